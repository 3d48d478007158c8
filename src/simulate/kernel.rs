//! Kernel logs: message bodies (mlx5, ib_core, NVRM Xid, OOM killer,
//! segfaults) and the per-host file in one of the framings of
//! docs/sys-formats.md §(a): raw `dmesg`, `dmesg -T`, `dmesg --time-format
//! iso`, or `journalctl -k`.
//!
//! `__LINE__` numbers and pids inside mlx5 messages change per kernel build;
//! they are drawn per job so no analyzer can key on them.

use std::io::{self, Write};

use super::clock::{self, MIN, MS, SEC, Us};
use super::plan::{Fabric, Host, KernelStyle, Nic, Plan};
use super::rng::Rng;
use super::story::HostStory;

/// `NVRM`'s PCI form: domain:bus:device without the function.
pub fn nvrm_pci(bdf: &str) -> &str {
    bdf.rsplit_once('.').map_or(bdf, |(head, _)| head)
}

pub fn roce_link(nic: &Nic, up: bool) -> String {
    let state = if up { "up" } else { "down" };
    format!("mlx5_core {} {}: Link {state}", nic.bdf, nic.netdev)
}

/// ib_core's port-state line (kernels from 2024 on); `state` is one of
/// DOWN, INIT, ARMED, ACTIVE.
pub fn ib_port_state(nic: &Nic, state: &str) -> String {
    format!("mlx5_core {} {}: Port: 1 Link {state}", nic.bdf, nic.name)
}

pub fn gpu_identity(bdf: &str, rng: &mut Rng) -> [String; 2] {
    [
        format!(
            "NVRM: GPU at PCI:{}: GPU-{}-{}-{}-{}-{}",
            nvrm_pci(bdf),
            rng.hex(8),
            rng.hex(4),
            rng.hex(4),
            rng.hex(4),
            rng.hex(12)
        ),
        format!(
            "NVRM: GPU Board Serial Number: {}",
            rng.range(1_650_000_000_000, 1_659_999_999_999)
        ),
    ]
}

/// `NVRM: Xid (PCI:0000:18:00): 79, pid=…, name=…, <text>`.
pub fn xid(bdf: &str, code: u32, pid: Option<u32>, text: &str) -> String {
    let who = match pid {
        Some(p) => format!("pid={p}, name=python3"),
        None => "pid='<unknown>', name=<unknown>".into(),
    };
    format!("NVRM: Xid (PCI:{}): {code}, {who}, {text}", nvrm_pci(bdf))
}

pub fn fallen_off_bus(bdf: &str) -> String {
    format!("NVRM: GPU {bdf}: GPU has fallen off the bus.")
}

/// The OOM killer's three lines for a worker.
pub fn oom_kill(pid: u32, rng: &mut Rng) -> Vec<String> {
    let vm = rng.range(380_000_000, 520_000_000);
    let rss = vm - rng.range(5_000_000, 40_000_000);
    vec![
        "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0".into(),
        format!(
            "Out of memory: Killed process {pid} (python3) total-vm:{vm}kB, anon-rss:{rss}kB, file-rss:{}kB, shmem-rss:{}kB, UID:0 pgtables:{}kB oom_score_adj:0",
            rng.range(90_000, 400_000),
            rng.range(8_000, 2_000_000),
            rng.range(700_000, 1_100_000)
        ),
        format!("oom_reaper: reaped process {pid} (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:{}kB", rng.range(8_000, 64_000)),
    ]
}

pub fn segfault(pid: u32, rng: &mut Rng) -> String {
    let base = 0x7f00_0000_0000u64 + (rng.below(0xff_ffff) << 12);
    format!(
        "python3[{pid}]: segfault at 0 ip {:016x} sp 00007ffd{:08x} error 4 in libtorch_cuda.so[{base:x}+{:x}] likely on CPU {} (core {}, socket 0)",
        base + 0x1e_4b40 + rng.below(0xffff),
        rng.below(0xffff_ffff),
        rng.range(0x4000000, 0x9000000),
        rng.range(0, 63),
        rng.range(0, 31)
    )
}

fn core_err(nic: &Nic, func: &str, line: i64, pid: u32, msg: &str) -> String {
    format!("mlx5_core {}: {func}:{line}:(pid {pid}): {msg}", nic.bdf)
}

/// A firmware health event: the fatal error, the health buffer, recovery.
pub fn hca_health(nic: &Nic, rng: &mut Rng) -> Vec<String> {
    let l = rng.range(400, 470);
    let mut out = vec![
        core_err(
            nic,
            "poll_health",
            rng.range(780, 990),
            0,
            &format!("Fatal error {} detected", rng.pick(&[1, 3, 5])),
        ),
        core_err(
            nic,
            "print_health_info",
            l,
            0,
            "Health issue observed, firmware internal error, severity(3) ERROR:",
        ),
    ];
    for i in 0..6 {
        let v = if i == 0 {
            rng.range(0x0800_0000, 0x08ff_ffff)
        } else {
            0
        };
        out.push(core_err(
            nic,
            "print_health_info",
            l + 4,
            0,
            &format!("assert_var[{i}] 0x{v:08x}"),
        ));
    }
    for (off, msg) in [
        (
            7,
            format!(
                "assert_exit_ptr 0x{:08x}",
                rng.range(0x00a0_0000, 0x00af_ffff)
            ),
        ),
        (
            9,
            format!(
                "assert_callra 0x{:08x}",
                rng.range(0x00a0_0000, 0x00af_ffff)
            ),
        ),
        (11, "fw_ver 28.39.1002".to_string()),
        (
            12,
            format!("time {}", rng.range(1_700_000_000, 1_760_000_000)),
        ),
        (13, "hw_id 0x0000021e".to_string()),
        (14, "rfr 1".to_string()),
        (15, "severity 3 (ERROR)".to_string()),
        (16, "irisc_index 9".to_string()),
        (17, "synd 0x1: firmware internal error".to_string()),
        (18, "ext_synd 0x8f7b".to_string()),
        (19, "raw fw_ver 0x1c2703ea".to_string()),
    ] {
        out.push(core_err(nic, "print_health_info", l + off, 0, &msg));
    }
    out.push(core_err(
        nic,
        "mlx5_health_try_recover",
        rng.range(320, 360),
        0,
        "handling bad device here",
    ));
    out.push(core_err(
        nic,
        "mlx5_error_sw_reset",
        rng.range(180, 230),
        0,
        "start",
    ));
    out.push(core_err(
        nic,
        "mlx5_error_sw_reset",
        rng.range(231, 260),
        0,
        "end",
    ));
    out.push(core_err(
        nic,
        "mlx5_health_try_recover",
        rng.range(361, 380),
        0,
        "starting health recovery flow",
    ));
    out
}

/// Firmware command timeouts leading to a missed heartbeat.
pub fn hca_cmd_timeouts(nic: &Nic, rng: &mut Rng) -> Vec<String> {
    let pid = rng.range(1_000, 90_000) as u32;
    let (l1, l2) = (rng.range(1100, 1170), rng.range(1171, 1200));
    let mut out = Vec::new();
    for (i, cmd) in [
        "QUERY_Q_COUNTER(0x773)",
        "2ERR_QP(0x507)",
        "DESTROY_QP(0x501)",
    ]
    .iter()
    .enumerate()
    {
        out.push(core_err(
            nic,
            "wait_func_handle_exec_timeout",
            l1,
            pid,
            &format!("cmd[{i}]: {cmd} No done completion"),
        ));
        out.push(core_err(
            nic,
            "wait_func",
            l2,
            pid,
            &format!("{cmd} timeout. Will cause a leak of a command resource"),
        ));
    }
    out.push(core_err(
        nic,
        "poll_health",
        rng.range(780, 990),
        0,
        "device's health compromised - reached miss count",
    ));
    out.push(core_err(
        nic,
        "poll_health",
        rng.range(780, 990),
        0,
        "Fatal error 3 detected",
    ));
    out
}

/// The benign ACCESS_REG(0x805) failure a counter monitor causes.
pub fn access_reg(nic: &Nic, pid: u32) -> String {
    core_err(
        nic,
        "mlx5_cmd_out_err",
        838,
        pid,
        "ACCESS_REG(0x805) op_mod(0x1) failed, status bad operation(0x2), syndrome (0x9a6171), err(-22)",
    )
}

/// Boot lines every host has: driver loads, NIC probes, cables.
fn boot_lines(plan: &Plan, host: &Host, rng: &mut Rng) -> Vec<(Us, String)> {
    let mut t = host.boot + rng.range(0, 3) * SEC;
    let mut out = vec![(t, "Linux version 5.15.0-119-generic (buildd@lcy02-amd64-079) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #129-Ubuntu SMP Fri Aug 2 19:25:20 UTC 2024".to_string())];
    for nic in &host.nics {
        t += rng.range(20, 400) * MS;
        out.push((
            t,
            format!("mlx5_core {}: firmware version: 28.39.1002", nic.bdf),
        ));
        out.push((
            t + 3 * MS,
            format!(
                "mlx5_core {}: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)",
                nic.bdf
            ),
        ));
        out.push((
            t + 900 * MS,
            format!(
                "mlx5_core {}: Port module event: module {}, Cable plugged",
                nic.bdf,
                &nic.name[5..]
            ),
        ));
    }
    t += 4 * SEC;
    out.push((
        t,
        "nvidia: loading out-of-tree module taints kernel.".into(),
    ));
    out.push((
        t + 40 * MS,
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024"
            .into(),
    ));
    for nic in &host.nics {
        t += rng.range(100, 700) * MS;
        let up = match plan.fabric {
            Fabric::Roce => roce_link(nic, true),
            Fabric::Ib => format!(
                "IPv6: ADDRCONF(NETDEV_CHANGE): {}: link becomes ready",
                nic.netdev
            ),
        };
        out.push((t + 20 * SEC, up));
    }
    out
}

/// Harmless lines during the job: container veths, the ACCESS_REG flood.
fn runtime_noise(plan: &Plan, host: &Host, rng: &mut Rng) -> Vec<(Us, String)> {
    let mut out = Vec::new();
    let t0 = plan.times.start - rng.range(1, 30) * MIN;
    for i in 0..rng.range(0, 3) {
        let veth = format!("veth{}", rng.hex(7));
        let t = t0 + i * 7 * MIN;
        out.push((
            t,
            format!("docker0: port {}({veth}) entered blocking state", i + 1),
        ));
        out.push((
            t + 2 * MS,
            format!("docker0: port {}({veth}) entered forwarding state", i + 1),
        ));
    }
    if plan.access_reg_flood && rng.chance(0.5) {
        let nic = &host.nics[rng.index(host.nics.len())];
        let pid = rng.range(1_000, 3_000_000) as u32;
        let mut t = plan.times.start + rng.range(1, 10) * MIN;
        for _ in 0..rng.range(5, 40) {
            out.push((t, access_reg(nic, pid)));
            t += rng.range(55, 65) * SEC;
        }
    }
    out
}

/// Writes one host's kernel log: boot, noise and the story's lines, in
/// time order, each with the host's framing.
pub fn write_log(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    w: &mut impl Write,
) -> io::Result<()> {
    let mut rng = Rng::derive(plan.seed, "kernel", &[host.index as u64]);
    let mut lines = boot_lines(plan, host, &mut rng);
    lines.extend(runtime_noise(plan, host, &mut rng));
    if let Some(s) = story {
        lines.extend(s.kernel.iter().cloned());
    }
    lines.sort_by_key(|l| l.0);
    for (t, body) in &lines {
        frame(plan.kernel_style, host, *t, w)?;
        w.write_all(body.as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

fn frame(style: KernelStyle, host: &Host, t: Us, w: &mut impl Write) -> io::Result<()> {
    let local = clock::civil(t + host.skew);
    match style {
        KernelStyle::Raw => {
            let up = (t - host.boot).max(0);
            write!(w, "[{:>5}.{:06}] ", up / SEC, up % SEC)
        }
        KernelStyle::Ctime => write!(w, "[{}] ", local.ctime()),
        KernelStyle::Iso => write!(w, "{} ", local.dmesg_iso()),
        KernelStyle::Journal => write!(w, "{} {} kernel: ", local.journal(), host.name),
    }
}

/// The file name the style is saved under.
pub fn file_name(style: KernelStyle) -> &'static str {
    match style {
        KernelStyle::Journal => "journal.txt",
        _ => "dmesg.txt",
    }
}

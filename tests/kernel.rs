//! Kernel logs beside a job's NCCL and PyTorch logs: small job folders built
//! in a temporary directory, and the verdicts they must give.
//!
//! The job is `common::two_hosts`'s: node001 and node002, eight ranks.

use std::fs;
use std::path::Path;

use serde_json::Value;

mod common;

use common::two_hosts::{Job, all_but, cites, pid};

#[test]
fn xid_79_on_rank_5s_gpu_is_a_gpu_fault_of_rank_5_dmesg_t() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    job.write(
        "node002/dmesg.txt",
        "[Tue Nov 26 08:00:00 2024] NVRM: Xid (PCI:0000:18:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1.\n\
[Fri Nov 29 12:29:40 2024] NVRM: GPU at PCI:0000:3b:00: GPU-3b6ec030-5adc-1847-e155-79f635584b4e\n\
[Fri Nov 29 12:29:40 2024] NVRM: GPU Board Serial Number: 1652923017935\n\
[Fri Nov 29 12:29:40 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=40005, name=python, GPU has fallen off the bus.\n",
    );
    let v = job.verdict();
    assert_eq!(v["status"], "hang");
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]));
    assert_eq!(v["cause"]["gpu_bus_id"], "0000:3b:00.0");
    assert_eq!(v["cause"]["host"], "node002");
    assert!(cites(&v, "node002/dmesg.txt", "): 79, pid=40005"));
    // The Xid 48 of three days before, on another GPU, is not the cause.
    assert!(v["cause"]["confidence"].as_f64().unwrap() >= 0.8);
    let alternatives = v["alternatives"].as_array().unwrap();
    assert!(
        alternatives
            .iter()
            .filter(|a| a["gpu_bus_id"] == "0000:18:00.0")
            .all(|a| a["confidence"].as_f64().unwrap() < 0.35)
    );
}

#[test]
fn raw_dmesg_with_a_boot_time_file_places_the_xid_on_the_wall_clock() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    job.write(
        "node002/dmesg.txt",
        "[    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (gcc 13.2.0) #45-Ubuntu SMP\n\
[86380.250000] NVRM: Xid (PCI:0000:3b:00): 79, pid=40005, name=python, GPU has fallen off the bus.\n",
    );
    // Booted 24 h minus 20 s before the Xid: the Xid is at 12:29:40.25.
    job.write("node002/boot_time", "2024-11-28T12:30:00\n");
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "gpu_fault");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]));
    let xid = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == "node002/dmesg.txt")
        .unwrap();
    assert_eq!(xid["time"], "2024-11-29 12:29:40.250000");
}

/// Rank 2 (node001, mlx5_1) reports retry exhaustion talking to node002.
fn status_12_on_rank_2(rank: u32) -> Vec<String> {
    if rank != 2 {
        return Vec::new();
    }
    vec![format!(
        "node001:{}:{} [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.3.0.12<46877> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.3.0.11 remoteGids::ffff:10.3.0.12 hca mlx5_1",
        pid(2),
        pid(2) + 9
    )]
}

#[test]
fn mlx5_link_down_up_and_a_victims_status_12_are_a_link_flap_of_node002_mlx5_1() {
    // Rank 2 (node001, mlx5_1) talks to rank 6 on node002 over mlx5_1.
    let extra = status_12_on_rank_2;
    let job = Job::new(&extra, &all_but(2));
    job.write(
        "node002/dmesg.txt",
        "[    5.101000] mlx5_core 0000:3b:00.1 mlx5_1: Port: 1 Link ACTIVE\n\
[    6.200000] mlx5_core 0000:3b:00.1 ens1f1np1: renamed from eth1\n\
[    6.900000] mlx5_core 0000:3b:00.1 ens1f1np1: Link up\n\
[86400.100000] mlx5_core 0000:3b:00.1 ens1f1np1: Link down\n\
[86403.500000] mlx5_core 0000:3b:00.1 ens1f1np1: Link up\n",
    );
    let v = job.verdict();
    let c = &v["cause"];
    assert_eq!(c["kind"], "link_flap", "{v:#}");
    assert_eq!(
        (&c["host"], &c["device"], &c["port"]),
        (&"node002".into(), &"mlx5_1".into(), &1.into())
    );
    assert_eq!(c["peer_host"], "node001");
    assert!(cites(&v, "node002/dmesg.txt", "ens1f1np1: Link down"));
    assert!(cites(&v, "node001/nccl.node001.40002", "status=12"));
    // The victims' packet loss on the same link is explained by the flap:
    // it corroborates the link flap instead of competing with it.
    assert!(
        !v["alternatives"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "packet_loss" && a["host"] == "node002")
    );
}

/// The kernel log names the flapping NIC only by netdev (its probe lines
/// rotated out of the ring buffer); a table of the host ties that netdev to
/// the RDMA device NCCL uses, so the flap and the victims' retry errors are
/// one link, not two candidates.
#[test]
fn a_flap_named_by_netdev_only_lands_on_the_rdma_device_a_table_ties_it_to() {
    let extra = status_12_on_rank_2;
    let tables = [
        (
            "node002/ibdev2netdev.txt",
            "mlx5_0 port 1 ==> ens1f0np0 (Up)\nmlx5_1 port 1 ==> ens1f1np1 (Up)\n",
        ),
        (
            "node002/show_gids.txt",
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n\
mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a02:000c\t10.2.0.12  \tv2\tens1f0np0\n\
mlx5_1\t1\t3\t0000:0000:0000:0000:0000:ffff:0a03:000c\t10.3.0.12  \tv2\tens1f1np1\n\
n_gids_found=2\n",
        ),
    ];
    for (table, text) in tables {
        let job = Job::new(&extra, &all_but(2));
        job.write(
            "node002/dmesg.txt",
            "[86400.100000] mlx5_core 0000:5e:00.0 ens1f1np1: Link down\n\
[86403.500000] mlx5_core 0000:5e:00.0 ens1f1np1: Link up\n",
        );
        job.write(table, text);
        let v = job.verdict();
        let c = &v["cause"];
        assert_eq!(c["kind"], "link_flap", "{table}: {v:#}");
        assert_eq!(
            (&c["host"], &c["device"]),
            (&"node002".into(), &"mlx5_1".into()),
            "{table}"
        );
        assert!(cites(&v, "node002/dmesg.txt", "ens1f1np1: Link down"));
        let apart = |a: &&Value| a["device"] == "ens1f1np1" || a["kind"] == "packet_loss";
        assert!(
            !v["alternatives"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| apart(&a)),
            "{table}: {v:#}"
        );
    }
}

#[test]
fn link_down_on_a_nic_the_job_does_not_use_is_not_the_cause() {
    let job = Job::new(&|_| Vec::new(), &all_but(6));
    job.write(
        "node002/dmesg.txt",
        "[    5.300000] mlx5_core 0000:c1:00.0 mlx5_2: Port: 1 Link ACTIVE\n\
[86400.100000] mlx5_core 0000:c1:00.0 mlx5_2: Port: 1 Link DOWN\n",
    );
    let v = job.verdict();
    assert_ne!(v["cause"]["kind"], "link_flap", "{v:#}");
    let flap = v["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "link_flap")
        .expect("still listed as a weak alternative");
    assert_eq!(flap["device"], "mlx5_2");
    assert!(flap["confidence"].as_f64().unwrap() < 0.35);
}

#[test]
fn oom_killer_killing_rank_1_is_its_crash_syslog() {
    let job = Job::new(&|_| Vec::new(), &all_but(1));
    job.write(
        "node001/syslog",
        "Nov 29 12:30:01 node001 kernel: python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n\
Nov 29 12:30:02 node001 kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/user.slice,task=python,pid=40001,uid=1000\n\
Nov 29 12:30:02 node001 kernel: Out of memory: Killed process 40001 (python) total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:200000kB oom_score_adj:0\n",
    );
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]));
    assert_eq!(v["status"], "crash");
    assert!(cites(&v, "node001/syslog", "Killed process 40001"));
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("OOM killer")
    );
}

#[test]
fn benign_access_reg_flood_and_boot_time_lines_do_not_make_a_cause() {
    let job = Job::new(&|_| Vec::new(), &all_but(6));
    let mut log = String::from(
        "<6>[    2.962781] mlx5_core 0000:3b:00.1: Port module event: module 1, Cable unplugged\n",
    );
    for i in 0..50 {
        log.push_str(&format!(
            "<3>[{:>5}.000001] mlx5_core 0000:3b:00.1: mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) op_mod(0x1) failed, status bad operation(0x2), syndrome (0x9a6171), err(-22)\n",
            1000 + i
        ));
    }
    job.write("node002/dmesg.txt", &log);
    let v = job.verdict();
    let kinds: Vec<&Value> = std::iter::once(&v["cause"]["kind"])
        .chain(
            v["alternatives"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| &a["kind"]),
        )
        .collect();
    assert!(
        !kinds.iter().any(|k| *k == "hca_fault" || *k == "link_flap"),
        "{kinds:?}"
    );
}

#[test]
fn every_corpus_kernel_log_with_known_messages_yields_events() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/sys");
    let Ok(dirs) = fs::read_dir(&root) else {
        return;
    };
    for case in dirs.filter_map(|d| d.ok().map(|d| d.path())) {
        let a = common::analyze(&case);
        for f in ["dmesg.txt", "journal.txt"] {
            let text = fs::read_to_string(case.join(f)).unwrap_or_default();
            let relevant = ["mlx5", "NVRM", "AER", "NETDEV WATCHDOG", "Killed process"];
            if relevant.iter().any(|k| text.contains(k)) {
                let info = a.job.files.iter().find(|i| i.path == f).unwrap();
                assert!(
                    info.matched_lines > 0,
                    "{}: no kernel line read",
                    case.display()
                );
            }
        }
    }
}

/// Without NCCL INFO lines, the host's RDMA names come from `ibstat`; the
/// kernel log's mlx5 functions then take them in PCI probe order, and the
/// netdevs the kernel names (what `ethtool -S` counts) join their HCA.
#[test]
fn ibstat_names_and_dmesg_functions_tie_netdevs_to_hcas_in_probe_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node007");
    std::fs::create_dir_all(&dir).unwrap();
    let mut dmesg = String::new();
    for (pci, nd) in [
        ("0000:1a:00.0", "enp26s0np0"),
        ("0000:2c:00.0", "enp44s0np0"),
    ] {
        dmesg += &format!(
            "[   12.000000] mlx5_core {pci}: firmware version: 28.39.1002\n\
             [   14.000000] mlx5_core {pci} {nd}: renamed from eth0\n"
        );
    }
    std::fs::write(dir.join("dmesg.txt"), dmesg).unwrap();
    let mut ibstat = String::new();
    for ca in ["mlx5_0", "mlx5_1"] {
        ibstat += &format!(
            "CA '{ca}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tLink layer: Ethernet\n"
        );
    }
    std::fs::write(dir.join("ibstat.txt"), ibstat).unwrap();
    let a = common::analyze(tmp.path());
    let nics = &a.job.kernel.hosts["node007"].nics;
    let named: Vec<(&str, Option<&str>, bool)> = nics
        .iter()
        .map(|(pci, n)| {
            (
                pci.as_str(),
                n.ibdev.as_deref(),
                n.netdevs.contains("enp44s0np0"),
            )
        })
        .collect();
    assert_eq!(
        named,
        vec![
            ("0000:1a:00.0", Some("mlx5_0"), false),
            ("0000:2c:00.0", Some("mlx5_1"), true)
        ]
    );
    assert!(nics.values().all(|n| n.ibdev_guessed));
}

/// Neither NCCL nor a snapshot names node007's HCAs, but its
/// `/sys/class/infiniband/<dev>` counter dumps do: the kernel log's mlx5
/// functions take those names in probe order, so a firmware fault on the
/// second function (mlx5 health, kernel 5.x) is placed on mlx5_1.
#[test]
fn counter_dump_names_tie_an_hca_fault_by_pci_address_to_its_rdma_device() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node007");
    let mut dmesg = String::new();
    for pci in ["0000:1a:00.0", "0000:2c:00.0"] {
        dmesg += &format!(
            "[    1.000000] mlx5_core {pci}: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)\n"
        );
    }
    dmesg +=
        "[620567.457514] mlx5_core 0000:2c:00.0: poll_health:791:(pid 0): Fatal error 1 detected\n";
    std::fs::create_dir_all(dir.join("counters/before")).unwrap();
    std::fs::create_dir_all(dir.join("counters/after")).unwrap();
    std::fs::write(dir.join("dmesg.txt"), dmesg).unwrap();
    for when in ["before", "after"] {
        let sysfs: String = ["mlx5_0", "mlx5_1"]
            .iter()
            .map(|d| format!("/sys/class/infiniband/{d}/ports/1/counters/link_downed:0\n"))
            .collect();
        std::fs::write(dir.join(format!("counters/{when}/sysfs.txt")), sysfs).unwrap();
    }
    let a = common::analyze(tmp.path());
    let nic = &a.job.kernel.hosts["node007"].nics["0000:2c:00.0"];
    assert_eq!(nic.ibdev.as_deref(), Some("mlx5_1"));
    assert!(nic.ibdev_guessed);
    let cause = a.diagnosis.verdict.cause.as_ref().expect("a cause");
    assert_eq!(cause.kind.to_string(), "hca_fault", "{cause:?}");
    assert_eq!(cause.device.as_deref(), Some("mlx5_1"), "{cause:?}");
}

/// No table names node040's HCAs, but NCCL's own async event does (`NET/IB
/// : mlx5_1:1 Got async event : local catastrophic error`, NCCL 2.19+): the
/// kernel log's mlx5 functions take that name in probe order, so the
/// command timeouts on the second function and NCCL's event are one fault
/// of one device, mlx5_1.
#[test]
fn an_rdma_device_nccls_async_event_names_ties_the_kernels_fault_to_it_nccl_2_19() {
    let tmp = tempfile::tempdir().unwrap();
    let mut dmesg = String::new();
    for pci in ["0000:1a:00.0", "0000:2c:00.0", "0000:3c:00.0"] {
        dmesg += &format!("[    1.053000] mlx5_core {pci}: firmware version: 28.39.1002\n");
    }
    dmesg += "[2807281.224711] mlx5_core 0000:2c:00.0: wait_func_handle_exec_timeout:1130:(pid 46764): cmd[0]: QUERY_Q_COUNTER(0x773) No done completion\n";
    dmesg += "[2807301.224711] mlx5_core 0000:2c:00.0: wait_func:1191:(pid 46764): QUERY_Q_COUNTER(0x773) timeout. Will cause a leak of a command resource\n";
    let dir = tmp.path().join("node040");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dmesg.txt"), dmesg).unwrap();
    let nccl = "node040:1503450:1503556 [1] transport/net_ib.cc:81 NCCL WARN NET/IB : mlx5_1:1 Got async event : local catastrophic error\n";
    std::fs::write(tmp.path().join("job.out"), nccl).unwrap();
    let a = common::analyze(tmp.path());
    let nic = &a.job.kernel.hosts["node040"].nics["0000:2c:00.0"];
    assert_eq!(nic.ibdev.as_deref(), Some("mlx5_1"));
    let cause = a.diagnosis.verdict.cause.as_ref().expect("a cause");
    assert_eq!(cause.kind.to_string(), "hca_fault", "{cause:?}");
    assert_eq!(cause.host.as_deref(), Some("node040"), "{cause:?}");
    assert_eq!(cause.device.as_deref(), Some("mlx5_1"), "{cause:?}");
    assert!(
        a.diagnosis
            .verdict
            .alternatives
            .iter()
            .all(|h| h.kind.to_string() != "hca_fault"),
        "one fault, not two: {:?}",
        a.diagnosis.verdict.alternatives
    );
}

/// nvidia-smi run on the host after the hang cannot reach rank 5's GPU
/// (`Unable to determine the device handle for GPU…: Unknown Error`,
/// returnn#1486's shape): the GPU was lost, as with an Xid 79.
#[test]
fn nvidia_smi_unable_to_reach_rank_5s_gpu_is_a_gpu_fault_of_rank_5() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    job.write(
        "node002/nvidia-smi.txt",
        "zeyer@node002 ~ % nvidia-smi\nUnable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n",
    );
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
    assert_eq!(v["cause"]["gpu_bus_id"], "0000:3b:00.0");
}

/// scitix/sichek#51's shape (driver 570, GSP): the RM asserts that the GPU
/// must be reset; no Xid number is printed.
#[test]
fn a_gpu_the_driver_says_must_be_reset_is_a_gpu_fault_driver_570() {
    let dmesg = "\
[Sun Jan 11 09:52:01 2026] NVRM: rpcRmApiAlloc_GSP: GspRmAlloc failed: hClient=0xc1d1a616; hParent=0x5c000054; hObject=0x5c00005b; hClass=0x0000c86f; paramsSize=0x00000170; paramsStatus=0x00000062; status=0x00000062
[Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874
";
    let v = &common::report_of(&[("node3/dmesg.log", dmesg)])["verdict"];
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("must be reset"), "{summary}");
    // nccl-tests' own failure line says the job failed on it.
    let test = "node3: Test CUDA failure common.cu:1007 'CUDA-capable device(s) is/are busy or unavailable'\n";
    let doc = common::report_of(&[
        ("node3/dmesg.log", dmesg),
        ("node3/all_reduce_perf.log", test),
    ]);
    assert_eq!(doc["verdict"]["status"], "crash", "{:#}", doc["verdict"]);
}

/// The IOMMU refusing rank 5's GPU's DMA (AMD-Vi, Linux 5.5+ wording): peer
/// traffic blocked by the host's IOMMU, not a broken GPU; the remedy is the
/// IOMMU and ACS set-up. Intel's DMAR line (5.15+) names the device by bus
/// only, and places the same way.
#[test]
fn an_iommu_page_fault_on_rank_5s_gpu_is_its_iommu_set_up_linux_5_5_and_5_15() {
    for line in [
        "[Fri Nov 29 12:29:40 2024] nvidia 0000:3b:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0027 address=0x3ffe8000 flags=0x0020]\n",
        "[Fri Nov 29 12:29:40 2024] DMAR: [DMA Write NO_PASID] Request device [3b:00.0] fault addr 0x2800000000 [fault reason 0x05] PTE Write access is not set\n",
    ] {
        let job = Job::new(&|_| Vec::new(), &all_but(5));
        job.write("node002/dmesg.txt", line);
        let v = job.verdict();
        assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
        assert_eq!(v["cause"]["gpu_bus_id"], "0000:3b:00.0", "{v:#}");
        assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
        let summary = v["cause"]["summary"].as_str().unwrap();
        assert!(summary.contains("IOMMU"), "{summary}");
        let remedy = v["cause"]["remedy"].as_str().unwrap();
        assert!(
            remedy.contains("iommu=pt") && remedy.contains("ACS"),
            "{remedy}"
        );
    }
}

/// An AMD-Vi page fault of every GPU of node002 (a re-image dropped
/// `iommu=pt`, so peers' writes into each other's memory are translated):
/// one fault of the host's IOMMU set-up, naming no single GPU, and every
/// rank of those GPUs is stuck in the first intra-node transfer.
#[test]
fn iommu_page_faults_of_several_gpus_are_the_hosts_not_one_gpus_linux_5_15() {
    let job = Job::new(&|_| Vec::new(), &[0, 1, 2, 3]);
    let dmesg: String = ["18", "3b", "86", "af"]
        .iter()
        .map(|b| format!("[Fri Nov 29 12:29:40 2024] nvidia 0000:{b}:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0027 address=0x3ffe8000 flags=0x0020]\n"))
        .collect();
    job.write("node002/dmesg.txt", &dmesg);
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
    assert!(v["cause"]["gpu_bus_id"].is_null(), "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([4, 5, 6, 7]), "{v:#}");
}

/// trtllm#15610's and flashinfer#3869's shape (driver 580): app-class Xids
/// (13, an out-of-bounds access; 31, an MMU fault at an illegal address) say
/// the program faulted on a GPU that is fine: the crash of the rank on it,
/// not a GPU fault. The same fault on several GPUs of a host is the job's
/// code: one crash of those ranks.
#[test]
fn a_programs_fault_on_its_gpu_is_its_crash_not_a_gpu_fault_driver_580() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    job.write(
        "node002/dmesg.txt",
        "[Fri Nov 29 12:29:40 2024] NVRM: Xid (PCI:0000:3b:00): 31, pid=40005, name=python, channel 0x00000002, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC0 GPCCLIENT_T1_0 faulted @ 0x7f3a_12340000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n",
    );
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
    assert!(
        !common::cause_kinds(&v).contains(&"gpu_fault")
            || v["alternatives"]
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["kind"] != "gpu_fault" || a["confidence"].as_f64().unwrap() < 0.35)
    );

    let everyone: Vec<u32> = (0..8).collect();
    let job = Job::new(&|_| Vec::new(), &everyone);
    let storm: String = ["18", "3b", "86"]
        .iter()
        .map(|bus| format!("[Fri Nov 29 12:29:40 2024] NVRM: Xid (PCI:0000:{bus}:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 1, SM 1): Out Of Range Address\n"))
        .collect();
    job.write("node002/dmesg.txt", &storm);
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("3 GPUs alike"), "{summary}");
    assert_eq!(v["cause"]["ranks"], serde_json::json!([4, 5, 6]), "{v:#}");
}

/// nccl#257's shape (one host, four GPUs, nccl-tests hung with no error
/// line, NCCL 2.4): nothing decides the cause, so the verdict says what
/// would: peer-to-peer traffic blocked by ACS or the IOMMU, and how to
/// check. A job across hosts gets no such hint.
#[test]
fn a_one_host_job_that_decides_nothing_is_told_to_check_acs_and_the_iommu() {
    let log = "\
jupyter-a:15833:15833 [0] NCCL INFO Bootstrap : Using [0]eth0:10.2.3.32<0>
jupyter-a:15833:15833 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.3.32<0>
jupyter-a:15833:15833 [3] NCCL INFO nranks 4
jupyter-a:15833:15833 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC
";
    let v = common::verdict_of(&[("all_reduce_perf.log", log)]);
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("ACSCtl") && summary.contains("NCCL_P2P_DISABLE=1"),
        "{summary}"
    );

    let two = log.replace("[3] NCCL INFO nranks 4", "[3] NCCL INFO nranks 4\njupyter-b:15900:15900 [0] NCCL INFO Bootstrap : Using [0]eth0:10.2.3.33<0>");
    let v = common::verdict_of(&[("all_reduce_perf.log", &two)]);
    let summary = v["cause"]["summary"].as_str().unwrap_or("");
    assert!(!summary.contains("ACSCtl"), "{summary}");

    // nccl-tests#125's shape: the second host's processes printed no NCCL
    // line, but the run's rank lines place half the ranks there.
    let silent_second = format!(
        "#  Rank  0 Group  0 Pid  263 on  jupyter-a device  0 [0x00] Tesla T4\n\
         #  Rank  1 Group  0 Pid  311 on  jupyter-b device  0 [0x00] Tesla T4\n{log}"
    );
    let v = common::verdict_of(&[("all_reduce_perf.log", &silent_second)]);
    let summary = v["cause"]["summary"].as_str().unwrap_or("");
    assert!(!summary.contains("ACSCtl"), "{summary}");
    // A host whose only line is a channel through the network.
    let over_net = log.replace("via P2P/IPC", "via P2P/IPC\njupyter-a:15833:15840 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/Socket/0");
    let v = common::verdict_of(&[("all_reduce_perf.log", &over_net)]);
    let summary = v["cause"]["summary"].as_str().unwrap_or("");
    assert!(!summary.contains("ACSCtl"), "{summary}");
}

/// nccl#2241's shape (a B200's NVLink Xids during a hung AllGather, the
/// reporter's paste with the bus address redacted, `(PCI:...)`): still Xids,
/// so still the GPU's fault, on a GPU the lines no longer name.
#[test]
fn xids_with_a_redacted_bus_address_are_still_a_gpu_fault_driver_570() {
    let dmesg = "\
kernel: NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)
kernel: NVRM: Xid (PCI:...): 137, RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error
";
    let v = &common::report_of(&[("dmesg.txt", dmesg)])["verdict"];
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["gpu_bus_id"], serde_json::Value::Null, "{v:#}");
    assert!(
        v["cause"]["summary"].as_str().unwrap().contains("Xid 137"),
        "{v:#}"
    );
}

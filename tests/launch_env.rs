//! The launching shell's NCCL settings that reached some hosts only.

mod common;

/// nccl-tests#125's shape (nccl-tests under `mpirun -H ddp-0,ddp-1`, NCCL
/// 2.10.3, NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO set on the launching shell):
/// the rank lines place ranks 4–7 on ddp-1, yet only ddp-0's process printed
/// NCCL's output into mpirun's merged output, and the run stopped.
fn mpirun_output(second_host_prints: bool) -> String {
    let mut out = String::from(
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n\
#\n\
# Using devices\n",
    );
    for r in 0..8 {
        let (host, pid) = if r < 4 {
            ("ddp-0", 263)
        } else {
            ("ddp-1", 311)
        };
        out.push_str(&format!(
            "#  Rank {r:2} Group  0 Pid {pid:6} on {host:>10} device {:2} [0x00] Tesla T4\n",
            r % 4
        ));
    }
    out.push_str(
        "ddp-0:263:263 [0] NCCL INFO Bootstrap : Using eth0:10.106.68.39<0>\n\
ddp-0:263:263 [0] NCCL INFO NET/IB : No device found.\n\
ddp-0:263:263 [0] NCCL INFO NET/Socket : Using [0]eth0:10.106.68.39<0>\n\
NCCL version 2.10.3+cuda11.4\n\
ddp-0:263:274 [2] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.\n",
    );
    if second_host_prints {
        out.push_str("ddp-1:311:311 [0] NCCL INFO Bootstrap : Using eth0:10.106.68.40<0>\n");
    }
    out
}

#[test]
fn a_host_silent_in_the_launchers_merged_output_missed_the_settings_nccl_2_10() {
    let v = common::verdict_of(&[("mpirun.out", &mpirun_output(false))]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([4, 5, 6, 7]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("NCCL_SHM_DISABLE") && summary.contains("ddp-1"),
        "{summary}"
    );
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("mpirun -x"), "{remedy}");
}

/// Both hosts printed: the settings reached both.
#[test]
fn every_host_printing_is_no_missed_setting() {
    let v = common::verdict_of(&[("mpirun.out", &mpirun_output(true))]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// Each host wrote its own file and one file is missing: that host's log
/// was not collected, which says nothing of its settings.
#[test]
fn a_host_without_its_own_file_is_a_missing_log_not_a_missed_setting() {
    let text = mpirun_output(false);
    let (ranks, nccl) = text.split_at(text.find("ddp-0:263:263").unwrap());
    let v = common::verdict_of(&[("launcher.out", ranks), ("ddp-0/nccl.log", nccl)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// The rank lines name hosts that no NCCL line names (a container's id in
/// NCCL's prefix, the pod's name in the rank lines): no host can be called
/// silent.
#[test]
fn hosts_named_differently_by_the_two_writers_are_not_silent() {
    let text = mpirun_output(false).replace("ddp-0:263:", "3f2a9c:263:");
    let v = common::verdict_of(&[("mpirun.out", &text)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

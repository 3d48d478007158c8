//! `nvidia-smi` snapshots beside a job's logs: the fields in which the driver
//! says a GPU is faulty place the fault on the GPU and the rank that used it.
//!
//! The job is `common::two_hosts`'s: node001 and node002, eight ranks; rank
//! 5 is node002's GPU 0000:3b:00.0.

use serde_json::json;

mod common;

use common::two_hosts::{Job, all_but, cites};

/// `nvidia-smi -q` of node002's GPUs 0000:18:00.0 and 0000:3b:00.0 (driver
/// 535 layout); `faulty` is the 3b GPU's Remapped Rows block.
fn query(faulty: &str) -> String {
    format!(
        "
==============NVSMI LOG==============

Timestamp                                 : Fri Nov 29 12:45:02 2024
Driver Version                            : 535.129.03

Attached GPUs                             : 2
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 0
        Pending                           : No
        Remapping Failure Occurred        : No

GPU 00000000:3B:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
{faulty}"
    )
}

const REMAP_FAILED: &str = "    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 2
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 2
        Pending                           : No
        Remapping Failure Occurred        : Yes
";

const HEALTHY: &str = "    ECC Errors
        Volatile
            DRAM Uncorrectable            : 0
    Remapped Rows
        Pending                           : No
        Remapping Failure Occurred        : No
";

#[test]
fn a_failed_row_remap_on_rank_5s_gpu_is_a_gpu_fault_of_rank_5_driver_535() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    job.write("node002/nvidia-smi-q.txt", &query(REMAP_FAILED));
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "node002");
    assert_eq!(v["cause"]["gpu_bus_id"], "0000:3b:00.0");
    assert_eq!(v["stuck_ranks"], json!([5]), "{v:#}");
    assert!(cites(
        &v,
        "node002/nvidia-smi-q.txt",
        "Remapping Failure Occurred"
    ));
    assert!(cites(
        &v,
        "node002/nvidia-smi-q.txt",
        "DRAM Uncorrectable            : 2"
    ));
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("nvidia-smi"), "{summary}");
}

#[test]
fn a_healthy_snapshot_blames_no_gpu() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    job.write("node002/nvidia-smi-q.txt", &query(HEALTHY));
    let v = job.verdict();
    assert!(!common::cause_kinds(&v).contains(&"gpu_fault"), "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([5]), "{v:#}");
}

#[test]
fn the_tables_err_on_rank_5s_gpu_is_a_gpu_fault_of_rank_5_driver_470() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    let table = "\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
|===============================+======================+======================|
|   0  NVIDIA H100 80G...  On   | 00000000:18:00.0 Off |                    0 |
| N/A   36C    P0    71W / 700W |  61720MiB / 81559MiB |    100%      Default |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA H100 80G...  On   | 00000000:3B:00.0 Off |                 ERR! |
| N/A  ERR!    P0   ERR! / 700W |  61720MiB / 81559MiB |     ERR!     Default |
+-------------------------------+----------------------+----------------------+
";
    job.write("node002/nvidia-smi.txt", table);
    let v = job.verdict();
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["gpu_bus_id"], "0000:3b:00.0");
    assert_eq!(v["stuck_ranks"], json!([5]), "{v:#}");
}

/// The fault of a GPU that no rank used (where the job's GPUs on the host
/// are known) is likely another job's: it does not become the verdict.
#[test]
fn a_fault_on_a_gpu_the_job_did_not_use_is_not_the_cause() {
    let job = Job::new(&|_| Vec::new(), &all_but(5));
    let other =
        query(HEALTHY).replace("GPU 00000000:3B:00.0", "GPU 00000000:CA:00.0") + REMAP_FAILED;
    job.write("node002/nvidia-smi-q.txt", &other);
    let v = job.verdict();
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// The Xid that states the fault at a time and the snapshot that shows its
/// state are two sources about one GPU: one hypothesis, stronger than each.
#[test]
fn an_xid_and_the_snapshot_of_the_same_gpu_corroborate() {
    let xid = "[Fri Nov 29 12:29:40 2024] NVRM: Xid (PCI:0000:3b:00): 94, pid=40005, name=python, Contained: SM (0x1). RST: No, D-RST: No\n";
    let alone = Job::new(&|_| Vec::new(), &all_but(5));
    alone.write("node002/dmesg.txt", xid);
    let alone = alone.verdict();
    let both = Job::new(&|_| Vec::new(), &all_but(5));
    both.write("node002/dmesg.txt", xid);
    both.write("node002/nvidia-smi-q.txt", &query(REMAP_FAILED));
    let v = both.verdict();
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let on_3b = |v: &serde_json::Value| {
        std::iter::once(&v["cause"])
            .chain(v["alternatives"].as_array().unwrap())
            .filter(|c| c["kind"] == "gpu_fault" && c["gpu_bus_id"] == "0000:3b:00.0")
            .count()
    };
    assert_eq!(on_3b(&v), 1, "{v:#}");
    let conf = |v: &serde_json::Value| v["cause"]["confidence"].as_f64().unwrap();
    assert!(conf(&v) > conf(&alone), "{} vs {}", conf(&v), conf(&alone));
    assert!(cites(&v, "node002/dmesg.txt", "): 94, pid=40005"));
    assert!(cites(
        &v,
        "node002/nvidia-smi-q.txt",
        "Remapping Failure Occurred"
    ));
}

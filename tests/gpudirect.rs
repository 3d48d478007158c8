//! GPUDirect RDMA broken on a host's PCIe path: the NIC's own completion
//! comes back with status 4 (local protection error). The reporter is the
//! culprit (its NIC could not reach its GPU's memory), not the peer it names.

mod common;

use serde_json::json;

/// nccl#928's shape (NCCL 2.17 wording, `with error 4, …, vendor err 81
/// (Send)`): ranks on three H100 hosts report it, each naming a peer by a
/// link-local GID address. ACS was on in every host's BIOS.
#[test]
fn status_4_on_several_hosts_is_gpudirect_broken_by_the_pcie_path_nccl_2_17() {
    let line = |host: &str, pid: u32, gid: &str| {
        format!(
            "{host}:{pid}:{} [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:{gid}%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)\n\
{host}:{pid}:{} [1] NCCL INFO transport/net.cc:1008 -> 6\n\
{host}:{pid}:{} [1] NCCL INFO proxy.cc:679 -> 6\n",
            pid + 99,
            pid + 99,
            pid + 99
        )
    };
    let v = common::verdict_of(&[
        ("H100-1.log", &line("H100-1", 9821, "df50")),
        ("H100-2.log", &line("H100-2", 19989, "df78")),
        ("H100-5.log", &line("H100-5", 68738, "f5f8")),
    ]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "H100-1", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("GPUDirect") && summary.contains("H100-2, H100-5"),
        "{v:#}"
    );
    assert!(
        v["cause"]["remedy"].as_str().unwrap().contains("ACSCtl"),
        "{v:#}"
    );
}

/// NCCL 2.22+ wording (`status=4 … hca mlx5_3`) from one rank whose init
/// lines place it: that rank, its host and its NIC are named; the same
/// report with status 12 (transport retries) blames no GPU.
#[test]
fn status_4_names_the_reporting_rank_and_its_nic_nccl_2_23() {
    let log = |status: u32| {
        format!(
            "node07:4411:4411 [3] NCCL INFO NCCL version 2.23.4+cuda12.6\n\
node07:4411:4411 [3] NCCL INFO comm 0x55d0c8a0 rank 11 nranks 16 cudaDev 3 nvmlDev 3 busId 4e000 commId 0x1c2f3a4b5c6d7e8f - Init COMPLETE\n\
node07:4411:4530 [3] transport/net_ib.cc:2306 NCCL WARN NET/IB: Got completion from peer 10.1.0.8<45217> with status={status} opcode=0 len=0 vendor err 81 (Send) localGid ::ffff:10.1.0.7 remoteGids::ffff:10.1.0.8 hca mlx5_3\n\
node07:4411:4530 [3] NCCL INFO transport/net.cc:1298 -> 6\n"
        )
    };
    let v = common::verdict_of(&[("node07/rank11.log", &log(4))]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "node07", "{v:#}");
    assert_eq!(v["cause"]["device"], "mlx5_3", "{v:#}");
    assert_eq!(v["stuck_ranks"], json!([11]), "{v:#}");

    let v = common::verdict_of(&[("node07/rank11.log", &log(12))]);
    assert!(!common::cause_kinds(&v).contains(&"gpu_fault"), "{v:#}");
}

/// A B200 report's paste (64-node nccl-tests): the completion error without
/// its writer's prefix, so no line names the reporting host. The summary
/// says so in words, not with a `?` where the host would stand.
#[test]
fn status_4_from_an_unnamed_host_says_so_in_words_nccl_2_19() {
    let log = "NCCL WARN NET/IB : Got completion from peer 7.247.232.133 with error 4, opcode 0, len 0, vendor err 81 (Send)\n";
    let v = common::verdict_of(&[("nccl-tests.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("a host no line names"), "{summary}");
    assert!(!summary.contains('?'), "{summary}");
}

//! Verbs calls that fail while NCCL sets up its IB/RoCE connections, in the
//! wordings of the NCCL releases that print them (misc/ibvwrap.cc).

use serde_json::Value;

mod common;

use common::write;

/// Two hosts, four ranks each, one NCCL_DEBUG_FILE per rank: every rank
/// prints its version and `env` lines; the ranks of `failing_host` then
/// print `warn` (a verbs wrapper's WARN, without the host prefix).
fn job(version: &str, env: &str, failing_host: &str, warn: &str) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..8u32 {
        let host = format!("node{:03}", r / 4 + 1);
        let (l, pid) = (r % 4, 5200 + r);
        let mut text = format!("{host}:{pid}:{pid} [{l}] NCCL INFO NCCL version {version}\n");
        for line in env.lines() {
            text.push_str(&format!("{host}:{pid}:{pid} [{l}] NCCL INFO {line}\n"));
        }
        text.push_str(&format!(
            "{host}:{pid}:{pid} [{l}] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.{}<0>\n",
            r / 4 + 1
        ));
        if host == failing_host {
            text.push_str(&format!("\n{host}:{pid}:{} [{l}] {warn}\n", pid + 40));
        }
        write(dir.path(), &format!("{host}/nccl.{host}.{pid}"), &text);
    }
    let doc = common::analyze_to_json(dir.path());
    (dir, doc)
}

/// NCCL ≤2.18 (NVIDIA/nccl#718's shape): an explicit NCCL_IB_GID_INDEX that
/// names an entry one host's GID table does not populate makes
/// ibv_modify_qp fail with ENODEV there.
#[test]
fn modify_qp_enodev_is_a_gid_index_that_host_lacks_nccl_2_18() {
    let (_dir, doc) = job(
        "2.18.3+cuda12.2",
        "NCCL_IB_GID_INDEX set by environment to 5.",
        "node002",
        "misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device",
    );
    let v = &doc["verdict"];
    assert_eq!(v["status"], "init_failure", "{v:#}");
    assert_eq!(v["cause"]["kind"], "gid_index", "{v:#}");
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
}

/// NCCL 2.19+ adds `errno %d`; ENETUNREACH on RoCE: the GID in use has no
/// route to the peer, the same family as the ETIMEDOUT case (GID or rail).
#[test]
fn modify_qp_enetunreach_is_a_gid_that_does_not_route_nccl_2_19() {
    let (_dir, doc) = job(
        "2.19.3+cuda12.2",
        "NCCL_IB_GID_INDEX set by environment to 1.",
        "node002",
        "misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable errno 101",
    );
    let v = &doc["verdict"];
    assert_eq!(v["status"], "init_failure", "{v:#}");
    assert_eq!(v["cause"]["kind"], "gid_index", "{v:#}");
}

/// NCCL registers its buffers with ibv_reg_mr_iova2 where the verbs
/// library has it (NVIDIA/nccl-tests#206's shape): ENOMEM there is the
/// locked-memory limit like any other registration.
#[test]
fn reg_mr_iova2_enomem_is_the_memlock_limit_nccl_2_18() {
    let (_dir, doc) = job(
        "2.18.5+cuda12.2",
        "",
        "node001",
        "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
    );
    let v = &doc["verdict"];
    assert_eq!(v["status"], "init_failure", "{v:#}");
    assert_eq!(v["cause"]["kind"], "memlock", "{v:#}");
    assert_eq!(v["cause"]["host"], "node001", "{v:#}");
}

/// NVIDIA/nccl#778's shape: `ibv_reg_dmabuf_mr` refused as `Operation not
/// supported` is the verbs stack lacking DMA-BUF (an old driver), no
/// locked-memory limit; on 2.13.4–2.14.2 it is the release's known defect
/// (DMA-BUF misdetected, fixed in 2.14.3).
#[test]
fn dmabuf_registration_not_supported_is_no_memlock_limit_nccl_2_13() {
    let warn = "misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported";
    for version in ["2.13.4+cuda11.7", "2.18.5+cuda12.2"] {
        let (_dir, doc) = job(version, "", "node001", warn);
        let v = &doc["verdict"];
        assert_ne!(v["cause"]["kind"], "memlock", "{version}: {v:#}");
    }
    let (_dir, doc) = job("2.13.4+cuda11.7", "", "node001", warn);
    assert_eq!(
        doc["verdict"]["cause"]["kind"], "nccl_bug",
        "{:#}",
        doc["verdict"]
    );
}

/// NVIDIA/nccl#1526's shape (NCCL 2.21, RoCE): the failed completion names
/// the queue pair's GIDs; a link-local GID built from the NIC's MAC
/// (`fe80::…ff:fe…`) does not route beyond its subnet: a GID index
/// problem, not loss. An InfiniBand GID is link-local too, but built from
/// the port GUID, and says nothing of the kind.
#[test]
fn a_failed_queue_pair_on_a_link_local_roce_gid_is_the_gid_index_nccl_2_21() {
    let warn = |gid: &str| {
        format!(
            "transport/net_ib.cc:1105 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<55466> with error 12, opcode 0, len 0, vendor err 129 (Recv) localGid {gid} remoteGid fe80::6e92:cfff:fe87:ca50"
        )
    };
    let gid_cause = |doc: &Value| {
        let v = &doc["verdict"];
        std::iter::once(&v["cause"])
            .chain(v["alternatives"].as_array().unwrap())
            .find(|c| c["kind"] == "gid_index")
            .cloned()
    };
    let (_dir, doc) = job(
        "2.21.5+cuda12.4",
        "",
        "node001",
        &warn("fe80::966d:aeff:fe5d:9950"),
    );
    let gid = gid_cause(&doc).expect("a GID index cause");
    assert_eq!(gid["host"], "node001", "{gid:#}");
    assert!(gid["confidence"].as_f64().unwrap() >= 0.4, "{gid:#}");
    let (_dir, doc) = job(
        "2.21.5+cuda12.4",
        "",
        "node001",
        &warn("fe80::ba59:9f03:c3:a0b4"),
    );
    assert!(gid_cause(&doc).is_none(), "{:#}", doc["verdict"]);
}

/// A tool's quote of UCX's error (mscclpp#335's shape, UCX 1.14 in a
/// container without IPC_LOCK): only `UCX ERROR` is left of the prefix; the
/// failed CQ creation is still the locked-memory limit.
#[test]
fn ucx_verbs_failure_without_its_prefix_is_still_read_ucx_1_14() {
    let log = "UCX ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate memory\n";
    let v = common::verdict_of(&[("ucx_info.log", log)]);
    assert_eq!(v["cause"]["kind"], "memlock", "{v:#}");
}

/// UCX's own completion error (nccl#394's paste, UCX 1.12 `ib_mlx5_log.c`):
/// the retries ran out on `mlx5_0:1/IB` and no peer is named. The place is
/// the reporter's own NIC and the port the line names.
#[test]
fn ucx_retry_exceeded_names_the_nic_and_port_it_printed_ucx_1_12() {
    let log = "[1700000000.100000] [gpu5:1234:0]  ib_mlx5_log.c:143  UCX  ERROR Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)\n";
    let v = common::verdict_of(&[("rank0.log", log)]);
    assert_eq!(v["cause"]["kind"], "packet_loss", "{v:#}");
    assert_eq!(
        (
            &v["cause"]["host"],
            &v["cause"]["device"],
            &v["cause"]["port"]
        ),
        (
            &serde_json::json!("gpu5"),
            &serde_json::json!("mlx5_0"),
            &serde_json::json!(1)
        ),
        "{v:#}"
    );
}

/// The same failure as people paste it. A GKE report's NCCL 2.27 WARN
/// wrapped over four lines, spaces widened to line values up, no port
/// after the peer; a DGX Spark logbook's 2.28 line with the named status
/// and the GIDs on the next line, opcode and length left out. Both read
/// as the completion they are: link-local RoCE GIDs on both ends.
#[test]
fn a_wrapped_or_abridged_completion_paste_is_still_read_nccl_2_27_and_2_28() {
    for log in [
        "transport/net_ib.cc:2472 NCCL WARN NET/IB: Got completion from peer 192.168.0.20\n  with status=12 opcode=0 len=0 vendor err 129 (Recv)\n  localGid  fe80::92e3:17ff:fe1c:647c\n  remoteGid fe80::92e3:17ff:fe20:8c8c   hca mlx5_6\n",
        "NCCL WARN NET/IB: Got completion from peer 192.168.101.2 with status=IBV_WC_RETRY_EXC_ERR(12)\n  localGid fe80::4ebb:47ff:fe2e:5fa6  remoteGids fe80::32c5:99ff:febe:6b46  hca roceP2p1s0f0\n",
    ] {
        let doc = common::report_of(&[("output.log", log)]);
        let v = &doc["verdict"];
        assert_eq!(v["cause"]["kind"], "gid_index", "{v:#}");
        let cited = v["cause"]["evidence"].as_array().unwrap();
        assert!(cited.iter().any(|e| e["line"] == 1), "{v:#}");
    }
}

/// DGX Spark logbooks' shape (NCCL 2.28, RoCE): `ibv_modify_qp` fails with
/// 61 `No data available` and NCCL prints `local GID ::` — the GID index in
/// use (3, 5) names an empty entry of the port's table (the kernel's
/// ENODATA for a slot not valid; the RoCE v2 address had moved to 4).
/// Pasted wrapped after the errno or after the device, or cut before the
/// remote GID, it is still read: a GID index named outright (0.8).
#[test]
fn a_queue_pair_on_an_empty_gid_slot_is_the_gid_index_nccl_2_28() {
    for log in [
        "misc/ibvwrap.cc:380 (wrap_ibv_modify_qp) NCCL WARN Call to ibv_modify_qp failed with 61\nNo data available, on dev roceP2p1s0f0:1, curr state INIT, next state RTR, local GID index 3, local GID ::\n",
        "NCCL WARN Call to ibv_modify_qp failed with 61 No data available, on dev rocep1s0f0:1,\n        curr state INIT, next state RTR, local GID index 3, local GID ::, remote GID ::\nRuntimeError: NCCL error: unhandled system error\n",
    ] {
        let v = &common::report_of(&[("worker.log", log)])["verdict"];
        assert_eq!(v["cause"]["kind"], "gid_index", "{v:#}");
        assert!(v["cause"]["confidence"].as_f64().unwrap() >= 0.8, "{v:#}");
        let summary = v["cause"]["summary"].as_str().unwrap();
        assert!(summary.contains("GID index 3"), "{summary}");
    }
}

/// A Thunderbolt RDMA chain's write-up (NCCL 2.28, RoCE over usb4): the
/// failed `ibv_modify_qp` quoted indented and wrapped over four lines, two
/// spaces after `local GID`; a DGX Spark ring's with the QP states and GID
/// index left out. Both read as the queue pair that could not reach its
/// peer (ENETUNREACH, ETIMEDOUT): on RoCE, a peer on another rail first.
#[test]
fn a_wrapped_or_shortened_modify_qp_paste_is_still_read_nccl_2_28() {
    let chain = "    NET/IB : Using [0]usb4_rdma0:1/RoCE [RO]; OOB eno1:10.2.0.7<0>\n\
    misc/ibvwrap.cc:309 NCCL WARN Call to ibv_modify_qp failed with 101\n\
      Network is unreachable, on dev usb4_rdma0:1, curr state INIT, next state RTR,\n\
      local GID index 2, local GID  fd5a:8000:1:0:7285:c2ff:fedc:3559,\n\
                         remote GID fd5a:8000:1:0:5a11:22ff:feb7:7543\n";
    let ring = "NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out,\n  on dev rocep1s0f0:1, local GID ::ffff:192.168.2.1, remote GID ::ffff:192.168.4.1\n";
    for log in [chain, ring] {
        let v = &common::report_of(&[("node.log", log)])["verdict"];
        assert_eq!(v["cause"]["kind"], "cross_rail", "{v:#}");
        let cited = v["cause"]["evidence"].as_array().unwrap();
        assert!(
            cited
                .iter()
                .any(|e| e["text"].as_str().unwrap().contains("ibv_modify_qp")),
            "{v:#}"
        );
    }
}

/// nccl-tests#206's and ucx#8229's shape: beside the failed registration,
/// the host's `ulimit -a` (bash) says 8192 kB of locked memory, or its
/// /proc/PID/limits 64 kB: a second source for the limit, cited in the
/// verdict's evidence and raising its confidence. An unlimited limit adds
/// nothing.
#[test]
fn a_low_locked_memory_limit_beside_a_failed_registration_is_cited_bash_ulimit() {
    let warn = "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory";
    let (dir, alone) = job("2.18.5+cuda12.2", "", "node001", warn);
    let base = alone["verdict"]["cause"]["confidence"].as_f64().unwrap();
    for (limit, shown) in [
        ("max locked memory       (kbytes, -l) 8192\n", "8192 kB"),
        (
            "Max locked memory         65536                65536                bytes     \n",
            "64 kB",
        ),
    ] {
        write(dir.path(), "node001/limits.txt", limit);
        let v = common::analyze_to_json(dir.path())["verdict"].clone();
        assert_eq!(v["cause"]["kind"], "memlock", "{v:#}");
        assert!(v["cause"]["confidence"].as_f64().unwrap() > base, "{v:#}");
        let cited = v["evidence"].to_string();
        assert!(
            cited.contains("limits.txt") && cited.contains(shown),
            "{v:#}"
        );
    }
    write(
        dir.path(),
        "node001/limits.txt",
        "max locked memory       (kbytes, -l) unlimited\n",
    );
    let v = common::analyze_to_json(dir.path())["verdict"].clone();
    assert_eq!(v["cause"]["confidence"].as_f64().unwrap(), base, "{v:#}");
}

/// `srun --label`, NCCL_DEBUG=WARN, NCCL 2.18: the job script echoes its
/// environment (`NCCL_IB_GID_INDEX=3`), the only line that says the index
/// was set. Index 3 is the IPv4 RoCE v2 entry on every port but node002's
/// mlx5_1, where an IPv6 address took it. Both ends of the failed queue
/// pairs report `ibv_modify_qp … Invalid argument`: rank 5 (node002, behind
/// mlx5_1) and its peer rank 1 on node001; the port is node002's mlx5_1,
/// and the peer on node001 is a victim.
#[test]
fn an_echoed_gid_index_points_at_the_port_whose_entry_is_not_ipv4_nccl_2_18() {
    let dir = tempfile::tempdir().unwrap();
    let mut log =
        String::from("NCCL_DEBUG=WARN\nNCCL_IB_GID_INDEX=3\n0: NCCL version 2.18.1+cuda12.1\n");
    for (r, host) in [(1u32, "node001"), (5, "node002")] {
        log.push_str(&format!(
            "{r}: {host}:{}:{} [{r}] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument\n",
            700 + r,
            740 + r
        ));
    }
    write(dir.path(), "slurm-5120.out", &log);
    let gids = |octet: u32, odd: bool| {
        let mut t = String::from(
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n",
        );
        for (dev, net) in [("mlx5_0", "ens1f0np0"), ("mlx5_1", "ens2f0np0")] {
            t.push_str(&format!(
                "{dev}\t1\t0\tfe80:0000:0000:0000:0e42:a1ff:fe3e:eb{octet:02x}\t\t\tv1\t{net}\n"
            ));
            t.push_str(&format!(
                "{dev}\t1\t1\tfe80:0000:0000:0000:0e42:a1ff:fe3e:eb{octet:02x}\t\t\tv2\t{net}\n"
            ));
            let ipv4 = |i: u32| {
                format!(
                    "{dev}\t1\t{i}\t0000:0000:0000:0000:0000:ffff:0a02:00{octet:02x}\t10.2.0.{octet}  \tv{}\t{net}\n",
                    i % 2 + 1
                )
            };
            if odd && dev == "mlx5_1" {
                t.push_str(&format!(
                    "{dev}\t1\t2\tfd7a:1c00:0002:0000:0e42:a1ff:fe7b:67{octet:02x}\t\t\tv1\t{net}\n"
                ));
                t.push_str(&format!(
                    "{dev}\t1\t3\tfd7a:1c00:0002:0000:0e42:a1ff:fe7b:67{octet:02x}\t\t\tv2\t{net}\n"
                ));
                t.push_str(&ipv4(4));
                t.push_str(&ipv4(5));
            } else {
                t.push_str(&ipv4(2));
                t.push_str(&ipv4(3));
            }
        }
        t
    };
    write(dir.path(), "node001/show_gids.txt", &gids(11, false));
    write(dir.path(), "node002/show_gids.txt", &gids(12, true));
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(
        doc["job"]["settings"]["NCCL_IB_GID_INDEX"],
        serde_json::json!(["3"])
    );
    assert_eq!(v["cause"]["kind"], "gid_index", "{v:#}");
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
    assert_eq!(v["cause"]["device"], "mlx5_1", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([5]), "{v:#}");
}

/// NCCL 2.21 at INFO, two hosts of two ranks, RoCE rails: each rank sends
/// over its own NIC (`via NET/IB/1` is mlx5_1 for local rank 1). The
/// queue pairs of rank 1 and its peer rank 3 time out at RTR, a WARN that
/// names no device: the device is the one the reporter's channels use.
#[test]
fn a_modify_qp_timeout_without_a_device_is_on_the_nic_the_channels_use_nccl_2_21() {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..4u32 {
        let host = format!("node{:03}", r / 2 + 1);
        let (l, pid) = (r % 2, 6100 + r);
        let peer = (r + 2) % 4;
        let mut text = format!(
            "{host}:{pid}:{pid} [{l}] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
             {host}:{pid}:{pid} [{l}] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.{}<0>\n\
             {host}:{pid}:{} [{l}] NCCL INFO Channel 00/0 : {r}[{l}] -> {peer}[{l}] [send] via NET/IB/{l}\n",
            r / 2 + 1,
            pid + 40
        );
        if l == 1 {
            text.push_str(&format!("{host}:{pid}:{} [{l}] misc/ibvwrap.cc:206 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out errno 110\n", pid + 40));
        }
        write(dir.path(), &format!("{host}/nccl.{host}.{pid}"), &text);
    }
    let doc = common::analyze_to_json(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "cross_rail", "{cause:#}");
    assert_eq!(cause["device"], "mlx5_1", "{cause:#}");
}

/// `srun --label`, NCCL 2.14 at INFO (torch 2.0), two hosts of two ranks:
/// node001's ranks finish their init; node002's fail to register memory
/// (`ibv_reg_mr … Cannot allocate memory`), raise NCCL's error and exit 1.
/// The job failed in NCCL's init on node002's side: an init failure, not a
/// crash, however far node001 got.
#[test]
fn a_set_up_fault_whose_ranks_never_came_up_is_an_init_failure_nccl_2_14() {
    let mut log = String::from("0: NCCL version 2.14.3+cuda11.7\n");
    for r in 0..4u32 {
        let host = if r < 2 { "node001" } else { "node002" };
        let (l, pid) = (r % 2, 7300 + r);
        if r < 2 {
            log.push_str(&format!("{r}: {host}:{pid}:{} [{l}] NCCL INFO comm 0x55{r} rank {r} nranks 4 cudaDev {l} busId {l}1000 - Init COMPLETE\n", pid + 60));
        } else {
            log.push_str(&format!("{r}: {host}:{pid}:{} [{l}] misc/ibvwrap.cc:150 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n", pid + 60));
            log.push_str(&format!("{r}: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3\n"));
            log.push_str(&format!(
                "srun: error: {host}: task {r}: Exited with exit code 1\n"
            ));
        }
    }
    let v = common::verdict_of(&[("slurm-771204.out", &log)]);
    assert_eq!(v["cause"]["kind"], "memlock", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// `srun --label`, NCCL 2.19 (`errno %d`), three hosts of four ranks with
/// NCCL_IB_GID_INDEX forced to 3 on every one. `failing` local ranks of
/// every host print ibv_modify_qp's ETIMEDOUT after their init lines.
fn three_host_timeouts(failing: &[u32]) -> Value {
    let mut log = String::from("0: NCCL version 2.19.3+cuda12.3\n");
    for r in 0..12u32 {
        let (h, l, pid) = (r / 4 + 1, r % 4, 9100 + r);
        let p = format!("{r}: gpu-0{h}:{pid}:{}", pid + 30);
        log.push_str(&format!(
            "{p} [{l}] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
        ));
        log.push_str(&format!("{p} [{l}] NCCL INFO comm 0x7f{r} rank {r} nranks 12 cudaDev {l} nvmlDev {l} busId {l}a000 commId 0x51c2 - Init START\n"));
    }
    for r in 0..12u32 {
        let (h, l, pid) = (r / 4 + 1, r % 4, 9100 + r);
        if failing.contains(&l) {
            log.push_str(&format!("{r}: gpu-0{h}:{pid}:{} [{l}] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out errno 110\n", pid + 31));
        }
    }
    common::verdict_of(&[("slurm-88120.out", &log)])
}

/// One GID index serves every NIC of a host: queue pairs that time out at
/// the same two GPU positions on every host, while the other positions'
/// NICs use the same forced index, follow the rails those NICs sit on.
#[test]
fn timeouts_on_the_same_nic_positions_of_every_host_are_cross_rail_nccl_2_19() {
    let v = three_host_timeouts(&[2, 3]);
    assert_eq!(v["cause"]["kind"], "cross_rail", "{v:#}");
}

/// The same timeouts at every GPU position: nothing sets some rails apart,
/// and the forced GID index stays the likelier cause.
#[test]
fn timeouts_at_every_nic_position_keep_the_forced_gid_index_nccl_2_19() {
    let v = three_host_timeouts(&[0, 1, 2, 3]);
    assert_eq!(v["cause"]["kind"], "gid_index", "{v:#}");
}

/// NCCL 2.23 connects its peers at the first collective (lazy connection,
/// NCCL_RUNTIME_CONNECT=1): every rank of two hosts prints Init COMPLETE,
/// then node002's ranks fail ibv_reg_mr in their proxies while the first
/// all-gather connects, and torch raises the error. No work completed: the
/// set-up failed, however far the init lines got.
#[test]
fn a_verbs_failure_at_the_first_collectives_connection_is_an_init_failure_nccl_2_23() {
    let mut log = String::new();
    for r in 0..4u32 {
        let host = if r < 2 { "node001" } else { "node002" };
        let (l, pid) = (r % 2, 6100 + r);
        log.push_str(&format!(
            "[default{l}]:{host}:{pid}:{} [{l}] NCCL INFO NCCL version 2.23.4+cuda12.6\n",
            pid + 40
        ));
        log.push_str(&format!("[default{l}]:{host}:{pid}:{} [{l}] NCCL INFO comm 0x55{r} rank {r} nranks 4 cudaDev {l} nvmlDev {l} busId {l}8000 commId 0x7ab1 - Init COMPLETE\n", pid + 40));
    }
    for r in 2..4u32 {
        let (l, pid) = (r % 2, 6100 + r);
        let p = format!("[default{l}]:node002:{pid}:{} [{l}]", pid + 41);
        log.push_str(&format!("{p} misc/ibvwrap.cc:153 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n"));
        log.push_str(&format!("{p} NCCL INFO transport/net_ib.cc:1228 -> 2\n"));
        log.push_str(&format!("{p} proxy.cc:1656 NCCL WARN [Proxy Service {r}] Failed to execute operation Connect from rank {r}, retcode 2\n"));
        log.push_str(&format!("[rank{r}]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.23.4\n"));
    }
    log.push_str("E1205 10:02:11.113000 91 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 6102) of binary: /usr/bin/python\n");
    let v = common::verdict_of(&[("node002/container.log", &log)]);
    assert_eq!(v["cause"]["kind"], "memlock", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// NCCL 2.23+ retries a queue-pair transition that timed out and says so
/// at INFO (`retrying 1/35 after 100 msec of sleep`); a job that then ran
/// to its end had no verbs failure (NCCL 2.27, torchrun).
#[test]
fn ibv_modify_qp_retries_that_then_connected_are_no_failure_nccl_2_27() {
    let mut log = String::new();
    for n in 1..=2 {
        log.push_str(&format!("gpu-q02:1692825:1693383 [4] NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_4:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:10.90.14.12, remote GID ::ffff:10.90.14.11, retrying {n}/35 after {} msec of sleep\n", n * 100));
    }
    log.push_str("gpu-q02:1692825:1692825 [4] NCCL INFO comm 0x56f926956f9e rank 12 nranks 16 cudaDev 4 busId 9a000 - Destroy COMPLETE\n");
    log.push_str("I1014 13:45:05.459000 1692777 torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish.\n");
    let v = common::verdict_of(&[("gpu-q02/train.log", &log)]);
    assert_eq!(v["status"], "healthy", "{v:#}");
}

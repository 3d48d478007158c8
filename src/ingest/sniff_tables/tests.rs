use super::*;
use crate::ingest::sniff::{FileKind, sniff};

macro_rules! data {
    ($name:literal) => {
        include_str!(concat!("../../../tests/data/tables/", $name))
    };
}

fn kind(text: &str) -> Option<TableKind> {
    sniff_table(text.as_bytes())
}

#[test]
fn real_captures_are_recognised() {
    use TableKind::*;
    let cases: &[(&str, TableKind)] = &[
        (data!("sysfs-gpud-h100-ndr.txt"), SysfsCounters),
        (data!("perfquery-x-rhel75.txt"), Perfquery),
        (data!("perfquery-legacy-watch-mlx4.txt"), Perfquery),
        (data!("ethtool-mlx5-k515.txt"), EthtoolStats),
        (data!("ethtool-grep-cx4lx-pause.txt"), EthtoolStats),
        (data!("ibstat-gpud-h100-some-down.txt"), Ibstat),
        (data!("ibstatus-nccl1935-all-down.txt"), Ibstatus),
        (data!("ibstatus-mlx4-fdr-spaces.txt"), Ibstatus),
        (data!("ibv_devinfo-nccl426-bond.txt"), IbvDevinfo),
        (data!("ibv_devinfo-nccl769-gid-fragment.txt"), IbvDevinfo),
        (data!("show_gids-cx4lx-4port.txt"), ShowGids),
        (data!("mlxlink-bf3-m-c.txt"), Mlxlink),
        (data!("mlxlink-c-ansi.txt"), Mlxlink),
        (data!("mlxlink-hdr2x-banners.txt"), Mlxlink),
        (data!("nvidia-smi-v100-470-err.txt"), NvidiaSmi),
        (data!("nvidia-smi-q-a100-535-remap.txt"), NvidiaSmi),
    ];
    for (text, want) in cases {
        assert_eq!(kind(text), Some(*want), "{}", &text[..text.len().min(80)]);
        assert_eq!(sniff(text.as_bytes()).kind, FileKind::Table(*want));
    }
}

#[test]
fn other_shapes_of_the_same_tools() {
    use TableKind::*;
    let cases: &[(&str, TableKind)] = &[
        (
            "Port 1 hw counters:\nduplicate_request: 0\nlifespan: 10\nout_of_sequence: 1811101\n",
            SysfsCounters,
        ),
        (
            "symbol_error 0\nlink_downed 2\nport_rcv_errors 0\n",
            SysfsCounters,
        ),
        (
            "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err:2705\n",
            SysfsCounters,
        ),
        (
            "link mlx5_0/1 rx_write_requests 0 out_of_sequence 3\nlink mlx5_1/1 rx_write_requests 0 out_of_sequence 0\n",
            RdmaStatistic,
        ),
        (
            "$ ibdev2netdev\nmlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 port 1 ==> ib1 (Down)\n",
            Ibdev2netdev,
        ),
        (
            "$ lldpcli show neighbors\n----------\nLLDP neighbors:\n----------\nInterface:    ens10f0np0, via: LLDP, RID: 1, Time: 0 day, 00:00:23\n  Chassis:     \n    ChassisID:    mac 1c:34:da:40:10:00\n    SysName:      leaf-rail0-a\n  Port:        \n    PortID:       ifname swp8s0\n",
            Lldp,
        ),
        (
            "lldp.ens10f0np0.via=LLDP\nlldp.ens10f0np0.chassis.name=leaf-rail0-a\nlldp.ens10f0np0.port.ifname=swp8s0\n",
            Lldp,
        ),
        (
            "Ethernet Channel Bonding Driver: v5.15.0-91-generic\n\nBonding Mode: IEEE 802.3ad Dynamic link aggregation\nMII Status: up\n\n802.3ad info\nLACP rate: fast\n\nSlave Interface: ens1f0np0\nMII Status: up\nLink Failure Count: 0\n",
            Bonding,
        ),
        (
            "== /proc/net/bonding/bond0\nBonding Mode: fault-tolerance (active-backup)\nPrimary Slave: None\nCurrently Active Slave: ens1f0np0\nMII Status: up\n\nSlave Interface: ens1f0np0\nMII Status: up\n",
            Bonding,
        ),
        (
            "0000:3b:00.1 mlx5_1 (MT4123 - MCX653106A-HDAT) ConnectX-6 VPI adapter card fw 20.31.1014 port 1 (ACTIVE) ==> ib1 (Up)\n",
            Ibdev2netdev,
        ),
        (
            "link mlx5_2/1\n    out_of_sequence 3\n    np_cnp_sent 9\n",
            RdmaStatistic,
        ),
        (
            "[{\"ifname\":\"mlx5_0\",\"port\":1,\"rx_write_requests\":0}]\n",
            RdmaStatistic,
        ),
        (
            "\t\t\tphys_state:\t\tLINK_UP (5)\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:feda:1cfb, RoCE v1\n\t\t\tGID[  3]:\t\t::ffff:200.0.209.6, RoCE v2\n",
            IbvDevinfo,
        ),
        (
            "$ perfquery -x\n# Port extended counters: Lid 3 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)\nPortSelect:......................1\n",
            Perfquery,
        ),
        (
            "     rx_prio3_pause: 0\n     tx_prio3_pause: 12\n",
            EthtoolStats,
        ),
    ];
    for (text, want) in cases {
        assert_eq!(kind(text), Some(*want), "{text}");
    }
}

#[test]
fn logs_are_not_tables() {
    let logs: &[&str] = &[
        // NCCL INFO / WARN lines.
        "node001:210433:210433 [0] NCCL INFO Bootstrap : Using ib0:10.3.0.11<0>\nnode001:210433:210498 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.3.0.11<0>\nnode001:210436:210569 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.3.0.12<46877> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.3.0.11 remoteGids::ffff:10.3.0.12\n",
        // PyTorch watchdog.
        "[rank3]:[E618 13:51:07.123456 210436 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n",
        // dmesg.
        "[  408.372201] infiniband mlx5_0: ib_cache_update: ib_query_port failed (-16)\n[  409.000000] mlx5_core 0000:3b:00.0 ens1f0: Link down\n",
        // A config file with integer values.
        "batch_size: 32\nepochs: 10\ncheckpoint_interval: 100\nseed: 1234\n",
        "model:\n  layers: 24\n  heads: 16\n  hidden: 2048\n",
        // A Slurm log with an ibstat pasted in its middle.
        "start: Tue Jun 18 13:41:07 UTC 2024\n+ srun python train.py\n0: step 1 loss 3.2\n0: step 2 loss 3.1\n0: step 3 loss 3.0\n0: step 4 loss 2.9\n0: step 5 loss 2.8\nCA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n",
        // The corpus' meta.json files.
        "{\n  \"source\": \"NVIDIA/nccl#426\",\n  \"formats\": [\n    \"nccl_debug\"\n  ],\n  \"port\": 1\n}\n",
        // Markdown with a table of counters.
        "# Notes\n\nWe saw `symbol_error` rise.\n\n| counter | value |\n|---|---|\n| symbol_error | 12 |\n",
        // Python traceback.
        "Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    main()\nRuntimeError: NCCL error\n",
    ];
    for log in logs {
        assert_eq!(kind(log), None, "{log}");
        // JSON documents (like the corpus' meta.json) are neither logs nor tables.
        let json = log.starts_with('{');
        assert!(json || sniff(log.as_bytes()).kind == FileKind::Log, "{log}");
        assert!(
            !matches!(sniff(log.as_bytes()).kind, FileKind::Table(_)),
            "{log}"
        );
    }
}

#[test]
fn junk_is_not_a_table() {
    assert_eq!(kind(""), None);
    assert_eq!(kind("\u{1b}[0m\n"), None);
    assert_eq!(kind("Port 1:"), None);
    assert_eq!(kind("link"), None);
}

/// Every file of the shared corpus (beside the checkout, when present): the
/// table captures are tables of their kind, the kernel and job logs are not.
#[test]
fn corpus_files_sniff_as_their_kind() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let Ok(parts) = std::fs::read_dir(&root) else {
        return;
    };
    let mut problems = Vec::new();
    for part in parts.flatten() {
        for case in std::fs::read_dir(part.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            for file in std::fs::read_dir(case.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = file.path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if name == "meta.json" || !path.is_file() {
                    continue;
                }
                let bytes = std::fs::read(&path).unwrap();
                let head = &bytes[..bytes.len().min(crate::ingest::sniff::SNIFF_BYTES)];
                let got = sniff_table(head);
                let want = match name.as_str() {
                    "sysfs-counters.txt" => Some(TableKind::SysfsCounters),
                    "perfquery.txt" => Some(TableKind::Perfquery),
                    "ethtool-S.txt" => Some(TableKind::EthtoolStats),
                    "show_gids.txt" => Some(TableKind::ShowGids),
                    "mlxlink.txt" => Some(TableKind::Mlxlink),
                    "ibv_devinfo.txt" => Some(TableKind::IbvDevinfo),
                    // ibstat.txt holds ibstat or ibstatus output.
                    "ibstat.txt" => {
                        got.filter(|k| matches!(k, TableKind::Ibstat | TableKind::Ibstatus))
                    }
                    _ => None,
                };
                if got != want || (name == "ibstat.txt" && got.is_none()) {
                    problems.push(format!("{}: got {got:?}, want {want:?}", path.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn head_and_tail_captures_of_many_files_sniff_as_their_first_section() {
    let ethtool = "==> node005/before/ethtool-S-enp26s0np0.txt <==\nNIC statistics:\n     rx_prio3_pause: 17\n     tx_prio3_pause: 4\n\n==> node005/before/ethtool-S-enp44s0np0.txt <==\nNIC statistics:\n     rx_prio3_pause: 9\n";
    assert_eq!(kind(ethtool), Some(TableKind::EthtoolStats));
    let sysfs = "==> /sys/class/infiniband/mlx5_0/ports/1/counters/link_downed <==\n0\n\n==> /sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error <==\n12\n";
    assert_eq!(kind(sysfs), Some(TableKind::SysfsCounters));
    let logs = "==> rank0.log <==\nnode001:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nnode001:1234:1234 [0] NCCL INFO NET/Plugin: No plugin found\n";
    assert_eq!(kind(logs), None, "a tail of logs stays a log");
}

#[test]
fn date_lines_between_dumps_are_stamps_not_misfits() {
    assert_eq!(
        content_stamp("Tue Dec  1 08:00:00 UTC 2026"),
        Some(20261201080000)
    );
    assert_eq!(
        content_stamp("2026-12-01T08:00:07+00:00"),
        Some(20261201080007)
    );
    assert_eq!(content_stamp("rx_prio3_pause: 2026"), None);
    let two = "Tue Dec  1 08:00:00 UTC 2026\nlink mlx5_0/1 local_ack_timeout_err 0 out_of_sequence 0\nTue Dec  1 09:30:00 UTC 2026\nlink mlx5_0/1 local_ack_timeout_err 12 out_of_sequence 3\n";
    assert_eq!(kind(two), Some(TableKind::RdmaStatistic));
}

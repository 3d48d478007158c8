//! Known NCCL defects end to end: small job folders with NCCL and PyTorch
//! lines in their real shapes. A defect is proposed when the version is in
//! its range *and* its signature is seen; not on the fixed release; not on
//! the version alone.

use std::path::Path;

use serde_json::Value;

mod common;

/// Writes `files` (relative path → lines) under a fresh temporary job folder.
fn job(files: &[(&str, Vec<String>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, lines) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    }
    dir
}

/// [`job`] for files whose paths were built per rank.
fn owned_job(files: &[(String, Vec<String>)]) -> tempfile::TempDir {
    let files: Vec<(&str, Vec<String>)> =
        files.iter().map(|(p, l)| (p.as_str(), l.clone())).collect();
    job(&files)
}

/// PyTorch 2.4+'s watchdog timeout of `rank` in collective `seq`.
fn watchdog_timeout(rank: u32, seq: u32, op: &str) -> String {
    format!(
        "[rank{rank}]:[E1129 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."
    )
}

fn analyze(dir: &Path) -> Value {
    common::analyze_to_json(dir)
}

/// Every cause the verdict names: the chosen one, then the alternatives.
fn causes(doc: &Value) -> Vec<&Value> {
    let v = &doc["verdict"];
    std::iter::once(&v["cause"])
        .chain(v["alternatives"].as_array().into_iter().flatten())
        .filter(|c| !c.is_null())
        .collect()
}

fn nccl_bug(doc: &Value) -> Option<&Value> {
    causes(doc).into_iter().find(|c| c["kind"] == "nccl_bug")
}

/// The defect the analysis proposes, whose summary names `id` (and each of
/// `also`); fails with the document otherwise.
fn assert_names<'d>(doc: &'d Value, id: &str, also: &[&str]) -> &'d Value {
    let bug = nccl_bug(doc).unwrap_or_else(|| panic!("{doc:#}"));
    let summary = bug["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(id) && also.iter().all(|a| summary.contains(a)),
        "{bug:#}"
    );
    bug
}

fn kinds(doc: &Value) -> Vec<String> {
    causes(doc)
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// One process's NCCL init up to START, in the 2.19–2.20 shape.
fn init(host: &str, pid: u32, rank: u32, version: &str) -> Vec<String> {
    let p = format!("{host}:{pid}:{pid}");
    let t = format!("{host}:{pid}:{}", pid + 60);
    vec![
        format!(
            "{p} [{rank}] NCCL INFO Bootstrap : Using ib0:10.3.0.{}<0>",
            10 + rank
        ),
        format!("{p} [{rank}] NCCL INFO NCCL version {version}"),
        format!(
            "{t} [{rank}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.3.0.{}<0>",
            10 + rank
        ),
        format!("{t} [{rank}] NCCL INFO Using network IB"),
        format!(
            "{t} [{rank}] NCCL INFO comm 0x55d0{rank}0 rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId {}000 commId 0x6f3a9d1c2b7e4a05 - Init START",
            18 + rank * 0x23
        ),
    ]
}

/// The 2.19.1–2.21.4 bootstrap tag collision: the barrier's 4-byte message is
/// read where the connection info was expected.
fn truncated_bootstrap(version: &str) -> tempfile::TempDir {
    let mut r0 = init("node1", 4100, 0, version);
    r0.extend([
        String::new(),
        "node1:4100:4160 [0] bootstrap.cc:77 NCCL WARN Message truncated : received 4 bytes instead of 1536".into(),
        "node1:4100:4160 [0] NCCL INFO transport.cc:157 -> 3".into(),
        "node1:4100:4160 [0] NCCL INFO init.cc:1167 -> 3".into(),
        "node1:4100:4160 [0] NCCL INFO group.cc:64 -> 3 [Async thread]".into(),
    ]);
    let r1 = init("node1", 4101, 1, version);
    job(&[("nccl.node1.4100", r0), ("nccl.node1.4101", r1)])
}

#[test]
fn a_defect_is_proposed_when_version_and_signature_match() {
    let dir = truncated_bootstrap("2.19.3+cuda12.2");
    let doc = analyze(dir.path());
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "nccl_bug", "{:#}", doc["verdict"]);
    assert_eq!(doc["verdict"]["status"], "init_failure");
    let summary = cause["summary"].as_str().unwrap();
    for part in ["2.19.3", "bootstrap_tag_collision", "fixed in 2.21.5"] {
        assert!(summary.contains(part), "{summary}");
    }
    let remedy = cause["remedy"].as_str().unwrap();
    assert!(remedy.contains("2.21.5"), "{remedy}");
    assert!(!remedy.contains('?'), "template filled: {remedy}");
    let confidence = cause["confidence"].as_f64().unwrap();
    assert!((0.5..0.7).contains(&confidence), "{confidence}");
    // The evidence cites the WARN first, then the version banner.
    let evidence = cause["evidence"].as_array().unwrap();
    assert!(
        evidence[0]["text"]
            .as_str()
            .unwrap()
            .contains("Message truncated"),
        "{evidence:#?}"
    );
    assert!(
        evidence
            .iter()
            .any(|e| e["text"].as_str().unwrap().contains("NCCL version 2.19.3")),
        "{evidence:#?}"
    );
}

#[test]
fn the_fixed_release_is_not_proposed() {
    let dir = truncated_bootstrap("2.21.5+cuda12.4");
    let doc = analyze(dir.path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

#[test]
fn suffixed_builds_and_prereleases_are_placed_correctly() {
    // A site's build of 2.19.3 is 2.19.3.
    let doc = analyze(truncated_bootstrap("2.19.3a+cuda12.2").path());
    assert_eq!(doc["verdict"]["cause"]["kind"], "nccl_bug");
    // A pre-release of the fixing version comes before it: still affected.
    let doc = analyze(truncated_bootstrap("2.21.5a1+cuda12.4").path());
    let bug = nccl_bug(&doc).expect("2.21.5a1 predates the 2.21.5 fix");
    assert!(
        bug["summary"].as_str().unwrap().contains("2.21.5a1"),
        "{bug:#}"
    );
}

#[test]
fn the_version_alone_proposes_nothing() {
    // 2.19.3 is in the range of several defects, but this job hung in an
    // all-reduce with none of their signatures: a rank never reached it.
    let mut r0 = init("node1", 4100, 0, "2.19.3+cuda12.2");
    r0.push(
        "node1:4100:4160 [0] NCCL INFO comm 0x55d000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE".into(),
    );
    r0.push("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.".into());
    let mut r1 = init("node1", 4101, 1, "2.19.3+cuda12.2");
    r1.push(
        "node1:4101:4161 [1] NCCL INFO comm 0x55d010 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 3b000 commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE".into(),
    );
    let dir = job(&[("nccl.node1.4100", r0), ("nccl.node1.4101", r1)]);
    let doc = analyze(dir.path());
    assert_eq!(doc["verdict"]["status"], "hang", "{:#}", doc["verdict"]);
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// NVLS reported available, then a CUDA call in transport/nvls.cc fails.
fn nvls_failure(version: &str, available: bool) -> tempfile::TempDir {
    let mut r0 = init("node1", 4100, 0, version);
    r0.extend([
        format!(
            "node1:4100:4160 [0] NCCL INFO NVLS multicast support is {}available on dev 0",
            if available { "" } else { "not " }
        ),
        String::new(),
        "node1:4100:4160 [0] transport/nvls.cc:154 NCCL WARN Cuda failure 1 'invalid argument'"
            .into(),
        "node1:4100:4160 [0] NCCL INFO transport/nvls.cc:389 -> 1".into(),
        "node1:4100:4160 [0] NCCL INFO init.cc:1232 -> 1".into(),
    ]);
    let r1 = init("node1", 4101, 1, version);
    job(&[("nccl.node1.4100", r0), ("nccl.node1.4101", r1)])
}

#[test]
fn a_feature_seen_in_info_lines_is_part_of_the_signature() {
    let doc = analyze(nvls_failure("2.26.2+cuda12.8", true).path());
    let bug = nccl_bug(&doc).expect("NVLS failure on 2.26.2");
    let summary = bug["summary"].as_str().unwrap();
    assert!(summary.contains("nvls_setup_failure_fatal"), "{summary}");
    assert!(summary.contains("2.27.3"), "{summary}");
    assert!(
        bug["remedy"]
            .as_str()
            .unwrap()
            .contains("NCCL_NVLS_ENABLE=0")
    );
    let cited: Vec<&str> = bug["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(cited.iter().any(|t| t.contains("nvls.cc:154")), "{cited:?}");
    assert!(
        cited
            .iter()
            .any(|t| t.contains("NVLS multicast support is available")),
        "{cited:?}"
    );
    // Fixed release: NCCL falls back instead of failing.
    let doc = analyze(nvls_failure("2.27.3+cuda12.9", true).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
    // Without NVLS reported available the signature is incomplete.
    let doc = analyze(nvls_failure("2.26.2+cuda12.8", false).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// NCCL 2.26.2 on two hosts that both report NVLS available: only node2's
/// ranks fail its set-up (a broken NVSwitch fabric there). The defect is
/// placed on node2 and its ranks are the struck ones.
#[test]
fn a_defect_struck_on_one_host_of_several_is_placed_there_nccl_2_26() {
    let mut files = Vec::new();
    for (rank, host) in [(0u32, "node1"), (1, "node1"), (2, "node2"), (3, "node2")] {
        let pid = 4100 + rank;
        let mut lines = init(host, pid, rank, "2.26.2+cuda12.8");
        let t = format!("{host}:{pid}:{}", pid + 60);
        lines.push(format!(
            "{t} [{rank}] NCCL INFO NVLS multicast support is available on dev {rank}"
        ));
        if host == "node2" {
            lines.push(format!(
                "{t} [{rank}] transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be performed in the present state'"
            ));
            lines.push(format!("{t} [{rank}] NCCL INFO transport/nvls.cc:409 -> 1"));
        }
        files.push((format!("nccl.{host}.{pid}"), lines));
    }
    let doc = analyze(owned_job(&files).path());
    let bug = nccl_bug(&doc).unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(bug["host"], "node2", "{bug:#}");
    assert_eq!(
        doc["verdict"]["stuck_ranks"],
        serde_json::json!([2, 3]),
        "{:#}",
        doc["verdict"]
    );
}

/// Two ranks on two hosts with different NCCL_CROSS_NIC, both timing out in
/// an all-reduce; optionally rank 1 dies of its own exception first.
fn cross_nic_hang(version: &str, crash: bool) -> tempfile::TempDir {
    let mut files = Vec::new();
    for (rank, host, cross) in [(0u32, "node1", "0"), (1, "node2", "1")] {
        let pid = 4100 + rank;
        let mut lines = init(host, pid, rank, version);
        lines.insert(
            0,
            format!(
                "{host}:{pid}:{pid} [{rank}] NCCL INFO NCCL_CROSS_NIC set by environment to {cross}"
            ),
        );
        lines.push(format!(
            "{host}:{pid}:{} [{rank}] NCCL INFO comm 0x55d0{rank}0 rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId 18000 commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE",
            pid + 60
        ));
        if crash && rank == 1 {
            lines.extend([
                "[rank1]: Traceback (most recent call last):".to_string(),
                "[rank1]:   File \"train.py\", line 88, in <module>".to_string(),
                "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
                    .to_string(),
            ]);
        } else {
            lines.push(watchdog_timeout(rank, 40, "ALLREDUCE"));
        }
        files.push((format!("{host}/nccl.{host}.{pid}"), lines));
    }
    owned_job(&files)
}

#[test]
fn settings_count_only_with_a_symptom_and_direct_evidence_still_wins() {
    let doc = analyze(cross_nic_hang("2.20.5+cuda12.3", false).path());
    let bug = nccl_bug(&doc).expect("differing NCCL_CROSS_NIC and a hang on 2.20.5");
    assert!(
        bug["summary"]
            .as_str()
            .unwrap()
            .contains("cross_nic_inconsistent_hang"),
        "{bug:#}"
    );
    let doc = analyze(cross_nic_hang("2.21.5+cuda12.4", false).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
    // A rank that died of its own accord is the stronger explanation.
    let doc = analyze(cross_nic_hang("2.20.5+cuda12.3", true).path());
    assert_eq!(
        doc["verdict"]["cause"]["kind"],
        "process_crash",
        "{:?}",
        kinds(&doc)
    );
    // … and the defect, still matched, stands as an alternative.
    assert!(nccl_bug(&doc).is_some(), "{:?}", kinds(&doc));
}

#[test]
fn the_report_is_the_same_on_every_run() {
    let dir = nvls_failure("2.26.2+cuda12.8", true);
    let a = analyze(dir.path());
    let b = analyze(dir.path());
    assert_eq!(a, b);
}

#[test]
fn pytorch_names_the_version_when_nccl_printed_no_banner() {
    let lines = vec![
        String::new(),
        "node1:4100:4160 [0] bootstrap.cc:77 NCCL WARN Message truncated : received 4 bytes instead of 1536".to_string(),
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, internal error - please report this issue to the NCCL developers, NCCL version 2.19.3".to_string(),
    ];
    let dir = job(&[("train.log", lines)]);
    let doc = analyze(dir.path());
    let bug = nccl_bug(&doc).expect("version from PyTorch's error line");
    assert!(
        bug["summary"].as_str().unwrap().contains("2.19.3"),
        "{bug:#}"
    );
}

/// NCCL picked a libvirt bridge for bootstrap, then could not connect.
fn virbr_bootstrap(ifname: Option<&str>) -> tempfile::TempDir {
    let mut lines = Vec::new();
    if let Some(ifname) = ifname {
        lines.push(format!(
            "node1:4100:4100 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to {ifname}"
        ));
    }
    lines.extend([
        "node1:4100:4100 [0] NCCL INFO Bootstrap : Using virbr0:192.168.122.1<0>".to_string(),
        "node1:4100:4100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4".to_string(),
        "node1:4100:4160 [0] NCCL INFO ncclCommInitRank comm 0x55d000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6f3a9d1c2b7e4a05 - Init START".to_string(),
        String::new(),
        "node1:4100:4160 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 192.168.122.1<45763> failed : Connection refused".to_string(),
        "node1:4100:4160 [0] NCCL INFO misc/socket.cc:565 -> 2".to_string(),
    ]);
    job(&[("nccl.node1.4100", lines)])
}

#[test]
fn an_unless_condition_keeps_a_deliberate_setting_out() {
    let doc = analyze(virbr_bootstrap(None).path());
    let bug = nccl_bug(&doc).expect("NCCL chose virbr0 by itself");
    assert!(
        bug["summary"]
            .as_str()
            .unwrap()
            .contains("virbr_bootstrap_interface"),
        "{bug:#}"
    );
    // The user asked for that interface: not NCCL's choice, not its defect.
    let doc = analyze(virbr_bootstrap(Some("virbr0")).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// Two of the ranks of an MNNVL communicator, both timing out in one op.
fn mnnvl_hang(nranks: u32, op: &str) -> tempfile::TempDir {
    let mut files = Vec::new();
    for rank in 0..2u32 {
        let pid = 4100 + rank;
        let mut lines = init("gb200n1", pid, rank, "2.26.2+cuda12.8");
        lines.extend([
            format!("gb200n1:{pid}:{} [{rank}] NCCL INFO comm 0x55d0{rank}0 rank {rank} nRanks {nranks} nNodes {} localRanks 4 localRank {rank} MNNVL 1", pid + 60, nranks / 4),
            format!("gb200n1:{pid}:{} [{rank}] NCCL INFO ncclCommInitRank comm 0x55d0{rank}0 rank {rank} nranks {nranks} cudaDev {rank} nvmlDev {rank} busId 18000 commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE", pid + 60),
            format!("[rank{rank}]:[E1129 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType={op}, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."),
        ]);
        files.push((format!("nccl.gb200n1.{pid}"), lines));
    }
    owned_job(&files)
}

#[test]
fn numeric_fields_and_the_hung_op_are_part_of_the_signature() {
    let id = "mnnvl_alltoall_80_ranks_hang";
    let has =
        |doc: &Value| nccl_bug(doc).is_some_and(|b| b["summary"].as_str().unwrap().contains(id));
    // PyTorch's `_ALLTOALL_BASE` is the all-to-all of the signature.
    assert!(has(&analyze(mnnvl_hang(96, "_ALLTOALL_BASE").path())));
    // Not above 80 ranks, or not an all-to-all: not this defect.
    assert!(!has(&analyze(mnnvl_hang(64, "_ALLTOALL_BASE").path())));
    assert!(!has(&analyze(mnnvl_hang(96, "ALLREDUCE").path())));
}

/// NVIDIA/nccl#1748's shape (NCCL 2.25.1 / 2.26.2, NeMo): the graph
/// search falls back and names NET 0, which NIC fusion renumbered away;
/// init fails and PyTorch raises. 2.27.3 is past the fix.
fn fused_nic_init_failure(version: &str) -> tempfile::TempDir {
    job(&[(
        "train.log",
        vec![
            "gpu12:771:771 [0] graph/search.cc:1135 NCCL WARN Could not find a path for pattern 1, falling back to simple order".into(),
            "gpu12:771:771 [0] graph/topo.h:230 NCCL WARN Could not find NET with id 0".into(),
            format!("[rank0]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3376, internal error - please report this issue to the NCCL developers, NCCL version {version}"),
        ],
    )])
}

#[test]
fn a_fused_nic_fallback_failure_is_the_known_defect_until_2_27_3() {
    let doc = analyze(fused_nic_init_failure("2.25.1").path());
    let bug = nccl_bug(&doc).expect("proposed");
    assert!(
        bug["summary"]
            .as_str()
            .unwrap()
            .contains("fused_nic_fallback_net_id"),
        "{bug:#}"
    );
    assert_eq!(
        doc["verdict"]["cause"]["kind"], "nccl_bug",
        "{:#}",
        doc["verdict"]
    );
    let doc = analyze(fused_nic_init_failure("2.27.3").path());
    assert!(nccl_bug(&doc).is_none(), "{:#}", doc["verdict"]);
}

/// NeMo#13996's shape: the same warning with no line naming the release. Its
/// source position dates it (graph/topo.h:230 is 2.25.1's, :234 2.26's); at
/// 2.27.3's position (:248) no defect is named.
#[test]
fn the_fused_nic_warnings_source_position_dates_the_release() {
    let warn = |line: u32| {
        job(&[(
            "output.log",
            vec![format!(
                "graph/topo.h:{line} NCCL WARN Could not find NET with id 0"
            )],
        )])
    };
    for line in [230, 234] {
        let doc = analyze(warn(line).path());
        assert_names(&doc, "fused_nic_fallback_net_id", &[]);
    }
    assert!(nccl_bug(&analyze(warn(248).path())).is_none());
}

/// NVIDIA/nccl#1612's shape: a listening socket's peer hangs up before its
/// 8-byte magic (a port scanner) and init fails through bootstrap.cc.
fn closed_before_magic(version: &str) -> tempfile::TempDir {
    job(&[(
        "rank0.log",
        vec![
            format!("node1:811:811 [0] NCCL INFO NCCL version {version}+cuda12.4"),
            String::new(),
            "node1:811:900 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.10.1.3<36138>".into(),
            "node1:811:900 [0] NCCL INFO misc/socket.cc:80 -> 6".into(),
            "node1:811:900 [0] NCCL INFO bootstrap.cc:701 -> 6".into(),
            "node1:811:900 [0] NCCL INFO init.cc:1402 -> 6".into(),
        ],
    )])
}

#[test]
fn a_peer_closing_before_the_magic_fails_init_until_2_27_3() {
    let doc = analyze(closed_before_magic("2.26.2").path());
    let bug = nccl_bug(&doc).expect("proposed");
    assert!(
        bug["summary"]
            .as_str()
            .unwrap()
            .contains("bootstrap_accept_closed_before_magic"),
        "{bug:#}"
    );
    let doc = analyze(closed_before_magic("2.27.3").path());
    assert!(nccl_bug(&doc).is_none(), "{:#}", doc["verdict"]);
}

/// nccl-tests#287's shape: two GeForce RTX 5090s on NCCL 2.25.1, whose init
/// log says the kernels need more shared memory than the GPU gives. The
/// defect fixed in 2.26.2 is named even where the paste stops before the
/// failure (status stays unknown: the log shows no failure itself); 2.26.2
/// prints the line as a WARN for another reason and is not proposed.
#[test]
fn blackwell_shared_memory_is_the_defect_of_2_25_1_fixed_in_2_26_2() {
    let lines = |version: &str, prefix: &str| {
        vec![
            "#  Rank  0 Group  0 Pid   4766 on   GENOA-06 device  0 [0x21] NVIDIA GeForce RTX 5090"
                .to_string(),
            "GENOA-06:4766:4766 [0] NCCL INFO Bootstrap: Using enp227s0f0:192.168.1.250<0>"
                .to_string(),
            format!("GENOA-06:4766:4766 [0] NCCL INFO NCCL version {version}+cuda12.8"),
            format!(
                "GENOA-06:4766:4780 [0] NCCL {prefix}ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856"
            ),
            format!(
                "GENOA-06:4766:4781 [1] NCCL {prefix}ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856"
            ),
        ]
    };
    let dir = job(&[("all_reduce_perf.log", lines("2.25.1", "INFO "))]);
    let doc = analyze(dir.path());
    let bug = nccl_bug(&doc).unwrap_or_else(|| panic!("{doc:#}"));
    let summary = bug["summary"].as_str().unwrap();
    assert!(
        summary.contains("blackwell_shared_mem") && summary.contains("fixed in 2.26.2"),
        "{bug:#}"
    );
    assert_eq!(doc["verdict"]["cause"]["kind"], "nccl_bug", "{doc:#}");
    assert_eq!(doc["verdict"]["status"], "unknown", "{doc:#}");

    let fixed = job(&[(
        "all_reduce_perf.log",
        lines("2.26.2", "WARN cudaArch 1200 "),
    )]);
    assert!(nccl_bug(&analyze(fixed.path())).is_none());
}

/// horovod#893's shape (NCCL 2.4.2, TensorFlow + Horovod, no version line
/// in the paste): rank 2's SHM set-up fails in cudaHostRegister at
/// `include/shm.h:42` and the chain runs through `transport/shm.cu`: the
/// segment-name reuse of ring and tree peers fixed in 2.4.6, dated by the
/// `.cu` source only 2.4.2 (of the releases with that registration line)
/// prints. 2.4.8's chain (`shm.cc`) names no defect.
#[test]
fn shm_set_up_invalid_argument_of_2_4_2_is_the_segment_name_reuse_fixed_in_2_4_6() {
    let lines = |ext: &str| {
        vec![
            "heinzel135:151779:151929 [1] NCCL INFO Ring 00 : 1[1] -> 2[2] via direct shared memory".to_string(),
            "heinzel136:84299:84449 [0] NCCL INFO Ring 00 : 3 -> 4 [receive] via NET/IB/0".to_string(),
            "heinzel135:151780:151928 [2] NCCL INFO Ring 00 : 2[2] -> 3[3] via direct shared memory".to_string(),
            String::new(),
            "heinzel135:151780:151928 [2] include/shm.h:42 NCCL WARN Cuda failure 'invalid argument'".to_string(),
            format!("heinzel135:151780:151928 [2] NCCL INFO transport/shm.{ext}:187 -> 1"),
            format!("heinzel135:151780:151928 [2] NCCL INFO init.{ext}:658 -> 1"),
        ]
    };
    let dir = job(&[("horovod.log", lines("cu"))]);
    let doc = analyze(dir.path());
    assert_names(&doc, "shm_segment_name_reuse_2_4", &["fixed in 2.4.6"]);
    assert_eq!(doc["verdict"]["cause"]["kind"], "nccl_bug", "{doc:#}");

    let mut later = lines("cc");
    later.insert(
        0,
        "heinzel135:151780:151780 [2] NCCL INFO NCCL version 2.4.8+cuda10.0".into(),
    );
    let doc = analyze(job(&[("horovod.log", later)]).path());
    assert!(
        nccl_bug(&doc).is_none_or(|b| !b["summary"].as_str().unwrap().contains("shm_segment")),
        "{doc:#}"
    );
}

/// TensorRT-LLM#4238's shape (two ranks behind a bare `[N] ` prefix, no
/// version line): the kernel launch fails at `enqueue.cc:1500` with `Cuda
/// failure 1 'invalid argument'`, the CUCHECK of cuLaunchKernelEx that only
/// NCCL 2.25.1 has on that line: the oversized shared memory of the defect
/// fixed in 2.26.2, dated by the line itself. The same text one line off (no
/// release's launch) names no defect.
#[test]
fn a_launch_failure_at_2_25_1s_enqueue_line_is_the_blackwell_defect_without_a_version_line() {
    let lines = |line: u32| {
        let mut out = Vec::new();
        for rank in [1, 0] {
            out.push(format!(
                "[{rank}] enqueue.cc:{line} NCCL WARN Cuda failure 1 'invalid argument'"
            ));
            out.push(format!("[{rank}] NCCL INFO group.cc:242 -> 1"));
            out.push(format!("[{rank}] NCCL INFO group.cc:470 -> 1"));
            out.push("Failed, NCCL error /src/tensorrt_llm/thop/allreduceOp.cpp:308 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'".to_string());
        }
        out
    };
    let dir = job(&[("output.log", lines(1500))]);
    let doc = analyze(dir.path());
    assert_names(&doc, "blackwell_shared_mem", &[]);
    assert_eq!(doc["verdict"]["cause"]["kind"], "nccl_bug", "{doc:#}");
    // The rank whose own launch failed is the one the defect struck.
    assert_eq!(
        doc["verdict"]["stuck_ranks"],
        serde_json::json!([1]),
        "{doc:#}"
    );

    let other = job(&[("output.log", lines(1501))]);
    let doc = analyze(other.path());
    assert!(
        nccl_bug(&doc).is_none_or(|b| !b["summary"].as_str().unwrap().contains("blackwell")),
        "{doc:#}"
    );
}

/// vLLM#3688's shape: a Ray worker's DistBackendError on NCCL 2.18.1 whose
/// last CUDA error is `invalid argument` — the unsynchronised copy of
/// ncclTransportP2pSetup fixed in 2.18.6 / 2.19.3 (NVIDIA/nccl#957). Named on
/// 2.18.1; not on 2.18.6, the first 2.18 release with the fix.
#[test]
fn p2p_setup_invalid_argument_is_the_defect_of_2_18_1_to_2_19_1() {
    let lines = |version: &str| {
        vec![
            format!("(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version {version}"),
            "(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] ncclUnhandledCudaError: Call to CUDA function failed.".to_string(),
            "(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] Last error:".to_string(),
            "(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] Cuda failure 'invalid argument'".to_string(),
        ]
    };
    let dir = job(&[("driver.log", lines("2.18.1"))]);
    let doc = analyze(dir.path());
    let bug = nccl_bug(&doc).unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        bug["summary"]
            .as_str()
            .unwrap()
            .contains("p2p_setup_unsynced_copy"),
        "{bug:#}"
    );
    let fixed = job(&[("driver.log", lines("2.18.6"))]);
    assert!(nccl_bug(&analyze(fixed.path())).is_none());
}

/// nccl#1176's shape (srun --label, AWS p4de): no line prints either
/// release, but PyTorch's point-to-point warning names the variable by its
/// 2.2+ name (`0TORCH_NCCL_AVOID_RECORD_STREAMS`) on a c10 line without a
/// time (≤2.3): every NCCL those releases ship has the bootstrap tag defect.
/// The same warning stamped (2.4+) or under the old name (≤2.1) dates a
/// series whose releases are not all affected, and proposes nothing.
#[test]
fn the_point_to_point_warnings_wording_dates_the_pytorch_series_torch_2_2() {
    let symptom = "1: node2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n1: node2:4827:6900 [4] NCCL INFO bootstrap.cc:554 -> 3\n";
    let warning = |prefix: &str, name: &str| {
        format!(
            "2: [rank18]:[W{prefix} ProcessGroupNCCL.cpp:2302] Warning: 0{name}=1 has no effect for point-to-point collectives. (function operator())\n"
        )
    };
    let doc = common::report_of(&[(
        "slurm.out",
        &format!(
            "{}{symptom}",
            warning("", "TORCH_NCCL_AVOID_RECORD_STREAMS")
        ),
    )]);
    let bug = nccl_bug(&doc).unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        bug["summary"]
            .as_str()
            .unwrap()
            .contains("bootstrap_tag_collision"),
        "{bug:#}"
    );
    for other in [
        warning("412 23:54:04.060794819", "TORCH_NCCL_AVOID_RECORD_STREAMS"),
        warning("", "NCCL_AVOID_RECORD_STREAMS"),
    ] {
        let doc = common::report_of(&[("slurm.out", &format!("{other}{symptom}"))]);
        assert!(nccl_bug(&doc).is_none(), "{other}: {doc:#}");
    }
}

/// No line prints the NCCL release, but PyTorch's own lines date its series
/// (2.2–2.3: the deprecation warning without a time stamp), and every NCCL
/// those releases ship (2.19.3, 2.20.5) has the bootstrap tag defect: it is
/// proposed, below the weight a printed release gives it. A series whose
/// shipped releases are not all affected (2.4+, stamped) proposes nothing.
#[test]
fn the_nccl_the_dated_pytorch_ships_stands_in_for_a_printed_release_torch_2_2() {
    let symptom = "[default4]:node2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n[default4]:node2:4827:6900 [4] NCCL INFO bootstrap.cc:554 -> 3\n";
    let unstamped = "[default4]:[W Utils.hpp:133] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)\n";
    let stamped = "[default4]:[W412 23:54:04.060794819 Utils.hpp:137] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())\n";
    let doc = common::report_of(&[("train.log", &format!("{unstamped}{symptom}"))]);
    let bug = nccl_bug(&doc).expect("the shipped NCCL is affected");
    let summary = bug["summary"].as_str().unwrap();
    assert!(summary.contains("bootstrap_tag_collision"), "{summary}");
    assert!(summary.contains("2.19.3 or 2.20.5"), "{summary}");
    let shipped = bug["confidence"].as_f64().unwrap();
    assert!(shipped < 0.5, "{shipped}");
    let printed = analyze(truncated_bootstrap("2.19.3+cuda12.2").path());
    let printed = nccl_bug(&printed).unwrap()["confidence"].as_f64().unwrap();
    assert!(shipped < printed, "{shipped} vs {printed}");
    let doc = common::report_of(&[("train.log", &format!("{stamped}{symptom}"))]);
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// nccl#1185's shape (FSDP over split communicators, the log cut before the
/// banner): a proxy's UDS socket already bound, which only 2.20.3–2.20.4
/// print (their socket names repeat a process's pidHash across split
/// communicators). With no release printed the line dates itself, at 0.8 of
/// the defect's weight; a release printed outside the range, or another UDS
/// error, proposes nothing.
#[test]
fn a_warning_only_the_affected_releases_print_dates_the_defect() {
    let bind = |rank: u32, error: &str| {
        vec![
            format!(
                "node3:3{rank}:1058{rank} [{rank}] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket /tmp/nccl-socket-{rank}-e647f8d8e15809a1 failed : {error}"
            ),
            format!("node3:3{rank}:1058{rank} [{rank}] NCCL INFO proxy.cc:1697 -> 2"),
            format!("node3:3{rank}:1058{rank} [{rank}] NCCL INFO init.cc:1210 -> 2"),
        ]
    };
    let in_use = "Address already in use (98)";
    let doc = analyze(
        job(&[
            ("rank2.log", bind(2, in_use)),
            ("rank7.log", bind(7, in_use)),
        ])
        .path(),
    );
    let bug = nccl_bug(&doc).expect("UDS bind collision without a release");
    assert_eq!(
        doc["verdict"]["cause"]["kind"], "nccl_bug",
        "{:#}",
        doc["verdict"]
    );
    assert_eq!(
        doc["verdict"]["status"], "init_failure",
        "{:#}",
        doc["verdict"]
    );
    let summary = bug["summary"].as_str().unwrap();
    assert!(summary.contains("uds_name_collision"), "{summary}");
    assert!(summary.contains("no line names the release"), "{summary}");
    let confidence = bug["confidence"].as_f64().unwrap();
    assert!((0.4..0.5).contains(&confidence), "{confidence}");

    let mut lines = init("node3", 32, 2, "2.21.5+cuda12.4");
    lines.extend(bind(2, in_use));
    let doc = analyze(job(&[("rank2.log", lines)]).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));

    let doc = analyze(job(&[("rank2.log", bind(2, "Permission denied (13)"))]).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// nccl#442 / horovod#3871's shape (WSL2): topology detection finds no PCI
/// sysfs path for the GPU and init fails, which 2.6.4–2.10.2 do (2.10.3 reads
/// the path as optional). The line of 2.6.4–2.9.9 dates the defect where no
/// banner is printed; a missing NIC path, which NCCL only notes, is no failure.
#[test]
fn a_gpu_without_a_pci_sysfs_path_fails_init_until_2_10_3_nccl_2_9_9() {
    let wsl = |version: Option<&str>| {
        let mut lines = version
            .map(|v| init("DESKTOP", 687, 0, v))
            .unwrap_or_default();
        lines.extend([
            "DESKTOP:687:748 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:03/../../0000:03:00.0".to_string(),
            "DESKTOP:687:748 [0] NCCL INFO graph/xml.cc:469 -> 2".into(),
            "DESKTOP:687:748 [0] NCCL INFO graph/xml.cc:682 -> 2".into(),
            "DESKTOP:687:748 [0] NCCL INFO graph/topo.cc:601 -> 2".into(),
            "DESKTOP:687:748 [0] NCCL INFO init.cc:540 -> 2".into(),
        ]);
        analyze(job(&[("rank0.log", lines)]).path())
    };
    for version in [Some("2.9.9+cuda11.3"), Some("2.6.4+cuda10.1"), None] {
        let doc = wsl(version);
        assert_eq!(doc["verdict"]["cause"]["kind"], "nccl_bug", "{version:?}");
        assert_names(&doc, "missing_pci_sysfs_path", &["fixed in 2.10.3"]);
    }
    let doc = wsl(Some("2.10.3+cuda11.4"));
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));

    let mut nic = init("node1", 815, 0, "2.9.9+cuda11.3");
    nic.push(
        "node1:815:864 [0] NCCL INFO Could not find real path of /sys/class/net/eth0/device".into(),
    );
    nic.push("node1:815:864 [0] NCCL INFO comm 0x55d000 rank 0 nranks 2 cudaDev 0 busId 12000 - Init COMPLETE".into());
    let doc = analyze(job(&[("rank0.log", nic)]).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// nccl#379's shape: a topology file (NCCL_TOPO_FILE) describing both
/// sockets of an 8-GPU box, a job using fewer GPUs, init failing on the CPU
/// node of the unused socket. 2.6.4–2.8.2 do this (2.8.3's notes fix it);
/// 2.6.4–2.7.8's `xml.h:77` dates it where no banner is printed. From 2.8.3
/// on the same warning is the file's own fault.
#[test]
fn a_topology_file_with_more_gpus_than_used_fails_init_until_2_8_3_nccl_2_7_8() {
    let run = |version: Option<&str>, line: u32| {
        let mut lines = version
            .map(|v| init("dgx1", 4410, 0, v))
            .unwrap_or_default();
        lines.extend([
            format!("dgx1:4410:4471 [0] graph/xml.h:{line} NCCL WARN Attribute arch of node cpu not found"),
            "dgx1:4410:4471 [0] NCCL INFO graph/topo.cc:380 -> 3".into(),
            "dgx1:4410:4471 [0] NCCL INFO init.cc:581 -> 3".into(),
            "dgx1:4410:4471 [0] NCCL INFO group.cc:73 -> 3 [Async thread]".into(),
        ]);
        analyze(job(&[("rank0.log", lines)]).path())
    };
    for (version, line) in [(Some("2.7.8+cuda11.0"), 77), (None, 77)] {
        let doc = run(version, line);
        assert_eq!(doc["verdict"]["cause"]["kind"], "nccl_bug", "{version:?}");
        assert_names(&doc, "topo_injection_fewer_gpus", &["fixed in 2.8.3"]);
    }
    for (version, line) in [(Some("2.8.3+cuda11.0"), 80), (None, 85)] {
        let doc = run(version, line);
        assert!(nccl_bug(&doc).is_none(), "{version:?} {:?}", kinds(&doc));
        assert_eq!(
            doc["verdict"]["cause"]["kind"], "config_mismatch",
            "{version:?}"
        );
    }
}

/// nccl#1808's shape: two hosts, communicators up, then every rank's
/// watchdog times out; one host's NCCL dropped a connection that did not
/// open with NCCL's magic (an HTTP scraper's `GET /met…`), in the wording of
/// its release: the WARN of 2.16.2–2.26 or the INFO of 2.27–2.30.4.
fn foreign_connection_hang(version: &str, hang: bool) -> tempfile::TempDir {
    let mut files = Vec::new();
    for (rank, host) in [(0u32, "node1"), (1, "node2")] {
        let pid = 5200 + rank;
        let mut lines = init(host, pid, rank, version);
        lines.push(format!(
            "{host}:{pid}:{} [{rank}] NCCL INFO comm 0x55d0{rank}0 rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId 18000 commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE",
            pid + 60
        ));
        if rank == 1 {
            let wording = if version.starts_with("2.2") && version < "2.27" {
                format!(
                    "{host}:{pid}:{} [{rank}] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic 74656d2f20544547 != 7970663b906d70b9",
                    pid + 3
                )
            } else {
                format!(
                    "{host}:{pid}:{} [{rank}] NCCL INFO socketFinalizeAccept: didn't receive a valid magic from 10.9.8.7<44120>",
                    pid + 3
                )
            };
            lines.push(wording);
        }
        if hang {
            lines.push(watchdog_timeout(rank, 2, "ALLREDUCE"));
        }
        files.push((format!("{host}/nccl.{host}.{pid}"), lines));
    }
    owned_job(&files)
}

#[test]
fn a_connection_without_nccls_magic_before_a_hang_is_the_proxy_accept_defect_fixed_in_2_30_7() {
    for version in ["2.21.5", "2.27.3"] {
        let doc = analyze(foreign_connection_hang(version, true).path());
        assert_names(&doc, "proxy_accept_foreign_connection", &["2.30.7"]);
        assert_eq!(
            doc["verdict"]["cause"]["kind"],
            "nccl_bug",
            "{version}: {:?}",
            kinds(&doc)
        );
    }
    // Dropped, the stranger's connection harmed nothing: no hang, no defect.
    let doc = analyze(foreign_connection_hang("2.21.5", false).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
    // 2.30.7 prints neither wording; a hang there is someone else's.
    let doc = analyze(foreign_connection_hang("2.30.7", true).path());
    assert!(nccl_bug(&doc).is_none(), "{:?}", kinds(&doc));
}

/// nccl#1185's shape on 2.20.3 with the default group up: every rank's first
/// communicator prints Init COMPLETE, then the split a new group makes fails
/// to bind its proxy's UDS socket, before any collective completed, and
/// torchrun reports the workers failed. The job never got past creating
/// its communicators: an init failure.
#[test]
fn a_later_communicator_failing_set_up_before_any_work_is_an_init_failure_nccl_2_20_3() {
    let rank = |r: u32| {
        let t = format!("node3:3{r}:1058{r}");
        let mut lines = init("node3", 30 + r, r, "2.20.3+cuda12.3");
        lines.extend([
            format!("{t} [{r}] NCCL INFO comm 0x55d0{r}0 rank {r} nranks 2 cudaDev {r} nvmlDev {r} busId {}000 commId 0x6f3a9d1c2b7e4a05 - Init COMPLETE", 18 + r * 0x23),
            format!("{t} [{r}] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket /tmp/nccl-socket-{r}-e647f8d8e15809a1 failed : Address already in use (98)"),
            format!("{t} [{r}] NCCL INFO proxy.cc:1697 -> 2"),
            format!("{t} [{r}] NCCL INFO init.cc:1210 -> 2"),
        ]);
        lines
    };
    let agent = vec![
        "[2025-02-11 09:14:07,512] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 30) of binary: /usr/bin/python".to_string(),
    ];
    let doc = analyze(
        job(&[
            ("rank0.log", rank(0)),
            ("rank1.log", rank(1)),
            ("agent.log", agent),
        ])
        .path(),
    );
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "nccl_bug", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// The same defect struck the processes of two hosts alike (nccl#1185's UDS
/// collision at a split, 2.20.3, every rank): no rank is the one the others
/// waited for, so the verdict names none.
#[test]
fn a_defect_every_host_hit_alike_names_no_stuck_rank_nccl_2_20_3() {
    let rank = |host: &str, r: u32| {
        let t = format!("{host}:3{r}:1058{r}");
        let mut lines = init(host, 30 + r, r, "2.20.3+cuda12.3");
        lines.extend([
            format!("{t} [{}] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket /tmp/nccl-socket-{}-e647f8d8e15809a1 failed : Address already in use (98)", r % 2, r % 2),
            format!("{t} [{}] NCCL INFO proxy.cc:1697 -> 2", r % 2),
        ]);
        lines
    };
    let doc = analyze(
        job(&[
            ("node3/rank0.log", rank("node3", 0)),
            ("node3/rank1.log", rank("node3", 1)),
            ("node4/rank2.log", rank("node4", 2)),
            ("node4/rank3.log", rank("node4", 3)),
        ])
        .path(),
    );
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "nccl_bug", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

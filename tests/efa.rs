//! The AWS EFA plugin (aws-ofi-nccl) failing to reach its peers: a lead to
//! the instances' security group, told in EFA's own terms; or finding a
//! peer's queue pair gone, which is the peer's crash; or not starting at
//! all in a container or stack that does not fit it.

mod common;

fn assert_security_group_lead(v: &serde_json::Value) {
    assert_eq!(v["cause"]["kind"], "firewall", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("security group"), "{summary}");
    assert!(!summary.contains("bootstrap"), "{summary}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("fi_pingpong -p efa"), "{remedy}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() < 0.6, "{v:#}");
}

/// aws-ofi-nccl#156's shape (plugin v1.4 wording, under mpirun's tags): a
/// send completes with an error at the start of nccl-tests; the security
/// group did not admit EFA traffic.
#[test]
fn a_request_completed_with_error_on_efa_is_a_security_group_lead_ofi_v1_4() {
    let log = "\
[1,13]<stdout>:nccl-tests-worker-1:35:89 [5] ofi_process_cq:1039 NCCL WARN NET/OFI Request 0x7fbb944701b8 completed with error. RC: 20. Error: unknown error. Completed length: 0, Request: { buffer_index: 255, dev: 1, size: 0, state: CREATED, direction: SEND }
[1,13]<stderr>:libfabric:35:1668017255::efa:cq:rxr_cq_write_tx_error():243<warn> rxr_cq_write_tx_error: err: 20, prov_err: Not a directory (20)
";
    let doc = common::report_of(&[("mpijob.log", log)]);
    let v = &doc["verdict"];
    assert_security_group_lead(v);
    assert_eq!(v["cause"]["host"], "nccl-tests-worker-1", "{v:#}");
    assert_ne!(
        v["status"], "degraded",
        "a failed request is a failure: {v:#}"
    );
}

/// aws-ofi-nccl#663's shape (NCCL 2.20.5, torchrun on two p5 hosts): the
/// plugin cannot add the peer's address; the outbound rule was missing.
/// And the v1.16+ completion wording, under a C++ function name.
#[test]
fn a_peer_address_the_plugin_cannot_add_is_the_same_lead_ofi_v1_16() {
    let log = "\
[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL version 2.20.5
[rank1]: ncclInternalError: Internal check failed.
[rank1]: Last error:
[rank1]: NET/OFI Unable to insert remote address into address vector for device 1. RC: 0
";
    let v = &common::report_of(&[("rank1.log", log)])["verdict"];
    assert_security_group_lead(v);

    let log = "ip-10-1-2-3:812:1034 [0] int process_err_completion(nccl_net_ofi_rdma_device_t*, fid_cq*):1463 NCCL WARN NET/OFI Request 0x7f3a20 (SEND) completed with error: err: 5, flags: 0, prov_errno: 15, strerror: Unreachable remote, len: 0\n";
    let v = &common::report_of(&[("nccl.log", log)])["verdict"];
    assert_security_group_lead(v);
}

/// The plugin failing to add its own address says nothing about peers.
#[test]
fn a_local_address_the_plugin_cannot_add_is_no_security_group_lead_ofi_v1_16() {
    let log = "ip-10-1-2-3:812:1034 [0] nccl_net_ofi_rdma_endpoint:4860 NCCL WARN NET/OFI Unable to insert local address into address vector for device 0. RC: Invalid argument\n";
    let v = &common::report_of(&[("nccl.log", log)])["verdict"];
    assert_ne!(v["cause"]["kind"], "firewall", "{v:#}");
}

/// awsome-distributed-training#312's shape (plugin v1.7 wording, mpirun's
/// tags): a send finds no queue pair at the peer, which libfabric says is
/// typically a crashed peer (there, a container's OOM kill): the process on
/// the peer's instance died, named by the instance id where no line of the
/// job ties it to a host, and by the host whose own lines print that id
/// where one does. Not a security-group lead.
#[test]
fn a_request_finding_no_queue_pair_at_the_peer_is_its_crash_ofi_v1_7() {
    let gone = |tag: &str, host: &str, me: &str, peer: &str| {
        format!(
            "[1,{tag}]<stdout>:{host}:199:263 [2] process_err_completion:1562 NCCL WARN NET/OFI Request 0x7f08c0001d30 completed with error. RC: 5. Error: Invalid receiver queue pair number (QPN) My EFA addr: fi_addr_efa://[fe80::30:43ff:fe60:456b]:0:657145598 My host id: {me} Peer EFA addr: fi_addr_efa://[fe80::ed:61ff:fe1d:a3b3]:0:229342137 Peer host id: {peer}. Completed length: 0, Request: {{ dev: 2, size: 0, state: CREATED, type: SEND_CTRL }}\n"
        )
    };
    let (w0, w1) = ("i-00ee91ea93e985ee0", "i-08d8a345a75ab52a0");
    let log = gone("2", "test-nccl-worker-0", w0, w1);
    let v = &common::report_of(&[("test-nccl-worker-0.log", &log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], w1, "{v:#}");
    assert!(!common::cause_kinds(v).contains(&"firewall"), "{v:#}");

    // worker-1's own line names its instance; worker-0 waited on worker-1.
    let unreachable = format!(
        "[1,9]<stdout>:test-nccl-worker-1:35:89 [1] process_err_completion:1562 NCCL WARN NET/OFI Request 0x7fbb944701b8 completed with error. RC: 5. Error: Unresponsive receiver My EFA addr: fi_addr_efa://[fe80::ed:61ff:fe1d:a3b3]:0:229342137 My host id: {w1} Peer EFA addr: fi_addr_efa://[fe80::30:43ff:fe60:456b]:0:657145598 Peer host id: {w0}. Completed length: 0\n"
    );
    let v = &common::report_of(&[
        ("test-nccl-worker-0.log", &log),
        ("test-nccl-worker-1.log", &unreachable),
    ])["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "test-nccl-worker-1", "{v:#}");
}

/// aws-ofi-nccl 1.14 in a container that does not expose the EFA devices
/// (aws-ofi-nccl#1020's shape): libfabric offers no provider, so the plugin
/// cannot start and no communicator can set up.
#[test]
fn no_libfabric_provider_is_the_containers_set_up_aws_ofi_nccl_1_14() {
    let log = "[2025-10-16 22:16:08] ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available\n";
    let v = common::verdict_of(&[("nccl.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("/dev/infiniband"), "{remedy}");
}

/// NCCL 2.19+ with the libfabric of an EFA installer before 1.29
/// (aws-ofi-nccl#584, awsome-distributed-training#203): CUDA memory
/// (`type = 2`) cannot be registered, `RC: -22`. The remedy is the
/// installer, not the memlock limit.
#[test]
fn cuda_memory_the_efa_libfabric_refuses_is_the_stack_mismatch_aws_ofi_nccl_1_7() {
    let log = "register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, Error: Invalid argument\n";
    let v = common::verdict_of(&[("warn.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("1.29.1"), "{remedy}");
}

/// `fi_info -p efa` inside a container not given the EFA devices
/// (aws-ofi-nccl#879's shape, libfabric 1.18+): the same missing provider,
/// told by libfabric's own tool; the remedy passes the devices in.
#[test]
fn fi_info_finding_no_efa_provider_is_the_containers_set_up_libfabric_1_18() {
    let log = "\
libfabric:1234:1712345678::efa:ep_data:efa_device_construct_gid():47<warn> ibv_open_device failed! errno: 2
libfabric:1234:1712345678::core:core:fi_getinfo_():1391<warn> fi_getinfo: provider efa output empty list
fi_getinfo: -61 (No data available)
";
    let v = common::verdict_of(&[("fi_info.txt", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("no EFA device"), "{summary}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("vpc.amazonaws.com/efa"), "{remedy}");
}

/// libfabric's EFA provider aborting a rank because it could not pin its
/// receive buffers (awsome-distributed-training#647: `ulimit -l` was 64 kB
/// in the container): the locked-memory limit, on that rank's host.
fn efa_abort(error: &str) -> serde_json::Value {
    let log = format!(
        "\
[rank3]: Libfabric EFA provider has encountered an internal error:
[rank3]:
[rank3]: Libfabric error: {error}
[rank3]: EFA internal error: (4112) Failure to post internal receive buffers
[rank3]:
[rank3]: Your application will now abort().
"
    );
    common::verdict_of(&[("p5-st-2/rank3.log", log.as_str())])
}

#[test]
fn an_efa_provider_out_of_pinnable_memory_is_the_memlock_limit_libfabric_1_18() {
    let v = efa_abort("(-12) Cannot allocate memory");
    assert_eq!(v["cause"]["kind"], "memlock", "{v:#}");
    assert_eq!(v["cause"]["host"], "p5-st-2", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("Cannot allocate memory"), "{summary}");
    // Another errno is no locked-memory limit.
    let v = efa_abort("(-113) No route to host");
    assert_ne!(v["cause"]["kind"], "memlock", "{v:#}");
}

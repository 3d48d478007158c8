//! Topology and graph XML files (NCCL_TOPO_FILE, NCCL_GRAPH_FILE, a network
//! plugin's per-instance file) that do not describe the machine.

mod common;

fn verdict(log: &str) -> serde_json::Value {
    common::verdict_of(&[("nccl.log", log)])
}

/// azhpc-images#327's shape (NCCL 2.18.6): a VM image sets a graph file
/// written for its 4-GPU size; on the 1-GPU size channel 0 names device 1.
#[test]
fn a_graph_file_naming_a_device_the_machine_lacks_is_the_configuration_nccl_2_18() {
    let log = "\
vm-a100:16674:16674 [0] NCCL INFO NCCL version 2.18.6+cuda11.8
vm-a100:16674:17023 [0] NCCL INFO comm 0x5640f24752d0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 100000 commId 0x2064c00fc2f91516 - Init START
vm-a100:16674:17023 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/microsoft/ncv4/topo.xml
vm-a100:16674:17023 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml
vm-a100:16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.
vm-a100:16674:17023 [0] NCCL INFO graph/search.cc:733 -> 2
vm-a100:16674:17023 [0] NCCL INFO init.cc:1301 -> 2
";
    let v = verdict(log);
    let c = &v["cause"];
    assert_eq!(c["kind"], "config_mismatch", "{v:#}");
    assert_eq!(c["host"], "vm-a100", "{v:#}");
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("/opt/microsoft/ncv4/graph.xml"),
        "{summary}"
    );
    assert!(
        c["remedy"].as_str().unwrap().contains("NCCL_GRAPH_FILE"),
        "{c:#}"
    );
    assert_eq!(v["status"], "init_failure", "{v:#}");
    // The rank whose NCCL could not set up from the file.
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// aws-ofi-nccl#785's WARN: a CPU node without `arch`, which NCCL's own
/// detection always fills. With the plugin's line naming its file it is
/// that file; alone it is a lead.
#[test]
fn a_missing_attribute_is_the_plugins_topology_file_where_one_was_set_ofi_v1_7() {
    let warn = "2a8874e7d1e6:2196:2275 [1] graph/xml.h:101 NCCL WARN Attribute arch of node cpu not found\n";
    let set = "2a8874e7d1e6:2196:2196 [1] NCCL INFO NET/OFI Running on p5.48xlarge platform, Setting NCCL_TOPO_FILE environment variable to /opt/amazon/efa/share/aws-ofi-nccl/xml/p5.48xl-topo.xml\n";
    let v = verdict(&format!("{set}{warn}"));
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("p5.48xl-topo.xml"),
        "{v:#}"
    );
    let with_file = v["cause"]["confidence"].as_f64().unwrap();
    let v = verdict(warn);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let alone = v["cause"]["confidence"].as_f64().unwrap();
    assert!(alone < with_file && alone < 0.5, "{alone} vs {with_file}");
}

/// An Azure image that sets NCCL_GRAPH_FILE (nccl#1240's shape, NCCL 2.18):
/// NCCL warns while setting up and no communicator comes up. NCCL's
/// maintainers call the setting a debugging one never to be set in
/// production: the lead the verdict names.
#[test]
fn a_graph_file_set_where_no_communicator_came_up_is_the_lead_nccl_2_18() {
    let log = "\
Spotllm:73025:73112 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml
Spotllm:73025:73112 [0] init.cc:1080 NCCL WARN Error : no algorithm/protocol available
Spotllm:73025:73112 [0] NCCL INFO init.cc:1261 -> 3
";
    let v = common::verdict_of(&[("nccl.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("NCCL_GRAPH_FILE"), "{summary}");
}

/// Where communicators came up, the setting blamed nothing.
#[test]
fn a_graph_file_set_on_a_job_that_came_up_is_no_lead() {
    let log = "\
n1:10:10 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml
n1:10:10 [0] NCCL INFO ncclCommInitRank comm 0x55 rank 0 nranks 1 cudaDev 0 busId 18000 - Init COMPLETE
";
    let v = common::verdict_of(&[("nccl.log", log)]);
    assert!(
        !common::cause_kinds(&v).contains(&"config_mismatch"),
        "{v:#}"
    );
}

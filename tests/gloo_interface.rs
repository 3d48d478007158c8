//! PyTorch's Gloo process group on an address other hosts cannot reach.

mod common;

use common::verdict_of as verdict;

/// vLLM on two hosts under Ray (torch 2.3, the paste of aws-do-eks#50's
/// kind): the worker's hostname resolved to nothing usable, Gloo bound
/// loopback, and the full mesh never connected.
#[test]
fn the_loopback_fallback_with_a_failed_mesh_is_gloos_interface_torch_2_3() {
    let log = "\
(RayWorkerWrapper pid=1890, ip=10.41.0.8) [rank9]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())
(RayWorkerWrapper pid=1890, ip=10.41.0.8) [rank8]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error
";
    let v = verdict(&[("ray-worker.log", log)]);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");
    let c = &v["cause"];
    assert!(c["summary"].as_str().unwrap().contains("Gloo"), "{c:#}");
    assert!(
        c["remedy"].as_str().unwrap().contains("GLOO_SOCKET_IFNAME"),
        "{c:#}"
    );
    assert!(c["confidence"].as_f64().unwrap() >= 0.6, "{c:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
}

/// A connect to a loopback address a peer advertised (Ubuntu's 127.0.1.1
/// hostname entry), wrapped as a terminal shows it.
#[test]
fn a_connect_to_a_peers_loopback_address_is_the_interface_gloo_pair_cc() {
    let log = "\
[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: Connection refused,
        remote=[127.0.1.1]:14215
RuntimeError: Gloo connectFullMesh failed ...
";
    let v = verdict(&[("engine.log", log)]);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("127.0.1.1"),
        "{v:#}"
    );
}

/// GLOO_SOCKET_IFNAME naming an interface without an address (a bond's
/// slave, a name from another host) fails at once.
#[test]
fn an_interface_without_an_address_is_named_gloo_device_cc() {
    let log = "gpu-node-3: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: ens35f0np0\n";
    let v = verdict(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("ens35f0np0"),
        "{v:#}"
    );
}

/// On one host the fallback is harmless: vLLM prints it on every start.
#[test]
fn the_fallback_on_one_host_that_ran_on_is_no_cause_vllm_0_4() {
    let log = "\
[rank0]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())
INFO 05-04 14:43:20 model_runner.py:173] Loading model weights took 14.9595 GB
INFO 05-04 14:43:23 gpu_executor.py:119] # GPU blocks: 2358, # CPU blocks: 2048
";
    let v = verdict(&[("serve.log", log)]);
    assert!(
        !common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// The same fallback where the launch command says two nodes, though no
/// line names a host: other hosts cannot reach loopback, a lead.
#[test]
fn the_fallback_on_a_two_node_launch_is_a_lead_torch_2_3() {
    let log = "\
torchrun --nnodes=2 --nproc_per_node=8 --rdzv_endpoint=10.0.0.1:29400 train.py
[rank0]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())
";
    let v = verdict(&[("serve.log", log)]);
    assert!(
        common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// vllm#13121's shape across two hosts: the full mesh failed and nothing
/// says why. The interface is a lead only (a peer not up yet fails alike).
#[test]
fn a_failed_mesh_alone_across_hosts_is_only_a_lead_torch_2_5() {
    let line = |r: u32| {
        format!(
            "[rank{r}]:[E212 02:14:01.179080356 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
        )
    };
    let (a, b) = (line(2), line(10));
    let v = verdict(&[("node001/worker.log", &a), ("node002/worker.log", &b)]);
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
    let alts = v["alternatives"].as_array().unwrap();
    let lead = alts
        .iter()
        .find(|a| a["kind"] == "socket_interface")
        .expect("an interface lead");
    assert!(
        lead["summary"].as_str().unwrap().contains("Gloo"),
        "{lead:#}"
    );
    assert!(lead["confidence"].as_f64().unwrap() < 0.35, "{lead:#}");
}

/// pytorch#135355's shape (torchrun on two hosts): each side's Gloo finds
/// its peer's address of the other family (IPv4 = 2, IPv6 = 10); neither
/// host is singled out.
#[test]
fn ranks_whose_gloo_addresses_differ_in_family_are_the_interface() {
    let enforce = |rank: u32, a: u32, b: u32| {
        format!(
            "[rank{rank}]: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:276] ss1.ss_family == ss2.ss_family. {a} vs {b}\n"
        )
    };
    let v = common::verdict_of(&[
        ("node1/rank0.log", &enforce(0, 2, 10)),
        ("node2/rank1.log", &enforce(1, 10, 2)),
    ]);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");
    assert_eq!(v["cause"]["host"], serde_json::Value::Null, "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("IPv6"), "{summary}");
    assert!(!common::cause_kinds(&v).contains(&"process_crash"), "{v:#}");
}

/// kubeflow/trainer#1638's shape (an elastic PyTorchJob on Gloo, torch 1.10):
/// worker-1's pod was deleted and worker-0's all-reduce in backward found
/// the connection closed from the other side. The peer's process went away:
/// a crash on the peer's address, where no line names its rank.
#[test]
fn a_gloo_connection_closed_by_its_peer_is_the_peers_death_torch_1_10() {
    let log = "\
    loss.backward()
RuntimeError: [/opt/conda/conda-bld/pytorch_1634272168290/work/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.244.48.107]:12717
";
    let v = verdict(&[("worker-0.log", log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["cause"]["host"], "10.244.48.107", "{v:#}");
}

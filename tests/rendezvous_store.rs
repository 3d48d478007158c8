//! Ranks that could not reach the c10d rendezvous store (MASTER_ADDR).

mod common;

use common::verdict_of as verdict;

/// OpenRLHF#265's shape (torch 2.1, Ray across docker-swarm containers):
/// the vLLM workers were sent to the actor's docker-bridge address.
#[test]
fn a_store_at_a_docker_bridge_address_is_the_interface_torch_2_1() {
    let log = "\
(RayWorkerVllm pid=207931, ip=10.0.1.75) [E socket.cpp:922] [c10d] The client socket has timed out after 1800s while trying to connect to (172.17.0.2
, 44737).
(ActorModelRayActor pid=207260, ip=10.0.1.75) [E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3856, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800268 milliseconds before timing out.
";
    let v = verdict(&[("ray-driver.log", log)]);
    let c = &v["cause"];
    assert_eq!(c["kind"], "socket_interface", "{v:#}");
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("MASTER_ADDR") && summary.contains("172.17.0.2"),
        "{summary}"
    );
    assert!(
        c["remedy"].as_str().unwrap().contains("MASTER_ADDR"),
        "{c:#}"
    );
}

/// One host, a store on loopback nobody listens on (a script overwrote
/// torchrun's MASTER_PORT): not an interface problem.
#[test]
fn a_loopback_store_on_one_host_is_no_interface_torch_2_4() {
    let log = "[E728 15:01:59.561275187 socket.cpp:1028] [c10d] The client socket has timed out after 600000ms while trying to connect to (127.0.0.1, 48315).\n";
    let v = verdict(&[("train.log", log)]);
    assert!(
        !common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// Two hosts; the second cannot reach node001's routable store address:
/// a dropped port or a master not up yet, so only a lead, on node001.
#[test]
fn a_routable_store_that_times_out_is_only_a_lead_on_its_host_torch_2_3() {
    let node1 = "node001:5100:5100 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.1<0>\n";
    let node2 = "[rank8]: torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (10.1.0.1, 29500).\n";
    let v = verdict(&[("node001/train.log", node1), ("node002/train.log", node2)]);
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
    let alts = v["alternatives"].as_array().unwrap();
    let fw = alts
        .iter()
        .find(|a| a["kind"] == "firewall")
        .expect("a firewall lead");
    assert_eq!(fw["host"], "node001", "{v:#}");
    assert!(fw["confidence"].as_f64().unwrap() < 0.35, "{v:#}");
}

/// torch 2.1+ on a 512-process Slurm job: the store's server timed out with
/// one process missing. No line says which, or why: the verdict is
/// undecided and says how many never connected and whose logs to read.
#[test]
fn the_store_servers_client_timeout_says_how_many_never_joined_torch_2_1() {
    let log = "torch.distributed.DistStoreError: Timed out after 1201 seconds waiting for clients. 511/512 clients joined.\n";
    let v = common::verdict_of(&[("rank0.log", log)]);
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("511 of 512"), "{summary}");
}

/// The missing process's own crash decides it; the undecided store is then
/// no alternative.
#[test]
fn a_crash_of_the_missing_process_decides_it_torch_2_1() {
    let log = "\
torch.distributed.DistStoreError: Timed out after 1201 seconds waiting for clients. 511/512 clients joined.
srun: error: nid001: task 343: Segmentation fault
";
    let v = common::verdict_of(&[("slurm.log", log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    let kinds = common::cause_kinds(&v);
    assert!(!kinds.contains(&"unknown"), "{kinds:?}");
}

/// An EKS write-up's shape (torch 2.6, two pods): the master's store waited
/// for its clients (`1/2 clients joined`) while the worker's connect to it
/// timed out. The store was up; the path between them dropped the connects
/// (here a security group's removed self-reference): a firewall, no longer
/// a lead only.
#[test]
fn a_client_timing_out_on_a_store_that_waited_for_it_is_a_firewall_torch_2_6() {
    let master = "torch.distributed.DistStoreError: Timed out after 121 seconds waiting for clients. 1/2 clients joined.\n";
    let worker = "[E419 13:27:42.301344821 socket.cpp:1011] [c10d] The client socket has timed out after 120000ms while trying to connect to (nccl-master, 29500).\n";
    let v = common::verdict_of(&[("master.log", master), ("worker.log", worker)]);
    assert_eq!(v["cause"]["kind"], "firewall", "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() >= 0.5, "{v:#}");
    // The client's timeout alone stays a lead.
    let v = common::verdict_of(&[("worker.log", worker)]);
    assert_eq!(v["cause"]["kind"], "unknown", "{v:#}");
}

/// PPASR#142's shape (Paddle 2.x, two hosts, one GPU each): the launcher
/// resolved the master's host name to Debian's 127.0.1.1, so the second
/// host keeps retrying its own loopback. No line names a host; the launch
/// command says the job spans two.
#[test]
fn paddle_retries_to_loopback_on_a_two_node_launch_are_the_interface_paddle_2_2() {
    let launch = "python -m paddle.distributed.launch --master 127.0.1.1:63919 --devices=0 --nnodes 2 train.py\n";
    let first = "\
I0224 13:50:30.574579 1498980 tcp_utils.cc:181] The server starts to listen on IP_ANY:63917
I0224 13:50:30.574657 1498980 tcp_utils.cc:130] Successfully connected to 127.0.1.1:63917
";
    let second = "\
I0224 13:50:30.278173 1512912 tcp_utils.cc:107] Retry to connect to 127.0.1.1:63917 while the server is not yet listening.
I0224 13:50:33.278455 1512912 tcp_utils.cc:107] Retry to connect to 127.0.1.1:63917 while the server is not yet listening.
";
    let files = [
        ("launch.txt", launch),
        ("first.log", first),
        ("second.log", second),
    ];
    let v = verdict(&files);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("127.0.1.1"),
        "{v:#}"
    );

    // The same retries on a one-node launch are a store that came up late.
    let one_node = launch.replace("--nnodes 2", "--nnodes 1");
    let v = verdict(&[
        ("launch.txt", one_node.as_str()),
        ("first.log", first),
        ("second.log", second),
    ]);
    assert!(
        !common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// One retry is a store that started late, even across hosts.
#[test]
fn a_single_retry_to_loopback_is_no_verdict_paddle_2_2() {
    let log = "\
python -m paddle.distributed.launch --nnodes 2 train.py
I0224 13:50:30.278173 1512912 tcp_utils.cc:107] Retry to connect to 127.0.1.1:63917 while the server is not yet listening.
";
    let v = verdict(&[("worker.log", log)]);
    assert!(
        !common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// torchrun's echo of its launch configs says two nodes: a store timeout on
/// loopback is then the interface, though no line names a host.
#[test]
fn a_loopback_store_timeout_under_two_nodes_launched_is_the_interface_torch_2_2() {
    let log = "\
[2024-03-12 08:22:45,549] torch.distributed.launcher.api: [INFO]   min_nodes        : 2
[2024-03-12 08:22:45,549] torch.distributed.launcher.api: [INFO]   max_nodes        : 2
[E728 15:01:59.561275187 socket.cpp:1028] [c10d] The client socket has timed out after 600000ms while trying to connect to (127.0.0.1, 48315).
";
    let v = verdict(&[("node-b.log", log)]);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");
}

/// torch's own retry warnings to loopback on a two-node launch: the same
/// story as Paddle's. Once a communicator came up the retries were a store
/// starting late, and say nothing.
#[test]
fn torch_retries_to_loopback_decide_only_while_no_communicator_came_up_torch_2_1() {
    let retries = "\
torchrun --nnodes=2 --nproc_per_node=8 --master_addr=localhost train.py
[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 111 - Connection refused).
[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 111 - Connection refused).
";
    let v = verdict(&[("node2.log", retries)]);
    assert_eq!(v["cause"]["kind"], "socket_interface", "{v:#}");

    let came_up = format!(
        "{retries}node2:100:100 [0] NCCL INFO comm 0x5555 rank 8 nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE\n"
    );
    let v = verdict(&[("node2.log", came_up.as_str())]);
    assert!(
        !common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// open-sora#667 and grl-image-restoration#27's shape (torch 2.1 / 2.2, one
/// host as far as the logs show): MASTER_ADDR was a node number, which the
/// resolver reads as an IPv4 number in 0.0.0.0/8 (`6841231` is
/// 0.104.99.143, `05` is 0.0.0.5), where no host has an address. The
/// per-address retries (bracketed IPv6-mapped and bare IPv4 forms) and the
/// final `failed to connect to any network address of (…)` both show it,
/// with no second host needed.
#[test]
fn a_master_addr_of_digits_is_an_address_no_host_has_torch_2_1() {
    let opensora = "\
[W socket.cpp:697] [c10d] The client socket has failed to connect to [::ffff:0.104.99.143]:47389 (errno: 110 - Connection timed out).
[W socket.cpp:697] [c10d] The client socket has failed to connect to 0.104.99.143:47389 (errno: 110 - Connection timed out).
[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).
";
    let torchx = "\
trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to [::ffff:0.0.0.5]:40323 (errno: 110 - Connection timed out).
trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to 0.0.0.5:40323 (errno: 110 - Connection timed out).
trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to 0.0.0.5:40323 (errno: 110 - Connection timed out).
";
    for log in [opensora, torchx] {
        let v = verdict(&[("train.log", log)]);
        let c = &v["cause"];
        assert_eq!(c["kind"], "socket_interface", "{v:#}");
        assert!(
            c["summary"].as_str().unwrap().contains("0.0.0.0/8"),
            "{c:#}"
        );
        assert!(
            c["remedy"].as_str().unwrap().contains("bare number"),
            "{c:#}"
        );
    }
    // A routable store retried on one host stays undecided.
    let routable = opensora
        .replace("0.104.99.143", "10.1.0.1")
        .replace("6841231", "node001");
    let v = verdict(&[("train.log", routable.as_str())]);
    assert_ne!(v["cause"]["kind"], "socket_interface", "{v:#}");
}

/// LlamaFactory#3715's shape (torch 2.x, one host): the store client's one
/// retry goes to 255.255.0.0, a netmask where the master's address belongs.
/// Reserved class E (and multicast) is no host's address: the first try
/// already decides, where one retry to a routable address is a store
/// starting late.
#[test]
fn a_single_try_at_an_address_no_host_has_decides_torch_2_3() {
    let line = |addr: &str| {
        format!(
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:{addr}]:29500 (errno: 110 - Connection timed out).\n"
        )
    };
    for addr in ["255.255.0.0", "239.1.2.3"] {
        let v = verdict(&[("rank.log", line(addr).as_str())]);
        let c = &v["cause"];
        assert_eq!(c["kind"], "socket_interface", "{addr}: {v:#}");
        assert!(c["summary"].as_str().unwrap().contains(addr), "{c:#}");
        // No reporting host known: the check is worded without one.
        assert!(
            !c["remedy"].as_str().unwrap().contains("<peer_host>"),
            "{c:#}"
        );
    }
    let v = verdict(&[("rank.log", line("10.1.0.1").as_str())]);
    assert!(
        !common::cause_kinds(&v).contains(&"socket_interface"),
        "{v:#}"
    );
}

/// kubeflow/pytorch-operator#125's shape (torch 1.0): a worker pod started
/// before the master pod's name resolved; c10d's `host not found` names no
/// host, and the cause is the name, not a port or an interface.
#[test]
fn a_store_name_that_does_not_resolve_is_the_address_set_up_torch_1_0() {
    let log = "\
  File \"/root/.local/lib/python3.7/site-packages/torch/distributed/rendezvous.py\", line 143, in _env_rendezvous_handler
    store = TCPStore(master_addr, master_port, start_daemon)
ValueError: host not found: Name or service not known
";
    let v = verdict(&[("worker0.log", log)]);
    let c = &v["cause"];
    assert_eq!(c["kind"], "socket_interface", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    let summary = c["summary"].as_str().unwrap();
    assert!(summary.contains("does not resolve"), "{summary}");
    assert!(
        c["remedy"].as_str().unwrap().contains("getent hosts"),
        "{v:#}"
    );
}

/// torch 2.x retries a name that does not resolve and then gives up,
/// quoting it (`(gai error: -2 - Name or service not known)`): the detail
/// names the store's host name.
#[test]
fn the_give_up_line_quoting_a_resolver_error_names_the_store_name_torch_2_1() {
    let log = "\
[W socket.cpp:436] [c10d] The IPv4 network addresses of (llama-master-0, 23456) cannot be retrieved (gai error: -2 - Name or service not known).
torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (llama-master-0, 23456). The IPv4 network addresses of (llama-master-0, 23456) cannot be retrieved (gai error: -2 - Name or service not known).
";
    let v = verdict(&[("gpu-7/worker.log", log)]);
    let c = &v["cause"];
    assert_eq!(c["kind"], "socket_interface", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    let summary = c["summary"].as_str().unwrap();
    assert!(summary.contains("`llama-master-0`"), "{summary}");
    assert_ne!(c["host"], "llama-master-0", "{v:#}");
}

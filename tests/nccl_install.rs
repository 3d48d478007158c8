//! The NCCL a process loaded does not fit it: the network it was told to
//! use is missing, the library is older than the program's headers, the
//! build cannot capture graphs on this driver.

mod common;

/// GCP A3 Ultra, NCCL 2.21 (gpu-recipes#5's shape): NCCL_NET=gIB, and the
/// gIB plugin mounted from the host needs a newer glibc than the serving
/// container has, so NCCL falls back to its own plugins and finds no gIB.
#[test]
fn a_named_network_whose_plugin_failed_to_load_is_the_hosts_set_up_nccl_2_21() {
    let pod = "serving-5d74c6754cq79gp";
    let mut log = String::new();
    log.push_str(&format!(
        "{pod}:565:565 [7] NCCL INFO Bootstrap : Using eth0:10.8.10.18<0>\n"
    ));
    log.push_str(&format!("{pod}:565:565 [7] NCCL INFO NET/Plugin: Plugin load returned 2 : /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by /usr/local/nvidia/lib64/libnccl-net.so) : when loading libnccl-net.so\n"));
    log.push_str(&format!(
        "{pod}:565:565 [7] NCCL INFO NET/Plugin: Using internal network plugin.\n"
    ));
    log.push_str(&format!(
        "{pod}:565:565 [7] net.cc:579 NCCL WARN Error: network gIB not found.\n"
    ));
    log.push_str(&format!("{pod}:565:565 [7] NCCL INFO init.cc:321 -> 5\n"));
    let v = common::verdict_of(&[("serving-pod.log", &log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    assert_eq!(v["cause"]["host"], pod, "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("GLIBC_2.32"), "{summary}");
}

/// A plugin that is simply absent is the usual case: its `Plugin load
/// returned` line explains nothing, and NCCL 2.27's `Failed to initialize
/// any NET plugin` still names the set-up.
#[test]
fn an_absent_plugin_is_not_cited_as_the_reason_nccl_2_27() {
    let log = "\
n1:10:10 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory when loading libnccl-net.so
n1:10:10 [0] plugin/net.cc:277 NCCL WARN Failed to initialize any NET plugin
";
    let v = common::verdict_of(&[("n1.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(!summary.contains("cannot open"), "{summary}");
}

/// torch 2.1 with a second, older NCCL (2.14.3) found first (vllm#1726's
/// shape): the config torch passes leaves `blocking` to the library, which
/// only 2.14 rejects.
#[test]
fn a_config_value_only_an_older_library_rejects_is_two_nccl_installs_nccl_2_14() {
    let log = "\
DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, invalid argument, NCCL version 2.14.3
ncclInvalidArgument: Invalid value for an argument.
Last error:
Invalid config blocking attribute value -2147483648
";
    let v = common::verdict_of(&[("error.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("one NCCL"), "{remedy}");
}

/// A value the caller set wrongly is the caller's mistake, not a library
/// mismatch.
#[test]
fn an_ordinary_invalid_config_value_is_not_a_library_mismatch() {
    let log = "n1:10:10 [0] init.cc:1669 NCCL WARN Invalid config blocking attribute value 2\n";
    let v = common::verdict_of(&[("n1.log", log)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// vLLM with NCCL 2.19.3+cuda11.0 on a CUDA 11.6 stack (vllm#3069's shape):
/// the build cannot be captured in the graphs vLLM records; the failure
/// comes when it captures, after set-up.
#[test]
fn a_build_that_cannot_capture_graphs_is_the_wrong_nccl_for_the_cuda_stack_nccl_2_19() {
    let log = "NCCL WARN NCCL cannot be captured in a graph if either it wasn't built with CUDA runtime >= 11.3 or if the installed CUDA driver < R465.\n";
    let v = common::verdict_of(&[("warn.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert_ne!(v["status"], "init_failure", "{v:#}");
}

/// nccl-tests#41's shape (Singularity, IB host): libibverbs finds the
/// device but no provider library in the container, and the test's NCCL
/// fails with an internal error. The image lacks the RDMA user space.
#[test]
fn an_rdma_device_without_a_provider_library_is_the_images_set_up_rdma_core() {
    let log = "\
libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
ip-0AB85F07: Test NCCL failure common.cu:775 'internal error'
";
    let v = common::verdict_of(&[("all_reduce_perf.out", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("no provider"), "{summary}");
    assert!(
        v["cause"]["remedy"]
            .as_str()
            .unwrap()
            .contains("ibv_devinfo"),
        "{v:#}"
    );
    // Alone, the warning is a lead: NCCL may have fallen back to sockets.
    let v = common::verdict_of(&[("x.out", log.lines().next().unwrap())]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// NVIDIA/nccl#444's shape (4× Tesla K40m, NCCL 2.7.8 under torch 1.7's
/// mp.spawn): every rank's first collective fails with `Cuda failure
/// 'invalid device function'` in enqueue.cc: the NCCL build holds no kernels
/// for sm_35. A build that does not fit the GPU, not a crash of rank 3.
#[test]
fn nccls_kernels_without_code_for_the_gpu_are_the_build_nccl_2_7() {
    let mut log = String::from("NCCL version 2.7.8+cuda11.0\n");
    for r in [3, 0, 1, 2] {
        log.push_str(&format!(
            "[{r}] enqueue.cc:215 NCCL WARN Cuda failure 'invalid device function'\n"
        ));
    }
    log.push_str("-- Process 3 terminated with the following error:\nTraceback (most recent call last):\nRuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:31, unhandled cuda error, NCCL version 2.7.8\n");
    let v = common::verdict_of_owned(&[("train.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("compute_cap"), "{remedy}");
}

/// ROCm/rccl#2189's shape (a gfx1200 beside a gfx1201 in one job, RCCL of
/// ROCm 6.4): RCCL reports its failed HIP call on a line of its own,
/// `[FATAL ERROR]: HIP failure: 'invalid device function'`, the same build
/// without code for one GPU; its other HIP failures are no such build.
#[test]
fn rccls_hip_failure_line_without_code_for_the_gpu_is_the_build_rccl_2_22() {
    let line = |error: &str| format!("desk:4242:4242 [1] [FATAL ERROR]: HIP failure: '{error}'\n");
    let v = common::verdict_of_owned(&[("rank1.log".to_string(), line("invalid device function"))]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("no kernels for this GPU"), "{summary}");
    assert!(
        v["cause"]["remedy"].as_str().unwrap().contains("gfx"),
        "{v:#}"
    );
    let v = common::verdict_of_owned(&[("rank1.log".to_string(), line("out of memory"))]);
    let summary = v["cause"]["summary"].as_str().unwrap_or_default();
    assert!(!summary.contains("no kernels for this GPU"), "{v:#}");
}

/// NVIDIA/nccl#1372's shape (a site build for sm_80 only, run on H100s;
/// also a cu118 wheel's NCCL 2.14 on an RTX 5090): with lazy module loading
/// the first kernel lookup fails as `named symbol not found` in enqueue.cc,
/// the same build without code for the GPU.
#[test]
fn a_kernel_symbol_not_found_is_the_build_without_code_for_the_gpu_nccl_2_18() {
    let mut log = String::from("NCCL version 2.18.3+cuda12.2\n");
    for line in [47, 58, 47, 58] {
        log.push_str(&format!(
            "gcn75:2336636:2336906 [0] enqueue.cc:{line} NCCL WARN Cuda failure 'named symbol not found'\n"
        ));
    }
    let v = common::verdict_of_owned(&[("rank0.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("no kernels for this GPU"), "{summary}");
}

/// ROCm/rccl#876's shape (two RX 7900 XTX beside a Ryzen's integrated
/// gfx1036, RCCL 2.18 from the ROCm packages): RCCL's own launch fails with
/// HIP's `invalid kernel file` (hipErrorInvalidKernelFile) on both ranks —
/// the same story on AMD: no code object for a device the build enumerates.
#[test]
fn rccls_invalid_kernel_file_is_a_build_without_code_for_the_gpu_rccl_2_18() {
    let mut log = String::new();
    for (tid, dev) in [(776696, 0), (776697, 1)] {
        log.push_str(&format!("catalyst-convoy:776691:{tid} [{dev}] /long_pathname_so_that_rpms_can_package_the_debug_info/src/extlibs/rccl/build/hipify/src/enqueue.cc:66 NCCL WARN Cuda failure 'invalid kernel file'\n"));
    }
    log.push_str("catalyst-convoy: Test NCCL failure common.cu:1006 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '\n");
    let v = common::verdict_of_owned(&[("rccl-tests.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("rocminfo"), "{remedy}");
}

/// NCCL's own CUDA call finding the driver older than its runtime, in two
/// shapes: paddle#8195 (NCCL 2.1.4's cuda9.1 build in a CUDA 8 image, the
/// untagged `init.cu:674 WARN` line) and PyTorch's `Last error:` quote of a
/// system libnccl loaded in place of the wheel (NCCL 2.29.7); and CUDA's
/// error 36 under an Open MPI tag, a CUDA 11.3 build's capture query on an
/// R460 driver (nccl#496, NCCL 2.9). The library does not fit the host:
/// `config_mismatch`, the library variant. The same text from the
/// program's own CUDA init is not put on NCCL: it is the host's driver
/// (the `driver` variant), whatever NCCL the job loads.
#[test]
fn nccls_cuda_call_finding_the_driver_too_old_is_the_library_nccl_2_1_2_9_and_2_29() {
    for log in [
        "[1,0]<stdout>:dgx1:13571:13600 [0] enqueue.cc:802 NCCL WARN Cuda failure 'API call is not supported in the installed CUDA driver'\n[1,0]<stdout>:dgx1:13571:13600 [0] NCCL INFO enqueue.cc:1034 -> 1\n",
        "idgsim-gpu-001:47744:47744 [0] init.cu:674 WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'\n",
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:94, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.29.7\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'CUDA driver version is insufficient for CUDA runtime version'\n",
    ] {
        let v = common::verdict_of(&[("train.log", log)]);
        assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
        let remedy = v["cause"]["remedy"].as_str().unwrap();
        assert!(remedy.contains("nvidia-smi"), "{remedy}");
    }
    let own =
        "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n";
    let v = common::verdict_of(&[("rank0.log", own)]);
    let summary = v["cause"]["summary"].as_str().unwrap_or_default();
    assert!(!summary.contains("NCCL library"), "{v:#}");
    assert!(summary.contains("could not start CUDA"), "{v:#}");
}

/// NCCL 2.23+'s init creates a CUDA memory pool (init.cc:417 in 2.23.4,
/// :426 in 2.27): a Tesla M10 (sm_50) under 2.23.4 and a CI runner under a
/// nightly's NCCL (a GitHub Actions stamp before NCCL's own) refuse it as
/// `operation not supported`. The platform lacks what the release needs:
/// `config_mismatch`, `mem_pool` variant. The same text from alloc.h (cuMem)
/// or from a release before 2.23 is not this story.
#[test]
fn nccls_init_refused_a_memory_pool_is_the_platform_nccl_2_23_and_2_27() {
    for log in [
        "NCCL INFO NCCL version 2.23.4+cuda12.6\ninit.cc:417 NCCL WARN Cuda failure 'operation not supported'\n",
        "2025-04-04T16:57:57.7153695Z [2025-04-04 16:57:39] ip-10-0-9-191:95209:95228 [0] init.cc:426 NCCL WARN Cuda failure 'operation not supported'\n",
    ] {
        let v = common::verdict_of(&[("nccl_debug.log", log)]);
        assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
        let remedy = v["cause"]["remedy"].as_str().unwrap();
        assert!(remedy.contains("enable_uvm"), "{remedy}");
    }
    for other in [
        "node:1:1 [0] include/alloc.h:128 NCCL WARN Cuda failure 'operation not supported'\n",
        "node:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\ninit.cc:417 NCCL WARN Cuda failure 'operation not supported'\n",
        // The banner as a paste keeps it without the writer's prefix.
        "NCCL INFO NCCL version 2.21.5+cuda12.4\ninit.cc:417 NCCL WARN Cuda failure 'operation not supported'\n",
    ] {
        let v = common::verdict_of(&[("nccl_debug.log", other)]);
        assert!(
            !v["cause"]["summary"]
                .as_str()
                .unwrap()
                .contains("memory pool"),
            "{v:#}"
        );
    }
}

/// NCCL's P2P transport refusing a peer's buffer handle, in three shapes:
/// vllm#5477 (NCCL 2.20, a Ray actor's prefix, p2p.cc:272 `invalid
/// argument` after vLLM set NCCL_CUMEM_ENABLE=0 in its workers only),
/// nemo-rl#564 (2.26.2, p2p.cc:298) and rccl#1055 (RCCL's p2p.cc:228
/// `invalid device pointer` in a container whose ROCm the host's driver
/// does not serve). The processes share GPU memory differently:
/// `config_mismatch`, `p2p_sharing` variant. The same error from another
/// file of NCCL's is not this story.
#[test]
fn p2p_transport_refusing_a_peers_buffer_is_mismatched_sharing_nccl_2_20_2_26_rccl_2_18() {
    for log in [
        "(LLMRayActor pid=116812) a5fa65866c9c:116812:120158 [0] transport/p2p.cc:272 NCCL WARN Cuda failure 'invalid argument'\n",
        "transport/p2p.cc:298 NCCL WARN Cuda failure 'invalid argument'\n",
        "9cce34ff6c6c:504930:505428 [0] /mnt/ubuntu/software/rocm/rccl/build/hipify/src/transport/p2p.cc:228 NCCL WARN Cuda failure 'invalid device pointer'\n",
    ] {
        let v = common::verdict_of(&[("worker.log", log)]);
        assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
        let remedy = v["cause"]["remedy"].as_str().unwrap();
        assert!(remedy.contains("NCCL_CUMEM_ENABLE=0"), "{remedy}");
    }
    let elsewhere = "node:1:1 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'invalid argument'\n";
    let v = common::verdict_of(&[("worker.log", elsewhere)]);
    assert!(
        !v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("P2P transport"),
        "{v:#}"
    );
}

/// The program's own kernels failing so is the framework's build: no claim
/// about NCCL's.
#[test]
fn a_programs_own_missing_kernel_image_is_not_put_on_nccl_torch_2_1() {
    let log = "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 12, in <module>\n[rank0]: RuntimeError: CUDA error: no kernel image is available for execution on the device\n";
    let v = common::verdict_of(&[("rank0.log", log)]);
    assert!(
        !v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("NCCL build"),
        "{v:#}"
    );
}

/// PaddleOCR#256's shape (Paddle 1.x's dynamic loader, multi-GPU training):
/// the host has no libnccl on the loader's path, so every collective fails.
/// The install, as XLA's `Unable to load NCCL library` is; the remedy says
/// how to find the NCCL Paddle's build wants.
#[test]
fn paddle_finding_no_libnccl_is_the_install_paddle_1_8() {
    let log = "Error: Failed to find dynamic library: libnccl.so ( libnccl.so: cannot open shared object file: No such file or directory ) \n Please specify its path correctly using following ways: \n Method. set environment variable LD_LIBRARY_PATH on Linux or DYLD_LIBRARY_PATH on Mac OS. \n";
    let v = common::verdict_of(&[("workerlog.0", log)]);
    let c = common::assert_cause(&v, "config_mismatch", "cannot open shared object file");
    assert!(c["remedy"].as_str().unwrap().contains("run_check"), "{c:#}");
}

/// NCCL 2.26+ refusing to connect an InfiniBand port with a RoCE one, in
/// both of its wordings (the local pair, and a remote NIC of the other
/// link layer): NCCL_IB_HCA mixes link types. The set-up, naming the host
/// and the NIC, with NCCL_IB_HCA in the remedy.
#[test]
fn nics_of_two_link_layers_are_the_set_up_nccl_2_26_and_2_30() {
    for log in [
        "node1:88:90 [0] transport/net_ib/connect.cc:987 NCCL WARN NET/IB : Attempted to connect incompatible devices: [1]mlx5_1:1/RoCE and [0]mlx5_0:1/IB. Try selecting NICs of only one link type using NCCL_IB_HCA\nnode1:88:90 [0] NCCL INFO transport/net.cc:870 -> 3\n",
        "node1:88:90 [0] transport/net_ib.cc:1376 NCCL WARN NET/IB : Remote IB device is incompatible with the local [0]mlx5_2:1/RoCE. Try selecting NICs of only one link type using NCCL_IB_HCA\n",
    ] {
        let v = common::verdict_of(&[("nccl.log", log)]);
        let c = &v["cause"];
        assert_eq!(c["kind"], "config_mismatch", "{v:#}");
        assert_eq!(c["host"], "node1", "{c:#}");
        assert!(
            c["remedy"].as_str().unwrap().contains("NCCL_IB_HCA"),
            "{c:#}"
        );
    }
}

/// nccl#1925's shape (NCCL 2.27+, GB200 pods without privileges): the
/// fabric-handle allocation fails (`Cuda failure 800 'operation not
/// permitted'`) and NCCL says MNNVL is there but not working, naming the
/// IMEX channel device. The container's set-up, not the GPU; 2.25's
/// wording says the same.
#[test]
fn mnnvl_without_an_imex_channel_is_the_containers_set_up_nccl_2_25_and_2_27() {
    let nccl_2_27 = "[2025-11-30 05:55:16] pod-a:3769901:3769901 [1] include/alloc.h:228 NCCL WARN Cuda failure 800 'operation not permitted'\n[2025-11-30 05:55:16] pod-a:3769901:3769901 [1] mnnvl.cc:67 NCCL WARN MNNVL (cliqueSize 8) is available but not working on this system. Check the IMEX channel configuration (/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.\npod-a:3769901:3769901 [1] NCCL INFO init.cc:915 -> 2\n";
    let nccl_2_25 = "gb-07:211:211 [0] mnnvl.cc:54 NCCL WARN MNNVL (cliqueSize 72) is available but not supported on this system. Check the IMEX configuration.\n";
    for log in [nccl_2_27, nccl_2_25] {
        let v = common::verdict_of(&[("nccl.log", log)]);
        let c = common::assert_cause(&v, "config_mismatch", "MNNVL");
        assert!(
            c["remedy"].as_str().unwrap().contains("nvidia-imex"),
            "{c:#}"
        );
    }
}

/// NCCL_NET=IB on a host whose IB ports are all Initializing (no subnet
/// manager configured them: SM lid 0): NCCL finds no IB device there. The
/// ports' state is the cause, not the set-up (NCCL 2.21, ibstat).
#[test]
fn no_ib_device_where_no_port_is_active_is_the_ports_state_nccl_2_21() {
    let log = "gpu-node-23:204:445 [7] net.cc:372 NCCL WARN Error: network IB not found.\ngpu-node-23:204:445 [7] NCCL INFO init.cc:321 -> 5\n";
    let port = |ca: &str| {
        format!(
            "CA '{ca}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Initializing\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 65535\n\t\tSM lid: 0\n\t\tLink layer: InfiniBand\n"
        )
    };
    let ibstat = format!("{}{}", port("mlx5_0"), port("mlx5_1"));
    let v = common::verdict_of(&[
        ("gpu-node-23/worker.log", log),
        ("gpu-node-23/ibstat.txt", &ibstat),
    ]);
    assert_eq!(v["cause"]["kind"], "port_degraded", "{v:#}");
    assert_eq!(v["cause"]["host"], "gpu-node-23", "{v:#}");
    // With one port Active, NCCL had an IB device: the set-up stays the lead.
    let one_up = ibstat.replacen("State: Initializing", "State: Active", 1);
    let v = common::verdict_of(&[
        ("gpu-node-23/worker.log", log),
        ("gpu-node-23/ibstat.txt", &one_up),
    ]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

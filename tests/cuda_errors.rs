//! CUDA errors a rank's own watchdog reports: a program fault takes that
//! rank down first; the same fault everywhere is not one rank's crash.

mod common;

use common::write;

fn job(faulty: &[u32]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for r in 0..4u32 {
        if faulty.contains(&r) {
            log.push_str(&format!("[rank{r}]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank {r}] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n"));
        } else {
            log.push_str(&format!("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"));
        }
    }
    write(dir.path(), "train.log", &log);
    dir
}

/// vllm-project/vllm#6042's shape, torch 2.3: rank 3 hit an illegal memory
/// access and its watchdog took it down; the others timed out waiting.
#[test]
fn a_ranks_own_cuda_program_fault_makes_it_the_crashed_rank_torch_2_3() {
    let dir = job(&[3]);
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    assert_eq!(v["status"], "crash", "{v:#}");
}

/// Every rank faulting alike is a defect they all run, not rank 0 crashing.
#[test]
fn the_same_cuda_fault_on_every_rank_names_no_single_crashed_rank() {
    let dir = job(&[0, 1, 2, 3]);
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_ne!(v["cause"]["kind"], "process_crash", "{v:#}");
}

/// nccl-tests#276's shape (NVLS set-up on an NVSwitch system after a Fabric
/// Manager restart): `Cuda failure 999 'unknown error` — the closing quote
/// lost in the paste. A CUDA failure of NCCL's NVLS calls (2.17–2.26) is,
/// by the maintainers' account, the Fabric Manager restarted without a GPU
/// reset: a weak fault of the host's NVSwitch fabric, not nothing. So is
/// nccl#1488's `invalid argument` there (NCCL 2.18).
#[test]
fn a_cuda_failure_of_the_nvls_transport_is_a_weak_nvswitch_fault_nccl_2_18() {
    for (line, host) in [
        (
            "gpu47:4962:5097 [1] transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error\n",
            "gpu47",
        ),
        (
            "node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'\nnode23:12098:12141 [2] NCCL INFO transport/nvls.cc:394 -> 1\n",
            "node23",
        ),
    ] {
        let doc = common::report_of(&[("allreduce.log", line)]);
        let v = &doc["verdict"];
        assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
        assert_eq!(v["cause"]["host"], host, "{v:#}");
        assert!(v["cause"]["confidence"].as_f64().unwrap() < 0.5, "{v:#}");
        let remedy = v["cause"]["remedy"].as_str().unwrap();
        assert!(remedy.contains("GPU reset"), "{remedy}");
    }
}

/// pytorch#177472's shape (NCCL 2.29.3 quoted by PyTorch after `Last
/// error:`): the NVSwitches would not bind NVLS multicast memory. NCCL's
/// own words put it on the Fabric Manager or the switches: a GPU-side
/// fault of the host, told as the NVSwitch variant.
#[test]
fn nvls_memory_the_nvswitches_would_not_bind_is_a_fabric_manager_fault_nccl_2_29() {
    let log = "\
torch.distributed.DistBackendError: NCCL error in: /var/lib/jenkins/workspace/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.29.3
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'.
This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.
Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.
";
    let v = &common::report_of(&[("train.log", log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("Fabric Manager"), "{summary}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("NCCL_NVLS_ENABLE=0"), "{remedy}");
}

/// nccl-tests' own check line (src/common.h, host prefix since 2019): a
/// CUDA failure whose text is the hardware's is a GPU fault.
#[test]
fn nccl_tests_failure_lines_are_read_nccl_tests_2_x() {
    let log = "gpu-node7: Test CUDA failure common.cu:891 'uncorrectable ECC error encountered'\n";
    let v = &common::report_of(&[("all_reduce_perf.log", log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// nccl-tests#264's shape (8×H100, driver 560): CUDA's `system not yet
/// initialized` (cudaErrorSystemNotReady, 802: a driver daemon the system
/// needs is not running) on an NVSwitch system is the Fabric Manager not
/// running, told as the NVSwitch variant of a GPU fault.
#[test]
fn system_not_yet_initialized_is_the_fabric_manager_nccl_tests_2_13() {
    let log = "\
# Using devices
test: Test CUDA failure common.cu:941 'system not yet initialized'
 .. test pid 54340: Test failure common.cu:891
";
    let v = &common::report_of(&[("all_reduce_perf.log", log)])["verdict"];
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("Fabric Manager"), "{summary}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("nvidia-fabricmanager"), "{remedy}");
}

/// NCCL 2.21 under torch 2.4, two ranks on one host: rank 1's tensors
/// filled its GPU, so NCCL could not allocate the buffers of its first
/// point-to-point connection (`include/alloc.h`, CUCHECK's `Cuda failure 2`
/// of 2.19+); torch raises the unhandled CUDA error. Rank 1 crashed for want
/// of GPU memory; rank 0 then waits.
#[test]
fn nccls_failed_gpu_allocation_is_that_ranks_crash_out_of_memory_nccl_2_21() {
    let mut log = String::new();
    for (rank, pid, bus) in [(0u32, 1234u32, "18000"), (1, 1235, "2a000")] {
        log.push_str(&format!(
            "node1:{pid}:{pid} [{rank}] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        ));
        log.push_str(&format!("node1:{pid}:1300 [{rank}] NCCL INFO ncclCommInitRank comm 0x55{rank} rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId {bus} commId 0x1 - Init COMPLETE\n"));
    }
    log.push_str(
        "node1:1235:1301 [1] include/alloc.h:228 NCCL WARN Cuda failure 2 'out of memory'\n",
    );
    log.push_str("node1:1235:1301 [1] NCCL INFO transport/p2p.cc:220 -> 1\n");
    log.push_str("[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3385, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n");
    let doc = common::report_of(&[("train.log", &log)]);
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("GPU memory"), "{summary}");
}

/// Open-Sora-Plan#386's shape (one host, four GPUs, NCCL 2.18's SHM
/// transport): no init line ties a pid to its rank, but each process's
/// channel lines print its own rank first on the send side (`0[1020] -> 2`)
/// and second on a `[receive]` line. The process whose allocation failed is
/// named by its rank; a process whose lines name two ranks is not placed.
#[test]
fn channel_lines_tie_a_process_to_its_rank_when_no_init_line_does_nccl_2_18() {
    let mut log = String::new();
    for (rank, pid) in [(0u32, 3018451u32), (1, 3018452), (2, 3018453), (3, 3018454)] {
        let next = (rank + 1) % 4;
        let prev = (rank + 3) % 4;
        log.push_str(&format!("box:{pid}:{} [{rank}] NCCL INFO Channel 00/0 : {rank}[{rank}] -> {next}[{next}] via SHM/direct/direct\n", pid + 10));
        log.push_str(&format!("box:{pid}:{} [{rank}] NCCL INFO Channel 01/0 : {prev}[{prev}] -> {rank}[{rank}] [receive] via NET/Socket/0\n", pid + 10));
    }
    log.push_str(
        "box:3018453:3018453 [2] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n",
    );
    let v = common::verdict_of_owned(&[("train.log".to_string(), log.clone())]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    // The failing process's lines name two ranks: no rank for it.
    let ambiguous = log.replace(
        "box:3018453:3018463 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3]",
        "box:3018453:3018463 [2] NCCL INFO Channel 00/0 : 1[2] -> 3[3]",
    );
    let v = common::verdict_of_owned(&[("train.log".to_string(), ambiguous)]);
    assert_eq!(v["stuck_ranks"], serde_json::json!([]), "{v:#}");
}

/// The same in NCCL 2.4's words (pytorch#37325's shape): network ring lines
/// print no devices (`Ring 00 : 16 -> 32 [receive] via NET/IB/0`) and the
/// SHM transport is `via direct shared memory`. They still place each
/// process on its rank.
#[test]
fn ring_lines_of_nccl_2_4_place_processes_too_nccl_2_4() {
    let mut log = String::new();
    for (rank, pid) in [(32u32, 8595u32), (33, 8596)] {
        let dev = rank - 32;
        log.push_str(&format!(
            "c0ffee:{pid}:{} [{dev}] NCCL INFO Ring 00 : {} -> {rank} [receive] via NET/IB/0\n",
            pid + 500,
            rank - 16
        ));
        log.push_str(&format!(
            "c0ffee:{pid}:{} [{dev}] NCCL INFO Ring 01 : {rank}[{dev}] -> {}[{}] via direct shared memory\n",
            pid + 500,
            rank + 1,
            dev + 1
        ));
    }
    log.push_str("c0ffee:8596:8596 [1] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n");
    let v = common::verdict_of_owned(&[("train.log".to_string(), log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([33]), "{v:#}");
}

/// The CUDA error in a traceback's last line, in the wordings of older and
/// newer torch: THC's `cuda runtime error (39) : … at` (torch ≤1.4,
/// semantic-segmentation#33) and the device count's `Error 802: system not
/// yet initialized` (an NVSwitch host whose Fabric Manager is not up,
/// huggingface_hub#4134). The process died of a GPU fault.
#[test]
fn python_tracebacks_cuda_errors_in_older_and_device_count_wordings_torch_1_4_and_2() {
    let cases = [
        "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at /pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265\n",
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized\n",
    ];
    for log in cases {
        let v = common::verdict_of(&[("train.log", log)]);
        assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
        assert_eq!(v["status"], "crash", "{v:#}");
    }
}

/// DeepSpeed#3827's shape (ZeRO++ all-to-all, NCCL 2.14.3, pdsh prefix):
/// PyTorch's report keeps only NCCL's last warning, the allocation that
/// failed. With no CUDA failure saying otherwise, the GPU ran out of memory.
#[test]
fn a_failed_allocation_of_nccls_is_out_of_gpu_memory_nccl_2_14() {
    let log = "\
192.168.1.51: RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1670525541990/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, internal error, NCCL version 2.14.3
192.168.1.51: ncclInternalError: Internal check failed.
192.168.1.51: Last error:
192.168.1.51: Failed to CUDA calloc async 1920 bytes
";
    let v = common::verdict_of(&[("deepspeed.log", log)]);
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("GPU memory"),
        "{v:#}"
    );
    // The CUDA failure before it saying something else: no memory verdict.
    let other = format!(
        "192.168.1.51: node:1:1 [0] include/alloc.h:128 NCCL WARN Cuda failure 'operation not supported'\n{log}"
    );
    let v = common::verdict_of(&[("deepspeed.log", &other)]);
    let summary = v["cause"]["summary"].as_str().unwrap_or("");
    assert!(!summary.contains("GPU memory"), "{v:#}");
}

/// sglang#552's shape (vLLM's custom all-reduce, two T4s without a P2P
/// path): both ranks' `Failed: Cuda error …custom_all_reduce.cuh:307 'peer
/// access is not supported between these two devices'`, NCCL's examples'
/// CUDACHECK wording. The GPUs of that host have no peer path the program's
/// own all-reduce can use: a peer-access fault of the host, whose remedy
/// turns that path off — not a program crash of rank 0.
#[test]
fn a_programs_peer_access_failure_is_the_hosts_missing_p2p_path_vllm_0_3() {
    let init = "kaggle-t4:3011:3011 [0] NCCL INFO cudaDriverVersion 12020\n\
kaggle-t4:3011:3011 [0] NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 busId 400 commId 0x9a1b - Init COMPLETE\n\
kaggle-t4:3012:3012 [1] NCCL INFO comm 0x5582 rank 1 nranks 2 cudaDev 1 busId 500 commId 0x9a1b - Init COMPLETE\n";
    let fail = "Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not supported between these two devices'\n";
    let v = common::verdict_of(&[
        ("nccl.log", init),
        ("worker0.log", fail),
        ("worker1.log", fail),
    ]);
    let cause = &v["cause"];
    assert_eq!(cause["kind"], "gpu_fault", "{v:#}");
    assert!(
        cause["summary"].as_str().unwrap().contains("peer-to-peer"),
        "{v:#}"
    );
    assert!(
        cause["remedy"]
            .as_str()
            .unwrap()
            .contains("--disable-custom-all-reduce"),
        "{v:#}"
    );
    assert_ne!(v["status"], "healthy", "{v:#}");
}

/// TensorRT-LLM#1498's shape (Triton's TensorRT-LLM backend, two GPUs in a
/// container without a peer path): the custom all-reduce's CUDA IPC open
/// fails in TLLM_CUDA_CHECK's words, inside Triton's glog error. The same
/// missing peer path.
#[test]
fn tensorrt_llms_peer_access_failure_is_the_hosts_missing_p2p_path_trtllm_0_9() {
    let log = "E0425 10:43:31.433641 841 backend_model.cc:691] ERROR: Failed to create instance: unexpected error when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in cudaIpcOpenMemHandle( reinterpret_cast<void**>(&foreignBuffer), handles[nodeId], cudaIpcMemLazyEnablePeerAccess): peer access is not supported between these two devices (/app/TensorRT-LLM/TensorRT-LLM/cpp/tensorrt_llm/runtime/ipcUtils.cpp:90)\n";
    let v = common::verdict_of(&[("triton.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("peer-to-peer"),
        "{v:#}"
    );
}

/// tensorflow#30887's shape (TF 2.0, ten GPUs in one process): TensorFlow
/// quotes CUDA's driver error by name, the warning wrapped before `peer
/// access from`; CUDA maps at most eight peers per GPU. Read from the
/// wrapped half alone, and told as the same peer-access fault.
#[test]
fn too_many_peers_quoted_by_tensorflow_is_a_peer_access_fault_tf_2_0() {
    let log = "2019-07-25 09:33:34.093469: W tensorflow/core/common_runtime/gpu/gpu_device.cc:1597] Unable to enable peer access between device ordinals 0 and 9, status: Internal: failed to enable\n\
peer access from 0x7f76d46da2c0 to 0x7f76b4713830: CUDA_ERROR_TOO_MANY_PEERS: peer mapping resources exhausted\n";
    let v = common::verdict_of(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let why = v["cause"]["evidence"][0]["why"].as_str().unwrap();
    assert!(why.contains("8 peers"), "{v:#}");
}

/// PyTorch's own wording of the same CUDA error (a P2P copy between two
/// devices of one process) is the same fault, not a program crash.
#[test]
fn peer_access_unsupported_in_a_torch_exception_is_a_peer_access_fault_torch_2_1() {
    let log = "[rank0]: Traceback (most recent call last):\n\
[rank0]:   File \"train.py\", line 41, in <module>\n\
[rank0]: RuntimeError: CUDA error: peer access is not supported between these two devices\n";
    let v = common::verdict_of(&[("rank0.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// ray_lightning#24's shape (NCCL 2.7.8 under Ray): NCCL's own P2P
/// transport could not open the peer GPU's buffer (`failed to open CUDA IPC
/// handle : 217 peer access is not supported …`, the 2.3–2.7 wording), on
/// GPUs NCCL took for P2P-capable. The same peer-access fault, on its host.
#[test]
fn nccls_failed_ipc_open_for_want_of_peer_access_is_the_hosts_p2p_fault_nccl_2_7() {
    let log = "(pid=909608) z-pc:909608:910337 [0] NCCL INFO Channel 00 : 0[2d000] -> 1[2e000] via P2P/IPC\n\
(pid=909608) z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices\n\
(pid=909608) z-pc:909608:910337 [0] NCCL INFO transport.cc:68 -> 1\n\
(pid=909597) RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1603729062494/work/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version 2.7.8\n";
    let v = common::verdict_of(&[("ray.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    assert_eq!(v["cause"]["host"], "z-pc", "{v:#}");
    assert!(
        v["cause"]["remedy"]
            .as_str()
            .unwrap()
            .contains("NCCL_P2P_DISABLE=1"),
        "{v:#}"
    );
}

/// BigScience tr11's log (torch 1.11, torchrun `[default3]:` tags): the
/// watchdog's cleanup loop queried a collective's CUDA event and the driver
/// answered `unknown error`; the exception escaped the thread, and
/// `std::terminate` printed it as `what():  CUDA error: unknown error`. The
/// GPU under that process is the suspect (weakly: `unknown error` is the
/// driver's word for a lost GPU, not proof of one), not a crash of the
/// program's own.
#[test]
fn a_cuda_error_thrown_out_of_the_watchdog_thread_is_read_torch_1_11() {
    let log = "[default3]:terminate called after throwing an instance of 'c10::CUDAError'
[default3]:  what():  CUDA error: unknown error
[default3]:Exception raised from query at ../aten/src/ATen/cuda/CUDAEvent.h:95 (most recent call first):
[default3]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x11a (0x15190c6c29ea in /lib/libtorch_cuda_cpp.so)
[default3]:frame #3: c10d::ProcessGroupNCCL::workCleanupLoop() + 0x145 (0x15190c6c6265 in /lib/libtorch_cuda_cpp.so)
";
    let doc = common::report_of(&[("main_log.txt", log)]);
    let cause = &doc["verdict"]["cause"];
    assert_eq!(cause["kind"], "gpu_fault", "{:#}", doc["verdict"]);
    assert!(
        cause["summary"].as_str().unwrap().contains("unknown error"),
        "{cause:#}"
    );
    assert!(cause["confidence"].as_f64().unwrap() < 0.5, "{cause:#}");
}

/// NVSHMEM#40's shape (H200 p5en, driver 570): the kernel log's
/// `NV_ERR_FABRIC_STATE_OUT_OF_SYNC` from the driver's multicast code while
/// a library's NVLS mapping failed in words no grammar reads. The driver's
/// NVLink fabric state went stale under the Fabric Manager: the host's
/// NVSwitch fabric, told as that variant of a GPU fault, from the kernel.
#[test]
fn a_stale_nvlink_fabric_state_in_the_kernel_log_is_the_nvswitch_fabric_driver_570() {
    let dmesg = "[1891044.581319] NVRM: nvCheckOkFailedNoLog: Check failed: NVLink fabric state cached by the driver is out of sync [NV_ERR_FABRIC_STATE_OUT_OF_SYNC] (0x00000087) returned from status @ mem_multicast_fabric.c:2917\n";
    let app = "/opt/nvshmem/src/host/team/team_internal_nvls.cpp:254: non-zero status: 401 cuMemMap failed to map 274877906944 bytes handle at address: 0x1320000000 offset 0 on device 7\n";
    let v =
        &common::report_of(&[("p5en-1/dmesg.txt", dmesg), ("p5en-1/nvshmem.log", app)])["verdict"];
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("out of sync"), "{summary}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("nvidia-fabricmanager"), "{remedy}");
    let cited = v["cause"]["evidence"].as_array().unwrap();
    assert!(
        cited.iter().any(|e| e["file"] == "p5en-1/dmesg.txt"),
        "{v:#}"
    );
}

/// A Megatron-LM logbook's shape (GB200 NVL72, torch 2.x): the training
/// log holds only the CUDA error's text on a line of its own, after the
/// trainer's step marker — no exception type, no watchdog line. The text is
/// the hardware's (an uncorrectable NVLink error): a GPU fault, not unknown.
/// The same line with a program's own fault names no hardware.
#[test]
fn a_cuda_errors_text_on_a_line_of_its_own_is_read_torch_2_x() {
    let log = "[before the start of training step]\nCUDA error: uncorrectable NVLink error detected during the execution\n";
    let v = common::verdict_of(&[("train.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let log = "[before the start of training step]\nCUDA error: an illegal memory access was encountered\n";
    let v = common::verdict_of(&[("train.log", log)]);
    assert_ne!(v["cause"]["kind"], "gpu_fault", "{v:#}");
}

/// A cluster's troubleshooting page (SciNet Trillium): the first BROADCAST
/// of a job timed out on a node whose NVML said, over and over, that its GPU
/// `requires reset` (wrapped after `Failed to get usage(16):`). The driver
/// holds that GPU in an error state: a GPU fault, named as NVML's.
#[test]
fn nvmls_gpu_requires_reset_is_a_gpu_fault_nvml() {
    let log = "NVML: Failed to get usage(16):\n  GPU requires reset\n[rank0]:[E1201 10:30:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n";
    let v = common::verdict_of(&[("trig0016.log", log)]);
    assert_eq!(v["cause"]["kind"], "gpu_fault", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("NVML: GPU requires reset"), "{summary}");
}

/// NCCL's example NCCLCHECK as FasterTransformer (and lmdeploy's TurboMind,
/// TensorRT-LLM's tests) copied it, under mpirun: the rank that printed
/// `Failed, NCCL error FILE:LINE 'ERROR'` raised on its own NCCL error after
/// rank 1 died of a signal; it is a victim, not a second crash.
#[test]
fn a_programs_ncclcheck_failure_is_its_own_nccl_error_fastertransformer_5() {
    let log = "\
[1,0]<stdout>:Failed, NCCL error /workspace/FasterTransformer/src/fastertransformer/utils/nccl_utils.cc:110 'remote process exited or there was a network error'
[1,1]<stderr>:[node2:12345] *** Process received signal ***
[1,1]<stderr>:[node2:12345] Signal: Segmentation fault (11)
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 12345 on node node2 exited on signal 11 (Segmentation fault).
--------------------------------------------------------------------------
";
    let doc = common::report_of(&[("mpirun.log", log)]);
    let v = &doc["verdict"];
    common::assert_cause(v, "process_crash", "Segmentation fault");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
    assert_eq!(common::rank_row(&doc, 0)["state"], "error", "{doc:#}");
}

/// NCCL's P2P transport enabling peer access to the GPU it reads from
/// (p2p.cc, `failed to peer with device 1(=3b000): 217 …`, 2.4+): the same
/// missing peer path, found by NCCL while it set up its transports, so the
/// init failed (no communicator came up) rather than a running job crashing.
#[test]
fn nccls_own_peer_enable_failure_is_the_missing_p2p_path_at_init_nccl_2_18() {
    let log = "\
dgx1:3121:3121 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
NCCL version 2.18.1+cuda12.1
dgx1:3121:3190 [0] NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 busId 1a000 commId 0x1234 - Init START
dgx1:3121:3190 [0] transport/p2p.cc:306 NCCL WARN failed to peer with device 1(=3b000): 217 peer access is not supported between these two devices
dgx1:3121:3190 [0] NCCL INFO transport/p2p.cc:425 -> 3
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, internal error - please report this issue to the NCCL developers, NCCL version 2.18.1
";
    let v = common::verdict_of(&[("rank0.log", log)]);
    common::assert_cause(&v, "gpu_fault", "peer-to-peer");
    assert_eq!(v["status"], "init_failure", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
}

/// A rank's `unspecified launch failure` where the kernel's only Xids on its
/// GPU are the program's own (13, then 43): the program faulted, the GPU is
/// fine: its process crashed, no GPU fault (NCCL 2.21, driver 535).
#[test]
fn a_launch_failure_with_only_program_xids_on_its_gpu_is_the_ranks_crash_nccl_2_21() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for (r, bus) in [(0u32, "18000"), (1, "2a000")] {
        log.push_str(&format!("gpu-a:{p}:{p} [{r}] NCCL INFO comm 0x55e1 rank {r} nranks 2 cudaDev {r} busId {bus} commId 0x7c1 - Init COMPLETE\n", p = 100 + r));
    }
    log.push_str(
        "gpu-a:101:101 [1] enqueue.cc:1371 NCCL WARN Cuda failure 'unspecified launch failure'\n",
    );
    log.push_str("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n");
    write(dir.path(), "gpu-a/train.log", &log);
    write(
        dir.path(),
        "gpu-a/dmesg.txt",
        "[Thu Jun 20 16:41:07 2024] NVRM: Xid (PCI:0000:2a:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 3, TPC 1, SM 0): Out Of Range Address\n[Thu Jun 20 16:41:07 2024] NVRM: Xid (PCI:0000:2a:00): 43, pid=2201, name=python3, Ch 00000008\n",
    );
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "process_crash", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

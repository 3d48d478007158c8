//! NCCL's shared memory running out (/dev/shm too small, as in containers):
//! the process that could not get its segment failed, told in those terms.

mod common;

fn assert_shm_crash(v: &serde_json::Value) {
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let summary = v["cause"]["summary"].as_str().unwrap();
    assert!(summary.contains("/dev/shm"), "{summary}");
    let remedy = v["cause"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("--shm-size"), "{remedy}");
}

/// NVIDIA/nccl#342's shape (2.4–2.11 wording: SYSCHECK's
/// `Call to posix_fallocate failed`, then the segment it was for).
#[test]
fn a_failed_fallocate_in_dev_shm_is_the_crash_nccl_2_4() {
    let log = "\
a2ccb7ff8bf4:112:219 [3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device
a2ccb7ff8bf4:112:219 [3] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)
a2ccb7ff8bf4:112:219 [3] NCCL INFO transport/shm.cc:101 -> 2
a2ccb7ff8bf4:112:219 [3] NCCL INFO transport.cc:34 -> 2
";
    let v = &common::report_of(&[("train.log", log)])["verdict"];
    assert_shm_crash(v);
    assert_eq!(v["cause"]["host"], "a2ccb7ff8bf4", "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() >= 0.6, "{v:#}");
}

/// The 2.19+ wording under 2.26's timestamp (vllm-project/ci-infra#490),
/// and the line PyTorch quotes after `Last error:` (torchtitan#853).
#[test]
fn the_newer_wordings_and_the_one_pytorch_quotes_are_read_nccl_2_19_and_2_26() {
    let log = "\
[2026-04-22 21:34:20] runner-g4sfw:202016:202235 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: No space left on device (28)
[2026-04-22 21:34:20] runner-g4sfw:202016:202235 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-WU88OE (size 9637888), error: No space left on device (28)
";
    let v = &common::report_of(&[("ci.log", log)])["verdict"];
    assert_shm_crash(v);
    assert_eq!(v["cause"]["host"], "runner-g4sfw", "{v:#}");

    let log = "\
[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
[rank1]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
[rank1]: Last error:
[rank1]: Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)
";
    let v = &common::report_of(&[("rank1.log", log)])["verdict"];
    assert_shm_crash(v);
    assert_eq!(v["stuck_ranks"], serde_json::json!([1]), "{v:#}");
}

/// A rank that died (torchrun's summary) and whose NCCL said /dev/shm was
/// full: one crash, told as the shared-memory one.
#[test]
fn a_ranked_death_on_the_same_host_takes_the_shared_memory_story_torch_2_4() {
    let log = "\
[default0]:node7:4410:4521 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Q1w2E3 to 33554436 bytes
[default0]:node7:4410:4521 [0] NCCL INFO transport/shm.cc:551 -> 2
E0816 01:45:43.466000 140650667333440 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 4410) of binary: /usr/bin/python
";
    let v = &common::report_of(&[("node7.log", log)])["verdict"];
    assert_shm_crash(v);
    assert_eq!(v["cause"]["host"], "node7", "{v:#}");
}

/// vllm-project/vllm#1111's shape (Ray 2.7, vLLM TP=2 in a container): Ray
/// warned at start that /dev/shm held 45 MB, then a worker died of SIGBUS
/// (Abseil's handler's banner) while NCCL set up. A bus error where /dev/shm
/// is that small is the same story as NCCL's own shared-memory error.
#[test]
fn a_bus_error_where_dev_shm_is_small_is_the_shared_memory_story_ray_2_7() {
    let warning = "2023-09-20 11:37:58,722\tWARNING services.py:1889 -- WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has only 46972928 bytes available. This will harm performance! You may be able to free up space by deleting files in /dev/shm.\n";
    let crash = "(RayWorker pid=4856) *** SIGBUS received at time=1695209888 on cpu 3 ***\n(RayWorker pid=4856) PC: @     0x7fd204a7fbba  (unknown)  (unknown)\n";
    let v = common::verdict_of_owned(&[("output.log".to_string(), format!("{warning}{crash}"))]);
    assert_shm_crash(&v);
    assert_eq!(v["status"], "crash", "{v:#}");
    // The bus error alone says nothing about /dev/shm.
    let v = common::verdict_of(&[("output.log", crash)]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// vllm-production-stack#276's shape: the pod's `df -h /dev/shm` (64M,
/// Docker's default) beside NCCL's failed segment: two sources, surer.
#[test]
fn df_of_a_small_dev_shm_corroborates_nccls_shared_memory_error_coreutils() {
    let nccl = "vllm-0:81:81 [1] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-F9ffgB (size 9637888)\n";
    let df = "Filesystem      Size  Used Avail Use% Mounted on\nshm              64M   64M     0 100% /dev/shm\n";
    let alone = common::verdict_of(&[("output.log", nccl)]);
    let both = common::verdict_of(&[("output.log", nccl), ("df_shm.txt", df)]);
    assert_shm_crash(&both);
    let (a, b) = (
        alone["cause"]["confidence"].as_f64().unwrap(),
        both["cause"]["confidence"].as_f64().unwrap(),
    );
    assert!(b > a, "{a} → {b}");
}

/// hugectr_backend#42's and pipedream#76's shape (UCX's fatal-signal report
/// in a container): a bus error whose backtrace runs through NCCL's own code
/// (`ncclGroupEnd`, where it maps the segments of its shared-memory
/// transport) is the same story without any size printed; a bus error in
/// other code says nothing about /dev/shm.
#[test]
fn a_bus_error_inside_nccls_own_code_is_the_shared_memory_story_ucx_1_12() {
    let crash = |func: &str| {
        format!(
            "[qgpuvb813-cvision:1    :0:381] Caught signal 7 (Bus error: nonexistent physical address)
==== backtrace (tid:    381) ====
 0 0x00000000000143c0 __funlockfile()  ???:0
 1 0x000000000018ba51 __nss_database_lookup()  ???:0
 2 0x0000000000068d6c {func}()  ???:0
 3 0x0000000000008609 start_thread()  ???:0
=================================
"
        )
    };
    let v = common::verdict_of_owned(&[("output.log".to_string(), crash("ncclGroupEnd"))]);
    assert_shm_crash(&v);
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("ncclGroupEnd"),
        "{v:#}"
    );
    let v = common::verdict_of_owned(&[("output.log".to_string(), crash("at::native::copy_"))]);
    assert_ne!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

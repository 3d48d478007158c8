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

//! TensorFlow's collective ops (MultiWorkerMirroredStrategy, collective
//! all-reduce under MirroredStrategy): the group resolver's own statements
//! that the workers disagree, and the aborts that follow a worker's input
//! running out.

mod common;

use common::verdict_of as verdict;

/// tensorflow#34156's shape (TF 2.0, two workers): one worker's last batch
/// was partial, so the two members of an all-reduce instance brought
/// different shapes. TensorFlow's words: a mismatch, naming no side.
#[test]
fn a_shape_mismatch_in_a_collective_instance_is_a_collective_mismatch_tf_2_0() {
    let log = "\
2019-11-11 11:45:07.181990: E tensorflow/core/common_runtime/ring_alg.cc:279] Aborting RingReduce with Cancelled: [_Derived_]Cancelled
2019-11-11 11:45:07.182077: W tensorflow/core/framework/op_kernel.cc:1655] OP_REQUIRES failed at collective_ops.cc:253 : Invalid argument: Shape mismatch in the collective instance 106. Op at device /job:worker/replica:0/task:1/device:CPU:0 expected shape [49] but another member in the group expected shape [64]. This is likely due to different input shapes at different members of the collective op.
";
    let v = verdict(&[("worker1.log", log)]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("different shapes"),
        "{v:#}"
    );
}

/// tensorflow#33086's shape (TF 2.0): one worker's dataset ended mid-step
/// and every member's RingReduce aborted with its `End of sequence`.
#[test]
fn a_ring_aborted_by_a_workers_end_of_input_is_a_weaker_mismatch_tf_2_0() {
    let log = "\
2019-10-06 15:35:15.789589: W tensorflow/core/common_runtime/base_collective_executor.cc:216] BaseCollectiveExecutor::StartAbort Out of range: [_Derived_]End of sequence
2019-10-06 15:35:15.797384: E tensorflow/core/common_runtime/ring_alg.cc:279] Aborting RingReduce with Out of range: [_Derived_]End of sequence
";
    let v = verdict(&[("chief.log", log)]);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert!(v["cause"]["confidence"].as_f64().unwrap() < 0.5, "{v:#}");
}

/// An evaluation loop ending on `End of sequence` outside any collective
/// is how tf.data says a dataset is done: no verdict.
#[test]
fn end_of_sequence_outside_a_collective_is_no_mismatch_tf_2_4() {
    let log = "2021-03-01 10:00:00.000001: W tensorflow/core/framework/op_kernel.cc:1767] OP_REQUIRES failed at iterator_ops.cc:1004 : Out of range: End of sequence\n";
    let v = verdict(&[("train.log", log)]);
    assert!(
        !common::cause_kinds(&v).contains(&"collective_mismatch"),
        "{v:#}"
    );
}

/// tensorflow#47203's shape (TF 2.4): the chief saw two GPUs, the worker
/// four, so the workers count the all-reduce group differently. The line
/// ends a traceback as the exception's message.
#[test]
fn workers_counting_a_group_differently_are_the_launchs_layout_tf_2_4() {
    let log = "\
Traceback (most recent call last):
  File \"main.py\", line 40, in <module>
    model.fit(ds, epochs=3)
tensorflow.python.framework.errors_impl.InternalError: Collective Op has group_size 8 and group_key 1 but that group has size 4
";
    let v = verdict(&[("worker.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    let c = &v["cause"];
    assert!(
        c["summary"].as_str().unwrap().contains("group of 4"),
        "{c:#}"
    );
    assert!(c["remedy"].as_str().unwrap().contains("TF_CONFIG"), "{c:#}");

    // 2.5+ names the device joining and prints its size without a space.
    let log = "INTERNAL: Device /job:worker/replica:0/task:1/device:GPU:0 is joining a group with size4, but that group has size 2 (group_key=1)\n";
    let v = verdict(&[("worker.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
}

/// tensorflow#60847's shape (TF 2.12): the second worker found no GPU and
/// joined the GPU group as a CPU device.
#[test]
fn a_cpu_member_of_a_gpu_group_is_a_setup_difference_tf_2_12() {
    let log = "2023-06-13 13:30:32.188736: E tensorflow/core/common_runtime/base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort INTERNAL: Device /job:worker/replica:0/task:1/device:GPU:0 is joining a group with incompatible device typeCPU (group_key=3)\n";
    let v = verdict(&[("worker.log", log)]);
    assert_eq!(v["cause"]["kind"], "config_mismatch", "{v:#}");
    assert!(
        v["cause"]["summary"]
            .as_str()
            .unwrap()
            .contains("CPU devices"),
        "{v:#}"
    );
}

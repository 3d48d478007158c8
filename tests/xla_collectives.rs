//! XLA's GPU collectives (JAX, TensorFlow) report NCCL's failures in their
//! own words.

mod common;

/// jax#18391's shape (jaxlib 0.4.20 installed without its NCCL wheel): XLA's
/// stub answers the first all-reduce's `ncclGetUniqueId` with `Unable to load
/// NCCL library`, wrapped as a terminal shows the runtime error. The install,
/// with the remedy that says where JAX's NCCL comes from.
#[test]
fn an_unloadable_nccl_library_is_the_install_jaxlib_0_4_20() {
    let log = "\
jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' failed:
external/xla/xla/service/gpu/nccl_utils.cc:133: NCCL operation ncclGetUniqueId(&id) failed: Unable to load NCCL library. Multi-GPU collectives will not work.;
current tracing scope: all-reduce-start; current profiling annotation:
";
    let v = common::verdict_of(&[("train.log", log)]);
    let c = common::assert_cause(&v, "config_mismatch", "Unable to load NCCL library");
    assert!(
        c["remedy"].as_str().unwrap().contains("jax[cuda12]"),
        "{c:#}"
    );
}

//! `lint-logs`: grammar coverage. Every line of the real corpus that looks like
//! a NCCL / ProcessGroupNCCL / elastic message must be recognised by a
//! specific pattern; an unknown one must show up as a gap.

use std::path::Path;
use std::process::Command;

fn ncclpm(args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ncclpm"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn the_real_corpus_has_no_unrecognised_message_lines() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if !corpus.is_dir() {
        return;
    }
    let (code, out) = ncclpm(&["lint-logs", corpus.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.ends_with("0 unrecognised line(s) in 0 file(s)\n"),
        "{out}"
    );
}

#[test]
fn an_unknown_warning_is_a_gap_even_though_the_fallback_takes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("nccl.log");
    std::fs::write(
        &log,
        "n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n\
         n1:1:2 [0] foo.cc:1 NCCL WARN Some brand new problem nobody has seen\n\
         frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x1 (0x1 in libtorch_cuda.so)\n",
    )
    .unwrap();
    let (code, out) = ncclpm(&["lint-logs", log.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains(":2: n1:1:2 [0] foo.cc:1 NCCL WARN Some brand new problem"),
        "{out}"
    );
    assert!(
        out.ends_with("1 unrecognised line(s) in 1 file(s)\n"),
        "{out}"
    );
}

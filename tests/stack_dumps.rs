//! Stack dumps of a hung job's processes (py-spy, Python's faulthandler):
//! the ranks whose main threads are not where the others wait.

mod common;

use serde_json::Value;

/// NCCL's init line of rank `r` on node1 (its pid is 4100 + r).
fn init(r: u32) -> String {
    let pid = 4100 + r;
    format!(
        "node1:{pid}:{pid} [{r}] NCCL INFO comm 0x5581 rank {r} nranks 4 cudaDev {r} nvmlDev {r} busId {r}1000 commId 0xabc - Init COMPLETE\n"
    )
}

/// `py-spy dump --pid P` (0.4: native thread ids) of a rank whose main
/// thread is in `main` (frames innermost first).
fn pyspy(r: u32, main: &[&str]) -> String {
    let pid = 4100 + r;
    let mut out = format!(
        "Process {pid}: /usr/bin/python3 -u train.py --local_rank={r}\nPython v3.10.12 (/usr/bin/python3.10)\n\n"
    );
    out += &format!(
        "Thread {} (idle): \"Thread-2 (_pin_memory_loop)\"\n    select (selectors.py:416)\n    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:53)\n",
        pid + 7
    );
    out += &format!("Thread {pid} (active): \"MainThread\"\n");
    for frame in main {
        out += &format!("    {frame}\n");
    }
    out
}

const IN_ALL_REDUCE: &[&str] = &[
    "all_reduce (torch/distributed/distributed_c10d.py:2050)",
    "wrapper (torch/distributed/c10d_logger.py:75)",
    "reduce_loss (train.py:98)",
    "train (train.py:131)",
    "<module> (train.py:200)",
];

const IN_DATA_LOADER: &[&str] = &[
    "_read (dataset.py:41)",
    "__getitem__ (dataset.py:77)",
    "fetch (torch/utils/data/_utils/fetch.py:51)",
    "_next_data (torch/utils/data/dataloader.py:674)",
    "__next__ (torch/utils/data/dataloader.py:630)",
    "train (train.py:120)",
    "<module> (train.py:200)",
];

fn summary(v: &Value) -> &str {
    v["cause"]["summary"].as_str().unwrap()
}

/// Four ranks dumped while the job hung, no watchdog line yet: three wait
/// in all_reduce, rank 2 is still in its data loader (py-spy 0.4 output,
/// one file per process, ranks found by the pids NCCL's init lines print).
#[test]
fn the_rank_outside_the_collective_the_others_wait_in_is_stuck_py_spy_0_4() {
    let logs: Vec<(String, String)> = (0..4)
        .flat_map(|r| {
            let main = if r == 2 {
                IN_DATA_LOADER
            } else {
                IN_ALL_REDUCE
            };
            [
                (format!("rank{r}.log"), init(r)),
                (format!("stacks/pyspy-{}.txt", 4100 + r), pyspy(r, main)),
            ]
        })
        .collect();
    let v = common::verdict_of_owned(&logs);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([2]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["collective"]["op"], "ALLREDUCE", "{v:#}");
    assert!(summary(&v).contains("_read (dataset.py:41)"), "{v:#}");
    let cited: Vec<&str> = v["cause"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["file"].as_str())
        .collect();
    assert!(cited.contains(&"stacks/pyspy-4102.txt"), "{cited:?}");
}

/// The same dumps beside the others' watchdog timeouts: the stack and the
/// silent rank are two sources, so the verdict is surer than either.
#[test]
fn a_dump_and_a_silent_rank_agree_and_combine() {
    let timeout = |r: u32| {
        format!(
            "[rank{r}]:[E1129 10:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
        )
    };
    let mut logs: Vec<(String, String)> = Vec::new();
    for r in 0..4 {
        let main = if r == 2 {
            IN_DATA_LOADER
        } else {
            IN_ALL_REDUCE
        };
        let mut log = init(r);
        if r != 2 {
            log += &timeout(r);
        }
        logs.push((format!("rank{r}.log"), log));
        logs.push((format!("stacks/pyspy-{}.txt", 4100 + r), pyspy(r, main)));
    }
    let with = common::verdict_of_owned(&logs);
    logs.retain(|(p, _)| !p.starts_with("stacks/"));
    let without = common::verdict_of_owned(&logs);
    assert_eq!(with["stuck_ranks"], serde_json::json!([2]), "{with:#}");
    assert_eq!(
        without["stuck_ranks"],
        serde_json::json!([2]),
        "{without:#}"
    );
    let conf = |v: &Value| v["cause"]["confidence"].as_f64().unwrap();
    assert!(conf(&with) > conf(&without) + 0.1, "{with:#}\n{without:#}");
}

/// faulthandler (`dump_traceback_later` on every rank, the file named by
/// rank): rank 3 waits in broadcast while the others wait in all_reduce.
#[test]
fn a_rank_waiting_in_another_collective_is_a_mismatch_faulthandler() {
    let dump = |func: &str, line: u32| {
        format!(
            "Timeout (0:30:00)!\nThread 0x00007f3c6f7fe700 (most recent call first):\n  File \"/usr/lib/python3.10/threading.py\", line 320 in wait\n  File \"/usr/lib/python3.10/threading.py\", line 607 in wait\n\nThread 0x00007f3d0a8b6740 (most recent call first):\n  File \"/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py\", line {line} in {func}\n  File \"/work/train.py\", line 88 in step\n  File \"/work/train.py\", line 140 in <module>\n"
        )
    };
    let texts: Vec<(String, String)> = (0..4)
        .map(|r| {
            let text = if r == 3 {
                dump("broadcast", 1906)
            } else {
                dump("all_reduce", 2050)
            };
            (format!("logs/rank{r}/faulthandler.txt"), text)
        })
        .collect();
    let v = common::verdict_of_owned(&texts);
    assert_eq!(v["cause"]["kind"], "collective_mismatch", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([3]), "{v:#}");
    assert!(summary(&v).contains("BROADCAST"), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
}

/// A pipeline's stages wait in send and recv: that is one transfer's two
/// ends, not a mismatch.
#[test]
fn send_on_one_rank_and_recv_on_another_are_no_mismatch() {
    let texts: Vec<(String, String)> = (0..2)
        .map(|r| {
            let func = if r == 0 { "send" } else { "recv" };
            let frame = format!("{func} (torch/distributed/distributed_c10d.py:1700)");
            let text = pyspy(r, &[&frame, "forward_step (pipeline.py:52)"]);
            (format!("rank{r}/pyspy.txt"), text)
        })
        .collect();
    let v = common::verdict_of_owned(&texts);
    assert!(
        !common::cause_kinds(&v).contains(&"collective_mismatch"),
        "{v:#}"
    );
}

/// py-spy 0.3 (hex thread ids, no native ids) where no frame names a
/// collective (the ranks wait in a sync the dump cannot show): the rank
/// whose stack none of the others share is a lead, named but weak.
#[test]
fn the_one_stack_the_others_do_not_share_is_a_lead_py_spy_0_3() {
    let dump = |r: u32, frames: &[&str]| {
        let mut out = format!(
            "Process {}: python train.py\nPython v3.8.10 (/usr/bin/python3.8)\n\nThread 0x7F2A4C1FF740 (active+gil): \"MainThread\"\n",
            4100 + r
        );
        for f in frames {
            out += &format!("    {f}\n");
        }
        out
    };
    let texts: Vec<(String, String)> = (0..4)
        .map(|r| {
            let frames: &[&str] = if r == 1 {
                &["save (checkpoint.py:30)", "train (train.py:150)"]
            } else {
                &["train (train.py:131)", "<module> (train.py:200)"]
            };
            (format!("pyspy-rank{r}.txt"), dump(r, frames))
        })
        .collect();
    let v = common::verdict_of_owned(&texts);
    let lead = std::iter::once(&v["cause"])
        .chain(v["alternatives"].as_array().into_iter().flatten())
        .find(|c| c["kind"] == "rank_stalled")
        .unwrap_or_else(|| panic!("a stalled-rank lead: {v:#}"));
    assert!(
        lead["summary"]
            .as_str()
            .unwrap()
            .contains("save (checkpoint.py:30)"),
        "{lead:#}"
    );
    assert!(lead["confidence"].as_f64().unwrap() <= 0.45, "{lead:#}");
}

/// The dumps a job's stack lines group into: (pid, threads, frames per thread).
fn dumps_of(files: &[(&str, &str)]) -> Vec<(Option<u32>, Vec<usize>)> {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        common::write(dir.path(), rel, text);
    }
    let a = common::analyze(dir.path());
    a.job
        .stacks
        .iter()
        .map(|d| (d.pid, d.threads.iter().map(|t| t.frames.len()).collect()))
        .collect()
}

/// `py-spy dump --locals` puts arguments and locals under each frame; a
/// loop over every pid writes its dumps into one file.
#[test]
fn dumps_group_by_process_across_locals_lines_py_spy() {
    let text = "\
Process 501: python train.py
Python v3.11.4 (/usr/bin/python3.11)

Thread 501 (active+gil): \"MainThread\"
    _read (dataset.py:41)
        Arguments:
            self: <Dataset at 0x7f00>
            idx: 77
        Locals:
            path: \"/data/shard-77\"
    train (train.py:120)
Process 502: python train.py
Python v3.11.4 (/usr/bin/python3.11)

Thread 502 (idle): \"MainThread\"
    all_reduce (torch/distributed/distributed_c10d.py:2050)
    train (train.py:131)
Thread 530 (idle): \"Thread-1\"
    wait (threading.py:320)
";
    assert_eq!(
        dumps_of(&[("stacks.txt", text)]),
        vec![(Some(501), vec![2]), (Some(502), vec![2, 1])]
    );
}

/// `faulthandler.dump_traceback_later(…, repeat=True)` dumps the process
/// again and again: a thread seen again opens the next dump; frames far
/// below the last dump line belong to nothing.
#[test]
fn a_repeated_faulthandler_dump_is_a_new_dump_and_far_frames_are_dropped() {
    let once = "\
Timeout (0:05:00)!
Thread 0x00007f3c6f7fe700 (most recent call first):
  File \"/usr/lib/python3.10/threading.py\", line 320 in wait

Current thread 0x00007f3d0a8b6740 (most recent call first):
  File \"/work/train.py\", line 88 in step
  File \"/work/train.py\", line 140 in <module>
";
    let far = format!(
        "{}  File \"/work/x.py\", line 1 in f\n",
        "noise\n".repeat(100)
    );
    let text = format!("{once}{once}{far}");
    assert_eq!(
        dumps_of(&[("rank0/faulthandler.log", &text)]),
        vec![(None, vec![1, 2]), (None, vec![1, 2])]
    );
}

/// A hang whose logs cannot tell who fell behind asks for stack dumps or a
/// RAS report; once they are there, it does not.
#[test]
fn a_hang_without_dumps_asks_for_them() {
    let timeout = |r: u32| {
        format!(
            "[rank{r}]:[E1129 10:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
        )
    };
    let mut logs: Vec<(String, String)> = (0..4)
        .map(|r| (format!("rank{r}.log"), init(r) + &timeout(r)))
        .collect();
    let asks = |logs: &[(String, String)]| {
        let notes = common::report_of_owned(logs)["notes"].to_string();
        notes.contains("No stack dumps")
    };
    assert!(asks(&logs));
    for r in 0..4 {
        logs.push((
            format!("stacks/pyspy-{}.txt", 4100 + r),
            pyspy(r, IN_ALL_REDUCE),
        ));
    }
    assert!(!asks(&logs));
}

/// pytorch#87995's and BLOOM's eval hangs: the only dump is of the rank the
/// others waited for, its main thread reading from its DataLoader's worker
/// queue (py-spy 0.3). With no dump in a collective to compare, that wait
/// is the lead: the rank stalled in data loading. A queue read under no
/// data iterator (a logging thread's queue) says nothing.
#[test]
fn a_lone_dump_waiting_for_its_data_loader_is_the_stalled_rank_py_spy_0_3() {
    const FETCHING: &[&str] = &[
        "wait (threading.py:306)",
        "get (queue.py:179)",
        "_try_get_data (torch/utils/data/dataloader.py:1011)",
        "_get_data (torch/utils/data/dataloader.py:1163)",
        "_next_data (torch/utils/data/dataloader.py:1207)",
        "__next__ (torch/utils/data/dataloader.py:530)",
        "evaluate (megatron/training.py:983)",
        "main (pretrain_gpt.py:245)",
    ];
    let rank_0_dumped_in = |main: &[&str]| {
        common::verdict_of_owned(&[
            ("rank0.log".to_string(), init(0)),
            ("stacks/pyspy-4100.txt".to_string(), pyspy(0, main)),
        ])
    };
    let v = rank_0_dumped_in(FETCHING);
    assert_eq!(v["cause"]["kind"], "rank_stalled", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([0]), "{v:#}");
    assert_eq!(v["status"], "hang", "{v:#}");
    assert!(summary(&v).contains("waiting for its data loader"), "{v:#}");
    assert!(summary(&v).contains("_try_get_data"), "{v:#}");

    const LOGGING: &[&str] = &[
        "wait (threading.py:306)",
        "get (queue.py:179)",
        "flush (metrics/writer.py:88)",
        "train (train.py:131)",
    ];
    let v = rank_0_dumped_in(LOGGING);
    assert_ne!(v["cause"]["kind"], "rank_stalled", "{v:#}");
}

//! torchrun agents list their host's global ranks at rendezvous: with no
//! NCCL INFO lines, that is where a rank that printed nothing ran.

use std::path::Path;

mod common;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The agent's block as torch 1.9+ prints it (`api.py`, `_rendezvous`).
fn rendezvous(group_rank: u32, first: u32) -> String {
    let ranks: Vec<String> = (first..first + 4).map(|r| r.to_string()).collect();
    format!(
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:\n  \
         restart_count=0\n  master_addr=node001\n  master_port=29500\n  group_rank={group_rank}\n  \
         group_world_size=2\n  local_ranks=[0, 1, 2, 3]\n  role_ranks=[{r}]\n  global_ranks=[{r}]\n  \
         role_world_sizes=[8, 8, 8, 8]\n  global_world_sizes=[8, 8, 8, 8]\n\n",
        r = ranks.join(", ")
    )
}

/// torch 1.13 under torchrun --tee 3, NCCL_DEBUG unset: two hosts of four
/// workers; rank 6 (node002, local rank 2) prints nothing while the other
/// seven time out in ALLREDUCE 1203.
fn silent_rank_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (node, host) in ["node001", "node002"].into_iter().enumerate() {
        let first = node as u32 * 4;
        let mut log = rendezvous(node as u32, first);
        for local in 0..4u32 {
            let rank = first + local;
            if rank == 6 {
                continue;
            }
            log.push_str(&format!(
                "[default{local}]:[E ProcessGroupNCCL.cpp:828] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.\n"
            ));
        }
        write(dir.path(), &format!("{host}/torchrun.log"), &log);
    }
    dir
}

#[test]
fn the_agents_rendezvous_places_a_rank_that_printed_nothing_torch_1_13() {
    let job = silent_rank_job();
    let doc = common::analyze_to_json(job.path());
    let v = &doc["verdict"];
    assert_eq!(v["status"], "hang", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([6]), "{v:#}");
    let row = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 6)
        .expect("rank 6 is listed");
    assert_eq!(row["host"], "node002", "{row:#}");
    assert_eq!(v["cause"]["host"], "node002", "{v:#}");
}

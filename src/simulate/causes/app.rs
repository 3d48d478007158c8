//! Healthy runs and the causes that live in the training process: a rank
//! that dies, one whose GPU fails, one that runs a different collective, and
//! one that never reaches the collective.

use crate::model::CauseKind;

use super::super::clock::{MS, SEC};
use super::super::kernel;
use super::super::story::{End, Exc, Fate, Story, Warn};
use super::Ctx;

pub fn healthy(c: &mut Ctx<'_>) -> Story {
    let mut story = c.story(
        "healthy",
        "Every rank trained to the last step and shut down cleanly.".into(),
    );
    story.default_fate = Fate::Finish;
    story
}

pub fn cancelled(c: &mut Ctx<'_>) -> Story {
    let mut story = c.story(
        "healthy",
        "The user cancelled a healthy job while it was training.".into(),
    );
    story.default_fate = Fate::Cancelled;
    story.end = End::Cancelled(c.plan.times.hang);
    story
}

pub fn gpu_fault(c: &mut Ctx<'_>) -> Story {
    let r = c.any_rank();
    let host = c.host_of(r);
    let bdf = c.plan.gpu_bdf(r);
    let pid = c.plan.rank(r).pid;
    let t_f = c.plan.times.hang + c.rng.range(10, 900) * MS;
    let (code, text, cuda): (u32, String, Option<&str>) = match c.rng.index(5) {
        0 | 1 => (79, "GPU has fallen off the bus.".into(), None),
        2 => (
            79,
            "GPU has fallen off the bus.".into(),
            Some("unspecified launch failure"),
        ),
        3 => (
            48,
            format!(
                "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x{:x} partition 2, subpartition 1.",
                c.rng.range(0x1_0000_0000, 0x13_ffff_ffff)
            ),
            Some("uncorrectable ECC error encountered"),
        ),
        _ => (
            95,
            "Uncontained: FBHUB. RST: Yes, D-RST: No".into(),
            Some("uncorrectable ECC error encountered"),
        ),
    };
    let status = if cuda.is_some() { "crash" } else { "hang" };
    let text_story = format!(
        "GPU {bdf} of rank {r} on {} raised Xid {code}; the rank {} and the others timed out waiting for it.",
        c.host_name(host),
        if cuda.is_some() {
            "died on the CUDA error"
        } else {
            "went silent"
        }
    );
    let mut story = c.story(status, text_story);
    story.truth.stuck_ranks = vec![r];
    story.truth.collective = c.collective(&story);
    story.truth.cause = Some(c.rank_cause(CauseKind::GpuFault, r));
    let fate = match cuda {
        Some(msg) => Fate::CudaError {
            at: t_f + c.rng.range(50, 2_000) * MS,
            msg: msg.into(),
        },
        None => Fate::Silent {
            at: t_f,
            enqueued: story.hung.seq,
        },
    };
    story.fates.insert(r, fate);
    let mut kern: Vec<(i64, String)> = kernel::gpu_identity(bdf, &mut c.rng)
        .into_iter()
        .map(|l| (t_f, l))
        .collect();
    let pid_slot = (code != 48).then_some(pid);
    kern.push((t_f + MS, kernel::xid(bdf, code, pid_slot, &text)));
    if code == 79 {
        kern.push((t_f + 2 * MS, kernel::fallen_off_bus(bdf)));
    }
    if code == 48 {
        let remap = format!(
            "Row Remapper: New row (0x{:016x}) marked for remapping, reset gpu to activate.",
            c.rng.range(0x1_0000_0000, 0x13_ffff_ffff)
        );
        kern.push((t_f + 30 * MS, kernel::xid(bdf, 63, None, &remap)));
    }
    story.host_mut(host).kernel.extend(kern);
    story
}

pub fn process_crash(c: &mut Ctx<'_>) -> Story {
    let r = c.any_rank();
    let host = c.host_of(r);
    let pid = c.plan.rank(r).pid;
    let t_f = c.plan.times.hang - c.rng.range(100, 3_000) * MS;
    let variant = c.rng.index(10);
    let (fate, what) = match variant {
        0..=3 => (
            Fate::Exception {
                at: t_f,
                exc: Exc::OutOfMemory,
            },
            "ran out of GPU memory",
        ),
        4..=5 => (
            Fate::Exception {
                at: t_f,
                exc: Exc::Bug(bug(c)),
            },
            "raised an exception",
        ),
        6..=7 => (
            Fate::Signal { at: t_f, signal: 9 },
            "was killed by the kernel OOM killer",
        ),
        _ => (
            Fate::Signal {
                at: t_f,
                signal: 11,
            },
            "segfaulted",
        ),
    };
    let text = format!(
        "Rank {r} on {} {what} before enqueuing the collective; the others timed out (or saw its connections close).",
        c.host_name(host)
    );
    let mut story = c.story("crash", text);
    story.truth.stuck_ranks = vec![r];
    story.truth.collective = c.collective(&story);
    story.truth.cause = Some(c.rank_cause(CauseKind::ProcessCrash, r));
    story.fates.insert(r, fate);
    let kern: Vec<String> = match variant {
        6..=7 => kernel::oom_kill(pid, &mut c.rng),
        8..=9 => vec![kernel::segfault(pid, &mut c.rng)],
        _ => Vec::new(),
    };
    let kern = kern
        .into_iter()
        .enumerate()
        .map(|(i, l)| (t_f + i as i64 * MS, l));
    story.host_mut(host).kernel.extend(kern);
    if c.rng.chance(0.5) {
        closed_by_peer(c, &mut story, r, t_f);
    }
    story
}

/// The dead rank's ring neighbours on other hosts see its sockets close.
fn closed_by_peer(c: &mut Ctx<'_>, story: &mut Story, dead: u32, t_f: i64) {
    let host = c.host_of(dead);
    let mut peers = std::collections::BTreeSet::new();
    for ch in 0..c.topo.world_channels() {
        peers.insert(c.topo.ring_next(ch, dead));
        peers.insert(c.topo.ring_prev(ch, dead));
    }
    let remote: Vec<u32> = peers
        .into_iter()
        .filter(|&p| c.host_of(p) != host)
        .collect();
    for p in remote {
        let at = t_f + c.rng.range(200, 5_000) * MS;
        let warns = vec![(at, Warn::ConnClosed { peer: dead })];
        story.fates.insert(
            p,
            Fate::NcclError {
                warns,
                result: c.remote_error(),
            },
        );
    }
}

fn bug(c: &mut Ctx<'_>) -> String {
    let shard = c.rng.range(0, 4_000);
    let cases = [
        "KeyError: 'attention_mask'".to_string(),
        format!("FileNotFoundError: [Errno 2] No such file or directory: '/data/shards/train-{shard:05}.bin'"),
        "RuntimeError: The size of tensor a (4096) must match the size of tensor b (4097) at non-singleton dimension 1".to_string(),
        "ValueError: Expected input batch_size (16) to match target batch_size (15).".to_string(),
        "AssertionError: loss is NaN".to_string(),
    ];
    cases[c.rng.index(cases.len())].clone()
}

pub fn collective_mismatch(c: &mut Ctx<'_>) -> Story {
    let r = c.any_rank();
    let detail = c.rng.chance(0.35);
    let majority = c.plan.hung.op;
    let other = *c.rng.pick(&[
        "BROADCAST",
        "_ALLGATHER_BASE",
        "ALLREDUCE",
        "REDUCE_SCATTER",
    ]);
    let other = if other == majority {
        "BROADCAST"
    } else {
        other
    };
    // Before torch 2.1 the work descriptor has no sizes: a size mismatch
    // would be invisible, so only a different op is written there.
    let same_op = !detail && c.plan.versions.torch.ge(2, 1, 0) && c.rng.chance(0.3);
    let text = format!(
        "Rank {r} on {} ran {} at SeqNum {} where every other rank ran {majority}; the collective could not complete.",
        c.host_name(c.host_of(r)),
        if same_op {
            format!("{majority} with a different size")
        } else {
            other.to_string()
        },
        c.plan.hung.seq
    );
    let mut story = c.story(if detail { "crash" } else { "hang" }, text);
    story.truth.stuck_ranks = vec![r];
    story.truth.collective = c.collective(&story);
    story.truth.cause = Some(c.rank_cause(CauseKind::CollectiveMismatch, r));
    let h = story.hung.clone();
    if detail {
        story.detail_debug = true;
        let at = story.hang_at + c.rng.range(5, 300) * MS;
        let first_other = if r == 0 { 1 } else { 0 };
        story.default_fate = Fate::Mismatch {
            at,
            mine: majority,
            other_rank: r,
            other,
        };
        story.fates.insert(
            r,
            Fate::Mismatch {
                at,
                mine: other,
                other_rank: first_other,
                other: majority,
            },
        );
    } else if same_op {
        let n = h.numel_in + c.rng.range(1, 4_096) as u64;
        story.fates.insert(
            r,
            Fate::Timeout {
                op: majority,
                numel_in: n,
                numel_out: n,
                enqueued: h.seq,
            },
        );
    } else {
        let n = c.rng.range(1 << 10, 1 << 22) as u64;
        story.fates.insert(
            r,
            Fate::Timeout {
                op: other,
                numel_in: n,
                numel_out: n,
                enqueued: h.seq,
            },
        );
    }
    story
}

pub fn rank_stalled(c: &mut Ctx<'_>) -> Story {
    let r = c.any_rank();
    let text = format!(
        "Rank {r} on {} stalled outside NCCL (data loader) and never enqueued SeqNum {}; the others timed out waiting for it.",
        c.host_name(c.host_of(r)),
        c.plan.hung.seq
    );
    let mut story = c.story("hang", text);
    story.truth.stuck_ranks = vec![r];
    story.truth.collective = c.collective(&story);
    story.truth.cause = Some(c.rank_cause(CauseKind::RankStalled, r));
    let at = story.hang_at - c.rng.range(1, 60) * SEC;
    story.fates.insert(
        r,
        Fate::Silent {
            at,
            enqueued: story.hung.seq - 1,
        },
    );
    story
}

//! A process asked NCCL for a rank outside the world it gave (`Invalid rank
//! requested : 2/2`, rank ≥ nranks): the launch handed its processes ranks
//! and a world size that do not fit together (a world size counted per
//! node, hosts started with different `--nnodes`), and NCCL refuses to set
//! up. Or the bootstrap root got different rank counts from the processes
//! of one communicator (`mismatch in rank count from procs 6 : 3`, 2.3–2.22;
//! `mismatch in info from procs, nranks 16 vs 8, nroots …`, 2.23+):
//! they were launched with different world sizes, or two processes checked
//! in with one rank (`rank 1 of 8 ranks has already checked in`, 2.3+):
//! their ranks collide. TensorFlow's group resolver says the same of its
//! collective groups (a worker counting a different group size, a worker
//! that found no GPU joining a group of GPUs). A launch set up wrongly,
//! in NCCL's own words.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventKind};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn rank_outside_the_world(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "rank_layout");
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::InvalidRank) {
        let Some((detail, why)) = what_was_refused(ev) else {
            continue;
        };
        if h.support.is_empty() {
            h.host = ctx.job.host_of_event(ev).map(str::to_string);
            h.value("detail", detail);
        }
        if h.support.len() < CITED {
            h.support(Source::Nccl, 0.75, Some(idx), why);
        }
    }
    (!h.support.is_empty()).then_some(h)
}

/// The finding's detail and why the line matters.
fn what_was_refused(ev: &Event) -> Option<(String, String)> {
    match ev.text_field("what") {
        Some("group_size") => return tensorflow_group_size(ev),
        Some("device_type") => return tensorflow_device_type(ev),
        _ => {}
    }
    let nranks = ev.int("nranks")?;
    if let (Some(roots), Some(other)) = (ev.int("nroots"), ev.int("other_nroots"))
        && roots != other
        && ev.int("other_nranks") == Some(nranks)
    {
        return Some((
            format!(
                "processes of one communicator of {nranks} gave {roots} and {other} bootstrap roots"
            ),
            format!(
                "NCCL's bootstrap root got a root count of {other} from a process that counts {roots}: the processes were set up for different numbers of roots (NCCL_COMM_NROOTS, ncclCommInitRankScalable)"
            ),
        ));
    }
    if let Some(other) = ev.int("other_nranks") {
        return Some((
            format!("processes of one communicator gave {nranks} and {other} ranks"),
            format!(
                "NCCL's bootstrap root got a rank count of {other} from a process of a communicator of {nranks}: the processes were launched with different world sizes"
            ),
        ));
    }
    let rank = ev.int("rank")?;
    if ev.text_field("what") == Some("duplicate_rank") {
        return Some((
            format!("two processes claimed rank {rank} of a communicator of {nranks}"),
            format!(
                "NCCL's bootstrap root got rank {rank} of {nranks} from two processes: the launch gave its processes ranks that collide"
            ),
        ));
    }
    Some((
        format!("a process asked for rank {rank} of a world of {nranks}"),
        format!("NCCL was asked for rank {rank} in a communicator of {nranks} ranks and refused"),
    ))
}

/// TensorFlow's group resolver: members gave one collective group different
/// sizes (the workers see different numbers of GPUs).
fn tensorflow_group_size(ev: &Event) -> Option<(String, String)> {
    let asked = ev.int("nranks").or_else(|| ev.int("joining"))?;
    let group = ev.int("other_nranks")?;
    Some((
        format!("a worker joined a collective group of {group} as one of {asked}"),
        format!(
            "TensorFlow's collective group has {group} members while a worker counts {asked}: the workers see different numbers of GPUs or were given different cluster specs"
        ),
    ))
}

/// TensorFlow's group resolver: a member of a GPU group is a CPU device,
/// so that worker found no GPU.
fn tensorflow_device_type(ev: &Event) -> Option<(String, String)> {
    let device = ev.text_field("device").unwrap_or("a device");
    let other = ev.text_field("device_type").unwrap_or("another type");
    Some((
        format!("{device} joined a collective group of {other} devices"),
        format!(
            "TensorFlow's collective group mixes device types ({device} and {other}): one worker found no GPU, or was set up differently"
        ),
    ))
}

//! Stack dumps of the ranks (py-spy, faulthandler), compared. A hung job's
//! ranks wait where the missing partner left them: most ranks' main threads
//! sit in one torch.distributed collective, and the few elsewhere are what
//! they wait for. Ranks that wait in different collectives called them in
//! different orders. Where no dump shows a collective (the ranks wait in a
//! sync the dump cannot name), one stack most ranks share still singles out
//! the few whose stacks differ, as a lead.
//!
//! A dump is one moment: a rank caught elsewhere may have been on its way.
//! So a stack alone weighs little more than a lead, and point-to-point ops
//! (a pipeline's send on one stage is the recv on the next) are no mismatch.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, Event, EventIdx, StackDump};

use super::Ctx;
use super::application::on_the_ranks;

/// Support of a rank caught outside the collective the others wait in.
const BEHIND: f64 = 0.55;
/// Support of ranks waiting in another collective than most.
const OTHER_COLLECTIVE: f64 = 0.55;
/// Support of a stack most ranks do not share, where none names a collective.
const ODD_STACK: f64 = 0.4;
/// File of the torch.distributed collective API (py-spy shortens paths to
/// the package's; faulthandler prints them whole).
const C10D_FILE: &str = "distributed/distributed_c10d.py";

/// Where a rank's main thread was.
struct Place {
    /// The collective it waited in and that frame, if any.
    collective: Option<(String, EventIdx)>,
    /// Its innermost frame of Python code (else its innermost frame).
    innermost: Option<EventIdx>,
    /// Its Python frames, innermost first, as `func (file:line)`.
    stack: Vec<String>,
    /// The frame that shows it waiting for its data loader, if it was.
    data_wait: Option<EventIdx>,
}

pub(super) fn stack_dumps(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let places = places_by_rank(ctx);
    let compared = (places.len() >= 2)
        .then(|| {
            behind(ctx, &places)
                .or_else(|| out_of_order(ctx, &places))
                .or_else(|| odd_stacks(ctx, &places))
        })
        .flatten();
    compared.or_else(|| waiting_for_data(ctx))
}

/// Support of a dump whose main thread waits for its data loader, where no
/// dump shows a rank in a collective to compare it with.
const DATA_WAIT: f64 = 0.45;
/// How many innermost Python frames a data-loader wait shows in.
const DATA_WAIT_FRAMES: usize = 8;
/// How many of them the summary quotes.
const DATA_WAIT_SHOWN: usize = 4;

/// Dumped processes whose main thread waits for its data loader (the
/// DataLoader's fetch from its workers, or a queue read under a data
/// iterator) and none of whose dumps waits in a collective: the rank never
/// reached the collective its peers need (a worker that died or deadlocked,
/// pytorch#25158; slow storage). A lone dump is a moment, so a lead.
fn waiting_for_data(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let places: Vec<(Option<u32>, Place)> = ctx
        .job
        .stacks
        .iter()
        .filter_map(|d| Some((d.rank, place_of(ctx, d)?)))
        .collect();
    if places.iter().any(|(_, p)| p.collective.is_some()) {
        return None;
    }
    let waiting: Vec<&(Option<u32>, Place)> = places
        .iter()
        .filter(|(_, p)| p.data_wait.is_some())
        .collect();
    let (_, first) = waiting.first()?;
    let ranks: BTreeSet<u32> = waiting.iter().filter_map(|(r, _)| *r).collect();
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.value("variant", "data_wait");
    let who = match ranks.first() {
        Some(_) => format!(
            "Rank {}{}",
            ranks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            h.host
                .as_ref()
                .map_or(String::new(), |host| format!(" on {host}"))
        ),
        None => "A dumped process".to_string(),
    };
    h.value("who", who);
    let at = first
        .stack
        .iter()
        .take(DATA_WAIT_SHOWN)
        .cloned()
        .collect::<Vec<_>>();
    h.value("detail", format!("`{}`", at.join(" ← ")));
    for (rank, place) in &waiting {
        let whose = rank.map_or("a process".to_string(), |r| format!("rank {r}"));
        h.support(
            Source::Stacks,
            DATA_WAIT,
            place.data_wait,
            format!(
                "{whose}'s stack dump: its main thread waited for its data loader, in no collective"
            ),
        );
    }
    h.ranks = ranks;
    Some(h)
}

/// The frame that shows a main thread waiting for its data: the
/// DataLoader's own fetch, or a queue read directly under a data
/// iterator's `__next__` (fairseq's, a datapipe's).
fn data_wait_frame(ctx: &Ctx<'_>, python: &[&(EventIdx, &Event)]) -> Option<EventIdx> {
    let near: Vec<&(EventIdx, &Event)> = python.iter().take(DATA_WAIT_FRAMES).copied().collect();
    fn func(e: &Event) -> &str {
        e.text_field("func").unwrap_or("")
    }
    let file = |e: &Event| e.text_field("file").unwrap_or("").to_ascii_lowercase();
    let loader = near
        .iter()
        .find(|(_, e)| ctx.kb.data_loader_fetch(&file(e), func(e)));
    if let Some((idx, _)) = loader {
        return Some(*idx);
    }
    let queue_read = near
        .iter()
        .take(3)
        .any(|(_, e)| func(e) == "get" && file(e).ends_with("queue.py"));
    let iterator = near
        .iter()
        .find(|(_, e)| func(e) == "__next__" && file(e).contains("data"));
    iterator.filter(|_| queue_read).map(|(idx, _)| *idx)
}

/// Some dumped rank's main thread waited in a torch.distributed collective,
/// or for its data loader: dumps are taken of a job that hangs, and this
/// one waited there.
pub fn dumps_show_a_wait(ctx: &Ctx<'_>) -> bool {
    ctx.job
        .stacks
        .iter()
        .filter_map(|d| place_of(ctx, d))
        .any(|p| p.collective.is_some() || p.data_wait.is_some())
}

/// The collective most dumped processes' main threads waited in, and one
/// frame that shows it (any dump counts, a rank or not).
pub fn dumped_collective(ctx: &Ctx<'_>) -> Option<(String, EventIdx)> {
    let places: Vec<Place> = ctx
        .job
        .stacks
        .iter()
        .filter_map(|d| place_of(ctx, d))
        .collect();
    let waiting: Vec<&Place> = places.iter().filter(|p| p.collective.is_some()).collect();
    most_common_op(&waiting)
}

/// Ranks caught outside any collective while more ranks wait in one.
fn behind(ctx: &Ctx<'_>, places: &BTreeMap<u32, Place>) -> Option<Hypothesis> {
    let (waiting, elsewhere): (Vec<_>, Vec<_>) =
        places.iter().partition(|(_, p)| p.collective.is_some());
    let fewer = elsewhere.len() < waiting.len() || (waiting.len() == 1 && elsewhere.len() == 1);
    if waiting.is_empty() || elsewhere.is_empty() || !fewer {
        return None;
    }
    let waiting_places: Vec<&Place> = waiting.iter().map(|(_, p)| *p).collect();
    let (op, op_frame) = most_common_op(&waiting_places)?;
    let ranks: BTreeSet<u32> = elsewhere.iter().map(|(r, _)| **r).collect();
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.value("variant", "stack");
    h.value("op", op.clone());
    let at = elsewhere[0].1.stack.first().cloned().unwrap_or_default();
    h.value("detail", format!("its main thread was in `{at}`"));
    for (rank, place) in &elsewhere {
        h.support(
            Source::Stacks,
            BEHIND,
            place.innermost,
            format!(
                "rank {rank}'s stack dump: its main thread was in {}, not in {op}",
                place
                    .stack
                    .first()
                    .map_or("code the dump does not name", String::as_str)
            ),
        );
    }
    h.support(
        Source::Stacks,
        BEHIND,
        Some(op_frame),
        format!(
            "{} of {} dumped ranks waited in {op} (torch.distributed)",
            waiting.len(),
            places.len()
        ),
    );
    h.ranks = ranks;
    Some(h)
}

/// Ranks waiting in another collective than most ranks wait in.
fn out_of_order(ctx: &Ctx<'_>, places: &BTreeMap<u32, Place>) -> Option<Hypothesis> {
    let mut by_op: BTreeMap<&str, Vec<(u32, EventIdx)>> = BTreeMap::new();
    for (rank, place) in places {
        let (op, frame) = place.collective.as_ref()?;
        by_op.entry(op.as_str()).or_default().push((*rank, *frame));
    }
    if by_op.len() < 2 || by_op.keys().any(|op| ctx.kb.point_to_point_op(op)) {
        return None;
    }
    let most = by_op.values().map(Vec::len).max()?;
    let majority: Vec<&str> = by_op
        .iter()
        .filter(|(_, r)| r.len() == most)
        .map(|(op, _)| *op)
        .collect();
    // With no clear majority every side is a suspect.
    let odd: Vec<(u32, EventIdx)> = by_op
        .iter()
        .filter(|(op, _)| majority.len() > 1 || !majority.contains(op))
        .flat_map(|(_, r)| r.iter().copied())
        .collect();
    let ops: Vec<&str> = by_op.keys().copied().collect();
    let mut h = Hypothesis::new(CauseKind::CollectiveMismatch);
    let ranks: BTreeSet<u32> = odd.iter().map(|(r, _)| *r).collect();
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.value(
        "detail",
        format!("their stack dumps wait in {}", ops.join(" and ")),
    );
    for (op, waiting) in &by_op {
        let list: Vec<String> = waiting.iter().map(|(r, _)| r.to_string()).collect();
        h.support(
            Source::Stacks,
            OTHER_COLLECTIVE,
            Some(waiting[0].1),
            format!("rank {}'s stack dump waits in {op}", list.join(", ")),
        );
    }
    h.ranks = ranks;
    Some(h)
}

/// Where no dump names a collective: the ranks whose stacks differ from the
/// one most ranks share (at least three ranks dumped, the shared stack held
/// by two thirds of them).
fn odd_stacks(ctx: &Ctx<'_>, places: &BTreeMap<u32, Place>) -> Option<Hypothesis> {
    if places.len() < 3 || places.values().any(|p| p.stack.is_empty()) {
        return None;
    }
    let mut by_stack: BTreeMap<&[String], Vec<u32>> = BTreeMap::new();
    for (rank, place) in places {
        by_stack.entry(&place.stack).or_default().push(*rank);
    }
    let (shared, sharers) = by_stack.iter().max_by_key(|(_, r)| r.len())?;
    if sharers.len() * 3 < places.len() * 2 || sharers.len() == places.len() {
        return None;
    }
    let ranks: BTreeSet<u32> = places
        .keys()
        .copied()
        .filter(|r| !sharers.contains(r))
        .collect();
    let mut h = Hypothesis::new(CauseKind::RankStalled);
    on_the_ranks(ctx.job, &mut h, &ranks);
    h.value("variant", "stack");
    h.value("op", "the collective");
    let first = *ranks.first()?;
    let at = places[&first].stack.first().cloned().unwrap_or_default();
    h.value("detail", format!("its main thread was in `{at}`"));
    for rank in &ranks {
        h.support(
            Source::Stacks,
            ODD_STACK,
            places[rank].innermost,
            format!(
                "rank {rank}'s stack dump differs from the one {} of {} ranks share (at {})",
                sharers.len(),
                places.len(),
                shared.first().map_or("?", String::as_str)
            ),
        );
    }
    h.ranks = ranks;
    Some(h)
}

/// The op most waiting ranks wait in, and one of its frames.
fn most_common_op(waiting: &[&Place]) -> Option<(String, EventIdx)> {
    let mut counts: BTreeMap<&str, (usize, EventIdx)> = BTreeMap::new();
    for place in waiting {
        let (op, frame) = place.collective.as_ref()?;
        let slot = counts.entry(op.as_str()).or_insert((0, *frame));
        slot.0 += 1;
    }
    let (op, (_, frame)) = counts.into_iter().max_by_key(|(_, (n, _))| *n)?;
    Some((op.to_string(), frame))
}

/// Each dumped rank's main thread, from its last dump.
fn places_by_rank(ctx: &Ctx<'_>) -> BTreeMap<u32, Place> {
    let mut out = BTreeMap::new();
    for dump in &ctx.job.stacks {
        let Some(rank) = dump.rank else { continue };
        if let Some(place) = place_of(ctx, dump) {
            out.insert(rank, place);
        }
    }
    out
}

fn place_of(ctx: &Ctx<'_>, dump: &StackDump) -> Option<Place> {
    let job = ctx.job;
    let main = dump.main_thread()?;
    let frames: Vec<(EventIdx, &Event)> =
        main.frames.iter().map(|&i| (i, &job.events[i])).collect();
    let python: Vec<&(EventIdx, &Event)> = frames.iter().filter(|(_, e)| is_python(e)).collect();
    let collective = python.iter().find_map(|(idx, e)| {
        let file = e.text_field("file")?;
        let op = ctx.kb.torch_api_op(e.text_field("func")?)?;
        file.ends_with(C10D_FILE).then(|| (op.to_string(), *idx))
    });
    let data_wait = data_wait_frame(ctx, &python);
    Some(Place {
        collective,
        data_wait,
        innermost: python.first().map(|p| p.0).or(frames.first().map(|f| f.0)),
        stack: python.iter().map(|(_, e)| frame_text(e)).collect(),
    })
}

fn is_python(e: &Event) -> bool {
    e.text_field("file").is_some_and(|f| f.ends_with(".py"))
}

/// `load_batch (data.py:88)`.
fn frame_text(e: &Event) -> String {
    let func = e.text_field("func").unwrap_or("?");
    let file = e.text_field("file").unwrap_or("?");
    let file = file.rsplit_once("site-packages/").map_or(file, |(_, f)| f);
    match e.int("line") {
        Some(line) => format!("{func} ({file}:{line})"),
        None => format!("{func} ({file})"),
    }
}

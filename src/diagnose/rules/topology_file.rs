//! A topology or graph XML file that does not describe the machine.
//!
//! NCCL reads the machine's layout from NCCL_TOPO_FILE (or the file a
//! network plugin points it at: aws-ofi-nccl ships one per EC2 instance
//! type) and its channels from NCCL_GRAPH_FILE. A channel naming a device the
//! machine lacks, a file of another XML version, one that does not parse or
//! cannot be opened only come from such a file. A missing attribute can
//! also come from NCCL's own detection of an unusual machine, so without a
//! file in the logs it is a lead only.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind, Level};

use super::Ctx;

/// Lines cited.
const CITED: usize = 3;

pub fn topology_file(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let job = ctx.job;
    let file = ["NCCL_GRAPH_FILE", "NCCL_TOPO_FILE"]
        .iter()
        .find_map(|name| Some((*name, job.env.get(*name)?.keys().next()?.clone())));
    let mut h = Hypothesis::new(CauseKind::ConfigMismatch);
    h.value("variant", "topology_file");
    for (idx, ev) in job.events_where(|k| k == EventKind::TopologyFileError) {
        let (weight, why) = match ev.text_field("what") {
            Some("graph_device") => (
                0.65,
                "a channel of the graph file names a device this machine does not have",
            ),
            Some("wrong_version") => (0.65, "the XML file was written for another NCCL release"),
            Some("unreadable") => (
                0.65,
                "the graph file NCCL was told to read cannot be opened",
            ),
            Some("parse") => (0.6, "the topology or graph file does not parse"),
            Some("missing_attribute") if file.is_some() => {
                (0.6, "the topology file lacks an attribute NCCL needs")
            }
            Some("missing_attribute") => (
                0.4,
                "NCCL's topology lacks an attribute its own detection fills: most often a topology file (NCCL_TOPO_FILE, or one a network plugin sets) that does not match",
            ),
            _ => continue,
        };
        h.host = h
            .host
            .take()
            .or_else(|| ev.who.host.as_deref().map(str::to_string));
        // The ranks whose NCCL could not set up from the file.
        h.ranks.extend(ev.who.rank);
        h.values.entry("detail").or_insert_with(|| {
            let warn = warn_text(&ev.text);
            match &file {
                Some((name, path)) => format!("{name}={path}: `{warn}`"),
                None => format!("`{warn}`"),
            }
        });
        if h.support.len() < CITED {
            h.support(Source::Nccl, weight, Some(idx), why);
        }
    }
    if h.support.is_empty() {
        graph_file_set(ctx, &mut h);
    }
    (!h.support.is_empty()).then_some(h)
}

/// NCCL_GRAPH_FILE replaces NCCL's own search for channels with a file;
/// NCCL's maintainers call it a debugging setting never to be set in
/// production, yet images set it (nccl#1240). Where no communicator came
/// up, it is a lead: stronger where NCCL warned, a pointer otherwise.
fn graph_file_set(ctx: &Ctx<'_>, h: &mut Hypothesis) {
    let job = ctx.job;
    if job.a_comm_came_up() {
        return;
    }
    let Some((idx, ev)) = job
        .events_where(|k| k == EventKind::NcclEnvSetting)
        .find(|(_, e)| e.text_field("name") == Some("NCCL_GRAPH_FILE"))
    else {
        return;
    };
    let warned = job.events.iter().any(|e| {
        e.level >= Level::Warn
            && e.kind != EventKind::NcclEnvSetting
            && e.text.contains("NCCL WARN")
    });
    let path = ev.text_field("value").unwrap_or_default();
    h.host = ev.who.host.as_deref().map(str::to_string);
    h.value(
        "detail",
        format!("NCCL_GRAPH_FILE={path}, a debugging setting"),
    );
    h.support(
        Source::Nccl,
        if warned { 0.45 } else { 0.3 },
        Some(idx),
        "NCCL was given a graph file instead of searching its channels itself, and no communicator came up",
    );
}

/// The WARN's message, from its `NCCL WARN ` on.
fn warn_text(line: &str) -> &str {
    line.split_once("NCCL WARN ")
        .map_or(line, |(_, m)| m)
        .trim_end()
}

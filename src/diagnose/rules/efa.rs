//! The AWS EFA plugin (aws-ofi-nccl) failing to reach its peers.
//!
//! On EFA the fabric's own transport (SRD) retransmits what is lost, so a
//! request that completes with an error, or a peer address the plugin
//! cannot add, says the peers are unreachable rather than that packets
//! dropped. The plugin's maintainers trace that most often to the
//! instances' security group not admitting EFA traffic to and from itself
//! (aws-ofi-nccl#156, #663): a lead, not a certainty, and one that names no
//! host, since the group spans them all.

use crate::diagnose::hypothesis::{Hypothesis, Source};
use crate::model::{CauseKind, EventKind};

use super::Ctx;

/// Lines cited: the first few say it all.
const CITED: usize = 3;

pub fn unreachable_peers(ctx: &Ctx<'_>) -> Option<Hypothesis> {
    let mut h = Hypothesis::new(CauseKind::Firewall);
    h.value("variant", "efa".to_string());
    let mut hosts = std::collections::BTreeSet::new();
    for (idx, ev) in ctx.job.events_where(|k| k == EventKind::OfiError) {
        let why = match ev.text_field("what") {
            Some("completion") => {
                "an EFA request completed with an error: the peer could not be reached"
            }
            Some("address") if ev.text_field("side") == Some("remote") => {
                "the EFA plugin could not add a peer's address: the peer could not be reached"
            }
            _ => continue,
        };
        hosts.extend(ev.who.host.as_deref().map(str::to_string));
        if h.support.len() < CITED {
            h.support(Source::Nccl, 0.45, Some(idx), why);
        }
        h.values
            .entry("detail")
            .or_insert_with(|| format!("`{}`", short(&ev.text)));
    }
    if h.support.is_empty() {
        return None;
    }
    // One host failing alone is where the lead points; on several, the
    // group they share.
    if hosts.len() == 1 {
        h.host = hosts.pop_first();
    }
    Some(h)
}

/// The line from its `NET/OFI` on, cut at a readable length.
fn short(text: &str) -> String {
    let from = text.find("NET/OFI").unwrap_or(0);
    text[from..].chars().take(160).collect()
}

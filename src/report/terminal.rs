//! The short verdict printed to the terminal.

use std::fmt::Write;

use crate::diagnose::Status;

use super::ReportInput;

const TOP_EVIDENCE: usize = 3;

pub fn summary(input: &ReportInput<'_>) -> String {
    let v = &input.diagnosis.verdict;
    let mut out = String::new();
    let _ = writeln!(out, "verdict: {}", v.status.name().to_uppercase());
    if v.status == Status::Healthy {
        let _ = writeln!(
            out,
            "  no failure found in {} file(s)",
            input.job.files.len()
        );
        return out;
    }
    if !v.stuck_ranks.is_empty() {
        let _ = writeln!(
            out,
            "  stuck rank(s): {}",
            super::rank_list::describe(input, &v.stuck_ranks, Some(8))
        );
    }
    if let Some(c) = &v.collective {
        // A call that failed at set-up has no sequence number or group.
        let mut line = format!("  collective:    {}", c.op.as_deref().unwrap_or("?"));
        if let Some(seq) = c.seq {
            let _ = write!(line, " seq {seq}");
        }
        if let Some(pg) = &c.pg {
            let _ = write!(line, " pg {pg}");
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(cause) = &v.cause {
        let _ = writeln!(
            out,
            "  cause:         {} (confidence {:.2})",
            cause.kind, cause.confidence
        );
        let place: Vec<String> = [
            cause.host.clone().map(|h| format!("host {h}")),
            // A port where one is known: an interface (`bond0`) has none.
            cause
                .device
                .clone()
                .map(|d| cause.port.map_or(d.clone(), |p| format!("{d} port {p}"))),
            cause.gpu_bus_id.clone().map(|g| format!("GPU {g}")),
            cause.peer_host.clone().map(|p| format!("peer {p}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !place.is_empty() {
            let _ = writeln!(out, "  where:         {}", place.join(", "));
        }
        let _ = writeln!(out, "  {}", cause.summary);
    }
    for e in v.evidence.iter().take(TOP_EVIDENCE) {
        let _ = writeln!(
            out,
            "  > {}: {}",
            super::location(&e.file, e.line),
            clip(&e.text, 160)
        );
    }
    out
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

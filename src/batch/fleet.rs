//! The fleet view: hosts, NICs, GPUs and links implicated in two or more
//! jobs — the repeat offenders — ranked by what they cost (the ranks of the
//! jobs they took down).

use std::collections::BTreeMap;

use serde::Serialize;

use super::summary::JobRow;
use crate::grammar::knowledge::{FaultOf, Knowledge, PeerRole};
use crate::model::CauseKind;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offender {
    /// `host`, `nic`, `gpu` or `link`.
    pub kind: &'static str,
    /// `node005`, `node005 mlx5_3 port 1`, `node005 GPU 0000:86:00.0`, `node001 ↔ node005`.
    pub key: String,
    pub host: String,
    pub jobs: Vec<String>,
    pub causes: BTreeMap<String, usize>,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
    /// Sum of the ranks of the jobs it took down.
    pub cost: u64,
}

#[derive(Debug, Serialize)]
pub struct Fleet {
    pub jobs: usize,
    pub failed_jobs: usize,
    pub offenders: Vec<Offender>,
}

/// Every entity a job's verdict blames, with its kind and host. A pair of
/// hosts is a link only where the cause puts the fault on the path between
/// them; a firewall's or a crash's peer merely saw it.
fn implicated(row: &JobRow, kb: &Knowledge) -> Vec<(&'static str, String, String)> {
    let Some(host) = row.host.clone() else {
        return Vec::new();
    };
    let kind = row.cause.as_deref().and_then(CauseKind::from_name);
    if kind.is_some_and(|k| kb.cause(k).fault == FaultOf::Software) {
        return Vec::new();
    }
    let mut out = vec![("host", host.clone(), host.clone())];
    if let Some(dev) = &row.device {
        let port = row.port.map_or(String::new(), |p| format!(" port {p}"));
        out.push(("nic", format!("{host} {dev}{port}"), host.clone()));
    }
    if let Some(gpu) = &row.gpu_bus_id {
        out.push(("gpu", format!("{host} GPU {gpu}"), host.clone()));
    }
    let on_path = kind.is_some_and(|k| kb.cause(k).peer == PeerRole::Path);
    if let Some(peer) = row.peer_host.as_ref().filter(|p| on_path && **p != host) {
        let (a, b) = if host < *peer {
            (&host, peer)
        } else {
            (peer, &host)
        };
        out.push(("link", format!("{a} ↔ {b}"), host.clone()));
    }
    out
}

/// The jobs blaming one entity, by job id.
type JobsById<'a> = BTreeMap<&'a str, &'a JobRow>;

/// Aggregates the rows into repeat offenders (two or more jobs).
pub fn fleet(rows: &[JobRow], kb: &Knowledge) -> Fleet {
    let mut by_key: BTreeMap<(&'static str, String), (String, JobsById<'_>)> = BTreeMap::new();
    for row in rows
        .iter()
        .filter(|r| r.error.is_none() && r.status.as_deref() != Some("healthy"))
    {
        for (kind, key, host) in implicated(row, kb) {
            by_key
                .entry((kind, key))
                .or_insert_with(|| (host, BTreeMap::new()))
                .1
                .insert(row.job_id.as_str(), row);
        }
    }
    let mut offenders: Vec<Offender> = by_key
        .into_iter()
        .filter(|(_, (_, jobs))| jobs.len() >= 2)
        .map(|((kind, key), (host, jobs))| offender(kind, key, host, &jobs))
        .collect();
    offenders.sort_by(|a, b| {
        b.cost
            .cmp(&a.cost)
            .then(b.jobs.len().cmp(&a.jobs.len()))
            .then(a.key.cmp(&b.key))
    });
    Fleet {
        jobs: rows.len(),
        failed_jobs: rows.iter().filter(|r| r.error.is_some()).count(),
        offenders,
    }
}

fn offender(
    kind: &'static str,
    key: String,
    host: String,
    jobs: &BTreeMap<&str, &JobRow>,
) -> Offender {
    let jobs: Vec<&JobRow> = jobs.values().copied().collect();
    let mut causes = BTreeMap::new();
    for j in &jobs {
        *causes
            .entry(j.cause.clone().unwrap_or_else(|| "unknown".into()))
            .or_insert(0) += 1;
    }
    let times: Vec<&String> = jobs.iter().filter_map(|j| j.time.as_ref()).collect();
    Offender {
        kind,
        key,
        host,
        jobs: jobs.iter().map(|j| j.job_id.clone()).collect(),
        causes,
        first_seen: times.iter().min().map(|t| t.to_string()),
        last_seen: times.iter().max().map(|t| t.to_string()),
        cost: jobs.iter().map(|j| u64::from(j.ranks.unwrap_or(1))).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, host: &str, dev: Option<&str>, ranks: u32) -> JobRow {
        JobRow {
            job_id: id.into(),
            status: Some("hang".into()),
            cause: Some("link_flap".into()),
            host: Some(host.into()),
            device: dev.map(Into::into),
            port: dev.map(|_| 1),
            peer_host: Some("node001".into()),
            ranks: Some(ranks),
            ..JobRow::default()
        }
    }

    fn kb() -> Knowledge {
        Knowledge::builtin().unwrap()
    }

    #[test]
    fn a_witness_peer_makes_no_link_only_a_path_peer_does() {
        let mut rows = vec![row("a", "node005", None, 8), row("b", "node005", None, 8)];
        for r in &mut rows {
            r.cause = Some("firewall".into());
        }
        let keys =
            |f: &Fleet| -> Vec<String> { f.offenders.iter().map(|o| o.key.clone()).collect() };
        assert_eq!(keys(&fleet(&rows, &kb())), vec!["node005"]);
        for r in &mut rows {
            r.cause = Some("packet_loss".into());
        }
        assert_eq!(
            keys(&fleet(&rows, &kb())),
            vec!["node001 ↔ node005", "node005"]
        );
    }

    #[test]
    fn repeat_offenders_need_two_jobs_and_rank_by_cost() {
        let rows = vec![
            row("a", "node005", Some("mlx5_3"), 64),
            row("b", "node005", Some("mlx5_3"), 16),
            row("c", "node007", None, 8),
            row("d", "node001", None, 1024),
        ];
        let mut rows = rows;
        rows.push(row("e", "node009", None, 1000));
        rows.push(row("f", "node009", None, 1000));
        let f = fleet(&rows, &kb());
        assert_eq!(f.offenders[0].host, "node009", "the costliest first");
        assert_eq!(f.offenders[0].cost, 2000);
        let f = fleet(&rows[..4], &kb());
        let keys: Vec<&str> = f.offenders.iter().map(|o| o.key.as_str()).collect();
        assert!(keys.contains(&"node005 mlx5_3 port 1"));
        assert!(keys.contains(&"node001 ↔ node005"));
        assert!(!keys.contains(&"node007"));
        assert!(
            f.offenders
                .iter()
                .all(|o| o.jobs == vec!["a".to_string(), "b".to_string()] && o.cost == 80)
        );
    }

    /// Ranks that call different collectives are the program's doing: the
    /// host their odd rank ran on is no repeat offender for it.
    #[test]
    fn software_causes_count_against_no_host() {
        let mut rows = vec![row("a", "node005", None, 8), row("b", "node005", None, 8)];
        for cause in ["collective_mismatch", "nccl_bug"] {
            for r in &mut rows {
                r.cause = Some(cause.into());
            }
            assert!(fleet(&rows, &kb()).offenders.is_empty(), "{cause}");
        }
        for r in &mut rows {
            r.cause = Some("rank_stalled".into());
        }
        assert_eq!(
            fleet(&rows, &kb()).offenders.len(),
            1,
            "a slow host repeats"
        );
    }
}

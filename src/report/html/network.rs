//! The link view: the suspect NIC's counters before / after / delta, every
//! counter rise (suspicious first) and the fabric snapshot findings.

use crate::diagnose::Diagnosis;

const MAX_COUNTER_ROWS: usize = 200;

pub struct CounterView {
    pub place: String,
    pub name: String,
    pub before: String,
    pub after: String,
    pub delta: String,
    pub note: String,
    pub suspicious: bool,
    pub cite: String,
}

pub struct FindingView {
    pub place: String,
    pub kind: String,
    pub detail: String,
    pub used: &'static str,
    pub cite: String,
}

pub struct NetworkView {
    /// `node005 mlx5_3 port 1`, when the cause names a NIC.
    pub suspect: Option<String>,
    pub suspect_counters: Vec<CounterView>,
    pub counters: Vec<CounterView>,
    pub hidden_counters: usize,
    pub findings: Vec<FindingView>,
}

pub fn build(d: &Diagnosis) -> NetworkView {
    let cause = d.verdict.cause.as_ref();
    let suspect = cause.and_then(|c| {
        let dev = c.device.as_ref()?;
        Some((c.host.clone(), dev.clone(), c.port))
    });
    let view = |r: &crate::diagnose::CounterRow| CounterView {
        place: format!(
            "{} {}{}",
            r.host.as_deref().unwrap_or("?"),
            r.device,
            r.port.map_or(String::new(), |p| format!(" port {p}"))
        ),
        name: r.name.clone(),
        before: r.before.to_string(),
        after: r.after.to_string(),
        delta: match (r.delta, r.saturated, r.reset) {
            (_, _, true) => "reset".into(),
            (Some(d), true, _) => format!("≥ {d}"),
            (Some(d), false, _) => format!("+{d}"),
            (None, _, _) => "?".into(),
        },
        note: r.meaning.clone().unwrap_or_default(),
        suspicious: r.suspicious,
        cite: format!("{}:{}", r.file, r.line),
    };
    let suspect_counters = match &suspect {
        Some((host, dev, port)) => d
            .counters
            .iter()
            .filter(|r| {
                &r.host == host && (&r.device == dev) && (port.is_none() || r.port == *port)
            })
            .map(view)
            .collect(),
        None => Vec::new(),
    };
    let counters: Vec<CounterView> = d
        .counters
        .iter()
        .filter(|r| r.delta != Some(0))
        .map(view)
        .collect();
    let hidden_counters = counters.len().saturating_sub(MAX_COUNTER_ROWS);
    let findings = d
        .fabric
        .iter()
        .map(|f| FindingView {
            place: format!(
                "{} {}{}",
                f.host.as_deref().unwrap_or("?"),
                f.device,
                f.port.map_or(String::new(), |p| format!(" port {p}"))
            ),
            kind: serde_json::to_value(f.kind)
                .ok()
                .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
                .unwrap_or_default(),
            detail: f.detail.clone(),
            used: match f.nic_used {
                Some(true) => "used by the job",
                Some(false) => "not used by the job",
                None => "",
            },
            cite: match (&f.file, f.line) {
                (Some(file), Some(line)) => format!("{file}:{line}"),
                _ => String::new(),
            },
        })
        .collect();
    NetworkView {
        suspect: suspect.map(|(h, d, p)| {
            format!(
                "{} {d}{}",
                h.unwrap_or_else(|| "?".into()),
                p.map_or(String::new(), |p| format!(" port {p}"))
            )
        }),
        suspect_counters,
        counters: counters.into_iter().take(MAX_COUNTER_ROWS).collect(),
        hidden_counters,
        findings,
    }
}

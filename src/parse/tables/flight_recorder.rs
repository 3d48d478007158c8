//! PyTorch Flight Recorder dumps (`TORCH_NCCL_TRACE_BUFFER_SIZE` > 0): one file
//! per rank, `…_trace_rank_<global rank>`, written on a timeout.
//!
//! The default form is a Python pickle (protocol 2, from torch's IValue
//! pickler) of a dict: `version`, `comm_lib_version` (or `nccl_version`),
//! `pg_config` {name: {name, desc, ranks: "[0, 1, …]"}}, `pg_status` {pg id:
//! {last_enqueued_collective, last_started_collective,
//! last_completed_collective}} and `entries` (oldest first). Specialised lists
//! are pickled as `torch.jit._pickle.build_intlist(list)` calls; read with
//! `keep_restore_state` they come back as a one-element tuple around the list.
//! `_dump_nccl_trace_json` writes the same keys as JSON. Both are converted to
//! one JSON tree and read by the same code.

use serde_json::{Map, Value};

use crate::model::{FlightDump, FlightEntry, FlightPgConfig, FlightPgStatus};

/// Reads a pickled dump.
pub fn from_pickle(data: &[u8]) -> Result<FlightDump, String> {
    let options = serde_pickle::DeOptions::new()
        .keep_restore_state()
        .replace_unresolved_globals();
    let value = serde_pickle::value_from_slice(data, options)
        .map_err(|e| format!("not a readable pickle: {e}"))?;
    from_tree(&pickle_to_json(value))
}

/// Reads a JSON dump.
pub fn from_json(data: &[u8]) -> Result<FlightDump, String> {
    let value: Value = serde_json::from_slice(data).map_err(|e| format!("not valid JSON: {e}"))?;
    from_tree(&value)
}

fn pickle_to_json(v: serde_pickle::Value) -> Value {
    use serde_pickle::Value as P;
    match v {
        P::None => Value::Null,
        P::Bool(b) => Value::Bool(b),
        P::I64(i) => Value::from(i),
        P::Int(big) => big
            .to_string()
            .parse::<i64>()
            .map_or(Value::Null, Value::from),
        P::F64(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        P::Bytes(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
        P::String(s) => Value::String(s),
        P::List(items) => Value::Array(items.into_iter().map(pickle_to_json).collect()),
        P::Set(items) | P::FrozenSet(items) => Value::Array(
            items
                .into_iter()
                .map(|h| pickle_to_json(h.into_value()))
                .collect(),
        ),
        // `build_intlist(list)` and friends: a one-element tuple around the list.
        P::Tuple(mut items) if items.len() == 1 && matches!(items[0], P::List(_)) => {
            pickle_to_json(items.remove(0))
        }
        P::Tuple(items) => Value::Array(items.into_iter().map(pickle_to_json).collect()),
        P::Dict(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (hashable_key(k), pickle_to_json(v)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

fn hashable_key(k: serde_pickle::HashableValue) -> String {
    use serde_pickle::HashableValue as H;
    match k {
        H::String(s) => s,
        H::I64(i) => i.to_string(),
        H::Int(b) => b.to_string(),
        H::Bool(b) => b.to_string(),
        H::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    }
}

fn from_tree(root: &Value) -> Result<FlightDump, String> {
    // torch 2.2 dumped a bare list of entries, without status or config.
    if let Value::Array(items) = root {
        return Ok(FlightDump {
            version: Some("2.2".into()),
            entries: items.iter().filter_map(entry).collect(),
            ..FlightDump::default()
        });
    }
    let obj = root.as_object().ok_or("the dump is not a dict")?;
    if !obj.contains_key("entries") && !obj.contains_key("pg_status") {
        return Err("the dump has neither entries nor pg_status".into());
    }
    Ok(FlightDump {
        rank: None,
        version: text(obj.get("version")),
        nccl_version: text(obj.get("comm_lib_version")).or_else(|| text(obj.get("nccl_version"))),
        pg_status: pg_status(obj.get("pg_status")),
        pg_config: pg_config(obj.get("pg_config")),
        entries: obj
            .get("entries")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(entry).collect())
            .unwrap_or_default(),
        origin: None,
    })
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// −1 means "none yet" in pg_status.
fn seq(v: Option<&Value>) -> Option<i64> {
    int(v).filter(|&s| s >= 0)
}

fn pg_status(v: Option<&Value>) -> Vec<FlightPgStatus> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .map(|(pg, st)| FlightPgStatus {
            pg_id: pg.clone(),
            last_enqueued: seq(st.get("last_enqueued_collective")),
            last_started: seq(st.get("last_started_collective")),
            last_completed: seq(st.get("last_completed_collective")),
        })
        .collect()
}

fn pg_config(v: Option<&Value>) -> Vec<FlightPgConfig> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .map(|(name, cfg)| FlightPgConfig {
            name: text(cfg.get("name")).unwrap_or_else(|| name.clone()),
            desc: text(cfg.get("desc")).filter(|d| !d.is_empty() && d != "undefined"),
            ranks: rank_list(cfg.get("ranks")),
        })
        .collect()
}

/// `ranks` is a string `"[0, 1, 2]"` in the dumps, a list in some JSON forms.
fn rank_list(v: Option<&Value>) -> Vec<u32> {
    match v {
        Some(Value::String(s)) => s
            .trim_matches(['[', ']'])
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_u64().map(|n| n as u32))
            .collect(),
        _ => Vec::new(),
    }
}

fn entry(v: &Value) -> Option<FlightEntry> {
    let e = v.as_object()?;
    let (pg_name, pg_desc) = match e.get("process_group") {
        Some(Value::Array(pair)) => (text(pair.first()), text(pair.get(1))),
        _ => (None, None),
    };
    Some(FlightEntry {
        pg_id: text(e.get("pg_id")),
        pg_name,
        pg_desc: pg_desc.filter(|d| !d.is_empty() && d != "undefined"),
        // 2.2 called it `seq_id`.
        collective_seq_id: int(e.get("collective_seq_id")).or_else(|| int(e.get("seq_id"))),
        p2p_seq_id: int(e.get("p2p_seq_id")),
        op: text(e.get("profiling_name")).map(|p| op_name(&p)),
        is_p2p: e.get("is_p2p").and_then(Value::as_bool).unwrap_or(false),
        input_sizes: sizes(e.get("input_sizes")),
        output_sizes: sizes(e.get("output_sizes")),
        state: text(e.get("state")),
        // 2.2 stamped microseconds.
        time_created_ns: int(e.get("time_created_ns"))
            .or_else(|| int(e.get("time_created_us")).map(|us| us.saturating_mul(1000))),
        time_started_ns: int(e.get("time_discovered_started_ns")),
        time_completed_ns: int(e.get("time_discovered_completed_ns")),
        timeout_ms: int(e.get("timeout_ms")),
        retired: e.get("retired").and_then(Value::as_bool),
    })
}

/// `nccl:all_reduce` → `ALLREDUCE`, `nccl:_reduce_scatter_base` →
/// `_REDUCE_SCATTER_BASE`: the OpType spelling of the watchdog lines.
fn op_name(profiling: &str) -> String {
    // `nccl:send 0->1`: p2p names carry the peers after a space.
    let name = profiling.rsplit(':').next().unwrap_or(profiling);
    let name = name.split_whitespace().next().unwrap_or(name);
    let leading = name.len() - name.trim_start_matches('_').len();
    let core: String = name
        .trim_start_matches('_')
        .chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let core = match core.as_str() {
        "reducescatterbase" => "REDUCE_SCATTER_BASE".to_string(),
        "allgatherbase" => "ALLGATHER_BASE".to_string(),
        "reducescattertensorcoalesced" => "REDUCE_SCATTER_TENSOR_COALESCED".to_string(),
        "allgatherintotensorcoalesced" => "ALLGATHER_INTO_TENSOR_COALESCED".to_string(),
        "alltoallbase" => "ALLTOALL_BASE".to_string(),
        other => other.to_ascii_uppercase(),
    };
    format!("{}{core}", "_".repeat(leading))
}

fn sizes(v: Option<&Value>) -> Vec<Vec<i64>> {
    let Some(Value::Array(outer)) = v else {
        return Vec::new();
    };
    outer
        .iter()
        .map(|shape| match shape {
            Value::Array(dims) => dims.iter().filter_map(Value::as_i64).collect(),
            _ => Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiling_names_become_op_types() {
        assert_eq!(op_name("nccl:all_reduce"), "ALLREDUCE");
        assert_eq!(op_name("nccl:_reduce_scatter_base"), "_REDUCE_SCATTER_BASE");
        assert_eq!(op_name("nccl:_allgather_base"), "_ALLGATHER_BASE");
        assert_eq!(op_name("nccl:broadcast"), "BROADCAST");
        assert_eq!(op_name("nccl:send 0->1"), "SEND");
    }

    #[test]
    fn profiling_names_in_the_op_type_spelling_read_the_same() {
        assert_eq!(
            op_name("nccl:_REDUCE_SCATTER_BASE"),
            op_name("nccl:_reduce_scatter_base")
        );
        assert_eq!(op_name("nccl:ALLGATHER_BASE"), "ALLGATHER_BASE");
    }

    #[test]
    fn json_dump_torch_2_5_shape() {
        let json = br#"{"version": "2.5", "comm_lib_version": "2.21.5",
          "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
          "pg_status": {"0": {"last_enqueued_collective": 20, "last_started_collective": 20, "last_completed_collective": 19}},
          "entries": [{"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 20,
             "p2p_seq_id": 0, "op_id": 20, "profiling_name": "nccl:all_reduce", "time_created_ns": 1732875000000000000,
             "input_sizes": [[1024]], "output_sizes": [[1024]], "state": "started", "timeout_ms": 600000,
             "is_p2p": false, "retired": false, "time_discovered_started_ns": 1732875000100000000,
             "time_discovered_completed_ns": null}]}"#;
        let d = from_json(json).unwrap();
        assert_eq!(d.nccl_version.as_deref(), Some("2.21.5"));
        assert_eq!(d.pg_config[0].ranks, vec![0, 1, 2, 3]);
        assert_eq!(d.pg_status[0].last_completed, Some(19));
        let e = &d.entries[0];
        assert_eq!(
            (e.collective_seq_id, e.op.as_deref(), e.state.as_deref()),
            (Some(20), Some("ALLREDUCE"), Some("started"))
        );
        assert_eq!(e.input_sizes, vec![vec![1024]]);
        assert_eq!(e.time_completed_ns, None);
    }

    #[test]
    fn pickled_dump_with_specialised_int_lists() {
        // Hand-assembled protocol-2 pickle of what torch's IValue pickler emits:
        // {'version': '2.4', 'pg_status': {'0': {'last_enqueued_collective': 7,
        //  'last_started_collective': -1, 'last_completed_collective': 6}},
        //  'entries': [{'collective_seq_id': 7, 'profiling_name': 'nccl:all_reduce',
        //  'input_sizes': [build_intlist([8])], 'state': 'scheduled'}]}
        let mut p: Vec<u8> = vec![0x80, 2, b'}'];
        let s = |p: &mut Vec<u8>, t: &str| {
            p.push(b'X');
            p.extend((t.len() as u32).to_le_bytes());
            p.extend(t.as_bytes());
        };
        let i = |p: &mut Vec<u8>, v: i32| {
            p.push(b'J');
            p.extend(v.to_le_bytes());
        };
        p.push(b'(');
        s(&mut p, "version");
        s(&mut p, "2.4");
        s(&mut p, "pg_status");
        p.extend([b'}', b'(']);
        s(&mut p, "0");
        p.extend([b'}', b'(']);
        s(&mut p, "last_enqueued_collective");
        i(&mut p, 7);
        s(&mut p, "last_started_collective");
        i(&mut p, -1);
        s(&mut p, "last_completed_collective");
        i(&mut p, 6);
        p.extend([b'u', b'u']);
        s(&mut p, "entries");
        p.extend([b']', b'(', b'}', b'(']);
        s(&mut p, "collective_seq_id");
        i(&mut p, 7);
        s(&mut p, "profiling_name");
        s(&mut p, "nccl:all_reduce");
        s(&mut p, "input_sizes");
        p.extend([b']', b'(']);
        p.extend(b"ctorch.jit._pickle\nbuild_intlist\n");
        p.extend([b']', b'(']);
        i(&mut p, 8);
        p.extend([b'e', 0x85, b'R']); // APPENDS, TUPLE1, REDUCE
        p.push(b'e');
        s(&mut p, "state");
        s(&mut p, "scheduled");
        // SETITEMS (the entry), APPENDS (the entries list), SETITEMS (the dump), STOP.
        p.extend([b'u', b'e', b'u', b'.']);
        let d = from_pickle(&p).unwrap();
        assert_eq!(d.version.as_deref(), Some("2.4"));
        assert_eq!(d.pg_status[0].last_started, None);
        assert_eq!(d.pg_status[0].last_completed, Some(6));
        assert_eq!(d.entries[0].input_sizes, vec![vec![8]]);
        assert_eq!(d.entries[0].op.as_deref(), Some("ALLREDUCE"));
    }

    #[test]
    fn torch_2_2_bare_entry_list() {
        let json = br#"[{"pg_id": 0, "seq_id": 5, "profiling_name": "nccl:all_reduce", "time_created_us": 7,
            "input_sizes": [[2, 3]], "output_sizes": [[2, 3]], "state": "scheduled", "retired": true, "frames": []}]"#;
        let d = from_json(json).unwrap();
        assert_eq!(d.entries[0].collective_seq_id, Some(5));
        assert_eq!(d.entries[0].time_created_ns, Some(7000));
        assert!(d.pg_status.is_empty());
    }

    #[test]
    fn junk_is_an_error_not_a_panic() {
        assert!(from_pickle(b"\x80\x02\xff\xff").is_err());
        assert!(from_json(b"{\"a\": 1}").is_err());
    }
}

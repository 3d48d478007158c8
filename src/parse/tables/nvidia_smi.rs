//! `nvidia-smi`: the default table and the `-q` report, read for the fields
//! in which the driver itself says a GPU is faulty.
//!
//! ```text
//! |   3  Tesla V100-SXM2...  On   | 00000000:3B:00.0 Off |                 ERR! |
//! | N/A   ERR!   P0   ERR! / 300W |  31728MiB / 32510MiB |     ERR!     Default |
//! ```
//!
//! The table's first row per GPU holds its number, bus id and the volatile
//! uncorrectable ECC count; `ERR!` in either row is a value the driver
//! could not read from the GPU. `-q` prints one indented block per GPU
//! (`GPU 00000000:07:00.0`), whose sections changed over driver releases:
//! ECC counts as `Double Bit › Total` (before Ampere) or `DRAM / SRAM
//! Uncorrectable` (460+), retirement as `Pending Page Blacklist` or
//! `Pending`, plus `Remapped Rows` (A100+), `GPU Reset Status` (525+),
//! `Fabric` (NVSwitch systems, 535+) and `GPU Recovery Action` (570+).
//! Only those fields are kept, as findings named like knowledge.toml's
//! `[[gpu_health]]` entries; everything else is the GPU's description.

use std::sync::LazyLock;

use regex::Regex;

use crate::grammar::normalize_bus_id;
use crate::model::{GpuFinding, GpuSnapshot, SysRecord};

use super::TableParse;
use super::common::{Line, TableCtx, parse_u64};

/// `GPU 00000000:07:00.0`, opening a GPU's block in `-q`.
static Q_GPU: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*GPU (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$")
        .unwrap()
});

/// A bus id in the table's middle cell (`00000000:3B:00.0 Off`).
static TABLE_BUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b").unwrap()
});

pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
    if lines.iter().any(|l| Q_GPU.is_match(&l.text)) {
        query::parse(ctx, lines)
    } else {
        table::parse(ctx, lines)
    }
}

fn finding(ctx: &TableCtx, line: &Line<'_>, finding: &'static str, value: &str) -> GpuFinding {
    GpuFinding {
        finding,
        value: value.to_string(),
        line: ctx.source_line(line),
    }
}

fn push(out: &mut TableParse, gpu: Option<GpuSnapshot>) {
    if let Some(g) = gpu {
        out.records.push(SysRecord::Gpu(Box::new(g)));
    }
}

/// The default table.
mod table {
    use super::*;

    pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
        let mut out = TableParse::default();
        let mut gpu: Option<GpuSnapshot> = None;
        for line in lines {
            let text = line.text.trim();
            if text.is_empty() || !text.starts_with(['|', '+']) {
                out.unparsed += u64::from(!text.is_empty() && !is_banner(text));
                continue;
            }
            let cells: Vec<&str> = text.trim_matches('|').split('|').collect();
            if let Some(next) = first_row(ctx, line, &cells) {
                push(&mut out, gpu.replace(next));
            } else if cells.len() == 3
                && let Some(g) = gpu.as_mut()
                && text.contains("ERR!")
                && !g.findings.iter().any(|f| f.finding == "smi_err")
            {
                g.findings.push(finding(ctx, line, "smi_err", "ERR!"));
            } else if cells.len() != 3 {
                // The process list and the footer end the GPU rows.
                push(&mut out, gpu.take());
            }
        }
        push(&mut out, gpu);
        out
    }

    /// `|   0  NVIDIA A100-SXM4-80GB  On  | 00000000:07:00.0 Off |  0 |`.
    fn first_row(ctx: &TableCtx, line: &Line<'_>, cells: &[&str]) -> Option<GpuSnapshot> {
        let [head, bus, ecc] = cells else {
            return None;
        };
        let pci = TABLE_BUS.captures(bus)?;
        let mut words = head.split_whitespace();
        let index = words.next()?.parse().ok()?;
        let mut name: Vec<&str> = words.collect();
        // The last word is the persistence mode.
        name.pop();
        let mut g = GpuSnapshot {
            host: ctx.host.clone(),
            pci: normalize_bus_id(&pci["pci"]),
            index: Some(index),
            product: (!name.is_empty()).then(|| name.join(" ")),
            origin: Some(ctx.origin(line)),
            ..GpuSnapshot::default()
        };
        let ecc = ecc.trim();
        if parse_u64(ecc).is_some_and(|n| n > 0) {
            g.findings
                .push(finding(ctx, line, "ecc_uncorrectable", ecc));
        }
        if cells.iter().any(|c| c.contains("ERR!")) {
            g.findings.push(finding(ctx, line, "smi_err", "ERR!"));
        }
        Some(g)
    }

    /// The lines around the table: its time stamp, a prompt, section titles.
    fn is_banner(text: &str) -> bool {
        text.starts_with("$ ")
            || text.contains("]# ")
            || text.contains("nvidia-smi")
            || super::super::common::content_stamp(text).is_some()
    }
}

/// The `-q` report.
mod query {
    use super::*;

    pub fn parse(ctx: &TableCtx, lines: &[Line<'_>]) -> TableParse {
        let mut out = TableParse::default();
        let mut gpu: Option<GpuSnapshot> = None;
        // (indent, section name) of the sections the line sits in.
        let mut sections: Vec<(usize, String)> = Vec::new();
        for line in lines {
            let text = line.text.trim_end();
            let body = text.trim_start();
            if body.is_empty() {
                continue;
            }
            if let Some(c) = Q_GPU.captures(text) {
                push(&mut out, gpu.take());
                gpu = Some(GpuSnapshot {
                    host: ctx.host.clone(),
                    pci: normalize_bus_id(&c["pci"]),
                    origin: Some(ctx.origin(line)),
                    ..GpuSnapshot::default()
                });
                sections.clear();
                continue;
            }
            let indent = text.len() - body.len();
            while sections.last().is_some_and(|(at, _)| *at >= indent) {
                sections.pop();
            }
            let Some((key, value)) = body.split_once(" : ") else {
                // A section title (no value), or the banner.
                if !body.contains(':') {
                    sections.push((indent, body.to_string()));
                }
                continue;
            };
            let Some(g) = gpu.as_mut() else {
                continue;
            };
            let path: Vec<&str> = sections.iter().map(|(_, s)| s.as_str()).collect();
            field(ctx, line, g, &path, key.trim(), value.trim());
        }
        push(&mut out, gpu);
        out
    }

    const SLOWDOWNS: [&str; 4] = [
        "HW Slowdown",
        "HW Thermal Slowdown",
        "HW Power Brake Slowdown",
        "SW Thermal Slowdown",
    ];

    /// Keeps the fields that show a fault.
    fn field(
        ctx: &TableCtx,
        line: &Line<'_>,
        g: &mut GpuSnapshot,
        path: &[&str],
        key: &str,
        value: &str,
    ) {
        let yes = value == "Yes";
        let found = match (path, key) {
            ([], "Product Name") => {
                g.product = Some(value.to_string());
                None
            }
            ([], "GPU Recovery Action") => (!matches!(value, "None" | "N/A")
                && !value.contains("deprecated"))
            .then_some("recovery_action"),
            (["ECC Errors", "Volatile", rest @ ..], _) => {
                let counted = key.contains("Uncorrectable")
                    || rest.first() == Some(&"Double Bit") && key == "Total";
                (counted && parse_u64(value).is_some_and(|n| n > 0)).then_some("ecc_uncorrectable")
            }
            (["Retired Pages"], _) if key.starts_with("Pending") => {
                yes.then_some("retirement_pending")
            }
            (["Remapped Rows"], "Pending") => yes.then_some("remap_pending"),
            (["Remapped Rows"], "Remapping Failure Occurred") => yes.then_some("remap_failure"),
            (["GPU Reset Status"], "Reset Required") => yes.then_some("reset_required"),
            (["GPU Reset Status"], "Drain and Reset Recommended") => {
                yes.then_some("drain_recommended")
            }
            (["Fabric"], "Status") => {
                (!matches!(value, "Success" | "N/A" | "Not Supported")).then_some("fabric_failure")
            }
            (["Fabric"], "State") => {
                matches!(value, "Not Started" | "In Progress").then_some("fabric_not_ready")
            }
            // The clocks held down by the hardware (heat, a power brake) or
            // the driver's thermal limit; a power cap under load is normal.
            // `Clocks Throttle Reasons` before driver 535.
            (["Clocks Event Reasons" | "Clocks Throttle Reasons"], _)
                if SLOWDOWNS.contains(&key) && value == "Active" =>
            {
                Some("clock_slowdown")
            }
            _ => None,
        };
        if found == Some("clock_slowdown")
            && g.findings.iter().any(|f| f.finding == "clock_slowdown")
        {
            return;
        }
        if let Some(name) = found {
            g.findings.push(finding(ctx, line, name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ingest::TableKind;
    use crate::model::GpuSnapshot;
    use crate::parse::tables::testing::{gpus, parse_text};

    fn findings(g: &GpuSnapshot) -> Vec<(&str, &str)> {
        g.findings
            .iter()
            .map(|f| (f.finding, f.value.as_str()))
            .collect()
    }

    const TABLE_470: &str = include_str!("../../../tests/data/tables/nvidia-smi-v100-470-err.txt");

    #[test]
    fn table_rows_give_bus_id_ecc_count_and_err_driver_470() {
        let t = parse_text(TableKind::NvidiaSmi, "node7/nvidia-smi.txt", TABLE_470);
        let g = gpus(&t);
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].pci.as_deref(), Some("0000:1a:00.0"));
        assert_eq!(g[0].index, Some(0));
        assert_eq!(g[0].product.as_deref(), Some("Tesla V100-SXM2..."));
        assert_eq!(g[0].host.as_deref(), Some("node7"));
        assert!(g[0].findings.is_empty());
        assert_eq!(findings(g[1]), vec![("ecc_uncorrectable", "2")]);
        assert_eq!(findings(g[2]), vec![("smi_err", "ERR!")]);
        assert_eq!(g[2].findings[0].line.origin.line, 17);
        assert_eq!(t.unparsed, 0);
    }

    #[test]
    fn an_err_in_the_second_row_is_kept_once_driver_560() {
        let text = "\
| NVIDIA-SMI 560.35.03              Driver Version: 560.35.03      CUDA Version: 12.6     |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   ERR!  P0            ERR! /  700W  |       1MiB /  81559MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
";
        let t = parse_text(TableKind::NvidiaSmi, "h/nvidia-smi.log", text);
        let g = gpus(&t);
        assert_eq!(g[0].product.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(g[0].pci.as_deref(), Some("0000:18:00.0"));
        assert_eq!(findings(g[0]), vec![("smi_err", "ERR!")]);
        assert_eq!(g[0].findings[0].line.origin.line, 4);
    }

    const QUERY_535: &str =
        include_str!("../../../tests/data/tables/nvidia-smi-q-a100-535-remap.txt");

    #[test]
    fn query_blocks_keep_volatile_uncorrectable_ecc_and_remap_state_driver_535() {
        let t = parse_text(TableKind::NvidiaSmi, "node3/nvidia-smi-q.txt", QUERY_535);
        let g = gpus(&t);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].pci.as_deref(), Some("0000:07:00.0"));
        assert_eq!(g[0].product.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        // The aggregate count (since manufacture) is history, not a fault now.
        assert_eq!(
            findings(g[0]),
            vec![("ecc_uncorrectable", "3"), ("remap_pending", "Yes")]
        );
        assert_eq!(g[0].findings[0].line.origin.line, 19);
        assert_eq!(findings(g[1]), vec![("remap_failure", "Yes")]);
    }

    #[test]
    fn query_before_ampere_counts_the_double_bit_total_only_driver_418() {
        let text = "==============NVSMI LOG==============

Driver Version                      : 418.67
GPU 00000000:86:00.0
    Product Name                    : Tesla V100-SXM2-32GB
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 4
                Total               : 4
            Double Bit
                Device Memory       : 1
                Register File       : 0
                Total               : 1
        Aggregate
            Double Bit
                Total               : 7
    Retired Pages
        Single Bit ECC              : 0
        Double Bit ECC              : 1
        Pending                     : Yes
";
        let t = parse_text(TableKind::NvidiaSmi, "n/smi.txt", text);
        let g = gpus(&t);
        assert_eq!(
            findings(g[0]),
            vec![("ecc_uncorrectable", "1"), ("retirement_pending", "Yes")]
        );
    }

    #[test]
    fn query_reset_fabric_and_recovery_fields_driver_570() {
        let text = "==============NVSMI LOG==============
GPU 00000000:1B:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    GPU Reset Status
        Reset Required                    : Yes
        Drain and Reset Recommended       : Yes
    GPU Recovery Action                   : GPU Reset
    Fabric
        State                             : Completed
        Status                            : Failure
GPU 00000000:2A:00.0
    GPU Reset Status
        Reset Required                    : Requested functionality has been deprecated
    GPU Recovery Action                   : None
    Fabric
        State                             : In Progress
        Status                            : N/A
";
        let t = parse_text(TableKind::NvidiaSmi, "n/smi.txt", text);
        let g = gpus(&t);
        assert_eq!(
            findings(g[0]),
            vec![
                ("reset_required", "Yes"),
                ("drain_recommended", "Yes"),
                ("recovery_action", "GPU Reset"),
                ("fabric_failure", "Failure"),
            ]
        );
        assert_eq!(findings(g[1]), vec![("fabric_not_ready", "In Progress")]);
    }

    /// `-q -d PERFORMANCE`: one GPU held down by heat (its HW slowdown and
    /// both thermal reasons Active, one finding); a power cap under load is
    /// normal. Driver 560 says `Clocks Event Reasons`, 525 `Clocks Throttle
    /// Reasons`.
    #[test]
    fn clock_slowdowns_are_a_finding_a_power_cap_is_not_driver_525_and_560() {
        for section in ["Clocks Event Reasons", "Clocks Throttle Reasons"] {
            let text = format!(
                "==============NVSMI LOG==============
GPU 00000000:4C:00.0
    Performance State                     : P0
    {section}
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
        SW Thermal Slowdown               : Not Active
GPU 00000000:5D:00.0
    Performance State                     : P0
    {section}
        SW Power Cap                      : Not Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
            HW Power Brake Slowdown       : Not Active
        SW Thermal Slowdown               : Active
"
            );
            let t = parse_text(TableKind::NvidiaSmi, "diag/hgx-c04_nvidia-smi-q.txt", &text);
            let g = gpus(&t);
            assert!(g[0].findings.is_empty(), "{section}");
            assert_eq!(
                findings(g[1]),
                vec![("clock_slowdown", "Active")],
                "{section}"
            );
            assert_eq!(g[1].findings[0].line.origin.line, 14, "{section}");
        }
    }
}

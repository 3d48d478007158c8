//! `lldpcli show neighbors` of a RoCE host, as collection scripts save it:
//! which leaf switch, and which of its ports, each NIC's cable reaches.
//!
//! The fabric is rail-optimised: NIC k of every host in a scalable unit
//! (32 hosts) reaches rail k's leaf of that unit, on the port of the
//! host's slot. A story's miscabled NIC reaches another rail's leaf, on
//! the slot's spare breakout port, so that leaf sees the host twice.

use std::io::{self, Write};

use super::plan::{Host, Plan};
use super::rng::Rng;
use super::story::HostStory;

const HOSTS_PER_UNIT: usize = 32;

/// How this site names its leaf switches, from the unit and the rail.
fn leaf_name(style: usize, unit: usize, rail: usize) -> String {
    match style {
        0 => format!("leaf-su{unit:02}-r{rail}"),
        1 => format!("su{unit}-rail{rail}-leaf"),
        _ => format!("sw-{unit:02}-{rail:02}"),
    }
}

pub fn write_lldp(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    w: &mut impl Write,
) -> io::Result<()> {
    let mut r = Rng::derive(plan.seed, "lldp", &[host.index as u64]);
    let style = (plan.seed % 3) as usize;
    let unit = host.index / HOSTS_PER_UNIT;
    let slot = host.index % HOSTS_PER_UNIT + 1;
    let rails = host.nics.len();
    let wrong = story.and_then(|s| s.miscabled_nic).map(|n| n as usize);
    let rule = "-".repeat(79);
    writeln!(w, "{rule}\nLLDP neighbors:\n{rule}")?;
    for (k, nic) in host.nics.iter().enumerate() {
        let (rail, breakout) = match wrong {
            Some(n) if n == k && rails > 1 => ((k + 1 + r.index(rails - 1)) % rails, 1),
            _ => (k, 0),
        };
        let age = r.range(600, 90_000);
        let (d, h, m, s) = (age / 86_400, age / 3600 % 24, age / 60 % 60, age % 60);
        let port = format!("swp{slot}s{breakout}");
        writeln!(
            w,
            "Interface:    {}, via: LLDP, RID: {}, Time: {d} day, {h:02}:{m:02}:{s:02}",
            nic.netdev,
            k + 1
        )?;
        writeln!(w, "  Chassis:     ")?;
        writeln!(
            w,
            "    ChassisID:    mac 1c:34:da:{:02x}:{:02x}:00",
            (plan.seed % 251) as u8 ^ unit as u8,
            rail
        )?;
        writeln!(w, "    SysName:      {}", leaf_name(style, unit, rail))?;
        writeln!(
            w,
            "    SysDescr:     Cumulus Linux version 5.9.1 running on Mellanox Technologies Ltd MSN4700"
        )?;
        writeln!(w, "    MgmtIP:       10.250.{unit}.{}", rail + 1)?;
        writeln!(w, "    Capability:   Bridge, on")?;
        writeln!(w, "    Capability:   Router, on")?;
        writeln!(w, "  Port:        ")?;
        writeln!(w, "    PortID:       ifname {port}")?;
        writeln!(w, "    PortDescr:    {port}")?;
        writeln!(w, "    TTL:          120")?;
        writeln!(w, "{rule}")?;
    }
    Ok(())
}

//! Fabric snapshots taken after the job, in the layouts of
//! docs/sys-formats.md §(d): `ibstat`, `ibstatus`, `ibv_devinfo` and (RoCE)
//! `show_gids`. A port the story degraded shows its state, rate or MTU.

use std::io::{self, Write};

use super::plan::{Fabric, Host, Nic, Plan};
use super::story::{HostStory, PortOverride};

/// A port as the tools see it.
struct Port {
    state: &'static str,
    phys: &'static str,
    rate: u32,
    width: &'static str,
    mtu: u32,
    ipv4_gid: bool,
}

fn port(story: Option<&HostStory>, nic: u32) -> Port {
    let o: Option<&PortOverride> = story.and_then(|s| s.ports.iter().find(|p| p.nic == nic));
    let (state, phys) = o.and_then(|o| o.state).unwrap_or(("Active", "LinkUp"));
    let (rate, width) = o.and_then(|o| o.rate).unwrap_or((400, "4X"));
    let down = state == "Down";
    Port {
        state,
        phys,
        rate: if down { 10 } else { rate },
        width,
        mtu: o.and_then(|o| o.active_mtu).unwrap_or(4096),
        ipv4_gid: !o.is_some_and(|o| o.no_ipv4_gid),
    }
}

fn guid_colons(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

/// RoCE port GUIDs are MAC-derived (`…fffe…` in the middle).
fn port_guid(plan: &Plan, nic: &Nic) -> u64 {
    match plan.fabric {
        Fabric::Ib => nic.guid,
        Fabric::Roce => {
            (nic.guid & 0xffff_ff00_0000_0000)
                | 0x0000_00ff_fe00_0000
                | (nic.guid & 0xff_ffff) ^ 0x0200_0000_0000_0000
        }
    }
}

fn sm_lid(plan: &Plan) -> u32 {
    1 + (plan.seed % 300) as u32
}

pub fn write_ibstat(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    w: &mut impl Write,
) -> io::Result<()> {
    for (k, nic) in host.nics.iter().enumerate() {
        let p = port(story, k as u32);
        let ib = plan.fabric == Fabric::Ib;
        writeln!(w, "CA '{}'", nic.name)?;
        writeln!(
            w,
            "\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n\tHardware version: 0"
        )?;
        writeln!(
            w,
            "\tNode GUID: 0x{:016x}\n\tSystem image GUID: 0x{:016x}\n\tPort 1:",
            nic.guid, nic.guid
        )?;
        writeln!(
            w,
            "\t\tState: {}\n\t\tPhysical state: {}\n\t\tRate: {}",
            p.state, p.phys, p.rate
        )?;
        let (lid, sm, cap) = if ib {
            (nic.lid, sm_lid(plan), "0xa751e848")
        } else {
            (0, 0, "0x00010000")
        };
        writeln!(
            w,
            "\t\tBase lid: {lid}\n\t\tLMC: 0\n\t\tSM lid: {sm}\n\t\tCapability mask: {cap}"
        )?;
        let layer = if ib { "InfiniBand" } else { "Ethernet" };
        writeln!(
            w,
            "\t\tPort GUID: 0x{:016x}\n\t\tLink layer: {layer}",
            port_guid(plan, nic)
        )?;
    }
    Ok(())
}

fn state_num(state: &str) -> (u32, &'static str) {
    match state {
        "Down" => (1, "DOWN"),
        "Initializing" => (2, "INIT"),
        "Armed" => (3, "ARMED"),
        _ => (4, "ACTIVE"),
    }
}

fn phys_num(phys: &str) -> u32 {
    match phys {
        "Sleep" => 1,
        "Polling" => 2,
        "Disabled" => 3,
        "PortConfigurationTraining" => 4,
        _ => 5,
    }
}

fn rate_text(p: &Port) -> String {
    match (p.rate, p.width) {
        (10, _) => "10 Gb/sec (4X SDR)".into(),
        (r, w) => format!(
            "{r} Gb/sec ({w} {})",
            if r / width_lanes(w) >= 100 {
                "NDR"
            } else {
                "HDR"
            }
        ),
    }
}

fn width_lanes(w: &str) -> u32 {
    w.trim_end_matches('X').parse().unwrap_or(4)
}

pub fn write_ibstatus(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    w: &mut impl Write,
) -> io::Result<()> {
    for (k, nic) in host.nics.iter().enumerate() {
        let p = port(story, k as u32);
        let ib = plan.fabric == Fabric::Ib;
        let (n, name) = state_num(p.state);
        writeln!(w, "Infiniband device '{}' port 1 status:", nic.name)?;
        writeln!(
            w,
            "\tdefault gid:\t fe80:0000:0000:0000:{}",
            guid_colons(port_guid(plan, nic))
        )?;
        let (lid, sm) = if ib { (nic.lid, sm_lid(plan)) } else { (0, 0) };
        writeln!(
            w,
            "\tbase lid:\t 0x{lid:x}\n\tsm lid:\t\t 0x{sm:x}\n\tstate:\t\t {n}: {name}"
        )?;
        writeln!(
            w,
            "\tphys state:\t {}: {}\n\trate:\t\t {}",
            phys_num(p.phys),
            p.phys,
            rate_text(&p)
        )?;
        writeln!(
            w,
            "\tlink_layer:\t {}\n",
            if ib { "InfiniBand" } else { "Ethernet" }
        )?;
    }
    Ok(())
}

fn mtu_code(mtu: u32) -> u32 {
    match mtu {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    }
}

pub fn write_ibv_devinfo(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    w: &mut impl Write,
) -> io::Result<()> {
    for (k, nic) in host.nics.iter().enumerate() {
        let p = port(story, k as u32);
        let ib = plan.fabric == Fabric::Ib;
        let (n, _) = state_num(p.state);
        let state = match n {
            1 => "PORT_DOWN (1)",
            2 => "PORT_INIT (2)",
            3 => "PORT_ARMED (3)",
            _ => "PORT_ACTIVE (4)",
        };
        writeln!(
            w,
            "hca_id:\t{}\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002",
            nic.name
        )?;
        writeln!(
            w,
            "\tnode_guid:\t\t\t{}\n\tsys_image_guid:\t\t\t{}",
            guid_colons(nic.guid),
            guid_colons(nic.guid)
        )?;
        writeln!(
            w,
            "\tvendor_id:\t\t\t0x02c9\n\tvendor_part_id:\t\t\t4129\n\thw_ver:\t\t\t\t0x0\n\tboard_id:\t\t\tMT_0000000838\n\tphys_port_cnt:\t\t\t1"
        )?;
        writeln!(
            w,
            "\t\tport:\t1\n\t\t\tstate:\t\t\t{state}\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{} ({})",
            p.mtu,
            mtu_code(p.mtu)
        )?;
        let (sm, lid) = if ib { (sm_lid(plan), nic.lid) } else { (0, 0) };
        writeln!(
            w,
            "\t\t\tsm_lid:\t\t\t{sm}\n\t\t\tport_lid:\t\t{lid}\n\t\t\tport_lmc:\t\t0x00"
        )?;
        writeln!(
            w,
            "\t\t\tlink_layer:\t\t{}\n",
            if ib { "InfiniBand" } else { "Ethernet" }
        )?;
    }
    Ok(())
}

/// `show_gids` (mlnx-tools) on a RoCE host.
pub fn write_show_gids(
    plan: &Plan,
    host: &Host,
    story: Option<&HostStory>,
    w: &mut impl Write,
) -> io::Result<()> {
    writeln!(w, "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")?;
    writeln!(w, "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")?;
    let mut found = 0;
    for (k, nic) in host.nics.iter().enumerate() {
        let p = port(story, k as u32);
        let g = port_guid(plan, nic);
        let ll = format!("fe80:0000:0000:0000:{}", guid_colons(g));
        for (i, ver) in ["v1", "v2"].iter().enumerate() {
            writeln!(w, "{}\t1\t{i}\t{ll}\t\t\t{ver}\t{}", nic.name, nic.netdev)?;
            found += 1;
        }
        if !p.ipv4_gid {
            continue;
        }
        let octets: Vec<u32> = nic.ip.split('.').filter_map(|o| o.parse().ok()).collect();
        let hex = if octets.len() == 4 {
            format!(
                "{:02x}{:02x}:{:02x}{:02x}",
                octets[0], octets[1], octets[2], octets[3]
            )
        } else {
            "0000:0000".into()
        };
        for (i, ver) in ["v1", "v2"].iter().enumerate() {
            writeln!(
                w,
                "{}\t1\t{}\t0000:0000:0000:0000:0000:ffff:{hex}\t{}  \t{ver}\t{}",
                nic.name,
                i + 2,
                nic.ip,
                nic.netdev
            )?;
            found += 1;
        }
    }
    writeln!(w, "n_gids_found={found}")
}

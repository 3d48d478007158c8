//! NCCL debug output, written from docs/log-formats.md §1: the line prefix
//! (`host:pid:tid [dev] NCCL INFO`), the 2.26+ WARN timestamp, the version
//! line, network selection, communicator init in each release's shape,
//! channel connections (with the bracket's meaning by release), teardown,
//! and every WARN a cause needs, each followed by its error-propagation
//! chain (`warn`).

mod warn;

pub use warn::{error_string, explanation, strerror};

use std::io::Write as _;

use super::clock::{self, MS, Us};
use super::plan::{Fabric, Host, Plan, nccl_bus_id};
use super::rng::Rng;
use super::story::Story;
use super::stream::Stream;
use super::topo::{Comm, CommKind, Hop, Topo, Via};
use super::versions::{NcclLines, Ver, nccl_lines};

/// NCCL builds lines in a 1024-byte buffer.
const MAX_LINE: usize = 1023;

/// Threads of one rank's NCCL.
#[derive(Debug, Clone, Copy)]
pub struct Tids {
    pub main: u32,
    pub init: u32,
    pub proxy: u32,
    pub async_ev: u32,
    pub service: u32,
    pub teardown: u32,
    /// The bootstrap root's thread (rank 0's process only).
    pub root: u32,
}

/// One rank's NCCL: who it is and which release it runs.
pub struct Nccl<'a> {
    pub plan: &'a Plan,
    pub story: &'a Story,
    pub host: &'a Host,
    pub rank: u32,
    pub v: Ver,
    pub pid: u32,
    pub dev: u32,
    pub tids: Tids,
    lines: NcclLines,
}

impl<'a> Nccl<'a> {
    pub fn new(plan: &'a Plan, story: &'a Story, rank: u32) -> Nccl<'a> {
        let info = plan.rank(rank);
        let host = &plan.hosts[info.host];
        let v = story
            .host(info.host)
            .and_then(|h| h.nccl_version)
            .unwrap_or(plan.versions.nccl);
        let mut r = Rng::derive(plan.seed, "tids", &[u64::from(rank)]);
        let pid = info.pid;
        let tids = Tids {
            main: pid,
            init: pid + r.range(40, 90) as u32,
            proxy: pid + r.range(110, 160) as u32,
            async_ev: pid + r.range(91, 109) as u32,
            service: pid + r.range(161, 200) as u32,
            teardown: pid + r.range(201, 260) as u32,
            root: pid + r.range(261, 300) as u32,
        };
        Nccl {
            plan,
            story,
            host,
            rank,
            v,
            pid,
            dev: info.local,
            tids,
            lines: nccl_lines(v),
        }
    }

    fn prefix(&self, b: &mut Vec<u8>, tid: u32) {
        let _ = write!(b, "{}:{}:{} [{}] ", self.host.name, self.pid, tid, self.dev);
    }

    /// An INFO line.
    pub fn info(&self, s: &mut Stream, t: Us, tid: u32, msg: std::fmt::Arguments<'_>) {
        // NCCL_DEBUG=WARN prints no INFO line, not even the error chain.
        if !self.plan.nccl_info {
            return;
        }
        s.line(t, |b| {
            let start = b.len();
            self.prefix(b, tid);
            b.extend_from_slice(b"NCCL INFO ");
            let _ = b.write_fmt(msg);
            if b.len() - start > MAX_LINE {
                b.truncate(start + MAX_LINE);
            }
        });
    }

    /// A WARN: a blank line, then (2.26+) the timestamp, the prefix, the
    /// source location and the text.
    pub fn warn(&self, s: &mut Stream, t: Us, tid: u32, file: &str, line: u32, msg: &str) {
        s.text(t, "");
        s.line(t, |b| {
            if self.v.ge(2, 26, 0) {
                let c = clock::civil(t + self.host.skew);
                let _ = write!(b, "[{}] ", c.date_time());
            }
            self.prefix(b, tid);
            let _ = write!(b, "{file}:{line} NCCL WARN {msg}");
        });
    }

    /// The version line: bare on stdout (≤2.23, and for NCCL_DEBUG=WARN),
    /// an INFO line on every rank from 2.24.
    pub fn version(
        &self,
        stdout: &mut Stream,
        nccl: &mut Stream,
        t: Us,
        comm_rank: u32,
        first: bool,
    ) {
        let text = format!("NCCL version {}+cuda{}", self.v, self.plan.versions.cuda);
        if self.v.ge(2, 24, 0) && self.plan.nccl_info {
            self.info(nccl, t, self.tids.main, format_args!("{text}"));
        } else if comm_rank == 0 && first {
            stdout.text(t, &text);
            if self.plan.layout == super::plan::Layout::NcclFiles && self.plan.nccl_info {
                self.info(nccl, t, self.tids.main, format_args!("{text}"));
            }
        }
    }

    fn socket_iface(&self) -> (String, String) {
        self.story
            .host(self.host.index)
            .and_then(|h| h.socket.clone())
            .unwrap_or_else(|| (self.host.iface.clone(), self.host.ip.clone()))
    }

    fn sockets_only(&self) -> bool {
        self.story
            .host(self.host.index)
            .is_some_and(|h| h.sockets_only)
    }

    /// `NCCL_*` settings this rank prints (ENV subsystem, default from 2.17).
    fn env_settings(&self) -> Vec<(String, String)> {
        let (iface, _) = self.socket_iface();
        let mut env = vec![("NCCL_SOCKET_IFNAME".to_string(), iface)];
        if self.plan.fabric == Fabric::Roce {
            env.push(("NCCL_IB_TC".into(), "106".into()));
        }
        env.extend(self.story.env.iter().cloned());
        if let Some(h) = self.story.host(self.host.index) {
            for (k, v) in &h.env {
                env.retain(|e| &e.0 != k);
                env.push((k.clone(), v.clone()));
            }
        }
        env
    }

    /// Everything before the first communicator: env, bootstrap, plugins.
    pub fn preamble(&self, s: &mut Stream, t: Us) -> Us {
        if !self.plan.nccl_info {
            return t;
        }
        let mut t = t;
        let main = self.tids.main;
        let (iface, ip) = self.socket_iface();
        if self.v.ge(2, 17, 0) {
            for (k, v) in self.env_settings().iter().take(1) {
                self.info(s, t, main, format_args!("{k} set by environment to {v}"));
            }
        }
        t += 200;
        let colon = if self.v.ge(2, 24, 0) { ":" } else { " :" };
        self.info(
            s,
            t,
            main,
            format_args!("Bootstrap{colon} Using {iface}:{ip}<0>"),
        );
        for line in self.plugin_lines() {
            t += 150;
            self.info(s, t, main, format_args!("{line}"));
        }
        if self.v.ge(2, 13, 0) {
            t += 90;
            let d = self.plan.versions.driver_version();
            self.info(s, t, main, format_args!("cudaDriverVersion {d}"));
        }
        t + 2 * MS
    }

    fn plugin_lines(&self) -> Vec<&'static str> {
        let v = self.v;
        if v.lt(2, 18, 0) {
            vec!["NET/Plugin : No plugin found (libnccl-net.so), using internal implementation"]
        } else if v.lt(2, 19, 0) {
            vec![
                "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory",
                "NET/Plugin : No plugin found, using internal implementation",
            ]
        } else if v.lt(2, 21, 0) {
            vec![
                "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation",
            ]
        } else if v.lt(2, 23, 0) {
            vec![
                "NET/Plugin: No plugin found (libnccl-net.so)",
                "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so",
                "NET/Plugin: Using internal network plugin.",
            ]
        } else {
            Vec::new()
        }
    }

    /// Network selection on the init thread (once per process).
    pub fn net_setup(&self, s: &mut Stream, t: Us) -> Us {
        if !self.plan.nccl_info {
            return t;
        }
        let mut t = t;
        let tid = self.tids.init;
        let (iface, ip) = self.socket_iface();
        if self.v.ge(2, 23, 0) {
            self.info(
                s,
                t,
                tid,
                format_args!(
                    "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin."
                ),
            );
            t += 100;
        }
        if self.v.ge(2, 17, 0) {
            for (k, v) in self.env_settings() {
                self.info(s, t, tid, format_args!("{k} set by environment to {v}"));
                t += 40;
            }
        }
        if self.sockets_only() {
            self.info(
                s,
                t,
                tid,
                format_args!("NET/Socket : Using [0]{iface}:{ip}<0>"),
            );
            self.info(s, t + 50, tid, format_args!("Using network Socket"));
            return t + MS;
        }
        let nics: String = self
            .host
            .nics
            .iter()
            .enumerate()
            .map(|(i, n)| format!(" [{i}]{}:1/{}", n.name, self.plan.link_layer()))
            .collect();
        let ro = if self.v.ge(2, 18, 0) { " [RO]" } else { "" };
        self.info(
            s,
            t,
            tid,
            format_args!("NET/IB : Using{nics}{ro}; OOB {iface}:{ip}<0>"),
        );
        t += 120;
        if self.v.ge(2, 19, 0) && self.v.lt(2, 23, 0) {
            self.info(
                s,
                t,
                tid,
                format_args!("Using non-device net plugin version 0"),
            );
        }
        if self.v.ge(2, 23, 0) {
            self.info(
                s,
                t,
                tid,
                format_args!("PROFILER/Plugin: Could not find: libnccl-profiler.so. "),
            );
        }
        self.info(s, t + 10, tid, format_args!("Using network IB"));
        if self.v.ge(2, 18, 0) {
            self.info(
                s,
                t + 20,
                tid,
                format_args!("DMA-BUF is available on GPU device {}", self.dev),
            );
        }
        t + MS
    }

    fn comm_ptr(&self, kind: CommKind) -> u64 {
        let mut r = Rng::derive(
            self.plan.seed,
            "comm-ptr",
            &[u64::from(self.rank), kind as u64],
        );
        0x5500_0000_0000 | (r.next_u64() & 0xff_ffff_fff0)
    }

    fn bracket(&self, rank: u32) -> String {
        let local = rank % self.plan.gpus_per_host;
        if self.v.ge(2, 18, 3) {
            local.to_string()
        } else {
            nccl_bus_id(super::plan::GPU_BDF[local as usize % 8])
        }
    }

    fn api(&self, kind: CommKind) -> &'static str {
        let split =
            kind != CommKind::World && self.v.ge(2, 18, 0) && self.plan.versions.torch.ge(2, 2, 0);
        if split {
            "ncclCommSplit"
        } else if self.plan.versions.torch.ge(2, 6, 0) {
            "ncclCommInitRankConfig"
        } else {
            "ncclCommInitRank"
        }
    }

    fn bus(&self) -> String {
        nccl_bus_id(self.plan.gpu_bdf(self.rank))
    }

    fn start_line(&self, s: &mut Stream, t: Us, comm: &Comm) {
        if self.v.lt(2, 18, 3) {
            return;
        }
        let api = self.api(comm.kind);
        let ptr = self.comm_ptr(comm.kind);
        let head = if self.v.ge(2, 21, 0) {
            let tag = if self.v.ge(2, 29, 0) {
                format!("[Rank {}] ", comm.rank)
            } else {
                String::new()
            };
            format!("{tag}{api} ")
        } else {
            String::new()
        };
        let body = format!(
            "comm 0x{ptr:x} rank {} nranks {} cudaDev {d} nvmlDev {d} busId {}",
            comm.rank,
            comm.nranks,
            self.bus(),
            d = self.dev
        );
        let tail = if api == "ncclCommSplit" && self.v.ge(2, 21, 0) {
            let parent = self.comm_ptr(CommKind::World);
            let key = comm.rank;
            if self.v.ge(2, 24, 0) {
                format!(
                    " parent 0x{parent:x} splitCount 1 color {} key {key}- Init START",
                    comm.color
                )
            } else if self.v.ge(2, 23, 0) {
                format!(
                    " parent 0x{parent:x} color {} key {key}- Init START",
                    comm.color
                )
            } else {
                format!(
                    " parent 0x{parent:x} color {} key {key} commId 0x{:x} - Init START",
                    comm.color, comm.id
                )
            }
        } else {
            format!(" commId 0x{:x} - Init START", comm.id)
        };
        self.info(s, t, self.tids.init, format_args!("{head}{body}{tail}"));
    }

    fn complete_line(&self, s: &mut Stream, t: Us, comm: &Comm) {
        let ptr = self.comm_ptr(comm.kind);
        let (r, n, d, bus) = (comm.rank, comm.nranks, self.dev, self.bus());
        let line = if self.v.lt(2, 16, 0) {
            format!("comm 0x{ptr:x} rank {r} nranks {n} cudaDev {d} busId {bus} - Init COMPLETE")
        } else if self.v.lt(2, 18, 3) {
            format!(
                "comm 0x{ptr:x} rank {r} nranks {n} cudaDev {d} busId {bus} commId 0x{:x} - Init COMPLETE",
                comm.id
            )
        } else {
            let api = if self.v.ge(2, 21, 0) {
                format!("{} ", self.api(comm.kind))
            } else {
                String::new()
            };
            format!(
                "{api}comm 0x{ptr:x} rank {r} nranks {n} cudaDev {d} nvmlDev {d} busId {bus} commId 0x{:x} - Init COMPLETE",
                comm.id
            )
        };
        self.info(s, t, self.tids.init, format_args!("{line}"));
    }

    /// One communicator's init, START to COMPLETE. With `fail`, the lines
    /// stop where connection setup hits the error (the caller writes it).
    pub fn comm_init(
        &self,
        s: &mut Stream,
        t0: Us,
        comm: &Comm,
        topo: &Topo<'_>,
        fail: bool,
    ) -> Us {
        if !self.plan.nccl_info {
            return t0 + 2 * MS;
        }
        let mut t = t0;
        let tid = self.tids.init;
        self.start_line(s, t, comm);
        t += 300;
        let numa = if self.dev < self.plan.gpus_per_host / 2 {
            "ffffffff,00000000,ffffffff"
        } else {
            "ffffffff,00000000,ffffffff,00000000"
        };
        self.info(
            s,
            t,
            tid,
            format_args!("Setting affinity for GPU {} to {numa}", self.dev),
        );
        if self.v.ge(2, 17, 0) {
            self.info(
                s,
                t + 20,
                tid,
                format_args!(
                    "NVLS multicast support is not available on dev {}",
                    self.dev
                ),
            );
        }
        if self.v.ge(2, 20, 0) {
            let (nodes, local_ranks, local_rank) = comm.layout(self.plan.gpus_per_host, self.rank);
            self.info(s, t + 40, tid, format_args!(
                "comm 0x{:x} rank {} nRanks {} nNodes {nodes} localRanks {local_ranks} localRank {local_rank} MNNVL 0",
                self.comm_ptr(comm.kind), comm.rank, comm.nranks
            ));
        }
        t += MS;
        if comm.rank == 0 {
            t = self.ring_orders(s, t, comm, topo);
        }
        self.trees(s, t, comm, topo);
        self.info(s, t + 30, tid, format_args!("P2P Chunksize set to 131072"));
        t += 100;
        let (ring, tree) = topo.hops(comm, self.rank);
        if fail {
            for hop in ring.iter().take(ring.len() / 2) {
                t += 35;
                self.hop(s, t, comm, hop);
            }
            return t;
        }
        for hop in &ring {
            t += 35;
            self.hop(s, t, comm, hop);
        }
        let pxn = if self.v.ge(2, 27, 0) {
            ", use ring PXN 0 GDR 1"
        } else {
            ""
        };
        t += 2 * MS;
        self.info(s, t, tid, format_args!("Connected all rings{pxn}"));
        for hop in &tree {
            t += 35;
            self.hop(s, t, comm, hop);
        }
        if comm.kind == CommKind::World {
            self.info(s, t + 300, tid, format_args!("Connected all trees"));
        }
        t += MS;
        self.summary(s, t, comm);
        t += 3 * MS;
        self.complete_line(s, t, comm);
        self.timings(s, t + 10, comm);
        t + MS
    }

    /// `Channel 00/02 :    0   1 …` (the communicator's rank 0 only).
    fn ring_orders(&self, s: &mut Stream, t: Us, comm: &Comm, topo: &Topo<'_>) -> Us {
        let n = comm.members.len();
        for c in 0..comm.channels {
            s.line(t + i64::from(c), |b| {
                let start = b.len();
                self.prefix(b, self.tids.init);
                let _ = write!(b, "NCCL INFO Channel {c:02}/{:02} : ", comm.channels);
                let mut cur = comm.members[0];
                for _ in 0..n {
                    let idx = comm.index_of(cur) as usize;
                    let _ = write!(b, " {idx:>3}");
                    if b.len() - start >= MAX_LINE {
                        break;
                    }
                    cur = match comm.kind {
                        CommKind::World => topo.ring_next(c, cur),
                        _ => comm.members[(idx + 1) % n],
                    };
                }
                if b.len() - start > MAX_LINE {
                    b.truncate(start + MAX_LINE);
                }
            });
        }
        t + i64::from(comm.channels) + 10
    }

    fn trees(&self, s: &mut Stream, t: Us, comm: &Comm, topo: &Topo<'_>) {
        s.line(t, |b| {
            let start = b.len();
            self.prefix(b, self.tids.init);
            b.extend_from_slice(b"NCCL INFO Trees");
            if comm.kind == CommKind::World {
                for (c, down, up) in topo.tree_line(comm.channels, self.rank) {
                    let _ = write!(
                        b,
                        " [{c}] {}/{}/{}->{}->{up}",
                        down[0], down[1], down[2], self.rank
                    );
                }
            } else {
                let (i, n) = (i64::from(comm.rank), i64::from(comm.nranks));
                let down = if i + 1 < n { i + 1 } else { -1 };
                let up = if i > 0 { i - 1 } else { -1 };
                for c in 0..comm.channels {
                    let _ = write!(b, " [{c}] {down}/-1/-1->{i}->{up}");
                }
            }
            if b.len() - start > MAX_LINE {
                b.truncate(start + MAX_LINE);
            }
        });
    }

    fn hop(&self, s: &mut Stream, t: Us, comm: &Comm, hop: &Hop) {
        let (src, dst) = (comm.index_of(hop.src), comm.index_of(hop.dst));
        let (bs, bd) = (self.bracket(hop.src), self.bracket(hop.dst));
        let conn = if comm.kind == CommKind::Ep { 1 } else { 0 };
        let p2p = if self.v.ge(2, 19, 0) {
            "P2P/CUMEM"
        } else {
            "P2P/IPC"
        };
        let shared = if comm.kind == CommKind::Ep {
            "/Shared"
        } else {
            ""
        };
        let c = hop.channel;
        match hop.via {
            Via::P2p => self.info(s, t, self.tids.init, format_args!("Channel {c:02}/{conn} : {src}[{bs}] -> {dst}[{bd}] via {p2p}")),
            Via::NetSend(k) => self.info(s, t, self.tids.init, format_args!("Channel {c:02}/{conn} : {src}[{bs}] -> {dst}[{bd}] [send] via NET/IB/{k}/GDRDMA{shared}")),
            Via::NetRecv(k) => self.info(s, t, self.tids.init, format_args!("Channel {c:02}/{conn} : {src}[{bs}] -> {dst}[{bd}] [receive] via NET/IB/{k}/GDRDMA{shared}")),
        }
    }

    fn summary(&self, s: &mut Stream, t: Us, comm: &Comm) {
        let tid = self.tids.init;
        let n = comm.channels;
        self.info(
            s,
            t,
            tid,
            format_args!(
                "threadThresholds 8/8/64 | {}/8/64 | 512 | 512",
                8 * comm.nranks.min(64)
            ),
        );
        let line = if self.v.ge(2, 20, 0) {
            format!(
                "{n} coll channels, {n} collnet channels, 0 nvls channels, {n} p2p channels, 2 p2p channels per peer"
            )
        } else if self.v.ge(2, 17, 0) {
            format!("{n} coll channels, 0 nvls channels, {n} p2p channels, 2 p2p channels per peer")
        } else {
            format!("{n} coll channels, {n} p2p channels, 2 p2p channels per peer")
        };
        self.info(s, t + 10, tid, format_args!("{line}"));
        let tuner: &[&str] = if self.v.ge(2, 23, 0) {
            &["TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin."]
        } else if self.v.ge(2, 21, 0) {
            &[
                "TUNER/Plugin: No plugin found (libnccl-tuner.so)",
                "TUNER/Plugin: No plugin found (libnccl-net.so)",
                "TUNER/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-tuner.so",
                "TUNER/Plugin: Using internal tuner plugin.",
            ]
        } else if self.v.ge(2, 19, 0) {
            &[
                "TUNER/Plugin: Failed to find ncclTunerPlugin_v1 symbol, using internal tuner instead.",
            ]
        } else {
            &[]
        };
        for l in tuner {
            self.info(s, t + 20, tid, format_args!("{l}"));
        }
    }

    fn timings(&self, s: &mut Stream, t: Us, comm: &Comm) {
        if self.v.lt(2, 22, 0) {
            return;
        }
        let mut r = Rng::derive(
            self.plan.seed,
            "timings",
            &[u64::from(self.rank), comm.kind as u64],
        );
        let parts: Vec<f64> = (0..8).map(|_| r.range(0, 900) as f64 / 100.0).collect();
        let total: f64 = parts.iter().sum();
        let (r_, n) = (comm.rank, comm.nranks);
        let head = if self.v.ge(2, 23, 0) {
            format!(
                "Init timings - {}: rank {r_} nranks {n}",
                self.api(comm.kind)
            )
        } else {
            format!("Init timings: rank {r_} nranks {n}")
        };
        self.info(s, t, self.tids.init, format_args!(
            "{head} total {total:.2} (kernels {:.2}, alloc {:.2}, bootstrap {:.2}, allgathers {:.2}, topo {:.2}, graphs {:.2}, connections {:.2}, rest {:.2})",
            parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6], parts[7]
        ));
    }

    /// `comm … - Destroy COMPLETE` / `- Abort COMPLETE` (2.12+; from 2.30.3
    /// in a subsystem that is off by default).
    pub fn teardown(&self, s: &mut Stream, t: Us, comm: &Comm, what: &str) {
        if self.v.lt(2, 12, 0) || self.v.ge(2, 30, 3) || !self.plan.nccl_info {
            return;
        }
        self.info(
            s,
            t,
            self.tids.teardown,
            format_args!(
                "comm 0x{:x} rank {} nranks {} cudaDev {} busId {} - {what} COMPLETE",
                self.comm_ptr(comm.kind),
                comm.rank,
                comm.nranks,
                self.dev,
                self.bus()
            ),
        );
    }

    /// `[Service thread] Connection closed by localRank L`.
    pub fn closed_by_local(&self, s: &mut Stream, t: Us, local: u32) {
        if self.v.ge(2, 12, 0) && self.plan.nccl_info {
            self.info(
                s,
                t,
                self.tids.service,
                format_args!("[Service thread] Connection closed by localRank {local}"),
            );
        }
    }
}

//! The NCCL WARN catalogue of docs/log-formats.md §1.4, in each release's
//! wording: IB completion errors and async events, verbs-wrapper failures,
//! socket and bootstrap errors, CUDA failures, each with the INFO
//! error-propagation chain NCCL prints after it.

use super::Nccl;
use crate::simulate::clock::{MS, Us};
use crate::simulate::plan::Fabric;
use crate::simulate::rng::Rng;
use crate::simulate::story::Warn;
use crate::simulate::stream::Stream;
use crate::simulate::versions::Ver;

/// A WARN's thread, source location, text and the chain after it.
struct Described {
    tid: u32,
    file: &'static str,
    line: u32,
    text: String,
    chain: Vec<(&'static str, u32, u8, &'static str)>,
}

impl<'a> Nccl<'a> {
    fn peer_addr(&self, peer: u32, salt: u64) -> String {
        let mut r = Rng::derive(
            self.plan.seed,
            "peer-port",
            &[u64::from(self.rank), u64::from(peer), salt],
        );
        format!(
            "{}<{}>",
            self.plan.host_of(peer).ip,
            r.range(32_768, 60_999)
        )
    }

    fn rail_ip(&self, rank: u32, nic: u32) -> String {
        let h = self.plan.host_of(rank);
        h.nics[nic as usize % h.nics.len()].ip.clone()
    }

    /// Writes a WARN (and its chain); returns the text "Last error:" quotes.
    pub fn write_warn(&self, s: &mut Stream, t: Us, w: &Warn) -> String {
        let d = self.describe(w, s, t);
        self.warn(s, t, d.tid, d.file, d.line, &d.text);
        for (i, (f, l, res, suffix)) in d.chain.iter().enumerate() {
            let at = t + 40 + i as i64 * 7;
            self.info(s, at, d.tid, format_args!("{f}:{l} -> {res}{suffix}"));
        }
        d.text
    }

    fn describe(&self, w: &Warn, s: &mut Stream, t: Us) -> Described {
        let l = self.lines;
        let progress = if self.v.ge(2, 19, 0) {
            " [Progress Thread]"
        } else {
            ""
        };
        let remote = if self.v.ge(2, 13, 0) { 6 } else { 2 };
        let d = |tid, file, line, text, chain| Described {
            tid,
            file,
            line,
            text,
            chain,
        };
        match w {
            Warn::IbCompletion { peer, status, nic } => {
                let file = if self.v.ge(2, 29, 0) {
                    "transport/net_ib/p2p.cc"
                } else {
                    "transport/net_ib.cc"
                };
                let chain = vec![
                    ("transport/net.cc", l.net, remote, ""),
                    ("proxy.cc", l.proxy, remote, ""),
                    ("proxy.cc", l.proxy_progress, remote, progress),
                ];
                let text = self.completion_text(*peer, *status, *nic);
                d(self.tids.proxy, file, l.ib_completion, text, chain)
            }
            Warn::IbAsync { nic, event, fatal } => {
                let text = self.async_text(*nic, event, *fatal);
                d(
                    self.tids.async_ev,
                    "transport/net_ib.cc",
                    l.ib_async,
                    text,
                    Vec::new(),
                )
            }
            Warn::ConnClosed { peer } => {
                let chain = vec![
                    ("misc/socket.cc", l.socket + 27, remote, ""),
                    ("proxy.cc", l.proxy, remote, ""),
                ];
                d(
                    self.tids.proxy,
                    "misc/socket.cc",
                    l.socket,
                    self.closed_text(*peer),
                    chain,
                )
            }
            Warn::Connect { addr, errno } => {
                let chain = vec![
                    ("misc/socket.cc", l.socket + 61, 2, ""),
                    ("bootstrap.cc", l.bootstrap, 2, ""),
                    ("init.cc", l.init, 2, ""),
                ];
                d(
                    self.tids.main,
                    "misc/socket.cc",
                    l.socket + 40,
                    self.connect_text(addr, *errno),
                    chain,
                )
            }
            // The root's thread gives up at its first failed send, and
            // its error goes no further than the thread (bootstrap.cc).
            Warn::RootConnect { addr, errno } => {
                let chain = vec![
                    ("misc/socket.cc", l.socket + 61, 2, ""),
                    ("bootstrap.cc", l.bootstrap + 41, 2, ""),
                ];
                d(
                    self.tids.root,
                    "misc/socket.cc",
                    l.socket + 40,
                    self.connect_text(addr, *errno),
                    chain,
                )
            }
            Warn::ModifyQp {
                nic,
                errno,
                peer,
                gid_index,
            } => {
                let text = self.modify_qp_text(*nic, *errno, *peer, *gid_index);
                self.modify_qp_retries(s, t, *errno, &text);
                let chain = vec![
                    ("transport/net_ib.cc", l.ib_completion - 700, 2, ""),
                    ("transport/net.cc", l.net - 400, 2, ""),
                    ("init.cc", l.init, 2, ""),
                ];
                d(self.tids.init, "misc/ibvwrap.cc", l.ibvwrap, text, chain)
            }
            Warn::RegMr => {
                let errno = if self.v.ge(2, 19, 0) { " errno 12" } else { "" };
                let text =
                    format!("Call to ibv_reg_mr failed with error Cannot allocate memory{errno}");
                let chain = vec![
                    ("transport/net_ib.cc", l.ib_completion - 520, 2, ""),
                    ("transport/net.cc", l.net - 300, 2, ""),
                    ("init.cc", l.init, 2, ""),
                ];
                d(
                    self.tids.init,
                    "misc/ibvwrap.cc",
                    l.ibvwrap - 90,
                    text,
                    chain,
                )
            }
            Warn::Truncated { got, want } => {
                let text = format!("Message truncated : received {got} bytes instead of {want}");
                let chain = vec![
                    ("bootstrap.cc", l.bootstrap + 12, 3, ""),
                    ("init.cc", l.init, 3, ""),
                ];
                d(
                    self.tids.init,
                    "bootstrap.cc",
                    l.bootstrap - 40,
                    text,
                    chain,
                )
            }
            Warn::Cuda { msg } => {
                let chain = vec![("enqueue.cc", l.enqueue + 3, 1, "")];
                d(
                    self.tids.main,
                    "enqueue.cc",
                    l.enqueue,
                    format!("Cuda failure '{msg}'"),
                    chain,
                )
            }
        }
    }

    /// 2.26+ retries a modify_qp that timed out, with INFO lines, first.
    fn modify_qp_retries(&self, s: &mut Stream, t: Us, errno: i32, text: &str) {
        if errno != 110 || self.v.lt(2, 26, 0) {
            return;
        }
        for i in 1..=5 {
            let at = t - (6 - i) * 400 * MS;
            self.info(
                s,
                at,
                self.tids.init,
                format_args!("{text}, retrying {i}/5 after 400 msec of sleep"),
            );
        }
    }

    /// `Connection closed by remote peer`: 2.18+ names the peer by its
    /// reverse-DNS host name, earlier releases by address.
    fn closed_text(&self, peer: u32) -> String {
        let addr = self.peer_addr(peer, 1);
        if self.v.ge(2, 18, 0) {
            let port = addr.split('<').nth(1).unwrap_or("0>");
            format!(
                "socketProgress: Connection closed by remote peer {}<{port}",
                self.plan.host_of(peer).fqdn
            )
        } else {
            format!("Net : Connection closed by remote peer {addr}")
        }
    }

    /// The IB completion-error text in this release's wording (§1.4).
    fn completion_text(&self, peer: u32, status: u32, nic: u32) -> String {
        let v = self.v;
        let addr = self.peer_addr(peer, 0);
        let vendor = if status == 12 { 129 } else { 249 };
        let hca = &self.host.nics[nic as usize % self.host.nics.len()].name;
        let roce = self.plan.fabric == Fabric::Roce;
        let lgid = format!("::ffff:{}", self.rail_ip(self.rank, nic));
        let rgid = format!(
            "::ffff:{}",
            self.rail_ip(peer, peer % self.plan.gpus_per_host)
        );
        let gids_old = if roce {
            format!(" localGid {lgid} remoteGid {rgid}")
        } else {
            String::new()
        };
        let gids = if roce {
            format!(" localGid {lgid} remoteGids{rgid}")
        } else {
            String::new()
        };
        let name = if status == 12 {
            "IBV_WC_RETRY_EXC_ERR"
        } else {
            "IBV_WC_WR_FLUSH_ERR"
        };
        if v.lt(2, 10, 0) {
            format!(
                "NET/IB : Got completion with error {status}, opcode 0, len 0, vendor err {vendor}"
            )
        } else if v.lt(2, 18, 0) {
            format!(
                "NET/IB : Got completion from peer {addr} with error {status}, opcode 0, len 0, vendor err {vendor}"
            )
        } else if v.lt(2, 20, 0) {
            format!(
                "NET/IB : Got completion from peer {addr} with error {status}, opcode 0, len 0, vendor err {vendor} (Send){gids_old}"
            )
        } else if v.lt(2, 22, 0) {
            format!(
                "NET/IB : Got completion from peer {addr} with status={status} opcode=0 len=0 vendor err {vendor} (Send){gids}"
            )
        } else if v.lt(2, 28, 7) {
            format!(
                "NET/IB: Got completion from peer {addr} with status={status} opcode=0 len=0 vendor err {vendor} (Send){gids} hca {hca}"
            )
        } else if v.lt(2, 29, 0) {
            format!(
                "NET/IB: Got completion from peer {addr} with status={name}({status}) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err={vendor} req_type=Send{gids} hca {hca}"
            )
        } else {
            format!(
                "NET/IB: Got completion from peer {addr} with status={name}({status}) opcode=IBV_WC_SEND(0) vendor_err={vendor} Send{gids} hca {hca}"
            )
        }
    }

    fn async_text(&self, nic: u32, event: &str, fatal: bool) -> String {
        let dev = &self.host.nics[nic as usize % self.host.nics.len()].name;
        let code = match event {
            "local catastrophic error" => 8,
            "port active" => 9,
            _ => 10,
        };
        if self.v.lt(2, 20, 0) {
            format!("NET/IB : Got async event : {event}")
        } else if self.v.lt(2, 23, 0) {
            format!("NET/IB : {dev}:1 Got async event : {event}")
        } else if fatal {
            format!("NET/IB : {dev}:1 async fatal event: {event}")
        } else if self.v.lt(2, 28, 7) {
            format!("NET/IB : {dev}:1 Got async error event: {event}")
        } else {
            format!("NET/IB : {dev}:1 Got non-fatal async event: {event}({code})")
        }
    }

    /// A bootstrap connect that failed, in the release's words (misc/socket.cc):
    /// 2.18–2.26 retry a refused or timed-out connect and give up without the
    /// address (2.24–2.26 also a host that cannot be reached); ≤2.17 and 2.27+
    /// name it.
    fn connect_text(&self, addr: &str, errno: i32) -> String {
        let err = strerror(errno);
        let (refused, timed_out) = (errno == 111, errno == 110);
        if self.v.lt(2, 12, 0) {
            format!("Connect to {addr} failed : {err}")
        } else if self.v.lt(2, 18, 0) {
            format!("Net : Connect to {addr} failed : {err}")
        } else if self.v.lt(2, 24, 0) && refused {
            "socketPollConnect: exceeded retries (20000)".to_string()
        } else if self.v.lt(2, 24, 0) && timed_out {
            "socketPollConnect: exceeded timeouts (3)".to_string()
        } else if self.v.ge(2, 24, 0) && self.v.lt(2, 27, 0) {
            format!("socketPollConnect: connect returned {err}, exceeded error retry count (35)")
        } else if self.v.lt(2, 21, 0) {
            format!("socketStartConnect: Connect to {addr} failed : {err}")
        } else if self.v.lt(2, 27, 0) {
            format!(
                "socketPollConnect: Connect to {addr} returned {errno}({err}) errno 115(Operation now in progress)"
            )
        } else {
            format!("socketPollConnect to {addr} failed with error {err}")
        }
    }

    fn modify_qp_text(&self, nic: u32, errno: i32, peer: u32, gid_index: u32) -> String {
        let err = strerror(errno);
        if self.v.lt(2, 19, 0) {
            return format!("Call to ibv_modify_qp failed with error {err}");
        }
        if self.v.lt(2, 26, 0) {
            return format!("Call to ibv_modify_qp failed with error {err} errno {errno}");
        }
        let dev = &self.host.nics[nic as usize % self.host.nics.len()].name;
        let lgid = if errno == 22 {
            "::".to_string()
        } else {
            format!("::ffff:{}", self.rail_ip(self.rank, nic))
        };
        let rgid = format!(
            "::ffff:{}",
            self.rail_ip(peer, peer % self.plan.gpus_per_host)
        );
        format!(
            "Call to ibv_modify_qp failed with {errno} {err}, on dev {dev}:1, curr state INIT, next state RTR, local GID index {gid_index}, local GID {lgid}, remote GID {rgid}"
        )
    }
}

pub fn strerror(errno: i32) -> &'static str {
    match errno {
        12 => "Cannot allocate memory",
        22 => "Invalid argument",
        104 => "Connection reset by peer",
        110 => "Connection timed out",
        111 => "Connection refused",
        113 => "No route to host",
        _ => "Unknown error",
    }
}

/// `ncclGetErrorString` for a result, in this release's wording.
pub fn error_string(v: Ver, result: u8) -> &'static str {
    let new = v.ge(2, 18, 0);
    match (result, new) {
        (1, false) => "unhandled cuda error",
        (1, true) => "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        (2, false) => "unhandled system error",
        (2, true) => "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        (3, false) => "internal error",
        (3, true) => "internal error - please report this issue to the NCCL developers",
        (6, _) => "remote process exited or there was a network error",
        _ => "invalid usage (run with NCCL_DEBUG=WARN for details)",
    }
}

/// PyTorch's explanation line for a result.
pub fn explanation(v: Ver, result: u8) -> &'static str {
    match result {
        1 => "ncclUnhandledCudaError: Call to CUDA function failed.",
        2 if v.lt(2, 13, 0) => {
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. It can be also caused by unexpected exit of a remote peer."
        }
        2 => {
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. "
        }
        3 => "ncclInternalError: Internal check failed.",
        6 => {
            "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
        }
        _ => "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    }
}

#[cfg(test)]
mod tests {
    use crate::model::CauseKind;
    use crate::simulate::causes;
    use crate::simulate::nccl::Nccl;
    use crate::simulate::plan::{Plan, Profile, Scenario, SimOptions};
    use crate::simulate::versions::Ver;

    fn plan(kind: CauseKind, nccl: &str) -> Plan {
        Plan::build(&SimOptions {
            scenario: Scenario::Fault(kind),
            ranks: 16,
            seed: 2,
            layout: None,
            nccl_version: Ver::parse(nccl),
            torch_version: None,
            profile: Profile::Small,
        })
    }

    /// docs/log-formats.md §1.4, the 2.22–2.28.3 RoCE shape:
    /// `NET/IB: Got completion from peer 10.3.0.18<51234> with status=12
    /// opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:… remoteGids::ffff:… hca mlx5_3`
    #[test]
    fn completion_error_2_26_on_roce() {
        let p = plan(CauseKind::GidIndex, "2.26.2");
        let story = causes::build(&p);
        let n = Nccl::new(&p, &story, 0);
        let t = n.completion_text(8, 12, 0);
        assert!(t.starts_with("NET/IB: Got completion from peer 10."), "{t}");
        assert!(
            t.contains(
                " with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.201."
            ),
            "{t}"
        );
        assert!(t.contains(" remoteGids::ffff:10.201."), "{t}");
        assert!(t.ends_with(" hca mlx5_0"), "{t}");
    }

    #[test]
    fn completion_error_wording_by_release() {
        let cases = [
            (
                "2.14.3",
                "NET/IB : Got completion from peer ",
                " with error 5, opcode 0, len 0, vendor err 249",
            ),
            (
                "2.20.5",
                "NET/IB : Got completion from peer ",
                " with status=5 opcode=0 len=0 vendor err 249 (Send)",
            ),
            (
                "2.28.9",
                "NET/IB: Got completion from peer ",
                " with status=IBV_WC_WR_FLUSH_ERR(5) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=249 req_type=Send",
            ),
        ];
        for (v, head, body) in cases {
            let p = plan(CauseKind::MtuMismatch, v);
            let story = causes::build(&p);
            let t = Nccl::new(&p, &story, 0).completion_text(8, 5, 0);
            assert!(t.starts_with(head) && t.contains(body), "{v}: {t}");
        }
    }

    #[test]
    fn modify_qp_wording_by_release() {
        for (v, want) in [
            (
                "2.18.6",
                "Call to ibv_modify_qp failed with error Invalid argument",
            ),
            (
                "2.21.5",
                "Call to ibv_modify_qp failed with error Invalid argument errno 22",
            ),
            (
                "2.26.2",
                "Call to ibv_modify_qp failed with 22 Invalid argument, on dev mlx5_1:1, curr state INIT, next state RTR, local GID index 3, local GID ::, remote GID ::ffff:",
            ),
        ] {
            let p = plan(CauseKind::GidIndex, v);
            let story = causes::build(&p);
            let t = Nccl::new(&p, &story, 1).modify_qp_text(1, 22, 9, 3);
            assert!(t.starts_with(want), "{v}: {t}");
        }
    }

    /// misc/socket.cc: 2.18–2.26 retry a refused or timed-out connect and
    /// give up without the address; ≤2.17, 2.27+ and 2.18–2.23's other
    /// errors name it.
    #[test]
    fn connect_wording_by_release() {
        let addr = "10.0.0.7<43211>";
        for (v, errno, want) in [
            (
                "2.14.3",
                111,
                "Net : Connect to 10.0.0.7<43211> failed : Connection refused",
            ),
            ("2.18.1", 111, "socketPollConnect: exceeded retries (20000)"),
            ("2.19.3", 110, "socketPollConnect: exceeded timeouts (3)"),
            (
                "2.20.5",
                113,
                "socketStartConnect: Connect to 10.0.0.7<43211> failed : No route to host",
            ),
            (
                "2.26.2",
                113,
                "socketPollConnect: connect returned No route to host, exceeded error retry count (35)",
            ),
            (
                "2.27.3",
                111,
                "socketPollConnect to 10.0.0.7<43211> failed with error Connection refused",
            ),
        ] {
            let p = plan(CauseKind::Firewall, v);
            let story = causes::build(&p);
            let t = Nccl::new(&p, &story, 1).connect_text(addr, errno);
            assert_eq!(t, want, "{v} errno {errno}");
        }
    }
}

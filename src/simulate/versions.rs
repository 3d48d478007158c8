//! NCCL and PyTorch versions: parsing, the pairs that ship together, and the
//! per-release details (source line numbers) that make lines look real.
//!
//! Line numbers in `FILE:LINE` slots are fingerprints of a release, never
//! keys; where a release was not checked, a nearby plausible number is used.

use std::fmt;

/// `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ver(pub u32, pub u32, pub u32);

impl Ver {
    pub fn parse(s: &str) -> Option<Ver> {
        let core = s.split(['+', '-', 'a', 'r']).next()?;
        let mut it = core.split('.').map(|p| p.parse::<u32>());
        let major = it.next()?.ok()?;
        let minor = it.next()?.ok()?;
        let patch = it.next().and_then(Result::ok).unwrap_or(0);
        Some(Ver(major, minor, patch))
    }

    pub fn ge(self, major: u32, minor: u32, patch: u32) -> bool {
        self >= Ver(major, minor, patch)
    }

    pub fn lt(self, major: u32, minor: u32, patch: u32) -> bool {
        !self.ge(major, minor, patch)
    }
}

impl fmt::Display for Ver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// torch release, the NCCL its wheels pin (`nvidia-nccl-cu12`), its CUDA and Python.
pub const PAIRS: &[(&str, &str, &str, &str)] = &[
    ("1.13.1", "2.14.3", "11.7", "3.8"),
    ("2.1.2", "2.18.1", "12.1", "3.10"),
    ("2.2.2", "2.19.3", "12.1", "3.10"),
    ("2.3.1", "2.20.5", "12.1", "3.10"),
    ("2.4.1", "2.20.5", "12.4", "3.10"),
    ("2.5.1", "2.21.5", "12.4", "3.11"),
    ("2.6.0", "2.21.5", "12.4", "3.11"),
    ("2.7.1", "2.26.2", "12.8", "3.12"),
    ("2.8.0", "2.27.3", "12.8", "3.12"),
];

/// The versions one simulated job runs.
#[derive(Debug, Clone)]
pub struct Versions {
    pub nccl: Ver,
    pub cuda: String,
    pub torch: Ver,
    pub python: String,
}

impl Versions {
    /// From the pair table, overridden by explicit versions. An explicit NCCL
    /// version without a torch version takes the torch of the closest pair.
    pub fn choose(pair: usize, nccl: Option<Ver>, torch: Option<Ver>) -> Versions {
        let base = match (nccl, torch) {
            (_, Some(t)) => closest(|p| Ver::parse(p.0), t),
            (Some(n), None) => closest(|p| Ver::parse(p.1), n),
            (None, None) => PAIRS[pair % PAIRS.len()],
        };
        Versions {
            nccl: nccl.or(Ver::parse(base.1)).unwrap_or(Ver(2, 21, 5)),
            cuda: base.2.to_string(),
            torch: torch.or(Ver::parse(base.0)).unwrap_or(Ver(2, 5, 1)),
            python: base.3.to_string(),
        }
    }

    /// `2.21.5+cuda12.4`
    pub fn nccl_full(&self) -> String {
        format!("{}+cuda{}", self.nccl, self.cuda)
    }

    /// `cudaDriverVersion` as NCCL prints it (12040 for 12.4).
    pub fn driver_version(&self) -> u32 {
        let mut it = self.cuda.split('.').filter_map(|p| p.parse::<u32>().ok());
        let major = it.next().unwrap_or(12);
        let minor = it.next().unwrap_or(4);
        major * 1000 + minor * 10
    }

    pub fn site_packages(&self) -> String {
        format!("/usr/local/lib/python{}/dist-packages", self.python)
    }
}

fn closest(
    key: impl Fn(&(&str, &str, &str, &str)) -> Option<Ver>,
    want: Ver,
) -> (&'static str, &'static str, &'static str, &'static str) {
    let score = |v: Ver| {
        let a = i64::from(v.0) * 10_000 + i64::from(v.1) * 100 + i64::from(v.2);
        let b = i64::from(want.0) * 10_000 + i64::from(want.1) * 100 + i64::from(want.2);
        (a - b).abs()
    };
    PAIRS
        .iter()
        .min_by_key(|p| key(p).map_or(i64::MAX, score))
        .copied()
        .unwrap_or(PAIRS[0])
}

/// `ProcessGroupNCCL.cpp` line numbers of one torch release's watchdog lines.
#[derive(Debug, Clone, Copy)]
pub struct C10Lines {
    pub timeout: u32,
    pub exception_detected: u32,
    pub timeout_at: u32,
    pub some_failed: u32,
    pub avoid: u32,
    pub terminated: u32,
    pub check_timeout: u32,
    pub comm_watchdog: u32,
    pub check_errors: u32,
    pub nccl_error_in: u32,
    pub barrier_warning: u32,
}

pub fn c10_lines(torch: Ver) -> C10Lines {
    let t = |a, b, c, d, e, f, g, h, i, j, k| C10Lines {
        timeout: a,
        exception_detected: b,
        timeout_at: c,
        some_failed: d,
        avoid: e,
        terminated: f,
        check_timeout: g,
        comm_watchdog: h,
        check_errors: i,
        nccl_error_in: j,
        barrier_warning: k,
    };
    match (torch.0, torch.1) {
        (1, _) => t(737, 0, 0, 459, 465, 821, 739, 825, 1080, 1269, 3133),
        (2, 0) | (2, 1) => t(475, 0, 0, 489, 495, 916, 477, 920, 1195, 1207, 3421),
        (2, 2) => t(523, 0, 0, 537, 543, 1182, 525, 1186, 1434, 1691, 3709),
        (2, 3) => t(563, 0, 1537, 577, 583, 1414, 565, 1418, 1723, 1970, 3868),
        (2, 4) => t(607, 1664, 1709, 621, 627, 1515, 609, 1521, 1854, 2027, 4016),
        (2, 5) => t(616, 1785, 1834, 630, 636, 1595, 618, 1601, 1993, 2186, 4115),
        (2, 6) => t(632, 1895, 1946, 646, 652, 1683, 634, 1689, 2104, 2315, 4631),
        (2, 7) => t(685, 2027, 2083, 699, 705, 1825, 687, 1831, 2251, 2528, 4805),
        _ => t(704, 2165, 2219, 718, 724, 1946, 706, 1952, 2398, 2691, 5011),
    }
}

/// Source line numbers of the NCCL WARNs the simulator writes, by release.
#[derive(Debug, Clone, Copy)]
pub struct NcclLines {
    pub ib_completion: u32,
    pub ib_async: u32,
    pub ibvwrap: u32,
    pub socket: u32,
    pub bootstrap: u32,
    pub net: u32,
    pub proxy: u32,
    pub proxy_progress: u32,
    pub init: u32,
    pub enqueue: u32,
}

pub fn nccl_lines(v: Ver) -> NcclLines {
    let n = |a, b, c, d, e, f, g, h, i, j| NcclLines {
        ib_completion: a,
        ib_async: b,
        ibvwrap: c,
        socket: d,
        bootstrap: e,
        net: f,
        proxy: g,
        proxy_progress: h,
        init: i,
        enqueue: j,
    };
    match (v.1, v.2) {
        (0..=17, _) => n(1289, 91, 268, 441, 120, 537, 486, 734, 1282, 1103),
        (18, _) => n(1418, 86, 287, 542, 112, 1003, 536, 794, 1317, 1141),
        (19, _) => n(1556, 86, 287, 549, 112, 1036, 671, 849, 1398, 1190),
        (20, _) => n(1696, 83, 298, 551, 112, 1133, 694, 874, 1431, 1221),
        (21 | 22, _) => n(1754, 81, 298, 606, 145, 1220, 732, 909, 1527, 1259),
        (23..=25, _) => n(2010, 85, 302, 633, 186, 1303, 754, 932, 1739, 1306),
        (26 | 27, _) => n(2353, 87, 317, 645, 191, 1377, 781, 955, 1802, 1362),
        _ => n(2401, 91, 331, 666, 203, 1420, 803, 981, 1901, 1420),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_compare() {
        assert_eq!(Ver::parse("2.21.5+cuda12.4"), Some(Ver(2, 21, 5)));
        assert_eq!(Ver::parse("2.5"), Some(Ver(2, 5, 0)));
        assert!(Ver(2, 26, 2).ge(2, 26, 0));
        assert!(Ver(2, 18, 6).lt(2, 19, 0));
        assert_eq!(Ver::parse("x"), None);
    }

    #[test]
    fn explicit_nccl_takes_the_closest_torch() {
        let v = Versions::choose(0, Ver::parse("2.26.2"), None);
        assert_eq!(v.torch, Ver(2, 7, 1));
        assert_eq!(v.nccl_full(), "2.26.2+cuda12.8");
        assert_eq!(v.driver_version(), 12080);
    }
}

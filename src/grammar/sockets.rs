//! Interfaces and networks that never carry traffic between hosts
//! (`[sockets]` in grammars/knowledge.toml).

use std::net::{IpAddr, Ipv4Addr};

use serde::Deserialize;

use super::GrammarError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SocketsSpec {
    #[serde(default)]
    local_only_interfaces: Vec<String>,
    #[serde(default)]
    local_only_network: Vec<NetworkSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSpec {
    cidr: String,
    what: String,
    /// No host has an address in it: a connect fails from every host,
    /// the caller's own included.
    #[serde(default)]
    no_host: bool,
}

/// A network every host has its own copy of (loopback, Docker's bridge):
/// an address in it names no other host.
#[derive(Debug, Clone)]
struct LocalNetwork {
    base: IpAddr,
    prefix: u8,
    what: String,
    no_host: bool,
}

#[derive(Debug, Clone, Default)]
pub struct LocalOnly {
    interface_prefixes: Vec<String>,
    networks: Vec<LocalNetwork>,
}

impl LocalOnly {
    pub(super) fn from_spec(file: &str, spec: SocketsSpec) -> Result<LocalOnly, GrammarError> {
        let networks = spec
            .local_only_network
            .into_iter()
            .map(|n| {
                let (base, prefix) = parse_cidr(&n.cidr).ok_or_else(|| GrammarError::Pattern {
                    file: file.into(),
                    id: n.cidr.clone(),
                    reason: "not an address/prefix-length network".into(),
                })?;
                Ok(LocalNetwork {
                    base,
                    prefix,
                    what: n.what,
                    no_host: n.no_host,
                })
            })
            .collect::<Result<_, GrammarError>>()?;
        Ok(LocalOnly {
            interface_prefixes: spec.local_only_interfaces,
            networks,
        })
    }

    /// Whether NCCL's socket interface `name` stays on its host.
    pub fn interface(&self, name: &str) -> bool {
        self.interface_prefixes.iter().any(|p| name.starts_with(p))
    }

    /// What host-local network `addr` lies in (`Docker's default bridge`).
    pub fn network_of(&self, addr: &str) -> Option<&str> {
        self.network(addr).map(|n| n.what.as_str())
    }

    /// Whether `addr` lies in a network no host has an address in, so a
    /// connect to it fails even from the caller's own host.
    pub fn no_host(&self, addr: &str) -> bool {
        self.network(addr).is_some_and(|n| n.no_host)
    }

    fn network(&self, addr: &str) -> Option<&LocalNetwork> {
        let addr = resolve_literal(addr)?;
        self.networks
            .iter()
            .find(|n| contains(n.base, n.prefix, addr))
    }
}

/// The address a literal names, as the resolver reads it: an IPv6 zone
/// (`fe80::1%ip6tnl0`, NCCL 2.5's bootstrap list) dropped, an IPv4-mapped
/// IPv6 address (`[::ffff:10.0.0.1]`, c10d's) read as the IPv4 one, and a
/// name of digits only read as one 32-bit number, as inet_aton does (a
/// leading 0 makes it octal): MASTER_ADDR=`05` connects to 0.0.0.5.
fn resolve_literal(addr: &str) -> Option<IpAddr> {
    let addr = addr.trim_matches(|c| c == '[' || c == ']');
    let addr = addr.split('%').next()?;
    if !addr.is_empty() && addr.len() <= 11 && addr.bytes().all(|b| b.is_ascii_digit()) {
        let number = match addr.strip_prefix('0').filter(|rest| !rest.is_empty()) {
            Some(octal) => u32::from_str_radix(octal, 8).ok()?,
            None => addr.parse::<u32>().ok()?,
        };
        return Some(IpAddr::V4(Ipv4Addr::from(number)));
    }
    match addr.parse().ok()? {
        IpAddr::V6(v6) => Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)),
        v4 => Some(v4),
    }
}

fn parse_cidr(cidr: &str) -> Option<(IpAddr, u8)> {
    let (base, prefix) = cidr.split_once('/')?;
    let base: IpAddr = base.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let bits = if base.is_ipv4() { 32 } else { 128 };
    (prefix <= bits).then_some((base, prefix))
}

fn contains(base: IpAddr, prefix: u8, addr: IpAddr) -> bool {
    // Compare the leading `prefix` bits, IPv4 widened into the IPv6 width.
    let widen = |a: IpAddr| -> (u128, u32) {
        match a {
            IpAddr::V4(v4) => (u128::from(v4.to_bits()) << 96, 32),
            IpAddr::V6(v6) => (v6.to_bits(), 128),
        }
    };
    let ((b, width), (a, a_width)) = (widen(base), widen(addr));
    if width != a_width {
        return false;
    }
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    };
    b & mask == a & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> LocalOnly {
        let spec: SocketsSpec = toml::from_str(
            r#"
            local_only_interfaces = ["lo", "docker"]
            [[local_only_network]]
            cidr = "172.17.0.0/16"
            what = "Docker's default bridge"
            [[local_only_network]]
            cidr = "fe80::/10"
            what = "IPv6 link-local"
            "#,
        )
        .unwrap();
        LocalOnly::from_spec("test", spec).unwrap()
    }

    #[test]
    fn addresses_fall_in_their_networks_only() {
        let t = table();
        assert_eq!(t.network_of("172.17.0.1"), Some("Docker's default bridge"));
        assert_eq!(
            t.network_of("172.17.255.254"),
            Some("Docker's default bridge")
        );
        assert_eq!(t.network_of("172.18.0.1"), None);
        assert_eq!(t.network_of("10.3.0.11"), None);
        assert_eq!(
            t.network_of("fe80::966d:aeff:fe6d:f6ea"),
            Some("IPv6 link-local")
        );
        assert_eq!(t.network_of("[fe80::1]"), Some("IPv6 link-local"));
        // NCCL 2.5's bootstrap list prints the zone (nccl#529).
        assert_eq!(
            t.network_of("fe80::e866:19ff:fe1e:a688%ip6tnl0"),
            Some("IPv6 link-local")
        );
        assert_eq!(t.network_of("2001:db8::1"), None);
        assert_eq!(t.network_of("node001"), None);
        // c10d prints IPv4 peers mapped into IPv6.
        assert_eq!(
            t.network_of("[::ffff:172.17.0.2]"),
            Some("Docker's default bridge")
        );
        assert!(t.interface("docker0") && t.interface("lo") && !t.interface("ib0"));
    }

    /// open-sora#667's `(6841231, 47389)`, grl#27's `(05, 40323)`: a host
    /// name of digits is a number to the resolver, here in 0.0.0.0/8.
    #[test]
    fn a_name_of_digits_is_read_as_the_number_it_is() {
        let spec: SocketsSpec = toml::from_str(
            "[[local_only_network]]\ncidr = \"0.0.0.0/8\"\nwhat = \"this network\"\nno_host = true\n",
        )
        .unwrap();
        let t = LocalOnly::from_spec("test", spec).unwrap();
        assert_eq!(resolve_literal("6841231"), "0.104.99.143".parse().ok());
        assert_eq!(resolve_literal("05"), "0.0.0.5".parse().ok());
        assert_eq!(resolve_literal("3232235777"), "192.168.1.1".parse().ok());
        assert!(t.no_host("6841231") && t.no_host("[::ffff:0.104.99.143]"));
        assert!(!t.no_host("10.0.0.5") && !t.no_host("node05"));
    }

    #[test]
    fn a_network_that_is_not_one_is_an_error() {
        for cidr in ["172.17.0.0", "172.17.0.0/33", "node/8"] {
            let spec: SocketsSpec = toml::from_str(&format!(
                "[[local_only_network]]\ncidr = \"{cidr}\"\nwhat = \"x\"\n"
            ))
            .unwrap();
            assert!(LocalOnly::from_spec("test", spec).is_err(), "{cidr}");
        }
    }
}

//! Interfaces and networks that never carry traffic between hosts
//! (`[sockets]` in grammars/knowledge.toml).

use std::net::IpAddr;

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
}

/// A network every host has its own copy of (loopback, Docker's bridge):
/// an address in it names no other host.
#[derive(Debug, Clone)]
struct LocalNetwork {
    base: IpAddr,
    prefix: u8,
    what: String,
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
        // An IPv6 link-local address carries its interface as a zone:
        // `fe80::1%ip6tnl0`.
        let addr = addr.trim_matches(|c| c == '[' || c == ']');
        let addr: IpAddr = addr.split('%').next()?.parse().ok()?;
        self.networks
            .iter()
            .find(|n| contains(n.base, n.prefix, addr))
            .map(|n| n.what.as_str())
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
        assert!(t.interface("docker0") && t.interface("lo") && !t.interface("ib0"));
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

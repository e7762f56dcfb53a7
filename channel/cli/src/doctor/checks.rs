//! The checks `diwarp doctor` makes: on each host (the rails diwarp would bind, the kernel's
//! socket-buffer limits, transparent huge pages, the port range) and between hosts (each
//! rail's MTU). Each check reads what it needs as arguments, so that it is tested on values
//! no machine here has.

use std::net::IpAddr;

use diwarp_fi::params::{Config, ParamSource};
use diwarp_fi::ports::PortRange;

use super::wire::{Finding, Hello, Rail};

/// The provider's settings for this host, as a rank here would read them.
pub struct Local {
    pub rails: Vec<Rail>,
    pub range: Option<PortRange>,
    pub findings: Vec<Finding>,
}

/// Where the kernel's limits and the huge-page setting are read.
const RMEM_MAX: &str = "/proc/sys/net/core/rmem_max";
const WMEM_MAX: &str = "/proc/sys/net/core/wmem_max";
const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Every check of this host.
pub fn local(src: &dyn ParamSource) -> Local {
    let config = Config::from_source(src);
    let mut findings = Vec::new();
    let rails = rails(config.iface.as_deref(), &mut findings);
    let range = match config.port_range {
        Ok(r) => r,
        Err(e) => {
            findings.push(Finding::new(
                "port_range",
                format!("{}={e}: no endpoint would open", diwarp_fi::ports::VAR),
                "give the range as LOW-HIGH, e.g. 50000-50099",
            ));
            None
        }
    };
    findings.extend(limits(
        read_number(RMEM_MAX),
        read_number(WMEM_MAX),
        iwarp::verbs::RD_SOCKET_BUFFER as u64,
    ));
    findings.extend(thp(std::fs::read_to_string(THP).ok().as_deref()));
    Local {
        rails,
        range,
        findings,
    }
}

/// The rails the provider's own choice gives (`FI_DIWARP_IFACE`, else its default).
fn rails(iface: Option<&str>, findings: &mut Vec<Finding>) -> Vec<Rail> {
    let up = || diwarp_fi::iface::up_interfaces().join(", ");
    let ips = match diwarp_fi::iface::resolve_rails(iface) {
        Ok(ips) => ips,
        Err(e) => {
            findings.push(Finding::new(
                "iface",
                format!("FI_DIWARP_IFACE={}: {e}", iface.unwrap_or_default()),
                format!(
                    "name interfaces every host has, in one order (this host's: {})",
                    up()
                ),
            ));
            return Vec::new();
        }
    };
    if iface.is_none() && ips.iter().all(IpAddr::is_loopback) {
        findings.push(Finding::new(
            "iface",
            "no interface is up besides loopback: ranks on other hosts cannot reach this one",
            "bring up the cluster's interface, or name it in FI_DIWARP_IFACE",
        ));
    }
    ips.into_iter()
        .map(|ip| {
            let (iface, mtu) = diwarp_fi::iface::interface_of(ip).unzip();
            Rail {
                ip,
                iface,
                mtu: mtu.flatten(),
            }
        })
        .collect()
}

/// The kernel caps what a socket may ask for its buffers at these limits; diwarp asks `want`
/// for each UDP socket's, and a smaller buffer drops bursts that a larger one would hold.
fn limits(rmem: Option<u64>, wmem: Option<u64>, want: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    for (name, have, what) in [("rmem_max", rmem, "receive"), ("wmem_max", wmem, "send")] {
        if let Some(have) = have.filter(|&h| h < want) {
            out.push(Finding::new(
                name,
                format!(
                    "net.core.{name} is {have}, below the {want} bytes diwarp asks for each UDP \
                     socket's {what} buffer: bursts beyond it are dropped and sent again"
                ),
                format!("sysctl -w net.core.{name}={want} (and in /etc/sysctl.d/ to keep it)"),
            ));
        }
    }
    out
}

/// The RC stream's bulk rate is bimodal unless the application's pages are huge
/// (channel/BENCHMARKS.md): only `always` gives them to a program that does not ask.
fn thp(enabled: Option<&str>) -> Vec<Finding> {
    let Some(text) = enabled else {
        return Vec::new();
    };
    let chosen = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    match chosen {
        Some("always") | None => Vec::new(),
        Some(mode) => vec![Finding::new(
            "thp",
            format!(
                "transparent huge pages are '{mode}': bulk transfers over RC connections \
                 (modes rc and hybrid) run at one rate or another from run to run"
            ),
            format!("echo always > {THP} (or have the application madvise its buffers)"),
        )],
    }
}

/// What differs between hosts: the number of rails, and each rail's MTU (datagrams are
/// sized by the sender's MTU, and frames beyond the receiver's are dropped).
pub fn between(hosts: &[(String, Hello)]) -> Vec<Finding> {
    let mut out = Vec::new();
    let with_rails: Vec<&(String, Hello)> =
        hosts.iter().filter(|(_, h)| !h.rails.is_empty()).collect();
    let Some((first, h0)) = with_rails.first() else {
        return out;
    };
    for (name, h) in &with_rails[1..] {
        if h.rails.len() != h0.rails.len() {
            out.push(Finding::new(
                "rails",
                format!(
                    "{first} has {} rails, {name} has {}",
                    h0.rails.len(),
                    h.rails.len()
                ),
                "list the same interfaces, in one order, in FI_DIWARP_IFACE on every host",
            ));
        }
    }
    let rails = with_rails
        .iter()
        .map(|(_, h)| h.rails.len())
        .min()
        .unwrap_or(0);
    for i in 0..rails {
        let mtus: Vec<(&str, &Rail)> = with_rails
            .iter()
            .map(|(n, h)| (n.as_str(), &h.rails[i]))
            .collect();
        if mtus.iter().any(|(_, r)| r.mtu != mtus[0].1.mtu) {
            let each: Vec<String> = mtus
                .iter()
                .map(|(n, r)| {
                    let mtu = r.mtu.map_or("unknown".into(), |m| m.to_string());
                    format!("{n} {} {mtu}", r.iface.as_deref().unwrap_or("?"))
                })
                .collect();
            out.push(Finding::new(
                "mtu",
                format!("rail {i}'s MTU differs between hosts: {}", each.join(", ")),
                "set one MTU on every host's interface of this rail (ip link set DEV mtu N)",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use diwarp_fi::params::{ParamSpec, ParamValue};

    struct Env(Vec<(&'static str, &'static str)>);

    impl ParamSource for Env {
        fn get(&self, spec: &ParamSpec) -> Option<ParamValue> {
            let (_, v) = self.0.iter().find(|(k, _)| *k == spec.env_name())?;
            ParamValue::parse(spec.kind, v)
        }
    }

    fn checks(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.check.as_str()).collect()
    }

    #[test]
    fn the_named_interface_must_exist_and_the_range_be_well_formed() {
        let l = local(&Env(vec![("FI_DIWARP_IFACE", "lo")]));
        assert_eq!(l.rails.len(), 1);
        assert_eq!(l.rails[0].iface.as_deref(), Some("lo"));
        assert!(!checks(&l.findings).contains(&"iface"));
        let l = local(&Env(vec![
            ("FI_DIWARP_IFACE", "no-such-if9"),
            ("FI_DIWARP_PORT_RANGE", "9-1"),
        ]));
        assert!(l.rails.is_empty());
        let iface = l.findings.iter().find(|f| f.check == "iface").unwrap();
        assert!(
            iface.what.contains("no-such-if9") && iface.fix.contains("lo"),
            "{iface:?}"
        );
        let range = l.findings.iter().find(|f| f.check == "port_range").unwrap();
        assert!(
            range.what.contains("FI_DIWARP_PORT_RANGE=\"9-1\""),
            "{range:?}"
        );
        let l = local(&Env(vec![("FI_DIWARP_PORT_RANGE", "50000-50009")]));
        assert_eq!(l.range.map(|r| r.len()), Some(10));
    }

    #[test]
    fn small_kernel_limits_and_thp_not_always_are_findings() {
        let want = 4 << 20;
        assert!(limits(Some(want), Some(8 << 20), want).is_empty());
        assert!(
            limits(None, None, want).is_empty(),
            "unreadable: nothing to say"
        );
        let f = limits(Some(212992), Some(want), want);
        assert_eq!(checks(&f), ["rmem_max"]);
        assert!(f[0].what.contains("212992") && f[0].fix.contains("net.core.rmem_max=4194304"));
        assert_eq!(
            checks(&limits(Some(1), Some(1), want)),
            ["rmem_max", "wmem_max"]
        );
        assert!(thp(Some("[always] madvise never\n")).is_empty());
        assert!(thp(None).is_empty());
        for mode in ["always [madvise] never", "always madvise [never]"] {
            let f = thp(Some(mode));
            assert_eq!(checks(&f), ["thp"], "{mode}");
            assert!(f[0].fix.contains("echo always >"));
        }
    }

    fn hello(mtus: &[u32]) -> Hello {
        Hello {
            hostname: "h".into(),
            rails: mtus
                .iter()
                .map(|&m| Rail {
                    ip: "10.0.0.1".parse().unwrap(),
                    iface: Some("dw0".into()),
                    mtu: Some(m),
                })
                .collect(),
            udp_port: None,
            tcp_port: None,
            findings: Vec::new(),
        }
    }

    #[test]
    fn hosts_must_agree_on_rails_and_mtus() {
        let same = [("a".into(), hello(&[1500])), ("b".into(), hello(&[1500]))];
        assert!(between(&same).is_empty());
        let f = between(&[("a".into(), hello(&[9000])), ("b".into(), hello(&[1500]))]);
        assert_eq!(checks(&f), ["mtu"]);
        assert!(f[0].what.contains("a dw0 9000, b dw0 1500"), "{:?}", f[0]);
        let f = between(&[
            ("a".into(), hello(&[1500, 1500])),
            ("b".into(), hello(&[1500])),
        ]);
        assert_eq!(checks(&f), ["rails"]);
        let none = [("a".into(), hello(&[])), ("b".into(), hello(&[1500]))];
        assert!(
            between(&none).is_empty(),
            "a host without rails has its own finding"
        );
    }
}

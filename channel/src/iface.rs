//! Which local IP addresses an endpoint binds to (`FI_DIWARP_IFACE`): one per rail.

use std::net::{IpAddr, Ipv4Addr};

use nix::ifaddrs::getifaddrs;
use nix::net::if_::InterfaceFlags;

use crate::addr::MAX_RAILS;

/// Resolves `FI_DIWARP_IFACE`, a comma-separated list of rails (interfaces or addresses), in
/// order: an endpoint's rail `i` talks to its peers' rail `i`. Unset: one rail, as [`resolve`].
pub fn resolve_rails(iface: Option<&str>) -> Result<Vec<IpAddr>, String> {
    let Some(list) = iface.filter(|s| s.contains(',')) else {
        return resolve(iface).map(|ip| vec![ip]);
    };
    let mut ips = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("{list:?}: an empty rail"));
        }
        let ip = resolve(Some(item))?;
        if ips.contains(&ip) {
            return Err(format!("{list:?}: {item} ({ip}) is listed twice"));
        }
        ips.push(ip);
    }
    if ips.len() > MAX_RAILS {
        return Err(format!(
            "{list:?}: {} rails, at most {MAX_RAILS}",
            ips.len()
        ));
    }
    Ok(ips)
}

/// Resolves one rail of `FI_DIWARP_IFACE`: an IP address is taken as is, anything else names an interface
/// (its first IPv4 address, else its first IPv6 one). Unset: the first interface that is up and
/// not loopback, so ranks on different hosts can reach each other; loopback if there is none.
pub fn resolve(iface: Option<&str>) -> Result<IpAddr, String> {
    if let Some(s) = iface {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(ip);
        }
    }
    let addrs: Vec<(String, InterfaceFlags, IpAddr)> = getifaddrs()
        .map_err(|e| format!("getifaddrs: {e}"))?
        .filter_map(|a| {
            let sa = a.address?;
            let ip = sa
                .as_sockaddr_in()
                .map(|s| IpAddr::V4(s.ip()))
                .or_else(|| sa.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())))?;
            Some((a.interface_name, a.flags, ip))
        })
        .collect();
    let pick = |want: &dyn Fn(&(String, InterfaceFlags, IpAddr)) -> bool| {
        let v4 = addrs.iter().find(|a| want(a) && a.2.is_ipv4());
        v4.or_else(|| addrs.iter().find(|a| want(a))).map(|a| a.2)
    };
    match iface {
        Some(name) => pick(&|a| a.0 == name).ok_or_else(|| format!("no interface {name:?}")),
        None => Ok(pick(&|a| {
            let up = a.1.contains(InterfaceFlags::IFF_UP);
            let lo = a.1.contains(InterfaceFlags::IFF_LOOPBACK);
            // IPv6 link-local addresses need a scope the name does not carry.
            let link_local = matches!(a.2, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
            up && !lo && !link_local
        })
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))),
    }
}

/// The interface that holds `ip`, and that interface's MTU where this host can tell (`None`:
/// no interface of this host has the address).
pub fn interface_of(ip: IpAddr) -> Option<(String, Option<u32>)> {
    let name = getifaddrs().ok().and_then(|mut all| {
        all.find(|a| {
            a.address.as_ref().is_some_and(|sa| {
                sa.as_sockaddr_in().map(|s| IpAddr::V4(s.ip())) == Some(ip)
                    || sa.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())) == Some(ip)
            })
        })
        .map(|a| a.interface_name)
    });
    // All of 127/8 is this host's loopback, though lo lists only 127.0.0.1.
    let name = name.or_else(|| {
        let lo =
            |a: &nix::ifaddrs::InterfaceAddress| a.flags.contains(InterfaceFlags::IFF_LOOPBACK);
        ip.is_loopback()
            .then(|| getifaddrs().ok()?.find(lo).map(|a| a.interface_name))
            .flatten()
    })?;
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()
        .and_then(|m| m.trim().parse().ok());
    Some((name, mtu))
}

/// The names of this host's interfaces that are up, for messages that suggest one.
pub fn up_interfaces() -> Vec<String> {
    let mut names: Vec<String> = getifaddrs()
        .map(|all| {
            all.filter(|a| a.flags.contains(InterfaceFlags::IFF_UP))
                .map(|a| a.interface_name)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// A rail as `diwarp info` shows it: the interface that holds its address, and that
/// interface's MTU, where this host can tell.
pub fn describe(ip: IpAddr) -> String {
    match interface_of(ip) {
        None => format!("{ip} (on no interface of this host)"),
        Some((name, Some(m))) => format!("{ip} on {name}, MTU {m}"),
        Some((name, None)) => format!("{ip} on {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_addresses_and_loopback() {
        assert_eq!(
            resolve(Some("127.0.0.1")),
            Ok(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        assert_eq!(resolve(Some("::1")), Ok("::1".parse().unwrap()));
        assert_eq!(resolve(Some("lo")), Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(resolve(Some("no-such-if0")).is_err());
        assert!(resolve(None).is_ok());
    }

    #[test]
    fn rails_are_listed_in_order() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(resolve_rails(Some("lo")), Ok(vec![lo]));
        assert_eq!(
            resolve_rails(Some("127.0.0.2, lo")),
            Ok(vec!["127.0.0.2".parse().unwrap(), lo])
        );
        for bad in [
            "lo,",
            "lo,127.0.0.1",
            "lo,no-such-if0",
            "::1,::2,::3,::4,::5",
        ] {
            assert!(resolve_rails(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(resolve_rails(None).map(|v| v.len()), Ok(1));
        assert!(
            describe(lo).starts_with("127.0.0.1 on lo"),
            "{}",
            describe(lo)
        );
        assert!(describe("192.0.2.9".parse().unwrap()).contains("no interface"));
        let (name, mtu) = interface_of(lo).unwrap();
        assert!(mtu.is_some_and(|m| m >= 1280), "{name} {mtu:?}");
        assert!(up_interfaces().contains(&name));
    }
}

//! Which local IP address an endpoint binds to (`FI_DIWARP_IFACE`).

use std::net::{IpAddr, Ipv4Addr};

use nix::ifaddrs::getifaddrs;
use nix::net::if_::InterfaceFlags;

/// Resolves `FI_DIWARP_IFACE`: an IP address is taken as is, anything else names an interface
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
}

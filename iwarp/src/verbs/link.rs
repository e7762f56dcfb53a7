//! What the link under a UDP socket carries without IP fragmentation.
//!
//! A datagram larger than the link's MTU leaves as IP fragments: losing any one fragment loses
//! the whole datagram (45 fragments for 64 KiB on a 1500-byte Ethernet), and the receiving
//! kernel holds partial datagrams in a small reassembly budget. RD therefore cuts datagrams to
//! the MTU of the interface its socket is bound to, and lets UDP segmentation offload (GSO)
//! keep the per-datagram cost low.

use std::net::IpAddr;

use nix::ifaddrs::getifaddrs;
use nix::net::if_::InterfaceFlags;

use super::io;

/// IPv4 header without options plus the UDP header.
const V4_HEADERS: usize = 20 + 8;
/// IPv6 header plus the UDP header.
const V6_HEADERS: usize = 40 + 8;

/// The largest UDP payload that leaves `local` unfragmented: the MTU of the interface holding
/// that address, less the IP and UDP headers. A socket bound to the unspecified address may
/// leave by any interface that is up, so it gets the smallest of theirs. `None` if no matching
/// interface or MTU is found.
pub(crate) fn udp_payload_limit(local: IpAddr) -> Option<usize> {
    let local = local.to_canonical();
    let headers = if local.is_ipv4() {
        V4_HEADERS
    } else {
        V6_HEADERS
    };
    let names = interface_names(local)?;
    let mtu = names
        .iter()
        .filter_map(|n| interface_mtu(n))
        // Links too small for IP (CAN, some tunnels) carry nothing of ours.
        .filter(|&m| m >= MIN_IP_MTU)
        .min()?;
    mtu.checked_sub(headers)
}

/// The smallest datagram every IPv4 host must accept (RFC 791); IPv6 links carry 1280.
const MIN_IP_MTU: usize = 576;

/// Interfaces that can carry a socket bound to `local`.
fn interface_names(local: IpAddr) -> Option<Vec<String>> {
    let mut names: Vec<String> = getifaddrs()
        .ok()?
        .filter(|a| {
            if local.is_unspecified() {
                return a.flags.contains(InterfaceFlags::IFF_UP);
            }
            let ip = a.address.as_ref().and_then(io::to_std).map(|s| s.ip());
            ip == Some(local)
        })
        // An address added with a label (`ip addr add ... label eth0:1`) is listed under
        // the label; the MTU is the device's.
        .map(|a| match a.interface_name.split_once(':') {
            Some((device, _)) => device.to_string(),
            None => a.interface_name,
        })
        .collect();
    names.sort();
    names.dedup();
    (!names.is_empty()).then_some(names)
}

/// The interface's MTU as sysfs shows it (`ip netns exec` mounts the namespace's own).
fn interface_mtu(name: &str) -> Option<usize> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn loopback_carries_the_largest_datagram() {
        // Linux's loopback MTU is 65536 (older kernels: 16436); either way above 16 KiB.
        let v4 = udp_payload_limit(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("lo has an MTU");
        assert!(v4 > 16_000, "{v4}");
        assert_eq!(interface_mtu("lo"), Some(v4 + V4_HEADERS));
    }

    #[test]
    fn unknown_addresses_and_names_give_none() {
        assert_eq!(
            udp_payload_limit(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77))),
            None
        );
        assert_eq!(
            udp_payload_limit(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9))),
            None
        );
        assert_eq!(interface_mtu("../lo"), None);
        assert_eq!(interface_mtu("no-such-if0"), None);
    }

    #[test]
    fn a_v4_mapped_address_is_its_v4_address() {
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(
            udp_payload_limit(mapped),
            udp_payload_limit(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }

    #[test]
    fn the_unspecified_address_takes_the_smallest_mtu_of_the_interfaces_up() {
        let any = udp_payload_limit(IpAddr::V4(Ipv4Addr::UNSPECIFIED)).expect("lo is up");
        let lo = udp_payload_limit(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        assert!(any <= lo);
    }
}

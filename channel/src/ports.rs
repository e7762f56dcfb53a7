//! `FI_DIWARP_PORT_RANGE`: the local ports an endpoint's listening sockets take, so that a
//! host firewall need open only that range. An endpoint listens on one UDP socket per rail
//! (datagrams) and one TCP listener on its first rail (RC connections; none in ud mode); what
//! it connects out from (RC connections, per-peer UDP sockets) keeps the kernel's ephemeral
//! source ports, as flows the host began.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};

/// The environment variable, as messages name it.
pub const VAR: &str = "FI_DIWARP_PORT_RANGE";

/// Ports `low..=high`, neither 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.low, self.high)
    }
}

/// Why no socket was bound.
#[derive(Debug)]
pub enum BindError {
    /// Every port of the range is taken (for this protocol on this address).
    Exhausted {
        range: PortRange,
        what: &'static str,
    },
    /// The kernel refused for another reason (no such address, permission).
    Os(io::Error),
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::Exhausted { range, what } => write!(
                f,
                "{VAR}={range}: every port in the range is in use for a {what} (widen the \
                 range: each rank needs one UDP port per rail and one TCP port)"
            ),
            BindError::Os(e) => write!(f, "{e}"),
        }
    }
}

impl BindError {
    /// The errno a caller can hand on.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            BindError::Exhausted { .. } => Some(libc::EADDRINUSE),
            BindError::Os(e) => e.raw_os_error(),
        }
    }
}

impl PortRange {
    /// `LOW-HIGH` (or one port, `PORT`); empty or blank: no range. Errors say what is wrong
    /// with the value.
    pub fn parse(s: &str) -> Result<Option<PortRange>, String> {
        let t = s.trim();
        if t.is_empty() {
            return Ok(None);
        }
        let port = |p: &str| -> Result<u16, String> {
            match p.trim().parse::<u16>() {
                Ok(0) => Err("port 0 is not a port (ranges are 1-65535)".into()),
                Ok(n) => Ok(n),
                Err(_) => Err(format!(
                    "{p:?} is not a port number (1-65535); the form is LOW-HIGH, e.g. 50000-50099"
                )),
            }
        };
        let (low, high) = match t.split_once('-') {
            Some((l, h)) => (port(l)?, port(h)?),
            None => {
                let p = port(t)?;
                (p, p)
            }
        };
        if low > high {
            return Err("the low end is above the high end".into());
        }
        Ok(Some(PortRange { low, high }))
    }

    pub fn len(&self) -> usize {
        usize::from(self.high - self.low) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.low..=self.high).contains(&port)
    }

    /// The range's ports, from a random one on and around: ranks that start together on a
    /// host try different ports first instead of all racing for the lowest.
    fn ports(&self) -> impl Iterator<Item = u16> {
        let len = self.len();
        let start = (RandomState::new().hash_one(std::process::id()) as usize) % len;
        let low = self.low;
        (0..len).map(move |i| low + ((start + i) % len) as u16)
    }
}

/// Binds within `range` (any port when `None`) with `bind`, trying the next port while one
/// is taken.
fn bind_in<T>(
    range: Option<PortRange>,
    ip: IpAddr,
    what: &'static str,
    bind: impl Fn(SocketAddr) -> io::Result<T>,
) -> Result<T, BindError> {
    let Some(range) = range else {
        return bind(SocketAddr::new(ip, 0)).map_err(BindError::Os);
    };
    for port in range.ports() {
        match bind(SocketAddr::new(ip, port)) {
            Ok(s) => return Ok(s),
            // EACCES: a port below 1024 without the privilege; the rest of the range may do.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied
                ) => {}
            Err(e) => return Err(BindError::Os(e)),
        }
    }
    Err(BindError::Exhausted { range, what })
}

/// A UDP socket on `ip`, its port in `range`.
pub fn bind_udp(range: Option<PortRange>, ip: IpAddr) -> Result<UdpSocket, BindError> {
    bind_in(range, ip, "UDP socket", UdpSocket::bind)
}

/// A TCP listener on `ip`, its port in `range`.
pub fn listen_tcp(range: Option<PortRange>, ip: IpAddr) -> Result<TcpListener, BindError> {
    bind_in(range, ip, "TCP listener", TcpListener::bind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    /// A range of `n` ports free for both protocols when looked at.
    fn free_range(n: u16) -> PortRange {
        for low in (20000..60000).step_by(97) {
            let r = PortRange {
                low,
                high: low + n - 1,
            };
            let free = (r.low..=r.high)
                .all(|p| UdpSocket::bind((LO, p)).is_ok() && TcpListener::bind((LO, p)).is_ok());
            if free {
                return r;
            }
        }
        panic!("no {n} free ports on loopback");
    }

    #[test]
    fn ranges_are_parsed_and_bad_ones_said_why() {
        assert_eq!(
            PortRange::parse("50000-50099"),
            Ok(Some(PortRange {
                low: 50000,
                high: 50099
            }))
        );
        assert_eq!(
            PortRange::parse(" 7000 - 7000 "),
            Ok(Some(PortRange {
                low: 7000,
                high: 7000
            }))
        );
        assert_eq!(
            PortRange::parse("7000").map(|r| r.map(|r| r.len())),
            Ok(Some(1))
        );
        assert_eq!(PortRange::parse(""), Ok(None));
        for (bad, why) in [
            ("50099-50000", "the low end is above the high end"),
            ("0-10", "port 0"),
            ("1-65536", "\"65536\" is not a port number"),
            ("a-b", "\"a\" is not a port number"),
            ("5000-", "\"\" is not a port number"),
            ("-5000", "\"\" is not a port number"),
            ("1-2-3", "\"2-3\" is not a port number"),
            ("5000:6000", "the form is LOW-HIGH"),
        ] {
            let e = PortRange::parse(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn sockets_bind_inside_the_range_until_it_is_exhausted() {
        let r = free_range(3);
        let mut udp = Vec::new();
        let mut tcp = Vec::new();
        for _ in 0..3 {
            let u = bind_udp(Some(r), LO).unwrap();
            let t = listen_tcp(Some(r), LO).unwrap();
            assert!(r.contains(u.local_addr().unwrap().port()));
            assert!(r.contains(t.local_addr().unwrap().port()));
            udp.push(u);
            tcp.push(t);
        }
        let mut ports: Vec<u16> = udp.iter().map(|u| u.local_addr().unwrap().port()).collect();
        ports.sort_unstable();
        assert_eq!(ports, [r.low, r.low + 1, r.high], "each port once");
        let e = bind_udp(Some(r), LO).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("FI_DIWARP_PORT_RANGE={r}")) && msg.contains("UDP socket"),
            "{msg}"
        );
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
        let e = listen_tcp(Some(r), LO).unwrap_err().to_string();
        assert!(e.contains("TCP listener") && e.contains("in use"), "{e}");
        drop(udp.pop());
        let again = bind_udp(Some(r), LO).unwrap();
        assert!(
            r.contains(again.local_addr().unwrap().port()),
            "a freed port is taken again"
        );
    }

    #[test]
    fn no_range_takes_an_ephemeral_port_and_bad_addresses_are_the_kernels_error() {
        assert!(bind_udp(None, LO).unwrap().local_addr().unwrap().port() != 0);
        let r = free_range(2);
        let foreign: IpAddr = "192.0.2.7".parse().unwrap();
        match bind_udp(Some(r), foreign) {
            Err(BindError::Os(e)) => assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable),
            other => panic!("{other:?}"),
        }
    }
}

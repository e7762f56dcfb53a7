//! The endpoint name: what `fi_getname` returns, MPI exchanges out of band and `fi_av_insert`
//! takes back. Fixed length (MPI packs names back to back) and self-describing (it carries a
//! version, how many rails it names and each rail's address family), exactly `FI_NAME_MAX`
//! (64) bytes: room for four IPv4 rails or two IPv6 ones.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `d1 57` ("diwarp"), then the format version.
const MAGIC: [u8; 2] = [0xd1, 0x57];
/// Raised with every change to what ranks send each other that an older build would misread
/// (3: pushed rendezvous chunks, which a build of version 2 refuses as malformed while its
/// sender waits for an answer that never comes; 4: the per-peer header in front of every
/// message; 5: the name carries every rail, and the per-peer header says whether its sender
/// knows the receiver's name). Ranks of two builds then fail at `fi_av_insert`, saying why,
/// instead of hanging.
const VERSION: u8 = 5;

/// Rails a name has room for (and an endpoint may have).
pub const MAX_RAILS: usize = 4;

/// Why bytes are not a diwarp endpoint name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{0} bytes, not {len}", len = EpName::LEN)]
    Length(usize),
    #[error("not a diwarp endpoint name")]
    Foreign,
    #[error(
        "the name of a diwarp build that speaks protocol version {0}, and this one speaks \
         {VERSION}: every rank must load the same libdiwarp-fi.so"
    )]
    Version(u8),
    #[error("unknown address family {0}")]
    Family(u8),
    #[error("UDP port 0")]
    Port,
    #[error("{0} rails, and a name holds 1 to {MAX_RAILS}")]
    Rails(u8),
    #[error("the rails' addresses do not fit in a name ({MAX_RAILS} IPv4 or 2 IPv6 at most)")]
    TooLong,
}

/// One rail of an endpoint: the address its UDP socket is bound to and the TCP port its
/// listener accepts RC connections on (0 while it has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RailAddr {
    pub ip: IpAddr,
    pub udp_port: u16,
    pub tcp_port: u16,
}

impl RailAddr {
    pub fn udp_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.udp_port)
    }
}

/// The rails after the first, in order; `None` past the last. Rails pair by position: a rank's
/// rail `i` talks to its peers' rail `i`, so every host lists its interfaces in one order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MoreRails(pub [Option<RailAddr>; MAX_RAILS - 1]);

impl MoreRails {
    /// A name of one rail.
    pub const NONE: MoreRails = MoreRails([None; MAX_RAILS - 1]);

    pub fn from_slice(rails: &[RailAddr]) -> MoreRails {
        let mut m = MoreRails::NONE;
        for (to, r) in m.0.iter_mut().zip(rails) {
            *to = Some(*r);
        }
        m
    }

    pub fn iter(&self) -> impl Iterator<Item = RailAddr> + '_ {
        self.0.iter().map_while(|r| *r)
    }

    pub fn is_empty(&self) -> bool {
        self.0[0].is_none()
    }
}

/// An endpoint's address: its first rail's UDP socket (where every peer starts) and TCP
/// listener, the number of the queue pair behind its sockets (datagrams name their
/// destination queue pair; every rail's queue pair has this number), a nonce that tells two
/// incarnations of an endpoint on the same address apart, so a restarted rank is never mistaken
/// for its predecessor, and its other rails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpName {
    pub ip: IpAddr,
    pub udp_port: u16,
    pub qpn: u32,
    pub tcp_port: u16,
    pub nonce: u64,
    pub more: MoreRails,
}

/// Bytes of a rail in the name: family, address, UDP port, TCP port.
fn rail_len(ip: &IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => 1 + 4 + 4,
        IpAddr::V6(_) => 1 + 16 + 4,
    }
}

/// Bytes before the first rail: magic, version, rail count, nonce, queue pair number.
const HEAD: usize = 16;

impl EpName {
    /// Bytes on the wire: magic (2), version (1), rails (1), nonce (8), QP number (4), then
    /// per rail its family (1: 4 or 6), address (4 or 16), UDP port (2) and TCP port (2), zeros
    /// after the last. Integers big-endian.
    pub const LEN: usize = 64;

    pub fn udp_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.udp_port)
    }

    /// Rail `i`'s address, the first from the flat fields.
    pub fn rail(&self, i: usize) -> Option<RailAddr> {
        match i {
            0 => Some(RailAddr {
                ip: self.ip,
                udp_port: self.udp_port,
                tcp_port: self.tcp_port,
            }),
            _ => self.more.0.get(i - 1).copied().flatten(),
        }
    }

    pub fn rails(&self) -> impl Iterator<Item = RailAddr> + '_ {
        (0..MAX_RAILS).map_while(|i| self.rail(i))
    }

    pub fn rail_count(&self) -> usize {
        1 + self.more.iter().count()
    }

    /// Whether the name's rails fit in [`EpName::LEN`] bytes.
    pub fn fits(&self) -> bool {
        HEAD + self.rails().map(|r| rail_len(&r.ip)).sum::<usize>() <= Self::LEN
    }

    /// The name's bytes; a name whose rails do not fit ([`EpName::fits`]) loses its last ones.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[4..12].copy_from_slice(&self.nonce.to_be_bytes());
        b[12..16].copy_from_slice(&self.qpn.to_be_bytes());
        let mut at = HEAD;
        let mut n = 0;
        for r in self.rails() {
            let len = rail_len(&r.ip);
            if at + len > Self::LEN {
                break;
            }
            let ip_len = match r.ip {
                IpAddr::V4(a) => {
                    b[at] = 4;
                    b[at + 1..at + 5].copy_from_slice(&a.octets());
                    4
                }
                IpAddr::V6(a) => {
                    b[at] = 6;
                    b[at + 1..at + 17].copy_from_slice(&a.octets());
                    16
                }
            };
            let ports = at + 1 + ip_len;
            b[ports..ports + 2].copy_from_slice(&r.udp_port.to_be_bytes());
            b[ports + 2..ports + 4].copy_from_slice(&r.tcp_port.to_be_bytes());
            at += len;
            n += 1;
        }
        b[3] = n;
        b
    }

    /// Parses a name, refusing anything this build did not produce (wrong length, magic,
    /// version, rail count, family, a zero UDP port, or bytes after the last rail).
    pub fn decode(b: &[u8]) -> Result<EpName, NameError> {
        // Magic and version first: another version's name may have another length.
        if b.get(..2) != Some(&MAGIC[..]) {
            return Err(NameError::Foreign);
        }
        match b.get(2) {
            Some(&VERSION) => {}
            Some(&v) => return Err(NameError::Version(v)),
            None => return Err(NameError::Length(b.len())),
        }
        let b: &[u8; Self::LEN] = b.try_into().map_err(|_| NameError::Length(b.len()))?;
        let n = b[3];
        if n == 0 || usize::from(n) > MAX_RAILS {
            return Err(NameError::Rails(n));
        }
        let mut rails = [None; MAX_RAILS];
        let mut at = HEAD;
        for rail in rails.iter_mut().take(usize::from(n)) {
            let ip_len = match b[at] {
                4 => 4,
                6 => 16,
                f => return Err(NameError::Family(f)),
            };
            let end = at + 1 + ip_len + 4;
            let Some(r) = b.get(at + 1..end) else {
                return Err(NameError::TooLong);
            };
            let ip = match ip_len {
                4 => IpAddr::V4(Ipv4Addr::new(r[0], r[1], r[2], r[3])),
                _ => IpAddr::V6(Ipv6Addr::from(*r.first_chunk::<16>().expect("16 bytes"))),
            };
            let udp_port = u16::from_be_bytes([r[ip_len], r[ip_len + 1]]);
            if udp_port == 0 {
                return Err(NameError::Port);
            }
            let tcp_port = u16::from_be_bytes([r[ip_len + 2], r[ip_len + 3]]);
            *rail = Some(RailAddr {
                ip,
                udp_port,
                tcp_port,
            });
            at = end;
        }
        if b[at..].iter().any(|&x| x != 0) {
            return Err(NameError::Foreign);
        }
        let first = rails[0].expect("one rail at least");
        let mut more = MoreRails::NONE;
        more.0.copy_from_slice(&rails[1..]);
        Ok(EpName {
            ip: first.ip,
            udp_port: first.udp_port,
            qpn: u32::from_be_bytes(*b[12..16].first_chunk().expect("4 bytes")),
            tcp_port: first.tcp_port,
            nonce: u64::from_be_bytes(*b[4..12].first_chunk().expect("8 bytes")),
            more,
        })
    }
}

/// `fi_av_straddr`'s form: `diwarp://<ip>:<udp>/<qpn>/<tcp>#<nonce>`, each further rail as
/// `+<ip>:<udp>/<tcp>` before the nonce.
impl fmt::Display for EpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "diwarp://{}/{}/{}",
            self.udp_addr(),
            self.qpn,
            self.tcp_port
        )?;
        for r in self.more.iter() {
            write!(f, "+{}/{}", r.udp_addr(), r.tcp_port)?;
        }
        write!(f, "#{:016x}", self.nonce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rail(ip: &str, udp_port: u16, tcp_port: u16) -> RailAddr {
        RailAddr {
            ip: ip.parse().unwrap(),
            udp_port,
            tcp_port,
        }
    }

    fn names() -> [EpName; 4] {
        let one = EpName {
            ip: "10.1.2.3".parse().unwrap(),
            udp_port: 40000,
            qpn: 7,
            tcp_port: 0,
            nonce: 0x0123_4567_89ab_cdef,
            more: MoreRails::NONE,
        };
        let v6 = EpName {
            ip: "fd00::1".parse().unwrap(),
            udp_port: 1,
            qpn: u32::MAX,
            tcp_port: 65535,
            nonce: u64::MAX,
            more: MoreRails::NONE,
        };
        let four = EpName {
            more: MoreRails::from_slice(&[
                rail("10.1.3.3", 2, 3),
                rail("10.1.4.3", 4, 0),
                rail("10.1.5.3", 65535, 9),
            ]),
            ..one
        };
        let two_v6 = EpName {
            more: MoreRails::from_slice(&[rail("fd01::2", 5, 6)]),
            ..v6
        };
        [one, v6, four, two_v6]
    }

    #[test]
    fn round_trip() {
        for n in names() {
            assert!(n.fits());
            let b = n.encode();
            assert_eq!(b.len(), EpName::LEN);
            assert_eq!(EpName::decode(&b), Ok(n));
            assert_eq!(n.rails().count(), n.rail_count());
        }
        assert_eq!(names()[2].rail_count(), 4);
        assert_eq!(names()[2].rail(3), Some(rail("10.1.5.3", 65535, 9)));
        assert_eq!(names()[2].rail(4), None);
    }

    #[test]
    fn rails_that_do_not_fit_are_refused() {
        let [_, v6, ..] = names();
        let three_v6 = EpName {
            more: MoreRails::from_slice(&[rail("fd01::2", 5, 6), rail("fd02::2", 7, 8)]),
            ..v6
        };
        assert!(!three_v6.fits());
        // Encoding keeps what fits, and says so in the count.
        let kept = EpName::decode(&three_v6.encode()).unwrap();
        assert_eq!(kept.rail_count(), 2);
    }

    #[test]
    fn foreign_bytes_are_refused() {
        let good = names()[0].encode();
        assert_eq!(EpName::decode(&good[..63]), Err(NameError::Length(63)));
        assert_eq!(EpName::decode(&good[..2]), Err(NameError::Length(2)));
        assert_eq!(EpName::decode(&[0xd1]), Err(NameError::Foreign));
        // Another version's name of another length still says which version it is.
        let mut older = good[..36].to_vec();
        older[2] = 4;
        assert_eq!(EpName::decode(&older), Err(NameError::Version(4)));
        assert_eq!(EpName::decode(&[0u8; EpName::LEN]), Err(NameError::Foreign));
        // Magic, version, rail counts, family, stray bytes after the last rail.
        for (i, v, e) in [
            (0, 0u8, NameError::Foreign),
            (2, 2, NameError::Version(2)),
            (3, 0, NameError::Rails(0)),
            (3, 5, NameError::Rails(5)),
            (3, 2, NameError::Family(0)),
            (16, 5, NameError::Family(5)),
            (40, 1, NameError::Foreign),
        ] {
            let mut b = good;
            b[i] = v;
            assert_eq!(EpName::decode(&b), Err(e), "byte {i}");
        }
        let mut b = good;
        b[21..23].fill(0);
        assert_eq!(EpName::decode(&b), Err(NameError::Port), "port 0");
        // Two IPv6 rails claimed where one and a half fit.
        let mut b = names()[3].encode();
        b[3] = 3;
        b[58] = 6;
        assert_eq!(EpName::decode(&b), Err(NameError::TooLong));
        // What a user reads when two builds meet.
        let why = NameError::Version(4).to_string();
        assert!(
            why.contains("version 4") && why.contains("speaks 5"),
            "{why}"
        );
    }

    #[test]
    fn display() {
        assert_eq!(
            names()[0].to_string(),
            "diwarp://10.1.2.3:40000/7/0#0123456789abcdef"
        );
        assert_eq!(
            names()[3].to_string(),
            "diwarp://[fd00::1]:1/4294967295/65535+[fd01::2]:5/6#ffffffffffffffff"
        );
    }
}

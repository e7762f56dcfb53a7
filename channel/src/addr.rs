//! The endpoint name: what `fi_getname` returns, MPI exchanges out of band and `fi_av_insert`
//! takes back. Fixed length (MPI packs names back to back) and self-describing (it carries a
//! version and its own address family), well under `FI_NAME_MAX` (64).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `d1 57` ("diwarp"), then the format version.
const MAGIC: [u8; 2] = [0xd1, 0x57];
/// Raised with every change to what ranks send each other that an older build would misread
/// (3: pushed rendezvous chunks, which a build of version 2 refuses as malformed while its
/// sender waits for an answer that never comes; 4: the per-peer header in front of every
/// message). Ranks of two builds then fail at
/// `fi_av_insert`, saying why, instead of hanging.
const VERSION: u8 = 4;

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
}

/// An endpoint's address: the UDP socket every peer starts on, the number of the queue pair
/// behind it (datagrams name their destination queue pair), the TCP port an RC connection is
/// accepted on (0 until that path exists), and a nonce that tells two incarnations of an
/// endpoint on the same address apart, so a restarted rank is never mistaken for its predecessor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpName {
    pub ip: IpAddr,
    pub udp_port: u16,
    pub qpn: u32,
    pub tcp_port: u16,
    pub nonce: u64,
}

impl EpName {
    /// Bytes on the wire: magic (2), version (1), family (1), UDP port (2), TCP port (2),
    /// address (16; IPv4 in the first 4), nonce (8), QP number (4). Integers big-endian.
    pub const LEN: usize = 36;

    pub fn udp_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.udp_port)
    }

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        match self.ip {
            IpAddr::V4(a) => {
                b[3] = 4;
                b[8..12].copy_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                b[3] = 6;
                b[8..24].copy_from_slice(&a.octets());
            }
        }
        b[4..6].copy_from_slice(&self.udp_port.to_be_bytes());
        b[6..8].copy_from_slice(&self.tcp_port.to_be_bytes());
        b[24..32].copy_from_slice(&self.nonce.to_be_bytes());
        b[32..36].copy_from_slice(&self.qpn.to_be_bytes());
        b
    }

    /// Parses a name, refusing anything this build did not produce (wrong length, magic,
    /// version, family, or a zero UDP port).
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
        let ip = match b[3] {
            4 if b[12..24].iter().all(|&x| x == 0) => {
                IpAddr::V4(Ipv4Addr::new(b[8], b[9], b[10], b[11]))
            }
            4 => return Err(NameError::Foreign),
            6 => IpAddr::V6(Ipv6Addr::from(*b[8..24].first_chunk().expect("16 bytes"))),
            f => return Err(NameError::Family(f)),
        };
        let udp_port = u16::from_be_bytes([b[4], b[5]]);
        if udp_port == 0 {
            return Err(NameError::Port);
        }
        Ok(EpName {
            ip,
            udp_port,
            qpn: u32::from_be_bytes([b[32], b[33], b[34], b[35]]),
            tcp_port: u16::from_be_bytes([b[6], b[7]]),
            nonce: u64::from_be_bytes(*b[24..32].first_chunk().expect("8 bytes")),
        })
    }
}

/// `fi_av_straddr`'s form: `diwarp://<ip>:<udp>/<qpn>/<tcp>#<nonce>`.
impl fmt::Display for EpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "diwarp://{}/{}/{}#{:016x}",
            self.udp_addr(),
            self.qpn,
            self.tcp_port,
            self.nonce
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> [EpName; 2] {
        [
            EpName {
                ip: "10.1.2.3".parse().unwrap(),
                udp_port: 40000,
                qpn: 7,
                tcp_port: 0,
                nonce: 0x0123_4567_89ab_cdef,
            },
            EpName {
                ip: "fd00::1".parse().unwrap(),
                udp_port: 1,
                qpn: u32::MAX,
                tcp_port: 65535,
                nonce: u64::MAX,
            },
        ]
    }

    #[test]
    fn round_trip() {
        for n in names() {
            let b = n.encode();
            assert_eq!(b.len(), EpName::LEN);
            assert_eq!(EpName::decode(&b), Ok(n));
        }
    }

    #[test]
    fn foreign_bytes_are_refused() {
        let good = names()[0].encode();
        assert_eq!(EpName::decode(&good[..35]), Err(NameError::Length(35)));
        assert_eq!(EpName::decode(&good[..2]), Err(NameError::Length(2)));
        assert_eq!(EpName::decode(&[0xd1]), Err(NameError::Foreign));
        // Another version's name of another length still says which version it is.
        let mut longer = good.to_vec();
        longer[2] = 5;
        longer.push(0);
        assert_eq!(EpName::decode(&longer), Err(NameError::Version(5)));
        assert_eq!(EpName::decode(&[0u8; EpName::LEN]), Err(NameError::Foreign));
        // Magic, version, family, stray bytes after an IPv4 address.
        for (i, v, e) in [
            (0, 0u8, NameError::Foreign),
            (2, 2, NameError::Version(2)),
            (3, 5, NameError::Family(5)),
            (20, 1, NameError::Foreign),
        ] {
            let mut b = good;
            b[i] = v;
            assert_eq!(EpName::decode(&b), Err(e), "byte {i}");
        }
        let mut b = good;
        b[4..6].fill(0);
        assert_eq!(EpName::decode(&b), Err(NameError::Port), "port 0");
        // What a user reads when two builds meet.
        let why = NameError::Version(2).to_string();
        assert!(
            why.contains("version 2") && why.contains("speaks 4"),
            "{why}"
        );
    }

    #[test]
    fn display() {
        assert_eq!(
            names()[0].to_string(),
            "diwarp://10.1.2.3:40000/7/0#0123456789abcdef"
        );
    }
}

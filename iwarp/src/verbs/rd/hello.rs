//! The RD session handshake: HELLO and HELLO-ACK control datagrams, by which two RD queue
//! pairs that know only each other's address handle agree on [`SessionIds`].
//!
//! ```text
//! 0  type     0xE1 HELLO, 0xE2 HELLO-ACK   (reliability datagrams start 0x1_: version 1)
//! 1  flags    0x01: the sender asks for a CRC32c trailer (on both ways if either asks); others 0
//! 2  reserved u16, 0
//! 4  dst_qpn  u32  the queue pair this is for (from the sender's address handle)
//! 8  src_qpn  u32  the sender's queue pair
//! 12 id       u32  session id the sender chose: the receiver stamps it on datagrams to it
//! 16 epoch    u32  the sender's incarnation
//! 20 echo_id  u32  HELLO-ACK: the id of the HELLO answered (HELLO: 0)
//! 24 echo_ep  u32  HELLO-ACK: the epoch of the HELLO answered (HELLO: 0)
//! 28 crc32c   u32  over bytes 0..28, little-endian as iWARP's
//! ```
//!
//! Big-endian fields, 32 bytes. The echo lets the side that said HELLO refuse an answer meant
//! for an earlier incarnation of itself.
//!
//! [`SessionIds`]: reliability::SessionIds

use crate::crc;

pub const HELLO_LEN: usize = 32;
const TYPE_HELLO: u8 = 0xE1;
const TYPE_HELLO_ACK: u8 = 0xE2;
const FLAG_CRC: u8 = 0x01;

/// Whether a datagram's first byte marks it as a control datagram (not a reliability one).
pub(crate) fn is_control(first: u8) -> bool {
    first >> 4 == 0xE
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloKind {
    Hello,
    Ack,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub kind: HelloKind,
    pub checksum: bool,
    pub dst_qpn: u32,
    pub src_qpn: u32,
    pub id: u32,
    pub epoch: u32,
    /// HELLO-ACK: (id, epoch) of the HELLO answered.
    pub echo: (u32, u32),
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Hello {
    pub fn emit(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0] = match self.kind {
            HelloKind::Hello => TYPE_HELLO,
            HelloKind::Ack => TYPE_HELLO_ACK,
        };
        b[1] = if self.checksum { FLAG_CRC } else { 0 };
        for (at, v) in [
            (4, self.dst_qpn),
            (8, self.src_qpn),
            (12, self.id),
            (16, self.epoch),
            (20, self.echo.0),
            (24, self.echo.1),
        ] {
            b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        let c = crc::to_wire(crc::crc32c(&b[..28]));
        b[28..].copy_from_slice(&c);
        b
    }

    /// `None` for anything but an intact HELLO or HELLO-ACK.
    pub fn parse(b: &[u8]) -> Option<Hello> {
        if b.len() != HELLO_LEN || crc::to_wire(crc::crc32c(&b[..28])) != b[28..] {
            return None;
        }
        let kind = match b[0] {
            TYPE_HELLO => HelloKind::Hello,
            TYPE_HELLO_ACK => HelloKind::Ack,
            _ => return None,
        };
        if b[1] & !FLAG_CRC != 0 || b[2] != 0 || b[3] != 0 {
            return None;
        }
        Some(Hello {
            kind,
            checksum: b[1] & FLAG_CRC != 0,
            dst_qpn: be32(b, 4),
            src_qpn: be32(b, 8),
            id: be32(b, 12),
            epoch: be32(b, 16),
            echo: (be32(b, 20), be32(b, 24)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let h = Hello {
            kind: HelloKind::Ack,
            checksum: true,
            dst_qpn: 7,
            src_qpn: 9,
            id: 0xdead_beef,
            epoch: 0x0102_0304,
            echo: (5, 6),
        };
        let b = h.emit();
        assert!(is_control(b[0]));
        assert_eq!(b[12..16], [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Hello::parse(&b), Some(h));
        for i in 0..HELLO_LEN {
            let mut c = b;
            c[i] ^= 0x10;
            assert_eq!(Hello::parse(&c), None, "flip at {i}");
        }
        assert_eq!(Hello::parse(&b[..31]), None);
        // A reliability header's first byte is version 1 in the high nibble.
        assert!(!is_control(0x12));
    }
}

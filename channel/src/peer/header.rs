//! The per-peer header: the first bytes of every message between two endpoints, whatever path
//! carries it, in front of the data path's own header (`data::wire`).
//!
//! ```text
//! 0..4 sequence u32 | 4..8 acknowledged u32 | 8..12 sender's epoch u32 | 12..16 receiver's epoch u32
//! ```
//!
//! The sequence numbers every message to one peer, across paths; the acknowledgement is the
//! last of the peer's messages handed over in order. Epochs are the endpoints' nonces folded
//! to 32 bits: a message for another incarnation of the receiver is dropped, and a new epoch
//! from a sender starts its sequence afresh. Integers are little-endian.

/// Header bytes.
pub const LEN: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerHeader {
    pub seq: u32,
    pub ack: u32,
    pub src_epoch: u32,
    pub dst_epoch: u32,
}

impl PeerHeader {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.ack.to_le_bytes());
        b[8..12].copy_from_slice(&self.src_epoch.to_le_bytes());
        b[12..16].copy_from_slice(&self.dst_epoch.to_le_bytes());
        b
    }

    /// The header and the message behind it; `None` if `b` is shorter than a header.
    pub fn parse(b: &[u8]) -> Option<(PeerHeader, &[u8])> {
        let (h, body) = b.split_first_chunk::<LEN>()?;
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let header = PeerHeader {
            seq: word(0),
            ack: word(4),
            src_epoch: word(8),
            dst_epoch: word(12),
        };
        Some((header, body))
    }
}

/// An endpoint's epoch: its name's nonce folded to the header's 32 bits.
pub fn epoch(nonce: u64) -> u32 {
    (nonce ^ (nonce >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_short_input() {
        let h = PeerHeader {
            seq: 0xdead_beef,
            ack: 7,
            src_epoch: 1,
            dst_epoch: u32::MAX,
        };
        let mut b = h.encode().to_vec();
        b.extend_from_slice(b"body");
        assert_eq!(PeerHeader::parse(&b), Some((h, &b"body"[..])));
        assert_eq!(PeerHeader::parse(&b[..LEN - 1]), None);
        assert_eq!(PeerHeader::parse(&b[..LEN]), Some((h, &b""[..])));
    }

    #[test]
    fn epochs_fold_both_halves() {
        assert_ne!(epoch(1), epoch(1 << 32 | 2));
        assert_eq!(epoch(0x0000_0001_0000_0001), 0);
    }
}

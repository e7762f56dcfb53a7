//! The per-peer header: the first bytes of every message between two endpoints, whatever path
//! carries it, in front of the data path's own header (`data::wire`).
//!
//! ```text
//! 0 flags | 1..4 zero | 4..8 sequence u32 | 8..12 acknowledged u32 | 12..16 sender's epoch u32
//! | 16..20 receiver's epoch u32
//! ```
//!
//! The sequence numbers every message to one peer, across paths; the acknowledgement is the
//! last of the peer's messages handed over in order. Epochs are the endpoints' nonces folded
//! to 32 bits: a message for another incarnation of the receiver is dropped, and a new epoch
//! from a sender starts its sequence afresh. `ACK_NOW` asks the receiver to acknowledge
//! without waiting for a message of its own to carry it; an `ACK_ONLY` message carries nothing
//! else, is not numbered, and has no body. Integers are little-endian.

/// Header bytes.
pub const LEN: usize = 20;

/// Acknowledge promptly.
pub const ACK_NOW: u8 = 1;
/// An acknowledgement alone.
pub const ACK_ONLY: u8 = 2;
const KNOWN_FLAGS: u8 = ACK_NOW | ACK_ONLY;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerHeader {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub src_epoch: u32,
    pub dst_epoch: u32,
}

impl PeerHeader {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0] = self.flags;
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..12].copy_from_slice(&self.ack.to_le_bytes());
        b[12..16].copy_from_slice(&self.src_epoch.to_le_bytes());
        b[16..20].copy_from_slice(&self.dst_epoch.to_le_bytes());
        b
    }

    /// The header and the message behind it; `None` if `b` is shorter than a header or sets
    /// bits this build does not know.
    pub fn parse(b: &[u8]) -> Option<(PeerHeader, &[u8])> {
        let (h, body) = b.split_first_chunk::<LEN>()?;
        if h[0] & !KNOWN_FLAGS != 0 || h[1..4] != [0; 3] {
            return None;
        }
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let header = PeerHeader {
            flags: h[0],
            seq: word(4),
            ack: word(8),
            src_epoch: word(12),
            dst_epoch: word(16),
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
            flags: ACK_NOW,
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
        for (at, bad) in [(0, 4), (1, 1), (3, 1)] {
            let mut c = b.clone();
            c[at] |= bad;
            assert_eq!(PeerHeader::parse(&c), None, "byte {at}");
        }
    }

    #[test]
    fn epochs_fold_both_halves() {
        assert_ne!(epoch(1), epoch(1 << 32 | 2));
        assert_eq!(epoch(0x0000_0001_0000_0001), 0);
    }
}

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
//! else, is not numbered, and has no body; `NAMED` says the sender knows the receiver's name,
//! so the receiver may use every rail they share. Integers are little-endian.
//!
//! [`Packet`] is a view over a buffer and [`Repr`] the parsed form, as in smoltcp and
//! `reliability::header`.

/// Header bytes.
pub const LEN: usize = 20;

/// Acknowledge promptly.
pub const ACK_NOW: u8 = 1;
/// An acknowledgement alone.
pub const ACK_ONLY: u8 = 2;
/// The sender knows the receiver's name, every rail of it: the receiver may send to it over
/// any rail they share (a peer that has not named us could not tell our other rails' datagrams
/// from a stranger's).
pub const NAMED: u8 = 4;
const KNOWN_FLAGS: u8 = ACK_NOW | ACK_ONLY | NAMED;

mod field {
    use core::ops::Range;

    pub const FLAGS: usize = 0;
    pub const RESERVED: Range<usize> = 1..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    pub const SRC_EPOCH: Range<usize> = 12..16;
    pub const DST_EPOCH: Range<usize> = 16..20;
}

/// Why a per-peer header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("message shorter than the per-peer header")]
    Truncated,
    /// A flag or a zero byte this build does not know is set: a newer peer's header.
    #[error("reserved bits set")]
    Reserved,
}

/// A view of a per-peer header and the message behind it.
///
/// After [`Packet::new_checked`] every accessor is in bounds; after [`Packet::new_unchecked`]
/// on a short buffer they may panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, HeaderError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` unless the buffer holds a whole header.
    pub fn check_len(&self) -> Result<(), HeaderError> {
        if self.buffer.as_ref().len() < LEN {
            Err(HeaderError::Truncated)
        } else {
            Ok(())
        }
    }

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        u32::from_le_bytes(self.buffer.as_ref()[r].try_into().expect("4 bytes"))
    }

    /// `ACK_NOW`, `ACK_ONLY`, and any flag of a newer build.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Bytes 1..4, zero from this build.
    pub fn reserved(&self) -> [u8; 3] {
        self.buffer.as_ref()[field::RESERVED]
            .try_into()
            .expect("3 bytes")
    }

    /// The message's number among the sender's messages to this receiver.
    pub fn seq(&self) -> u32 {
        self.u32_at(field::SEQ)
    }

    /// The last of the receiver's messages the sender handed over in order.
    pub fn ack(&self) -> u32 {
        self.u32_at(field::ACK)
    }

    /// The sender's epoch.
    pub fn src_epoch(&self) -> u32 {
        self.u32_at(field::SRC_EPOCH)
    }

    /// The epoch of the receiver the sender means.
    pub fn dst_epoch(&self) -> u32 {
        self.u32_at(field::DST_EPOCH)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The message behind the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u32(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_le_bytes());
    }

    /// Sets the flag byte.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    /// Sets bytes 1..4 (for tests; senders leave them zero).
    pub fn set_reserved(&mut self, v: [u8; 3]) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&v);
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        self.set_u32(field::SEQ, v);
    }

    /// Sets the acknowledgement.
    pub fn set_ack(&mut self, v: u32) {
        self.set_u32(field::ACK, v);
    }

    /// Sets the sender's epoch.
    pub fn set_src_epoch(&mut self, v: u32) {
        self.set_u32(field::SRC_EPOCH, v);
    }

    /// Sets the receiver's epoch.
    pub fn set_dst_epoch(&mut self, v: u32) {
        self.set_u32(field::DST_EPOCH, v);
    }
}

/// A parsed per-peer header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub src_epoch: u32,
    pub dst_epoch: u32,
}

impl Repr {
    /// Reads a header, refusing a short buffer and bits this build does not know.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr, HeaderError> {
        p.check_len()?;
        if p.flags() & !KNOWN_FLAGS != 0 || p.reserved() != [0; 3] {
            return Err(HeaderError::Reserved);
        }
        Ok(Repr {
            flags: p.flags(),
            seq: p.seq(),
            ack: p.ack(),
            src_epoch: p.src_epoch(),
            dst_epoch: p.dst_epoch(),
        })
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the header into the first [`LEN`] bytes of `p`.
    ///
    /// # Panics
    /// If the buffer is shorter than [`LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_flags(self.flags);
        p.set_reserved([0; 3]);
        p.set_seq(self.seq);
        p.set_ack(self.ack);
        p.set_src_epoch(self.src_epoch);
        p.set_dst_epoch(self.dst_epoch);
    }

    /// The header as bytes, for the paths that send it in front of a body kept elsewhere.
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        self.emit(&mut Packet::new_unchecked(&mut b[..]));
        b
    }
}

/// The header of message `b` and the message behind it.
pub fn split(b: &[u8]) -> Result<(Repr, &[u8]), HeaderError> {
    let p = Packet::new_checked(b)?;
    Ok((Repr::parse(&p)?, p.payload()))
}

/// An endpoint's epoch: its name's nonce folded to the header's 32 bits.
pub fn epoch(nonce: u64) -> u32 {
    (nonce ^ (nonce >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: Repr = Repr {
        flags: ACK_NOW,
        seq: 0xdead_beef,
        ack: 7,
        src_epoch: 1,
        dst_epoch: u32::MAX,
    };

    #[test]
    fn round_trips_and_refuses_short_input() {
        let h = SAMPLE;
        let mut b = h.encode().to_vec();
        b.extend_from_slice(b"body");
        assert_eq!(split(&b), Ok((h, &b"body"[..])));
        assert_eq!(split(&b[..LEN - 1]), Err(HeaderError::Truncated));
        assert_eq!(split(&b[..LEN]), Ok((h, &b""[..])));
        for (at, bad) in [(0, 8), (0, 0x80), (1, 1), (3, 1)] {
            let mut c = b.clone();
            c[at] |= bad;
            assert_eq!(split(&c), Err(HeaderError::Reserved), "byte {at}");
        }
    }

    #[test]
    fn bytes_sit_where_the_layout_says() {
        let h = Repr {
            flags: ACK_NOW | ACK_ONLY,
            ..SAMPLE
        };
        let mut b = [0xffu8; LEN];
        h.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(
            b,
            [3, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde, 7, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
            "stale bytes under the reserved ones are cleared"
        );
        assert_eq!(h.buffer_len(), b.len());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(h));
        for n in 0..LEN {
            assert_eq!(
                Packet::new_checked(&b[..n]).unwrap_err(),
                HeaderError::Truncated
            );
            let short = Packet::new_unchecked(&b[..n]);
            assert_eq!(
                Repr::parse(&short),
                Err(HeaderError::Truncated),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn epochs_fold_both_halves() {
        assert_ne!(epoch(1), epoch(1 << 32 | 2));
        assert_eq!(epoch(0x0000_0001_0000_0001), 0);
    }
}

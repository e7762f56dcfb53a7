//! DDP segment headers (RFC 5041 §4), tagged and untagged.
//!
//! Offsets here are from the first byte of the DDP segment, that is after MPA's ULPDU_Length on
//! TCP or after the reliability header on UDP. Byte 1 belongs to the ULP (RsvdULP\[0:7\]); RDMAP
//! keeps its control field there, so it is counted in the header lengths.
//!
//! ```text
//!  byte 0   T L r r r r DV DV     T = tagged, L = last, r = reserved (zero), DV = 1
//!  byte 1   RsvdULP[0:7]          (RDMAP control: RV, reserved, opcode)
//!  tagged:   STag:u32 @2, TO:u64 @6                                -> 14 bytes
//!  untagged: RsvdULP[8:39]:u32 @2, QN:u32 @6, MSN:u32 @10, MO:u32 @14 -> 18 bytes
//! ```

use super::{Error, Result};

/// Header length of a tagged segment, including the ULP control byte.
pub const TAGGED_HEADER_LEN: usize = 14;
/// Header length of an untagged segment, including the ULP control byte.
pub const UNTAGGED_HEADER_LEN: usize = 18;
/// The only DDP version RFC 5041 defines.
pub const DDP_VERSION: u8 = 1;

const FLAG_TAGGED: u8 = 0x80;
const FLAG_LAST: u8 = 0x40;
const MASK_RESERVED: u8 = 0x3c;
const MASK_VERSION: u8 = 0x03;

mod field {
    use core::ops::Range;

    pub const CONTROL: usize = 0;
    pub const ULP_CTRL: usize = 1;
    pub const STAG: Range<usize> = 2..6;
    pub const TO: Range<usize> = 6..14;
    pub const RSVD_ULP: Range<usize> = 2..6;
    pub const QN: Range<usize> = 6..10;
    pub const MSN: Range<usize> = 10..14;
    pub const MO: Range<usize> = 14..18;
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

pub(crate) fn be64(b: &[u8]) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Header length implied by the first byte of a segment (its T bit).
pub fn header_len_for(control: u8) -> usize {
    if control & FLAG_TAGGED != 0 {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

/// A read/write view of a DDP segment.
///
/// Field accessors index the buffer directly, as smoltcp's do: on a packet made with
/// [`Packet::new_checked`] every field of the packet's own kind (tagged or untagged) is in
/// bounds; the other kind's accessors, or any accessor after [`Packet::new_unchecked`] on a short
/// buffer, may panic. Parsing goes through `new_checked`, so it never does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the whole header its T bit announces.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` unless the buffer holds the header its T bit announces. An empty buffer
    /// needs at least the shorter (tagged) header.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        let need = match buf.first() {
            Some(&c) => header_len_for(c),
            None => TAGGED_HEADER_LEN,
        };
        if buf.len() < need {
            Err(Error::Truncated {
                need,
                have: buf.len(),
            })
        } else {
            Ok(())
        }
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn control(&self) -> u8 {
        self.buffer.as_ref()[field::CONTROL]
    }

    /// T: the segment uses the tagged buffer model.
    pub fn tagged(&self) -> bool {
        self.control() & FLAG_TAGGED != 0
    }

    /// L: last segment of its DDP message.
    pub fn last(&self) -> bool {
        self.control() & FLAG_LAST != 0
    }

    /// The four reserved bits of byte 0 (must be zero), shifted down.
    pub fn reserved(&self) -> u8 {
        (self.control() & MASK_RESERVED) >> 2
    }

    /// DV: the DDP version (1).
    pub fn ddp_version(&self) -> u8 {
        self.control() & MASK_VERSION
    }

    /// RsvdULP\[0:7\]: byte 1, which RDMAP uses as its control field.
    pub fn rsvd_ulp_ctrl(&self) -> u8 {
        self.buffer.as_ref()[field::ULP_CTRL]
    }

    /// Tagged: the data sink STag.
    pub fn stag(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::STAG])
    }

    /// Tagged: the tagged offset.
    pub fn tagged_offset(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::TO])
    }

    /// Untagged: RsvdULP\[8:39\] (RDMAP's Invalidate STag, or reserved).
    pub fn rsvd_ulp_ext(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::RSVD_ULP])
    }

    /// Untagged: the queue number.
    pub fn queue_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::QN])
    }

    /// Untagged: the message sequence number.
    pub fn msn(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::MSN])
    }

    /// Untagged: the message offset.
    pub fn message_offset(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::MO])
    }

    /// 14 if tagged, 18 if untagged.
    pub fn header_len(&self) -> usize {
        header_len_for(self.control())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        let hl = self.header_len();
        &self.buffer.as_ref()[hl..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_control_bits(&mut self, mask: u8, value: u8) {
        let b = &mut self.buffer.as_mut()[field::CONTROL];
        *b = (*b & !mask) | (value & mask);
    }

    /// Sets T.
    pub fn set_tagged(&mut self, value: bool) {
        self.set_control_bits(FLAG_TAGGED, if value { FLAG_TAGGED } else { 0 });
    }

    /// Sets L.
    pub fn set_last(&mut self, value: bool) {
        self.set_control_bits(FLAG_LAST, if value { FLAG_LAST } else { 0 });
    }

    /// Sets the four reserved bits of byte 0 (for tests; senders leave them zero).
    pub fn set_reserved(&mut self, value: u8) {
        self.set_control_bits(MASK_RESERVED, value << 2);
    }

    /// Sets DV.
    pub fn set_ddp_version(&mut self, value: u8) {
        self.set_control_bits(MASK_VERSION, value);
    }

    /// Sets RsvdULP\[0:7\].
    pub fn set_rsvd_ulp_ctrl(&mut self, value: u8) {
        self.buffer.as_mut()[field::ULP_CTRL] = value;
    }

    /// Sets the STag (tagged).
    pub fn set_stag(&mut self, value: u32) {
        self.buffer.as_mut()[field::STAG].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the tagged offset (tagged).
    pub fn set_tagged_offset(&mut self, value: u64) {
        self.buffer.as_mut()[field::TO].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets RsvdULP\[8:39\] (untagged).
    pub fn set_rsvd_ulp_ext(&mut self, value: u32) {
        self.buffer.as_mut()[field::RSVD_ULP].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the queue number (untagged).
    pub fn set_queue_number(&mut self, value: u32) {
        self.buffer.as_mut()[field::QN].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the message sequence number (untagged).
    pub fn set_msn(&mut self, value: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the message offset (untagged).
    pub fn set_message_offset(&mut self, value: u32) {
        self.buffer.as_mut()[field::MO].copy_from_slice(&value.to_be_bytes());
    }

    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }
}

/// Where a segment's payload goes: the buffer model and its addressing fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Tagged buffer model: place at `offset` within the buffer named by `stag`.
    Tagged { stag: u32, offset: u64 },
    /// Untagged buffer model: place at message offset `mo` of message `msn` on queue `qn`.
    /// `inval_stag` is RsvdULP\[8:39\], RDMAP's Invalidate STag (reserved, zero, otherwise).
    Untagged {
        inval_stag: u32,
        qn: u32,
        msn: u32,
        mo: u32,
    },
}

impl Placement {
    /// True for the tagged buffer model.
    pub fn is_tagged(&self) -> bool {
        matches!(self, Placement::Tagged { .. })
    }

    /// The header length this placement needs.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }
}

/// A DDP segment header, independent of the ULP: `ulp_ctrl` is RsvdULP\[0:7\] uninterpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub last: bool,
    pub ulp_ctrl: u8,
    pub placement: Placement,
}

impl Repr {
    /// Reads a header, rejecting a short buffer, reserved bits and DV other than 1.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.ddp_version() != DDP_VERSION {
            return Err(Error::BadDdpVersion(p.ddp_version()));
        }
        if p.reserved() != 0 {
            return Err(Error::ReservedBits("DDP control"));
        }
        let placement = if p.tagged() {
            Placement::Tagged {
                stag: p.stag(),
                offset: p.tagged_offset(),
            }
        } else {
            Placement::Untagged {
                inval_stag: p.rsvd_ulp_ext(),
                qn: p.queue_number(),
                msn: p.msn(),
                mo: p.message_offset(),
            }
        };
        Ok(Repr {
            last: p.last(),
            ulp_ctrl: p.rsvd_ulp_ctrl(),
            placement,
        })
    }

    /// 14 for tagged, 18 for untagged.
    pub fn header_len(&self) -> usize {
        self.placement.header_len()
    }

    /// Writes the header into the first [`Repr::header_len`] bytes of `p`.
    ///
    /// # Panics
    /// If the buffer is shorter than `header_len()`; [`crate::wire::rdmap::SegmentRepr::emit`]
    /// is the checked way in.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        // Byte 0 is written whole so that stale reserved bits cannot survive.
        let tagged = if self.placement.is_tagged() {
            FLAG_TAGGED
        } else {
            0
        };
        let last = if self.last { FLAG_LAST } else { 0 };
        p.buffer.as_mut()[field::CONTROL] = tagged | last | DDP_VERSION;
        p.set_rsvd_ulp_ctrl(self.ulp_ctrl);
        match self.placement {
            Placement::Tagged { stag, offset } => {
                p.set_stag(stag);
                p.set_tagged_offset(offset);
            }
            Placement::Untagged {
                inval_stag,
                qn,
                msn,
                mo,
            } => {
                p.set_rsvd_ulp_ext(inval_stag);
                p.set_queue_number(qn);
                p.set_msn(msn);
                p.set_message_offset(mo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAGGED: [u8; 16] = [
        0xc1, 0x40, // T L DV=1, RDMAP RV=1 Write
        0x12, 0x34, 0x56, 0x78, // STag
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // TO
        0xaa, 0xbb, // payload
    ];

    const UNTAGGED: [u8; 19] = [
        0x01, 0x43, // DV=1, RDMAP Send, not last
        0xde, 0xad, 0xbe, 0xef, // RsvdULP[8:39]
        0x00, 0x00, 0x00, 0x04, // QN
        0x00, 0x00, 0x00, 0x07, // MSN
        0x00, 0x00, 0x10, 0x00, // MO
        0x99,
    ];

    #[test]
    fn tagged_view_and_repr() {
        let p = Packet::new_checked(&TAGGED[..]).unwrap();
        assert!(p.tagged() && p.last());
        assert_eq!(p.ddp_version(), 1);
        assert_eq!(p.rsvd_ulp_ctrl(), 0x40);
        assert_eq!(p.stag(), 0x1234_5678);
        assert_eq!(p.tagged_offset(), 0x0102_0304_0506_0708);
        assert_eq!(p.header_len(), 14);
        assert_eq!(p.payload(), &[0xaa, 0xbb]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                last: true,
                ulp_ctrl: 0x40,
                placement: Placement::Tagged {
                    stag: 0x1234_5678,
                    offset: 0x0102_0304_0506_0708
                }
            }
        );
        let mut out = [0u8; 16];
        out[14..].copy_from_slice(&[0xaa, 0xbb]);
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, TAGGED);
    }

    #[test]
    fn untagged_view_and_repr() {
        let p = Packet::new_checked(&UNTAGGED[..]).unwrap();
        assert!(!p.tagged() && !p.last());
        assert_eq!(p.rsvd_ulp_ext(), 0xdead_beef);
        assert_eq!(p.queue_number(), 4);
        assert_eq!(p.msn(), 7);
        assert_eq!(p.message_offset(), 0x1000);
        assert_eq!(p.payload(), &[0x99]);
        let r = Repr::parse(&p).unwrap();
        let mut out = [0xffu8; 19];
        out[18] = 0x99;
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, UNTAGGED);
    }

    #[test]
    fn short_and_bad_headers() {
        for n in 0..14 {
            assert_eq!(
                Packet::new_checked(&TAGGED[..n]).unwrap_err(),
                Error::Truncated { need: 14, have: n }
            );
        }
        for n in 1..18 {
            assert_eq!(
                Packet::new_checked(&UNTAGGED[..n]).unwrap_err(),
                Error::Truncated { need: 18, have: n }
            );
        }
        for dv in [0, 2, 3] {
            let mut b = TAGGED;
            Packet::new_unchecked(&mut b[..]).set_ddp_version(dv);
            let p = Packet::new_unchecked(&b[..]);
            assert_eq!(Repr::parse(&p), Err(Error::BadDdpVersion(dv)));
        }
        for bit in 0..4 {
            let mut b = UNTAGGED;
            Packet::new_unchecked(&mut b[..]).set_reserved(1 << bit);
            let p = Packet::new_unchecked(&b[..]);
            assert_eq!(Repr::parse(&p), Err(Error::ReservedBits("DDP control")));
        }
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut b = [0u8; 18];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_ddp_version(1);
        p.set_last(true);
        p.set_tagged(true);
        p.set_tagged(false);
        assert_eq!(p.into_inner()[0], 0x41);
    }
}

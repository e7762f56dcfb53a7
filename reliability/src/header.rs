//! The reliability header that starts every datagram, ahead of the (opaque) DDP segment.
//!
//! ```text
//!  0      version:4 | kind:4      version = 1; kind 0 ACK, 1 SINGLE, 2 SEGMENT, 3 COALESCED
//!  1      flags                   0x01 ACK_REQ (ack me now), 0x02 CHECKSUM (CRC32c trailer),
//!                                 0x04 DSACK (ACK only: `seq` names a datagram received twice),
//!                                 0x08 ACK_SOON (the sender has nothing more queued: ack within
//!                                 the short delay), 0x10 ACKED (with DSACK only: the duplicate
//!                                 had been acknowledged before its copy came); the other bits
//!                                 are reserved and must be zero
//!  2..4   credit:u16              datagrams the sender of this header will accept from `ack` on
//!  4..8   session:u32             the receiver-chosen id of the session this datagram is for
//!  8..12  epoch:u32               the sender's incarnation
//! 12..16  seq:u32                 this datagram's sequence number (ACK: the sender's next one,
//!                                 or with DSACK the duplicate it reports)
//! 16..20  ack:u32                 cumulative: every sequence number before `ack` was received
//! 20..24  sack:u32                bit i set: `ack + 1 + i` was received
//! --- kind-specific, right after the 24 bytes above ---
//!  SINGLE     msg:u32 @24                                      one whole message  (28 bytes)
//!  SEGMENT    msg:u32 @24, offset:u32 @28, total_len:u32 @32  one piece of one    (36 bytes)
//!  COALESCED  msg:u32 @24, count:u16 @28, then `count` entries of len:u16 + bytes (30 bytes)
//! payload, then CRC32c over everything before it when CHECKSUM is set (little-endian, as iWARP)
//! ```
//!
//! Multi-byte fields are big-endian. [`Packet`] is a checked view over a buffer (smoltcp style);
//! [`Repr`] is the parsed form, with [`Repr::parse`] and [`Repr::emit`].

use crate::seq::{MsgId, Seq};

/// Version carried in the high nibble of byte 0.
pub const VERSION: u8 = 1;
/// Length of the part every kind shares.
pub const BASE_LEN: usize = 24;
/// Header length of a SINGLE datagram.
pub const SINGLE_LEN: usize = 28;
/// Header length of a SEGMENT datagram.
pub const SEGMENT_LEN: usize = 36;
/// Header length of a COALESCED datagram, before its entries.
pub const COALESCED_LEN: usize = 30;
/// Bytes each COALESCED entry spends on its length.
pub const ENTRY_LEN_LEN: usize = 2;
/// Length of the CRC32c trailer.
pub const CRC_LEN: usize = 4;
/// The longest header of any kind.
pub const MAX_HEADER_LEN: usize = SEGMENT_LEN;
/// Bits of the selective-ACK bitmap.
pub const SACK_BITS: u32 = 32;

/// Flag: the receiver should acknowledge without waiting for its ACK batch to fill.
pub const FLAG_ACK_REQ: u8 = 0x01;
/// Flag: a CRC32c trailer ends the datagram.
pub const FLAG_CHECKSUM: u8 = 0x02;
/// Flag (ACK only): `seq` is a sequence number the sender of the ACK received twice, which
/// lets the peer recognise its spurious retransmissions.
pub const FLAG_DSACK: u8 = 0x04;
/// Flag: the sender has nothing more queued, so no later datagram will fill the receiver's ACK
/// batch; whoever waits on this one's completion waits for the ACK, which should come after a
/// short delay (`ack_soon_delay`) rather than the full one, unless a reply carries it first.
pub const FLAG_ACK_SOON: u8 = 0x08;
/// Flag (with DSACK only): the duplicate reported had already been acknowledged when its copy
/// came, so the ACK was lost or late on the wire. Without it the copy came first: the receiver
/// had not yet acknowledged the original (it was computing, or the original was held back).
/// That tells a lost ACK from a late receiver, which the sender cannot tell by timing alone.
pub const FLAG_ACKED: u8 = 0x10;
const FLAGS_KNOWN: u8 = FLAG_ACK_REQ | FLAG_CHECKSUM | FLAG_DSACK | FLAG_ACK_SOON | FLAG_ACKED;

mod field {
    use core::ops::Range;
    pub const VERSION_KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const CREDIT: Range<usize> = 2..4;
    pub const SESSION: Range<usize> = 4..8;
    pub const EPOCH: Range<usize> = 8..12;
    pub const SEQ: Range<usize> = 12..16;
    pub const ACK: Range<usize> = 16..20;
    pub const SACK: Range<usize> = 20..24;
    pub const MSG: Range<usize> = 24..28;
    pub const OFFSET: Range<usize> = 28..32;
    pub const TOTAL: Range<usize> = 32..36;
    pub const COUNT: Range<usize> = 28..30;
}

/// Why a datagram's header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Shorter than the header (and trailer) its first bytes announce.
    #[error("datagram truncated")]
    Truncated,
    /// Unknown version nibble.
    #[error("unknown version {0}")]
    Version(u8),
    /// Unknown kind nibble.
    #[error("unknown kind {0}")]
    Kind(u8),
    /// A reserved flag bit is set.
    #[error("reserved flags {0:#04x}")]
    ReservedFlags(u8),
    /// The CRC32c trailer does not match.
    #[error("checksum mismatch")]
    Checksum,
    /// A checksum is required and the datagram has none.
    #[error("checksum missing")]
    ChecksumMissing,
    /// A SEGMENT that is empty or reaches past its message's total length.
    #[error("segment outside its message")]
    SegmentBounds,
    /// COALESCED entries that do not exactly fill the payload, or a count of zero.
    #[error("malformed coalesced entries")]
    Coalesced,
    /// An ACK carrying payload bytes.
    #[error("ack with payload")]
    AckPayload,
}

/// Datagram kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Acknowledgement only; consumes no sequence number.
    Ack = 0,
    /// A whole message.
    Single = 1,
    /// One piece of a message that the receiver places at its offset.
    Segment = 2,
    /// Several whole small messages.
    Coalesced = 3,
}

impl Kind {
    fn from_u8(k: u8) -> Result<Kind, HeaderError> {
        Ok(match k {
            0 => Kind::Ack,
            1 => Kind::Single,
            2 => Kind::Segment,
            3 => Kind::Coalesced,
            other => return Err(HeaderError::Kind(other)),
        })
    }

    /// Header length for this kind.
    pub const fn header_len(self) -> usize {
        match self {
            Kind::Ack => BASE_LEN,
            Kind::Single => SINGLE_LEN,
            Kind::Segment => SEGMENT_LEN,
            Kind::Coalesced => COALESCED_LEN,
        }
    }
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A view of a datagram.
///
/// After [`Packet::new_checked`] every accessor of the packet's own kind is in bounds; accessors of
/// another kind (say `offset` on a SINGLE) read payload bytes, and after
/// [`Packet::new_unchecked`] on a short buffer they may panic. Parsing uses `new_checked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking version, kind, reserved flags and that the header and trailer fit.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, HeaderError> {
        let p = Packet::new_unchecked(buffer);
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), HeaderError> {
        let b = self.buffer.as_ref();
        if b.len() < BASE_LEN {
            return Err(HeaderError::Truncated);
        }
        if self.version() != VERSION {
            return Err(HeaderError::Version(self.version()));
        }
        let kind = Kind::from_u8(b[field::VERSION_KIND] & 0x0f)?;
        let flags = self.flags();
        if flags & !FLAGS_KNOWN != 0 {
            return Err(HeaderError::ReservedFlags(flags & !FLAGS_KNOWN));
        }
        if flags & FLAG_DSACK != 0 && kind != Kind::Ack {
            return Err(HeaderError::ReservedFlags(FLAG_DSACK));
        }
        if flags & (FLAG_ACKED | FLAG_DSACK) == FLAG_ACKED {
            return Err(HeaderError::ReservedFlags(FLAG_ACKED));
        }
        if b.len() < kind.header_len() + self.trailer_len() {
            return Err(HeaderError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version nibble.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION_KIND] >> 4
    }

    /// Kind (only fails on an unchecked packet).
    pub fn kind(&self) -> Result<Kind, HeaderError> {
        Kind::from_u8(self.buffer.as_ref()[field::VERSION_KIND] & 0x0f)
    }

    /// Flag byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Advertised credit.
    pub fn credit(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CREDIT])
    }

    /// Destination session id.
    pub fn session(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SESSION])
    }

    /// Sender's epoch.
    pub fn epoch(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::EPOCH])
    }

    /// Sequence number.
    pub fn seq(&self) -> Seq {
        Seq(be32(&self.buffer.as_ref()[field::SEQ]))
    }

    /// Cumulative acknowledgement.
    pub fn ack(&self) -> Seq {
        Seq(be32(&self.buffer.as_ref()[field::ACK]))
    }

    /// Selective-ACK bitmap.
    pub fn sack(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SACK])
    }

    /// Message id (SINGLE, SEGMENT; first message of a COALESCED).
    pub fn msg(&self) -> MsgId {
        MsgId(be32(&self.buffer.as_ref()[field::MSG]))
    }

    /// Offset of a SEGMENT's payload in its message.
    pub fn offset(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::OFFSET])
    }

    /// Total length of a SEGMENT's message.
    pub fn total_len(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::TOTAL])
    }

    /// Number of entries of a COALESCED.
    pub fn count(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::COUNT])
    }

    fn trailer_len(&self) -> usize {
        if self.flags() & FLAG_CHECKSUM != 0 {
            CRC_LEN
        } else {
            0
        }
    }

    /// Header length from the kind nibble.
    pub fn header_len(&self) -> usize {
        self.kind().map_or(BASE_LEN, Kind::header_len)
    }

    /// Bytes between the header and the trailer.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len()..b.len() - self.trailer_len()]
    }

    /// Whether the CRC32c trailer, if any, matches.
    pub fn checksum_ok(&self) -> bool {
        let b = self.buffer.as_ref();
        if self.trailer_len() == 0 {
            return true;
        }
        let (body, crc) = b.split_at(b.len() - CRC_LEN);
        crate::crc::crc32c(&[body]).to_le_bytes() == crc
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    fn put32(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets version and kind.
    pub fn set_version_kind(&mut self, version: u8, kind: Kind) {
        self.buffer.as_mut()[field::VERSION_KIND] = (version << 4) | kind as u8;
    }

    /// Sets the flag byte.
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    /// Sets the credit.
    pub fn set_credit(&mut self, v: u16) {
        self.put16(field::CREDIT, v);
    }

    /// Sets the session id.
    pub fn set_session(&mut self, v: u32) {
        self.put32(field::SESSION, v);
    }

    /// Sets the epoch.
    pub fn set_epoch(&mut self, v: u32) {
        self.put32(field::EPOCH, v);
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: Seq) {
        self.put32(field::SEQ, v.0);
    }

    /// Sets the cumulative ACK.
    pub fn set_ack(&mut self, v: Seq) {
        self.put32(field::ACK, v.0);
    }

    /// Sets the SACK bitmap.
    pub fn set_sack(&mut self, v: u32) {
        self.put32(field::SACK, v);
    }

    /// Sets the message id.
    pub fn set_msg(&mut self, v: MsgId) {
        self.put32(field::MSG, v.0);
    }

    /// Sets a SEGMENT's offset.
    pub fn set_offset(&mut self, v: u32) {
        self.put32(field::OFFSET, v);
    }

    /// Sets a SEGMENT's total length.
    pub fn set_total_len(&mut self, v: u32) {
        self.put32(field::TOTAL, v);
    }

    /// Sets a COALESCED's entry count.
    pub fn set_count(&mut self, v: u16) {
        self.put16(field::COUNT, v);
    }
}

/// What a datagram carries after the shared header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Acknowledgement only.
    Ack,
    /// The whole of message `msg`.
    Single {
        /// Message id.
        msg: MsgId,
    },
    /// Bytes `offset..offset+payload.len()` of message `msg`, `total_len` long.
    Segment {
        /// Message id.
        msg: MsgId,
        /// Where the payload goes in the message.
        offset: u32,
        /// The message's length.
        total_len: u32,
    },
    /// Messages `msg, msg+1, …`, `count` of them, each a length-prefixed entry.
    Coalesced {
        /// First message id.
        msg: MsgId,
        /// Number of entries.
        count: u16,
    },
}

impl Body {
    /// The kind that carries this body.
    pub const fn kind(&self) -> Kind {
        match self {
            Body::Ack => Kind::Ack,
            Body::Single { .. } => Kind::Single,
            Body::Segment { .. } => Kind::Segment,
            Body::Coalesced { .. } => Kind::Coalesced,
        }
    }
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Destination session id.
    pub session: u32,
    /// Sender's epoch.
    pub epoch: u32,
    /// Sequence number.
    pub seq: Seq,
    /// Cumulative ACK.
    pub ack: Seq,
    /// Selective-ACK bitmap.
    pub sack: u32,
    /// Advertised credit.
    pub credit: u16,
    /// ACK_REQ flag.
    pub ack_req: bool,
    /// ACK_SOON flag.
    pub ack_soon: bool,
    /// CHECKSUM flag: a CRC32c trailer follows the payload.
    pub checksum: bool,
    /// DSACK flag (ACK only): `seq` was received twice.
    pub dsack: bool,
    /// ACKED flag (with DSACK only): `seq` had been acknowledged before its copy came.
    pub dsack_acked: bool,
    /// Kind-specific part.
    pub body: Body,
}

impl Repr {
    /// Parses and fully validates a datagram: header, checksum, segment bounds and COALESCED
    /// entries. Returns the header and the payload.
    pub fn parse(datagram: &[u8]) -> Result<(Repr, &[u8]), HeaderError> {
        let p = Packet::new_checked(datagram)?;
        if !p.checksum_ok() {
            return Err(HeaderError::Checksum);
        }
        let flags = p.flags();
        let payload = &datagram[p.header_len()..datagram.len() - p.trailer_len()];
        let body = match p.kind()? {
            Kind::Ack => {
                if !payload.is_empty() {
                    return Err(HeaderError::AckPayload);
                }
                Body::Ack
            }
            Kind::Single => Body::Single { msg: p.msg() },
            Kind::Segment => {
                let (offset, total_len) = (p.offset(), p.total_len());
                let end = u64::from(offset) + payload.len() as u64;
                if payload.is_empty() || end > u64::from(total_len) {
                    return Err(HeaderError::SegmentBounds);
                }
                Body::Segment {
                    msg: p.msg(),
                    offset,
                    total_len,
                }
            }
            Kind::Coalesced => {
                let count = p.count();
                let mut entries = Entries::new(payload);
                let mut n = 0u32;
                for e in &mut entries {
                    if e.is_none() {
                        return Err(HeaderError::Coalesced);
                    }
                    n += 1;
                }
                if count == 0 || n != u32::from(count) {
                    return Err(HeaderError::Coalesced);
                }
                Body::Coalesced {
                    msg: p.msg(),
                    count,
                }
            }
        };
        let repr = Repr {
            session: p.session(),
            epoch: p.epoch(),
            seq: p.seq(),
            ack: p.ack(),
            sack: p.sack(),
            credit: p.credit(),
            ack_req: flags & FLAG_ACK_REQ != 0,
            ack_soon: flags & FLAG_ACK_SOON != 0,
            checksum: flags & FLAG_CHECKSUM != 0,
            dsack: flags & FLAG_DSACK != 0,
            dsack_acked: flags & FLAG_ACKED != 0,
            body,
        };
        Ok((repr, payload))
    }

    /// Header length, without payload or trailer.
    pub const fn header_len(&self) -> usize {
        self.body.kind().header_len()
    }

    /// Writes the header into the first [`Repr::header_len`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than the header.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(&mut buf[..self.header_len()]);
        p.set_version_kind(VERSION, self.body.kind());
        let mut flags = 0;
        if self.ack_req {
            flags |= FLAG_ACK_REQ;
        }
        if self.ack_soon {
            flags |= FLAG_ACK_SOON;
        }
        if self.checksum {
            flags |= FLAG_CHECKSUM;
        }
        if self.dsack {
            flags |= FLAG_DSACK;
            if self.dsack_acked {
                flags |= FLAG_ACKED;
            }
        }
        p.set_flags(flags);
        p.set_credit(self.credit);
        p.set_session(self.session);
        p.set_epoch(self.epoch);
        p.set_seq(self.seq);
        p.set_ack(self.ack);
        p.set_sack(self.sack);
        match self.body {
            Body::Ack => {}
            Body::Single { msg } => p.set_msg(msg),
            Body::Segment {
                msg,
                offset,
                total_len,
            } => {
                p.set_msg(msg);
                p.set_offset(offset);
                p.set_total_len(total_len);
            }
            Body::Coalesced { msg, count } => {
                p.set_msg(msg);
                p.set_count(count);
            }
        }
    }
}

/// The CRC32c trailer for a datagram made of `header` then `payload`.
pub fn checksum(header: &[u8], payload: &[u8]) -> [u8; CRC_LEN] {
    checksum_parts(header, payload, &[])
}

/// The CRC32c trailer for a datagram made of `header`, `payload` and `tail`.
pub fn checksum_parts(header: &[u8], payload: &[u8], tail: &[u8]) -> [u8; CRC_LEN] {
    // Each call into the CRC library has a fixed cost that dwarfs a few dozen bytes: a small
    // datagram is joined on the stack and summed in one call.
    const JOIN: usize = 256;
    let len = header.len() + payload.len() + tail.len();
    if len <= JOIN {
        let mut buf = [0u8; JOIN];
        let mut at = 0;
        for part in [header, payload, tail] {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        return crate::crc::crc32c(&[&buf[..len]]).to_le_bytes();
    }
    crate::crc::crc32c(&[header, payload, tail]).to_le_bytes()
}

/// Appends one COALESCED entry (length prefix, then bytes) to `out`.
///
/// # Panics
/// If the entry is longer than `u16::MAX`.
pub fn push_entry(out: &mut Vec<u8>, msg: &[u8]) {
    let len = u16::try_from(msg.len()).expect("coalesced entries are at most u16::MAX bytes");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(msg);
}

/// Iterates over the entries of a COALESCED payload; yields `None` once, and then stops, if an
/// entry runs past the end.
pub struct Entries<'a> {
    rest: &'a [u8],
    broken: bool,
}

impl<'a> Entries<'a> {
    /// Entries of `payload`.
    pub const fn new(payload: &'a [u8]) -> Entries<'a> {
        Entries {
            rest: payload,
            broken: false,
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Option<&'a [u8]>> {
        if self.broken || self.rest.is_empty() {
            return None;
        }
        if self.rest.len() < ENTRY_LEN_LEN {
            self.broken = true;
            return Some(None);
        }
        let len = usize::from(be16(self.rest));
        let rest = &self.rest[ENTRY_LEN_LEN..];
        if rest.len() < len {
            self.broken = true;
            return Some(None);
        }
        let (entry, rest) = rest.split_at(len);
        self.rest = rest;
        Some(Some(entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(body: Body) -> Repr {
        Repr {
            session: 0x0102_0304,
            epoch: 0x0506_0708,
            seq: Seq(0x090a_0b0c),
            ack: Seq(0x0d0e_0f10),
            sack: 0x1112_1314,
            credit: 0x1516,
            ack_req: true,
            ack_soon: false,
            checksum: false,
            dsack: false,
            dsack_acked: false,
            body,
        }
    }

    #[test]
    fn segment_bytes() {
        let r = sample(Body::Segment {
            msg: MsgId(0x1718_191a),
            offset: 0x1b1c_1d1e,
            total_len: 0xffff_ffff,
        });
        let mut buf = [0u8; SEGMENT_LEN + 1];
        r.emit(&mut buf);
        assert_eq!(
            &buf[..SEGMENT_LEN],
            &[
                0x12, 0x01, 0x15, 0x16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                0x11, 0x12, 0x13, 0x14, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0xff, 0xff,
                0xff, 0xff
            ]
        );
        let (back, payload) = Repr::parse(&buf).unwrap();
        assert_eq!(back, r);
        assert_eq!(payload, &[0]);
    }

    #[test]
    fn checksum_trailer() {
        let mut r = sample(Body::Single { msg: MsgId(9) });
        r.checksum = true;
        let mut buf = vec![0u8; SINGLE_LEN];
        r.emit(&mut buf);
        buf.extend_from_slice(b"hello");
        let crc = checksum(&buf[..SINGLE_LEN], b"hello");
        buf.extend_from_slice(&crc);
        let (back, payload) = Repr::parse(&buf).unwrap();
        assert_eq!((back, payload), (r, &b"hello"[..]));
        buf[SINGLE_LEN] ^= 1;
        assert_eq!(Repr::parse(&buf), Err(HeaderError::Checksum));
    }

    #[test]
    fn rejects() {
        let r = sample(Body::Ack);
        let mut buf = [0u8; BASE_LEN];
        r.emit(&mut buf);
        assert!(Repr::parse(&buf).is_ok());
        assert_eq!(Repr::parse(&buf[..23]), Err(HeaderError::Truncated));
        let mut b = buf;
        b[0] = 0x22;
        assert_eq!(Repr::parse(&b), Err(HeaderError::Version(2)));
        b[0] = 0x14;
        assert_eq!(Repr::parse(&b), Err(HeaderError::Kind(4)));
        b[0] = 0x10;
        b[1] = 0x80;
        assert_eq!(Repr::parse(&b), Err(HeaderError::ReservedFlags(0x80)));
        // ACKED qualifies a DSACK and means nothing alone.
        b[1] = FLAG_ACKED;
        assert_eq!(Repr::parse(&b), Err(HeaderError::ReservedFlags(FLAG_ACKED)));
        b[1] = FLAG_ACKED | FLAG_DSACK;
        assert!(Repr::parse(&b).is_ok_and(|(r, _)| r.dsack && r.dsack_acked));
        let mut with_payload = buf.to_vec();
        with_payload.push(0);
        assert_eq!(Repr::parse(&with_payload), Err(HeaderError::AckPayload));
    }

    #[test]
    fn coalesced_entries() {
        let r = sample(Body::Coalesced {
            msg: MsgId(3),
            count: 3,
        });
        let mut buf = vec![0u8; COALESCED_LEN];
        r.emit(&mut buf);
        push_entry(&mut buf, b"ab");
        push_entry(&mut buf, b"");
        push_entry(&mut buf, b"cde");
        let (back, payload) = Repr::parse(&buf).unwrap();
        assert_eq!(back, r);
        let e: Vec<_> = Entries::new(payload).map(Option::unwrap).collect();
        assert_eq!(e, vec![&b"ab"[..], b"", b"cde"]);
        // One byte short: the last entry runs past the end.
        assert_eq!(
            Repr::parse(&buf[..buf.len() - 1]),
            Err(HeaderError::Coalesced)
        );
    }

    #[test]
    fn segment_bounds() {
        let r = sample(Body::Segment {
            msg: MsgId(1),
            offset: 10,
            total_len: 12,
        });
        let mut buf = vec![0u8; SEGMENT_LEN];
        r.emit(&mut buf);
        assert_eq!(Repr::parse(&buf), Err(HeaderError::SegmentBounds));
        buf.extend_from_slice(&[1, 2]);
        assert!(Repr::parse(&buf).is_ok());
        buf.push(3);
        assert_eq!(Repr::parse(&buf), Err(HeaderError::SegmentBounds));
    }
}

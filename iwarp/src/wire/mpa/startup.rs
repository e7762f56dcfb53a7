//! MPA Request and Reply frames (RFC 5044 §7.1) and RFC 6581's IRD/ORD private data.
//!
//! ```text
//!  0..16  key          "MPA ID Req Frame" or "MPA ID Rep Frame"
//!  16     flags        M 0x80 | C 0x40 | R 0x20 | enhanced 0x10 (rev 2 only) | 0x0f reserved
//!  17     revision     1 (RFC 5044) or 2 (RFC 6581)
//!  18..20 PD_Length    u16 BE, at most 512
//!  20..   private data; with rev 2 + enhanced, it starts with IRD:u16 BE, ORD:u16 BE
//! ```

use super::{MAX_PRIVATE_DATA, REP_KEY, REQ_KEY, STARTUP_HEADER_LEN};
use crate::wire::{Error, Result};

const FLAG_MARKERS: u8 = 0x80;
const FLAG_CRC: u8 = 0x40;
const FLAG_REJECT: u8 = 0x20;
const FLAG_ENHANCED: u8 = 0x10;
const FLAG_RESERVED: u8 = 0x0f;

const IRD_ORD_LEN: usize = 4;
const CTRL_HIGH: u16 = 0x8000;
const CTRL_LOW: u16 = 0x4000;
const CTRL_VALUE: u16 = 0x3fff;

mod field {
    use core::ops::Range;

    pub const KEY: Range<usize> = 0..16;
    pub const FLAGS: usize = 16;
    pub const REV: usize = 17;
    pub const PD_LEN: Range<usize> = 18..20;
}

/// Which of the two start-up frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Sent by the initiator (the side that called connect).
    Request,
    /// Sent by the responder.
    Reply,
}

impl FrameKind {
    /// The 16-octet key that opens a frame of this kind.
    pub fn key(self) -> &'static [u8; 16] {
        match self {
            FrameKind::Request => REQ_KEY,
            FrameKind::Reply => REP_KEY,
        }
    }
}

/// RFC 6581 enhanced connection data: the first four octets of a revision-2 frame's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrdOrd {
    /// Inbound RDMA Read queue depth, 14 bits.
    pub ird: u16,
    /// Outbound RDMA Read queue depth, 14 bits.
    pub ord: u16,
    /// IRD bit 0x8000: the initiator will send a ready-to-receive message first.
    pub peer_to_peer: bool,
    /// IRD bit 0x4000: a zero-length Send may serve as that message.
    pub zero_length_rtr: bool,
    /// ORD bit 0x8000: a zero-length RDMA Write may serve as that message.
    pub write_rtr: bool,
    /// ORD bit 0x4000: a zero-length RDMA Read may serve as that message.
    pub read_rtr: bool,
}

impl IrdOrd {
    fn parse(b: [u8; IRD_ORD_LEN]) -> IrdOrd {
        let ird = u16::from_be_bytes([b[0], b[1]]);
        let ord = u16::from_be_bytes([b[2], b[3]]);
        IrdOrd {
            ird: ird & CTRL_VALUE,
            ord: ord & CTRL_VALUE,
            peer_to_peer: ird & CTRL_HIGH != 0,
            zero_length_rtr: ird & CTRL_LOW != 0,
            write_rtr: ord & CTRL_HIGH != 0,
            read_rtr: ord & CTRL_LOW != 0,
        }
    }

    fn emit(&self) -> Result<[u8; IRD_ORD_LEN]> {
        if self.ird > CTRL_VALUE || self.ord > CTRL_VALUE {
            return Err(Error::OutOfRange("MPA IRD/ORD above 14 bits"));
        }
        let flag = |on: bool, bit: u16| if on { bit } else { 0 };
        let ird =
            self.ird | flag(self.peer_to_peer, CTRL_HIGH) | flag(self.zero_length_rtr, CTRL_LOW);
        let ord = self.ord | flag(self.write_rtr, CTRL_HIGH) | flag(self.read_rtr, CTRL_LOW);
        let (i, o) = (ird.to_be_bytes(), ord.to_be_bytes());
        Ok([i[0], i[1], o[0], o[1]])
    }
}

/// A read view of a complete start-up frame.
///
/// [`StartupFrame::new_checked`] makes sure the header and all PD_Length octets of private data are
/// in the buffer, so every accessor is in bounds; after `new_unchecked` on a short buffer they may
/// panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> StartupFrame<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> StartupFrame<T> {
        StartupFrame { buffer }
    }

    /// Wraps a buffer that holds at least one whole frame (it may hold more).
    pub fn new_checked(buffer: T) -> Result<StartupFrame<T>> {
        let frame = StartupFrame::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that the header and the private data it announces are all present.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < STARTUP_HEADER_LEN {
            return Err(Error::Truncated {
                need: STARTUP_HEADER_LEN,
                have,
            });
        }
        let need = self.frame_len();
        if have < need {
            return Err(Error::Truncated { need, have });
        }
        Ok(())
    }

    /// The 16-octet key.
    pub fn key(&self) -> &[u8] {
        &self.buffer.as_ref()[field::KEY]
    }

    /// The flags octet, reserved bits included.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// M: the sender of this frame wants the receiver to put markers in the FPDUs it sends back.
    pub fn markers(&self) -> bool {
        self.flags() & FLAG_MARKERS != 0
    }

    /// C: the sender wants CRCs.
    pub fn crc(&self) -> bool {
        self.flags() & FLAG_CRC != 0
    }

    /// R: the responder rejects the connection (meaningful in a Reply).
    pub fn reject(&self) -> bool {
        self.flags() & FLAG_REJECT != 0
    }

    /// RFC 6581's enhanced flag: IRD/ORD lead the private data.
    pub fn enhanced(&self) -> bool {
        self.flags() & FLAG_ENHANCED != 0
    }

    /// The revision octet.
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref()[field::REV]
    }

    /// PD_Length: octets of private data, IRD/ORD included.
    pub fn pd_len(&self) -> usize {
        let b = &self.buffer.as_ref()[field::PD_LEN];
        usize::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Octets the whole frame takes: header plus private data.
    pub fn frame_len(&self) -> usize {
        STARTUP_HEADER_LEN + self.pd_len()
    }

    /// All private data, IRD/ORD included.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[STARTUP_HEADER_LEN..self.frame_len()]
    }
}

/// A start-up frame, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupRepr {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M flag: asks the receiver of this frame to send markers.
    pub markers: bool,
    /// C flag: asks for CRCs (both ways, see [`negotiate`]).
    pub crc: bool,
    /// R flag: a Reply that rejects the connection.
    pub reject: bool,
    /// 1 or 2.
    pub revision: u8,
    /// RFC 6581 IRD/ORD; `Some` exactly when the enhanced flag is set (revision 2 only).
    pub ird_ord: Option<IrdOrd>,
    /// The ULP's private data, after IRD/ORD when those are present.
    pub private_data: Vec<u8>,
}

impl StartupRepr {
    /// Parses one frame from the front of `buf`.
    ///
    /// `Ok(None)` means `buf` is a valid but incomplete start of a frame; `Ok(Some((frame, n)))`
    /// means the frame took the first `n` octets, and any octets after it are the peer's first
    /// FPDUs. Errors are found as early as the octets allow: a wrong key is reported from its
    /// first wrong octet, a bad header before the private data arrives.
    pub fn parse(buf: &[u8]) -> Result<Option<(StartupRepr, usize)>> {
        let key_have = buf.len().min(REQ_KEY.len());
        let kind = if buf[..key_have] == REQ_KEY[..key_have] {
            FrameKind::Request
        } else if buf[..key_have] == REP_KEY[..key_have] {
            FrameKind::Reply
        } else {
            return Err(Error::BadMpaKey);
        };
        if buf.len() < STARTUP_HEADER_LEN {
            return Ok(None);
        }
        let frame = StartupFrame::new_unchecked(buf);
        let (flags, revision) = (frame.flags(), frame.revision());
        if revision != 1 && revision != 2 {
            return Err(Error::BadMpaRevision(revision));
        }
        if flags & FLAG_RESERVED != 0 {
            return Err(Error::ReservedBits("MPA start-up flags"));
        }
        if frame.enhanced() && revision != 2 {
            return Err(Error::ReservedBits(
                "MPA enhanced flag in a revision 1 frame",
            ));
        }
        let pd_len = frame.pd_len();
        if pd_len > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong(pd_len));
        }
        if frame.enhanced() && pd_len < IRD_ORD_LEN {
            return Err(Error::Malformed("MPA enhanced frame too short for IRD/ORD"));
        }
        if buf.len() < frame.frame_len() {
            return Ok(None);
        }
        let pd = frame.private_data();
        let (ird_ord, ulp) = match pd.split_first_chunk::<IRD_ORD_LEN>() {
            Some((head, rest)) if frame.enhanced() => (Some(IrdOrd::parse(*head)), rest),
            _ => (None, pd),
        };
        let repr = StartupRepr {
            kind,
            markers: frame.markers(),
            crc: frame.crc(),
            reject: frame.reject(),
            revision,
            ird_ord,
            private_data: ulp.to_vec(),
        };
        Ok(Some((repr, frame.frame_len())))
    }

    /// PD_Length of this frame: IRD/ORD plus the ULP's private data.
    pub fn pd_len(&self) -> usize {
        self.ird_ord.map_or(0, |_| IRD_ORD_LEN) + self.private_data.len()
    }

    /// Octets [`StartupRepr::emit`] produces.
    pub fn buffer_len(&self) -> usize {
        STARTUP_HEADER_LEN + self.pd_len()
    }

    /// The frame's octets.
    pub fn emit(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.buffer_len());
        self.emit_into(&mut out)?;
        Ok(out)
    }

    /// Appends the frame's octets to `out`; on error nothing is appended.
    pub fn emit_into(&self, out: &mut Vec<u8>) -> Result<()> {
        if self.revision != 1 && self.revision != 2 {
            return Err(Error::BadMpaRevision(self.revision));
        }
        let pd_len = self.pd_len();
        if pd_len > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong(pd_len));
        }
        let ird_ord = match self.ird_ord {
            Some(_) if self.revision != 2 => {
                return Err(Error::Malformed("MPA IRD/ORD needs revision 2"));
            }
            Some(io) => Some(io.emit()?),
            None => None,
        };
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        let flags = flag(self.markers, FLAG_MARKERS)
            | flag(self.crc, FLAG_CRC)
            | flag(self.reject, FLAG_REJECT)
            | flag(ird_ord.is_some(), FLAG_ENHANCED);
        out.reserve(self.buffer_len());
        out.extend_from_slice(self.kind.key());
        out.push(flags);
        out.push(self.revision);
        // pd_len ≤ 512 was checked above.
        out.extend_from_slice(&(pd_len as u16).to_be_bytes());
        if let Some(io) = ird_ord {
            out.extend_from_slice(&io);
        }
        out.extend_from_slice(&self.private_data);
        Ok(())
    }
}

/// What the two start-up frames settled, seen from the local side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The local side puts markers in the FPDUs it sends (the peer set M).
    pub markers_tx: bool,
    /// The peer puts markers in the FPDUs it sends (the local side set M).
    pub markers_rx: bool,
    /// CRCs are generated and checked in both directions.
    pub crc: bool,
}

/// Settles markers and CRC from the frame this side sent (`local`) and the one it received
/// (`remote`), RFC 5044 §7.1:
///
/// - C: CRCs are used in both directions when either frame sets C;
/// - M: a frame's M asks the frame's *receiver* to insert markers into the FPDUs it sends to the
///   frame's sender (Wireshark: a Request's M means "the initiator expects the responder to
///   insert markers"), so markers are chosen separately for each direction;
/// - R in a Reply rejects the connection ([`Error::MpaRejected`]), whichever side sent it;
/// - a Reply's revision may not exceed the Request's (RFC 6581: a responder answers with the
///   revision it will use).
///
/// One frame must be a Request and the other a Reply.
pub fn negotiate(local: &StartupRepr, remote: &StartupRepr) -> Result<Negotiated> {
    let (request, reply) = match (local.kind, remote.kind) {
        (FrameKind::Request, FrameKind::Reply) => (local, remote),
        (FrameKind::Reply, FrameKind::Request) => (remote, local),
        _ => {
            return Err(Error::Malformed(
                "MPA negotiation needs one Request and one Reply",
            ))
        }
    };
    if reply.reject {
        return Err(Error::MpaRejected);
    }
    if reply.revision > request.revision {
        return Err(Error::BadMpaRevision(reply.revision));
    }
    Ok(Negotiated {
        markers_tx: remote.markers,
        markers_rx: local.markers,
        crc: local.crc || remote.crc,
    })
}

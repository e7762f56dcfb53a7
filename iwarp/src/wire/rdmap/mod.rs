//! RDMAP (RFC 5040 §4, RFC 7306 §4) on top of DDP: the control byte, segment headers, and the
//! opcode-specific headers carried at the start of an untagged message's payload.
//!
//! RDMAP's control field is DDP's RsvdULP\[0:7\] (byte 1 of the segment): RV (two bits, = 1),
//! two reserved bits, a four-bit opcode. Its RsvdULP\[8:39\] is the Invalidate STag of the
//! Send-with-Invalidate opcodes and reserved (zero) for every other untagged opcode.

use super::ddp::{self, be32, be64, Placement};
use super::{Error, Result};

/// The RDMAP version RFC 5040 defines (0 was the RDMA Consortium draft).
pub const RDMAP_VERSION: u8 = 1;
/// Longest RDMAP segment header (untagged); tagged headers are [`ddp::TAGGED_HEADER_LEN`].
pub const MAX_HEADER_LEN: usize = ddp::UNTAGGED_HEADER_LEN;

/// Untagged queue of Send, Send-with-Invalidate/SE and (RFC 7306) Immediate Data messages.
pub const QUEUE_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests.
pub const QUEUE_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminate messages.
pub const QUEUE_TERMINATE: u32 = 2;
/// Untagged queue of RFC 7306 Atomic Requests and Responses.
pub const QUEUE_ATOMIC: u32 = 3;
/// Number of untagged queues RDMAP uses; queue numbers fit in the low two bits of the DDP QN.
pub const NUM_QUEUES: u32 = 4;

/// `Error::Malformed` text when the DDP T bit disagrees with the opcode's buffer model.
pub const ERR_MODEL_MISMATCH: &str = "DDP T bit does not match the RDMAP opcode";
/// `Error::Malformed` text when an untagged segment's queue is not its opcode's queue.
pub const ERR_WRONG_QUEUE: &str = "DDP queue number does not match the RDMAP opcode";
/// `Error::Malformed` text for an atomic opcode RFC 7306 does not define.
pub const ERR_ATOMIC_OPCODE: &str = "unknown RFC 7306 atomic opcode";

const MASK_RV: u8 = 0xc0;
const MASK_RESERVED: u8 = 0x30;
const MASK_OPCODE: u8 = 0x0f;

/// RDMAP message types (RFC 5040 §4.2, RFC 7306 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    RdmaWrite = 0x0,
    ReadRequest = 0x1,
    ReadResponse = 0x2,
    Send = 0x3,
    SendInvalidate = 0x4,
    SendSolicited = 0x5,
    SendSolicitedInvalidate = 0x6,
    Terminate = 0x7,
    ImmediateData = 0x8,
    ImmediateDataSolicited = 0x9,
    AtomicRequest = 0xA,
    AtomicResponse = 0xB,
}

impl Opcode {
    /// Every opcode, in wire order.
    pub const ALL: [Opcode; 12] = [
        Opcode::RdmaWrite,
        Opcode::ReadRequest,
        Opcode::ReadResponse,
        Opcode::Send,
        Opcode::SendInvalidate,
        Opcode::SendSolicited,
        Opcode::SendSolicitedInvalidate,
        Opcode::Terminate,
        Opcode::ImmediateData,
        Opcode::ImmediateDataSolicited,
        Opcode::AtomicRequest,
        Opcode::AtomicResponse,
    ];

    /// RDMA Write and Read Response use the tagged buffer model; all others are untagged.
    pub fn is_tagged(self) -> bool {
        matches!(self, Opcode::RdmaWrite | Opcode::ReadResponse)
    }

    /// The untagged queue the opcode travels on ([`QUEUE_SEND`] …  [`QUEUE_ATOMIC`]).
    /// Tagged opcodes have no queue; they return 0.
    pub fn queue(self) -> u32 {
        match self {
            Opcode::ReadRequest => QUEUE_READ_REQUEST,
            Opcode::Terminate => QUEUE_TERMINATE,
            Opcode::AtomicRequest | Opcode::AtomicResponse => QUEUE_ATOMIC,
            _ => QUEUE_SEND,
        }
    }

    /// Send with Invalidate (with or without SE): RsvdULP\[8:39\] is the STag to invalidate.
    pub fn carries_inval_stag(self) -> bool {
        matches!(
            self,
            Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate
        )
    }

    /// The Solicited Event variants.
    pub fn solicited(self) -> bool {
        matches!(
            self,
            Opcode::SendSolicited
                | Opcode::SendSolicitedInvalidate
                | Opcode::ImmediateDataSolicited
        )
    }

    /// The RDMAP control byte for this opcode (RV = 1, reserved bits zero).
    pub fn control_byte(self) -> u8 {
        (RDMAP_VERSION << 6) | self as u8
    }
}

impl TryFrom<u8> for Opcode {
    type Error = Error;

    /// Maps a four-bit opcode; 0xC..=0xF and anything wider are `UnknownOpcode`.
    fn try_from(v: u8) -> Result<Opcode> {
        Opcode::ALL
            .get(usize::from(v))
            .copied()
            .ok_or(Error::UnknownOpcode(v))
    }
}

/// An RDMAP segment header: the DDP header with RDMAP's reading of its ULP fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRepr {
    pub opcode: Opcode,
    pub last: bool,
    pub placement: Placement,
}

impl SegmentRepr {
    /// A tagged segment (RDMA Write or Read Response).
    pub fn tagged(opcode: Opcode, last: bool, stag: u32, offset: u64) -> SegmentRepr {
        SegmentRepr {
            opcode,
            last,
            placement: Placement::Tagged { stag, offset },
        }
    }

    /// An untagged segment with a zero RsvdULP\[8:39\].
    pub fn untagged(opcode: Opcode, last: bool, qn: u32, msn: u32, mo: u32) -> SegmentRepr {
        SegmentRepr {
            opcode,
            last,
            placement: Placement::Untagged {
                inval_stag: 0,
                qn,
                msn,
                mo,
            },
        }
    }

    /// 14 for tagged, 18 for untagged.
    pub fn header_len(&self) -> usize {
        self.placement.header_len()
    }

    /// Splits a DDP segment into its header and payload.
    ///
    /// Rejects, in this order: a short buffer (`Truncated`), DV ≠ 1 (`BadDdpVersion`), DDP
    /// reserved bits (`ReservedBits`), RV ≠ 1 (`BadRdmapVersion`), RDMAP reserved bits
    /// (`ReservedBits`), an unknown opcode (`UnknownOpcode`), a T bit that disagrees with the
    /// opcode ([`ERR_MODEL_MISMATCH`]), an untagged queue (QN & 3) that is not the opcode's
    /// ([`ERR_WRONG_QUEUE`]), and a non-zero RsvdULP\[8:39\] on opcodes that do not invalidate.
    pub fn parse(segment: &[u8]) -> Result<(SegmentRepr, &[u8])> {
        let packet = ddp::Packet::new_checked(segment)?;
        let d = ddp::Repr::parse(&packet)?;
        let rv = (d.ulp_ctrl & MASK_RV) >> 6;
        if rv != RDMAP_VERSION {
            return Err(Error::BadRdmapVersion(rv));
        }
        if d.ulp_ctrl & MASK_RESERVED != 0 {
            return Err(Error::ReservedBits("RDMAP control"));
        }
        let seg = SegmentRepr {
            opcode: Opcode::try_from(d.ulp_ctrl & MASK_OPCODE)?,
            last: d.last,
            placement: d.placement,
        };
        seg.check()?;
        Ok((seg, packet.payload()))
    }

    /// Writes the header into `buf[..header_len()]` and returns its length. Refuses a repr
    /// that [`SegmentRepr::parse`] would reject, and a short buffer (`Truncated`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        self.check()?;
        let hl = self.header_len();
        let Some(header) = buf.get_mut(..hl) else {
            return Err(Error::Truncated {
                need: hl,
                have: buf.len(),
            });
        };
        ddp::Repr {
            last: self.last,
            ulp_ctrl: self.opcode.control_byte(),
            placement: self.placement,
        }
        .emit(&mut ddp::Packet::new_unchecked(header));
        Ok(hl)
    }

    /// The consistency rules shared by parse and emit.
    fn check(&self) -> Result<()> {
        if self.opcode.is_tagged() != self.placement.is_tagged() {
            return Err(Error::Malformed(ERR_MODEL_MISMATCH));
        }
        if let Placement::Untagged { inval_stag, qn, .. } = self.placement {
            if qn % NUM_QUEUES != self.opcode.queue() {
                return Err(Error::Malformed(ERR_WRONG_QUEUE));
            }
            if inval_stag != 0 && !self.opcode.carries_inval_stag() {
                return Err(Error::ReservedBits("RDMAP RsvdULP[8:39]"));
            }
        }
        Ok(())
    }
}

fn truncated<T>(need: usize, have: usize) -> Result<T> {
    Err(Error::Truncated { need, have })
}

fn out(buf: &mut [u8], need: usize) -> Result<&mut [u8]> {
    let have = buf.len();
    buf.get_mut(..need).ok_or(Error::Truncated { need, have })
}

/// RDMA Read Request header (RFC 5040 §4.4), 28 bytes after the untagged DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequestRepr {
    /// Data sink STag: where the Read Response places the data.
    pub sink_stag: u32,
    /// Data sink tagged offset.
    pub sink_to: u64,
    /// RDMARDSZ: bytes to read.
    pub len: u32,
    /// Data source STag at the responder.
    pub src_stag: u32,
    /// Data source tagged offset.
    pub src_to: u64,
}

impl ReadRequestRepr {
    /// Header length.
    pub const LEN: usize = 28;

    /// Reads the header; returns it and the bytes after it.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8])> {
        if buf.len() < Self::LEN {
            return truncated(Self::LEN, buf.len());
        }
        let repr = ReadRequestRepr {
            sink_stag: be32(&buf[0..4]),
            sink_to: be64(&buf[4..12]),
            len: be32(&buf[12..16]),
            src_stag: be32(&buf[16..20]),
            src_to: be64(&buf[20..28]),
        };
        Ok((repr, &buf[Self::LEN..]))
    }

    /// Writes the header; returns [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, Self::LEN)?;
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.len.to_be_bytes());
        b[16..20].copy_from_slice(&self.src_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.src_to.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Terminate layers, error types and codes (RFC 5040 §4.8, RFC 5044 §8, RFC 6581), as Linux
/// siw and Wireshark number them.
pub mod term {
    /// Layer: RDMAP.
    pub const LAYER_RDMAP: u8 = 0;
    /// Layer: DDP.
    pub const LAYER_DDP: u8 = 1;
    /// Layer: the lower-layer protocol (MPA, or diwarp's datagram framing).
    pub const LAYER_LLP: u8 = 2;

    /// RDMAP etype: local catastrophic error.
    pub const RDMAP_CATASTROPHIC: u8 = 0;
    /// RDMAP etype: remote protection error.
    pub const RDMAP_REMOTE_PROTECTION: u8 = 1;
    /// RDMAP etype: remote operation error.
    pub const RDMAP_REMOTE_OPERATION: u8 = 2;

    /// RDMAP ecode: invalid STag.
    pub const RDMAP_INVALID_STAG: u8 = 0x00;
    /// RDMAP ecode: base or bounds violation.
    pub const RDMAP_BASE_BOUNDS: u8 = 0x01;
    /// RDMAP ecode: access rights violation.
    pub const RDMAP_ACCESS_RIGHTS: u8 = 0x02;
    /// RDMAP ecode: STag not associated with this RDMAP stream.
    pub const RDMAP_STAG_NOT_ASSOCIATED: u8 = 0x03;
    /// RDMAP ecode: tagged offset wrap.
    pub const RDMAP_TO_WRAP: u8 = 0x04;
    /// RDMAP ecode: invalid RDMAP version.
    pub const RDMAP_VERSION: u8 = 0x05;
    /// RDMAP ecode: unexpected opcode.
    pub const RDMAP_OPCODE: u8 = 0x06;
    /// RDMAP ecode: catastrophic error localized to the stream.
    pub const RDMAP_CATASTROPHIC_STREAM: u8 = 0x07;
    /// RDMAP ecode: catastrophic error, global.
    pub const RDMAP_CATASTROPHIC_GLOBAL: u8 = 0x08;
    /// RDMAP ecode: STag cannot be invalidated.
    pub const RDMAP_CANNOT_INVALIDATE: u8 = 0x09;
    /// RDMAP ecode: unspecified.
    pub const RDMAP_UNSPECIFIED: u8 = 0xff;

    /// DDP etype: local catastrophic error.
    pub const DDP_CATASTROPHIC: u8 = 0;
    /// DDP etype: tagged buffer error.
    pub const DDP_TAGGED: u8 = 1;
    /// DDP etype: untagged buffer error.
    pub const DDP_UNTAGGED: u8 = 2;

    /// DDP tagged ecode: invalid STag.
    pub const DDP_T_INVALID_STAG: u8 = 0x00;
    /// DDP tagged ecode: base or bounds violation.
    pub const DDP_T_BASE_BOUNDS: u8 = 0x01;
    /// DDP tagged ecode: STag not associated with this stream.
    pub const DDP_T_STAG_NOT_ASSOCIATED: u8 = 0x02;
    /// DDP tagged ecode: tagged offset wrap.
    pub const DDP_T_TO_WRAP: u8 = 0x03;
    /// DDP tagged ecode: invalid DDP version.
    pub const DDP_T_VERSION: u8 = 0x04;
    /// DDP untagged ecode: invalid queue number.
    pub const DDP_U_INVALID_QN: u8 = 0x01;
    /// DDP untagged ecode: invalid MSN, no buffer available.
    pub const DDP_U_NO_BUFFER: u8 = 0x02;
    /// DDP untagged ecode: invalid MSN, out of range.
    pub const DDP_U_MSN_RANGE: u8 = 0x03;
    /// DDP untagged ecode: invalid message offset.
    pub const DDP_U_INVALID_MO: u8 = 0x04;
    /// DDP untagged ecode: message too long for the receive buffer.
    pub const DDP_U_TOO_LONG: u8 = 0x05;
    /// DDP untagged ecode: invalid DDP version.
    pub const DDP_U_VERSION: u8 = 0x06;

    /// LLP etype: MPA (the only one).
    pub const LLP_MPA: u8 = 0;
    /// LLP ecode: TCP connection closed, terminated or lost.
    pub const LLP_STREAM_LOST: u8 = 0x01;
    /// LLP ecode: CRC error.
    pub const LLP_CRC: u8 = 0x02;
    /// LLP ecode: marker and ULPDU length mismatch.
    pub const LLP_MARKER: u8 = 0x03;
    /// LLP ecode: invalid MPA request or reply frame.
    pub const LLP_BAD_REQ_REP: u8 = 0x04;
    /// LLP ecode: local catastrophic error (RFC 6581).
    pub const LLP_CATASTROPHIC: u8 = 0x05;
    /// LLP ecode: insufficient IRD resources (RFC 6581).
    pub const LLP_INSUFFICIENT_IRD: u8 = 0x06;
    /// LLP ecode: no matching RTR option (RFC 6581).
    pub const LLP_NO_MATCHING_RTR: u8 = 0x07;
}

/// The DDP segment length and copied DDP header a Terminate carries when its D bit is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminatedDdp {
    /// DDP Segment Length of the offending segment.
    pub segment_len: u16,
    header: [u8; ddp::UNTAGGED_HEADER_LEN],
}

impl TerminatedDdp {
    /// Copies the offending segment's DDP header: 14 bytes if its T bit is set, else 18.
    /// `header` may be longer (the whole segment); the rest is ignored.
    pub fn new(segment_len: u16, header: &[u8]) -> Result<TerminatedDdp> {
        let Some(&first) = header.first() else {
            return truncated(ddp::TAGGED_HEADER_LEN, 0);
        };
        let hl = ddp::header_len_for(first);
        if header.len() < hl {
            return truncated(hl, header.len());
        }
        let mut copy = [0; ddp::UNTAGGED_HEADER_LEN];
        copy[..hl].copy_from_slice(&header[..hl]);
        Ok(TerminatedDdp {
            segment_len,
            header: copy,
        })
    }

    /// The copied header, 14 or 18 bytes. Not validated: it is the header that was at fault.
    pub fn header(&self) -> &[u8] {
        &self.header[..ddp::header_len_for(self.header[0])]
    }

    fn wire_len(&self) -> usize {
        2 + self.header().len()
    }
}

/// Terminate header (RFC 5040 §4.8): what failed, and optionally copies of the offending
/// headers.
///
/// ```text
/// Terminate Control:u32  layer:4 etype:4 ecode:8 M:1 D:1 R:1 reserved:13
/// if D: DDP Segment Length:u16, then the DDP header (14 or 18 bytes, by its own T bit)
/// if R: the RDMAP header (28 bytes, the Read Request header)
/// ```
///
/// M only says that the segment length is valid; as in Wireshark's dissector, the length field
/// is on the wire when D is set. Linux siw always sets M together with D.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateRepr {
    /// 0 RDMAP, 1 DDP, 2 LLP (see [`term`]); four bits.
    pub layer: u8,
    /// Error type within the layer; four bits.
    pub etype: u8,
    /// Error code within the type.
    pub ecode: u8,
    /// M: the DDP Segment Length is valid.
    pub segment_len_valid: bool,
    /// D: the offending DDP header, with its segment length.
    pub ddp: Option<TerminatedDdp>,
    /// R: the offending RDMAP header.
    pub rdmap: Option<[u8; ReadRequestRepr::LEN]>,
}

const TERM_M: u32 = 0x8000;
const TERM_D: u32 = 0x4000;
const TERM_R: u32 = 0x2000;
const TERM_RESERVED: u32 = 0x1fff;

impl TerminateRepr {
    /// Shortest header: the control word alone.
    pub const MIN_LEN: usize = 4;
    /// Longest header: control, segment length, untagged DDP header, RDMAP header.
    pub const MAX_LEN: usize = 4 + 2 + ddp::UNTAGGED_HEADER_LEN + ReadRequestRepr::LEN;

    /// A Terminate that copies no headers.
    pub fn new(layer: u8, etype: u8, ecode: u8) -> TerminateRepr {
        TerminateRepr {
            layer,
            etype,
            ecode,
            segment_len_valid: false,
            ddp: None,
            rdmap: None,
        }
    }

    /// Bytes [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        Self::MIN_LEN
            + self.ddp.as_ref().map_or(0, TerminatedDdp::wire_len)
            + self.rdmap.map_or(0, |r| r.len())
    }

    /// Reads the header; returns it and the bytes after it.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8])> {
        if buf.len() < Self::MIN_LEN {
            return truncated(Self::MIN_LEN, buf.len());
        }
        let ctrl = be32(&buf[0..4]);
        if ctrl & TERM_RESERVED != 0 {
            return Err(Error::ReservedBits("Terminate control"));
        }
        let mut at = Self::MIN_LEN;
        let ddp = if ctrl & TERM_D != 0 {
            // The copied header's own T bit says how long it is.
            let hl = buf
                .get(at + 2)
                .map_or(ddp::TAGGED_HEADER_LEN, |&c| ddp::header_len_for(c));
            if buf.len() < at + 2 + hl {
                return truncated(at + 2 + hl, buf.len());
            }
            let seg_len = u16::from_be_bytes([buf[at], buf[at + 1]]);
            let t = TerminatedDdp::new(seg_len, &buf[at + 2..at + 2 + hl])?;
            at += 2 + hl;
            Some(t)
        } else {
            None
        };
        let rdmap = if ctrl & TERM_R != 0 {
            let end = at + ReadRequestRepr::LEN;
            let Some(src) = buf.get(at..end) else {
                return truncated(end, buf.len());
            };
            let mut h = [0; ReadRequestRepr::LEN];
            h.copy_from_slice(src);
            at = end;
            Some(h)
        } else {
            None
        };
        let repr = TerminateRepr {
            layer: (ctrl >> 28) as u8,
            etype: ((ctrl >> 24) & 0xf) as u8,
            ecode: (ctrl >> 16) as u8,
            segment_len_valid: ctrl & TERM_M != 0,
            ddp,
            rdmap,
        };
        Ok((repr, &buf[at..]))
    }

    /// Writes the header; returns [`Self::buffer_len`]. Layer and etype must fit in four bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.layer > 0xf {
            return Err(Error::OutOfRange("Terminate layer"));
        }
        if self.etype > 0xf {
            return Err(Error::OutOfRange("Terminate etype"));
        }
        let len = self.buffer_len();
        let have = buf.len();
        let Some(b) = buf.get_mut(..len) else {
            return truncated(len, have);
        };
        let mut ctrl =
            u32::from(self.layer) << 28 | u32::from(self.etype) << 24 | u32::from(self.ecode) << 16;
        if self.segment_len_valid {
            ctrl |= TERM_M;
        }
        if self.ddp.is_some() {
            ctrl |= TERM_D;
        }
        if self.rdmap.is_some() {
            ctrl |= TERM_R;
        }
        b[0..4].copy_from_slice(&ctrl.to_be_bytes());
        let mut at = Self::MIN_LEN;
        if let Some(d) = &self.ddp {
            b[at..at + 2].copy_from_slice(&d.segment_len.to_be_bytes());
            let h = d.header();
            b[at + 2..at + 2 + h.len()].copy_from_slice(h);
            at += 2 + h.len();
        }
        if let Some(r) = &self.rdmap {
            b[at..at + r.len()].copy_from_slice(r);
        }
        Ok(len)
    }
}

/// RFC 7306 atomic operations (the AOpCode field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AtomicOp {
    /// Masked fetch-and-add.
    FetchAdd = 0,
    /// Masked swap.
    Swap = 1,
    /// Masked compare-and-swap.
    CompareSwap = 2,
}

impl TryFrom<u8> for AtomicOp {
    type Error = Error;

    fn try_from(v: u8) -> Result<AtomicOp> {
        match v {
            0 => Ok(AtomicOp::FetchAdd),
            1 => Ok(AtomicOp::Swap),
            2 => Ok(AtomicOp::CompareSwap),
            _ => Err(Error::Malformed(ERR_ATOMIC_OPCODE)),
        }
    }
}

/// Atomic Request header (RFC 7306 §4.2), 52 bytes on untagged queue 3.
///
/// ```text
/// reserved:28 AOpCode:4 | Request Identifier:u32 | Remote STag:u32 | Remote TO:u64 |
/// Add or Swap Data:u64 | Add or Swap Mask:u64 | Compare Data:u64 | Compare Mask:u64
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicRequestRepr {
    pub op: AtomicOp,
    /// Echoed in the response so the requester can match it.
    pub request_id: u32,
    /// STag of the remote 64-bit word.
    pub stag: u32,
    /// Tagged offset of the remote word.
    pub offset: u64,
    pub add_swap_data: u64,
    pub add_swap_mask: u64,
    pub compare_data: u64,
    pub compare_mask: u64,
}

impl AtomicRequestRepr {
    /// Header length.
    pub const LEN: usize = 52;

    /// Reads the header; returns it and the bytes after it.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8])> {
        if buf.len() < Self::LEN {
            return truncated(Self::LEN, buf.len());
        }
        let first = be32(&buf[0..4]);
        if first & !0xf != 0 {
            return Err(Error::ReservedBits("Atomic Request"));
        }
        let repr = AtomicRequestRepr {
            op: AtomicOp::try_from(first as u8)?,
            request_id: be32(&buf[4..8]),
            stag: be32(&buf[8..12]),
            offset: be64(&buf[12..20]),
            add_swap_data: be64(&buf[20..28]),
            add_swap_mask: be64(&buf[28..36]),
            compare_data: be64(&buf[36..44]),
            compare_mask: be64(&buf[44..52]),
        };
        Ok((repr, &buf[Self::LEN..]))
    }

    /// Writes the header; returns [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, Self::LEN)?;
        b[0..4].copy_from_slice(&u32::from(self.op as u8).to_be_bytes());
        b[4..8].copy_from_slice(&self.request_id.to_be_bytes());
        b[8..12].copy_from_slice(&self.stag.to_be_bytes());
        b[12..20].copy_from_slice(&self.offset.to_be_bytes());
        b[20..28].copy_from_slice(&self.add_swap_data.to_be_bytes());
        b[28..36].copy_from_slice(&self.add_swap_mask.to_be_bytes());
        b[36..44].copy_from_slice(&self.compare_data.to_be_bytes());
        b[44..52].copy_from_slice(&self.compare_mask.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Atomic Response header (RFC 7306 §4.3), 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicResponseRepr {
    /// The request's identifier.
    pub request_id: u32,
    /// The remote word's value before the operation.
    pub original: u64,
}

impl AtomicResponseRepr {
    /// Header length.
    pub const LEN: usize = 12;

    /// Reads the header; returns it and the bytes after it.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8])> {
        if buf.len() < Self::LEN {
            return truncated(Self::LEN, buf.len());
        }
        let repr = AtomicResponseRepr {
            request_id: be32(&buf[0..4]),
            original: be64(&buf[4..12]),
        };
        Ok((repr, &buf[Self::LEN..]))
    }

    /// Writes the header; returns [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, Self::LEN)?;
        b[0..4].copy_from_slice(&self.request_id.to_be_bytes());
        b[4..12].copy_from_slice(&self.original.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Immediate Data header (RFC 7306 §4.4): eight bytes of data, the whole message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImmediateDataRepr {
    pub data: u64,
}

impl ImmediateDataRepr {
    /// Header length.
    pub const LEN: usize = 8;

    /// Reads the header; returns it and the bytes after it.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8])> {
        if buf.len() < Self::LEN {
            return truncated(Self::LEN, buf.len());
        }
        Ok((
            ImmediateDataRepr {
                data: be64(&buf[0..8]),
            },
            &buf[Self::LEN..],
        ))
    }

    /// Writes the header; returns [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        out(buf, Self::LEN)?.copy_from_slice(&self.data.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// The opcode-specific header at the start of a message's payload, if the opcode has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpHeader {
    /// Writes, Read Responses and Sends carry only data.
    None,
    ReadRequest(ReadRequestRepr),
    Terminate(TerminateRepr),
    AtomicRequest(AtomicRequestRepr),
    AtomicResponse(AtomicResponseRepr),
    ImmediateData(ImmediateDataRepr),
}

impl OpHeader {
    /// Reads the header `opcode` puts at the start of `payload` (the first segment's payload);
    /// returns it and the bytes after it.
    pub fn parse(opcode: Opcode, payload: &[u8]) -> Result<(OpHeader, &[u8])> {
        Ok(match opcode {
            Opcode::ReadRequest => {
                let (r, rest) = ReadRequestRepr::parse(payload)?;
                (OpHeader::ReadRequest(r), rest)
            }
            Opcode::Terminate => {
                let (r, rest) = TerminateRepr::parse(payload)?;
                (OpHeader::Terminate(r), rest)
            }
            Opcode::AtomicRequest => {
                let (r, rest) = AtomicRequestRepr::parse(payload)?;
                (OpHeader::AtomicRequest(r), rest)
            }
            Opcode::AtomicResponse => {
                let (r, rest) = AtomicResponseRepr::parse(payload)?;
                (OpHeader::AtomicResponse(r), rest)
            }
            Opcode::ImmediateData | Opcode::ImmediateDataSolicited => {
                let (r, rest) = ImmediateDataRepr::parse(payload)?;
                (OpHeader::ImmediateData(r), rest)
            }
            _ => (OpHeader::None, payload),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            OpHeader::None => 0,
            OpHeader::ReadRequest(_) => ReadRequestRepr::LEN,
            OpHeader::Terminate(t) => t.buffer_len(),
            OpHeader::AtomicRequest(_) => AtomicRequestRepr::LEN,
            OpHeader::AtomicResponse(_) => AtomicResponseRepr::LEN,
            OpHeader::ImmediateData(_) => ImmediateDataRepr::LEN,
        }
    }

    /// Writes the header; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            OpHeader::None => Ok(0),
            OpHeader::ReadRequest(r) => r.emit(buf),
            OpHeader::Terminate(r) => r.emit(buf),
            OpHeader::AtomicRequest(r) => r.emit(buf),
            OpHeader::AtomicResponse(r) => r.emit(buf),
            OpHeader::ImmediateData(r) => r.emit(buf),
        }
    }
}

#[cfg(test)]
mod tests;

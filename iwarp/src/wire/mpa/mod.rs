//! MPA, Marker PDU Aligned framing for TCP (RFC 5044), with the enhanced connection set-up of
//! RFC 6581.
//!
//! An RC connection starts with one MPA Request frame (initiator → responder) and one MPA Reply
//! frame (responder → initiator), see [`StartupRepr`] and [`negotiate`]. After that each
//! direction carries FPDUs, one ULPDU (a DDP segment, opaque here) each:
//!
//! ```text
//! ULPDU_Length:u16 BE | ULPDU | PAD (0-3 zero octets, 2+len+pad ≡ 0 mod 4) | CRC32c (4 octets)
//! ```
//!
//! with, when the peer asked for them, 4-octet markers `0x0000 | FPDUPTR:u16 BE` inserted every
//! 512 octets of the stream (see [`marker`] for exactly where). [`FpduSender`] frames outgoing
//! ULPDUs; [`FpduDecoder`] takes the received byte stream cut anywhere and yields ULPDUs.
//!
//! A stream position (`stream_pos` in the docs) counts octets of one direction since the first
//! octet of its first FPDU; the start-up frames are not counted.

mod decoder;
mod fpdu;
pub mod marker;
mod startup;

pub use decoder::{Bypass, FpduDecoder};
pub use fpdu::{FpduSender, Frame};
pub use startup::{negotiate, FrameKind, IrdOrd, Negotiated, StartupFrame, StartupRepr};

/// Key of an MPA Request frame (RFC 5044 §7.1), sent by the initiator.
pub const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// Key of an MPA Reply frame (RFC 5044 §7.1), sent by the responder.
pub const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";
/// Largest PD_Length a start-up frame may carry, IRD/ORD included (RFC 5044 §7.1).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Octets of stream between the starts of two markers.
pub const MARKER_INTERVAL: u64 = 512;
/// Octets in one marker.
pub const MARKER_LEN: usize = 4;
/// Largest ULPDU the 16-bit ULPDU_Length can describe.
pub const MAX_ULPDU: usize = 65535;
/// Largest ULPDU that can be framed with markers wherever the FPDU starts.
///
/// FPDUPTR is 16 bits, so a marker can sit at most 65535 octets after its FPDU's ULPDU_Length.
/// The worst start is 4 octets before a marker; then 65022 octets of ULPDU still fit, 65023
/// do not. At luckier positions [`FpduSender::encode`] accepts more, but a sender should size
/// its ULPDUs (its MULPDU) below this when markers are on.
pub const MAX_ULPDU_MARKERS: usize = 65022;
/// Octets in the CRC field, which every FPDU carries even when CRCs are not in use.
pub const CRC_LEN: usize = 4;
/// Octets in the ULPDU_Length field.
pub const LENGTH_LEN: usize = 2;
/// Fixed part of a start-up frame: key, flags, revision, PD_Length.
pub const STARTUP_HEADER_LEN: usize = 20;
/// Upper bound of one FPDU on the wire, markers included: what a receive buffer must be able to
/// hold at once.
pub const MAX_FPDU_LEN: usize = 66048;
/// Smallest FPDU without markers: length field, 2 octets of pad, CRC.
pub const MIN_FPDU_LEN: usize = 8;

// Here rather than in `fpdu`: `marker` lays FPDUs out too, and sits below `fpdu`.
/// Zero octets after a ULPDU of `ulpdu_len` octets, so that ULPDU_Length, ULPDU and pad fill whole
/// 4-octet words (markers are 4 octets and do not change that).
pub fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (LENGTH_LEN + ulpdu_len) % 4) % 4
}

#[cfg(test)]
mod startup_tests;
#[cfg(test)]
mod tests;

//! Datagram-iWARP framing for UD/RD queue pairs (seed 000 §III): one DDP segment per UDP
//! datagram, no MPA length, markers or pad, and a CRC32c trailer.
//!
//! ```text
//! DDP/RDMAP header (14 or 18) | payload | CRC32c (4, little-endian wire order; zeros when off)
//! ```
//!
//! The trailer is always present so a datagram's layout does not depend on a setting; whether
//! it is checked is pre-agreed, as datagram QPs have no MPA negotiation. Several QPs share one
//! socket: the untagged DDP queue number carries the destination QP number in its high 30
//! bits and the RDMAP queue in its low two. Tagged segments name their target by STag alone.

use core::ops::Range;

use super::rdmap::{self, SegmentRepr};
use super::{Error, Result};
use crate::crc;

/// Trailer length.
pub const CRC_LEN: usize = 4;
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65507;
/// Largest QP number a datagram's queue number can carry.
pub const MAX_QPN: u32 = (1 << 30) - 1;
/// Shortest datagram: a tagged header and the trailer, no payload.
pub const MIN_DATAGRAM: usize = crate::wire::ddp::TAGGED_HEADER_LEN + CRC_LEN;

/// The DDP queue number for RDMAP `queue` (0..=3) of QP `qpn`. Bits above [`MAX_QPN`] and
/// above the two queue bits are dropped.
pub fn qn_for(qpn: u32, queue: u32) -> u32 {
    ((qpn & MAX_QPN) << 2) | (queue & (rdmap::NUM_QUEUES - 1))
}

/// Splits a DDP queue number into (QP number, RDMAP queue).
pub fn split_qn(qn: u32) -> (u32, u32) {
    (qn >> 2, qn & (rdmap::NUM_QUEUES - 1))
}

/// The trailer for a datagram made of `parts` (header, then payload pieces): the CRC32c in
/// wire order when `crc_enabled`, zeros otherwise.
pub fn trailer(crc_enabled: bool, parts: &[&[u8]]) -> [u8; CRC_LEN] {
    if crc_enabled {
        crc::to_wire(crc::crc32c_parts(parts))
    } else {
        [0; CRC_LEN]
    }
}

/// Parses a received datagram: returns its segment header and where its payload lies.
///
/// Checks the length (`Truncated` below the header plus trailer, `BadLength` above
/// [`MAX_DATAGRAM`]), then the CRC when `crc_enabled` (`BadCrc`, before any header field is
/// trusted), then the header as [`SegmentRepr::parse`] does. With CRC off the trailer is
/// ignored, so a peer that sends CRCs is still understood.
pub fn parse(datagram: &[u8], crc_enabled: bool) -> Result<(SegmentRepr, Range<usize>)> {
    let have = datagram.len();
    if have > MAX_DATAGRAM {
        return Err(Error::BadLength(have));
    }
    let need = datagram.first().map_or(MIN_DATAGRAM, |&c| {
        crate::wire::ddp::header_len_for(c) + CRC_LEN
    });
    if have < need {
        return Err(Error::Truncated { need, have });
    }
    let (body, tail) = datagram.split_at(have - CRC_LEN);
    if crc_enabled {
        let computed = crc::crc32c(body);
        let received = crc::from_wire([tail[0], tail[1], tail[2], tail[3]]);
        if computed != received {
            return Err(Error::BadCrc { computed, received });
        }
    }
    let (seg, _) = SegmentRepr::parse(body)?;
    Ok((seg, seg.header_len()..body.len()))
}

/// Builds a whole datagram. Fails if `seg` is inconsistent (as [`SegmentRepr::emit`]) or the
/// result would exceed [`MAX_DATAGRAM`] (`BadLength`).
pub fn try_encode(seg: &SegmentRepr, payload: &[u8], crc_enabled: bool) -> Result<Vec<u8>> {
    let len = seg.header_len() + payload.len() + CRC_LEN;
    if len > MAX_DATAGRAM {
        return Err(Error::BadLength(len));
    }
    let mut out = vec![0; len];
    let hl = seg.emit(&mut out)?;
    out[hl..hl + payload.len()].copy_from_slice(payload);
    let (body, tail) = out.split_at_mut(len - CRC_LEN);
    tail.copy_from_slice(&trailer(crc_enabled, &[body]));
    Ok(out)
}

/// Builds a whole datagram, for tests and fuzzing; the data path gathers header, payload and
/// [`trailer`] with iovecs instead.
///
/// # Panics
/// Where [`try_encode`] fails: an inconsistent `seg` or an oversized datagram.
pub fn encode(seg: &SegmentRepr, payload: &[u8], crc_enabled: bool) -> Vec<u8> {
    match try_encode(seg, payload, crc_enabled) {
        Ok(v) => v,
        Err(e) => panic!("datagram::encode: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::rdmap::Opcode;

    #[test]
    fn qn_packing() {
        assert_eq!(qn_for(0, 0), 0);
        assert_eq!(qn_for(1, 2), 6);
        assert_eq!(qn_for(MAX_QPN, 3), u32::MAX);
        assert_eq!(split_qn(qn_for(12345, 1)), (12345, 1));
        assert_eq!(qn_for(MAX_QPN + 1, 4), 0);
    }

    #[test]
    fn send_datagram_bytes() {
        let seg = SegmentRepr::untagged(Opcode::Send, true, qn_for(5, 0), 1, 0);
        let d = encode(&seg, b"hi", true);
        let mut want = vec![
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0x14, 0, 0, 0, 1, 0, 0, 0, 0, b'h', b'i',
        ];
        let crc = crate::crc::crc32c(&want).to_le_bytes();
        want.extend_from_slice(&crc);
        assert_eq!(d, want);
        assert_eq!(parse(&d, true).unwrap(), (seg, 18..20));
        assert_eq!(&encode(&seg, b"hi", false)[20..], &[0, 0, 0, 0]);
    }
}

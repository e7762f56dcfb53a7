//! Where markers go, and what they say.
//!
//! A marker is `RESERVED:u16 = 0 | FPDUPTR:u16`, both big-endian (RFC 5044 §4.3). Sources: the
//! RFC's text was not readable while this was written, so its wording below is quoted from
//! memory; Wireshark's `epan/dissectors/packet-iwarp-mpa.c` was read and agrees with every point.
//!
//! - (a) Stream offset 0 carries a marker. RFC: markers go "immediately preceding the first FPDU
//!   of full operation phase, and at every 512th octet of the TCP octet stream thereafter".
//!   Wireshark: `get_first_marker_offset()` is 0 for the first FPDU, and `dissect_mpa_fpdu()`
//!   then reads ULPDU_Length at offset 4 ("this FPDU may start with a Marker").
//! - (b) FPDUPTR counts the octets from the ULPDU_Length of the FPDU holding the marker to the
//!   marker's first octet. A marker that falls on an FPDU boundary sits in front of the next
//!   FPDU's ULPDU_Length, belongs to that FPDU, and has FPDUPTR 0, like the very first marker
//!   (RFC: "the first MPA Marker has an FPDUPTR value of 0"). Every marker of an FPDU, a leading
//!   one included, is covered by that FPDU's CRC (RFC: all markers are included in the containing
//!   FPDU's CRC); Wireshark checks the CRC over `markers·4 + 2 + len + pad` octets from the
//!   FPDU's first octet, leading marker included.
//! - (c) FPDUs are multiples of 4 octets and markers 512 apart, so every field starts 4-aligned
//!   in the stream: a marker can never split ULPDU_Length or the CRC. It can land after the pad,
//!   in front of the CRC; it then belongs to the FPDU, is covered by its CRC, and points back like
//!   any other (Wireshark's `pad_offset()`: "a Marker resides between the padding and CRC").
//!
//! Receivers treat the two low bits of FPDUPTR as zero and ignore RESERVED (RFC 5044 §4.3).

use super::{CRC_LEN, LENGTH_LEN, MARKER_INTERVAL, MARKER_LEN};

const INTERVAL: usize = MARKER_INTERVAL as usize;
/// Non-marker octets between two markers.
const SPAN: usize = INTERVAL - MARKER_LEN;

/// The marker with this FPDUPTR.
pub fn marker_bytes(fpduptr: u16) -> [u8; 4] {
    let p = fpduptr.to_be_bytes();
    [0, 0, p[0], p[1]]
}

/// The FPDUPTR a received marker carries, low two bits cleared as RFC 5044 §4.3 asks.
pub fn fpduptr_of(marker: [u8; 4]) -> u16 {
    u16::from_be_bytes([marker[2], marker[3]]) & !3
}

/// Offset into the 512-octet marker period of stream position `pos`.
fn phase(pos: u64) -> usize {
    // The remainder is below 512, so it fits any usize.
    (pos % MARKER_INTERVAL) as usize
}

/// Octets from an FPDU's first octet to its ULPDU_Length: 4 when the FPDU starts on a marker.
pub fn header_offset(markers: bool, start: u64) -> usize {
    if markers && phase(start) == 0 {
        MARKER_LEN
    } else {
        0
    }
}

/// How many markers an FPDU starting at stream position `start` holds when it carries `data`
/// non-marker octets (ULPDU_Length, ULPDU, pad and CRC).
pub fn markers_in(start: u64, data: usize) -> usize {
    let first_room = match phase(start) {
        0 => 0,
        r => INTERVAL - r,
    };
    if data <= first_room {
        0
    } else {
        (data - first_room).div_ceil(SPAN)
    }
}

/// The shape of one FPDU on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// ULPDU octets.
    pub ulpdu_len: usize,
    /// Zero octets after the ULPDU.
    pub pad: usize,
    /// Markers inside the FPDU.
    pub markers: usize,
    /// Offset of the first marker from the FPDU's first octet (meaningless without markers).
    pub first_marker: usize,
    /// Offset of ULPDU_Length from the FPDU's first octet.
    pub header_off: usize,
    /// Octets the whole FPDU takes on the wire.
    pub wire_len: usize,
}

impl Layout {
    /// The layout of a `ulpdu_len`-octet ULPDU framed at stream position `start`, with markers
    /// or without.
    pub fn new(markers: bool, start: u64, ulpdu_len: usize) -> Layout {
        let pad = super::pad_len(ulpdu_len);
        let data = LENGTH_LEN + ulpdu_len + pad + CRC_LEN;
        if !markers {
            return Layout {
                ulpdu_len,
                pad,
                markers: 0,
                first_marker: usize::MAX,
                header_off: 0,
                wire_len: data,
            };
        }
        let n = markers_in(start, data);
        let first_marker = match phase(start) {
            0 => 0,
            r => INTERVAL - r,
        };
        Layout {
            ulpdu_len,
            pad,
            markers: n,
            first_marker,
            header_off: header_offset(true, start),
            wire_len: data + n * MARKER_LEN,
        }
    }

    /// Offsets of the markers from the FPDU's first octet, in order.
    pub fn marker_offsets(&self) -> impl Iterator<Item = usize> {
        let first = self.first_marker;
        (0..self.markers).map(move |i| first + i * INTERVAL)
    }

    /// FPDUPTR of the marker at offset `off` of this FPDU; may exceed 16 bits for huge ULPDUs.
    pub fn fpduptr_at(&self, off: usize) -> usize {
        off.saturating_sub(self.header_off)
    }

    /// Whether every marker's FPDUPTR fits its 16 bits.
    pub fn pointers_fit(&self) -> bool {
        match self.markers {
            0 => true,
            n => self.fpduptr_at(self.first_marker + (n - 1) * INTERVAL) <= usize::from(u16::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mpa::{pad_len, MAX_ULPDU, MAX_ULPDU_MARKERS};

    /// Places markers octet by octet, the slow obvious way, to check the closed forms.
    fn slow_layout(start: u64, ulpdu_len: usize) -> (usize, Vec<usize>) {
        let mut data = LENGTH_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN;
        let mut off = 0usize;
        let mut marks = Vec::new();
        while data > 0 {
            if phase(start + off as u64) == 0 {
                marks.push(off);
                off += MARKER_LEN;
            } else {
                off += 1;
                data -= 1;
            }
        }
        (off, marks)
    }

    #[test]
    fn closed_forms_match_the_slow_walk() {
        let small = (0..1100u64)
            .step_by(4)
            .flat_map(|s| (0..=1040).map(move |l| (s, l)));
        let big = (0..512u64)
            .step_by(4)
            .flat_map(|s| [4000, 65022, 65023, 65535].map(|l| (s, l)));
        for (start, len) in small.chain(big) {
            {
                let l = Layout::new(true, start, len);
                let (wire, marks) = slow_layout(start, len);
                assert_eq!(l.wire_len, wire, "start {start} len {len}");
                assert_eq!(l.marker_offsets().collect::<Vec<_>>(), marks);
                assert_eq!(l.header_off, if start % 512 == 0 { 4 } else { 0 });
            }
        }
    }

    #[test]
    fn max_ulpdu_with_markers_is_tight() {
        for start in (0..512u64).step_by(4) {
            assert!(Layout::new(true, start, MAX_ULPDU_MARKERS).pointers_fit());
        }
        let worst = (0..512u64)
            .step_by(4)
            .filter(|&s| !Layout::new(true, s, MAX_ULPDU_MARKERS + 1).pointers_fit())
            .collect::<Vec<_>>();
        assert_eq!(worst, vec![508]);
        assert!(!Layout::new(true, 0, MAX_ULPDU).pointers_fit());
    }

    #[test]
    fn max_fpdu_len_bounds_every_framable_fpdu() {
        let mut most = Layout::new(false, 0, MAX_ULPDU).wire_len;
        for start in (0..512u64).step_by(4) {
            for len in (60000..=MAX_ULPDU).rev() {
                let l = Layout::new(true, start, len);
                if l.pointers_fit() {
                    most = most.max(l.wire_len);
                    break;
                }
            }
        }
        assert_eq!(most, crate::wire::mpa::MAX_FPDU_LEN);
    }

    #[test]
    fn marker_bytes_round_trip() {
        assert_eq!(marker_bytes(0x1234), [0, 0, 0x12, 0x34]);
        assert_eq!(fpduptr_of([0xff, 0xff, 0x12, 0x37]), 0x1234);
    }
}

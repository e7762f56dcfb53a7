//! The sending side of FPDU framing (RFC 5044 §4).

use super::marker::{marker_bytes, Layout};
use super::{pad_len, CRC_LEN, LENGTH_LEN, MARKER_INTERVAL, MARKER_LEN, MAX_ULPDU};
use crate::crc;
use crate::wire::{Error, Result};

fn total_len(parts: &[&[u8]]) -> Result<usize> {
    let len = parts.iter().map(|p| p.len()).sum::<usize>();
    if len > MAX_ULPDU {
        return Err(Error::BadLength(len));
    }
    Ok(len)
}

/// Frames outgoing ULPDUs for one direction of one connection.
///
/// It remembers the stream position, which decides where markers fall, so every FPDU it frames
/// must be sent, in order, and nothing else may be sent in between.
#[derive(Debug, Clone)]
pub struct FpduSender {
    markers: bool,
    crc: bool,
    pos: u64,
}

impl FpduSender {
    /// A sender at stream position 0, inserting markers when `markers` and computing CRCs when
    /// `crc` (otherwise the CRC field is sent as zeros).
    pub fn new(markers: bool, crc: bool) -> Self {
        FpduSender {
            markers,
            crc,
            pos: 0,
        }
    }

    /// Octets sent so far, markers included.
    pub fn stream_pos(&self) -> u64 {
        self.pos
    }

    /// Whether markers are inserted.
    pub fn markers(&self) -> bool {
        self.markers
    }

    /// Whether CRCs are computed.
    pub fn crc(&self) -> bool {
        self.crc
    }

    /// Octets the next FPDU takes on the wire if its ULPDU has `ulpdu_len` octets: length field,
    /// ULPDU, pad, any markers, CRC.
    pub fn wire_len(&self, ulpdu_len: usize) -> usize {
        Layout::new(self.markers, self.pos, ulpdu_len).wire_len
    }

    /// Appends one FPDU carrying the concatenation of `ulpdu` to `out`, markers inserted.
    ///
    /// `BadLength` when the ULPDU exceeds [`MAX_ULPDU`], or, with markers, when a marker would sit
    /// more than 65535 octets past ULPDU_Length (see [`super::MAX_ULPDU_MARKERS`]); on error
    /// nothing is appended and the position does not move.
    pub fn encode(&mut self, ulpdu: &[&[u8]], out: &mut Vec<u8>) -> Result<()> {
        let len = total_len(ulpdu)?;
        let layout = Layout::new(self.markers, self.pos, len);
        if !layout.pointers_fit() {
            return Err(Error::BadLength(len));
        }
        out.reserve(layout.wire_len);
        let start = out.len();
        let mut w = Writer {
            out,
            off: 0,
            next_marker: if layout.markers > 0 {
                layout.first_marker
            } else {
                usize::MAX
            },
            markers_left: layout.markers,
            header_off: layout.header_off,
        };
        // ULPDU_Length ≤ 65535 was checked above.
        w.put(&(len as u16).to_be_bytes());
        for part in ulpdu {
            w.put(part);
        }
        w.put(&[0; 3][..layout.pad]);
        // A marker due right after the pad goes before the CRC and is covered by it.
        w.marker_if_due();
        debug_assert_eq!(w.markers_left, 0);
        let crc = if self.crc {
            crc::crc32c(&out[start..])
        } else {
            0
        };
        out.extend_from_slice(&crc::to_wire(crc));
        debug_assert_eq!(out.len() - start, layout.wire_len);
        self.pos += layout.wire_len as u64;
        Ok(())
    }

    /// Frames one ULPDU without copying it: the FPDU is `[frame.prefix, ulpdu…, frame.suffix()]`,
    /// ready for a gathered write.
    ///
    /// Only without markers (`Malformed` otherwise), since markers would have to be spliced into
    /// the ULPDU. `BadLength` above [`MAX_ULPDU`].
    pub fn frame(&mut self, ulpdu: &[&[u8]]) -> Result<Frame> {
        if self.markers {
            return Err(Error::Malformed("zero-copy MPA framing needs markers off"));
        }
        let len = total_len(ulpdu)?;
        let pad = pad_len(len);
        // len ≤ 65535 was checked by total_len.
        let prefix = (len as u16).to_be_bytes();
        let crc = if self.crc {
            let head = crc::crc32c(&prefix);
            let body = ulpdu.iter().fold(head, |c, p| crc::crc32c_append(c, p));
            crc::crc32c_append(body, &[0; 3][..pad])
        } else {
            0
        };
        let mut suffix = [0; 7];
        suffix[pad..pad + CRC_LEN].copy_from_slice(&crc::to_wire(crc));
        self.pos += (LENGTH_LEN + len + pad + CRC_LEN) as u64;
        Ok(Frame {
            prefix,
            suffix,
            suffix_len: (pad + CRC_LEN) as u8,
        })
    }
}

/// The framing octets around a ULPDU sent without markers, from [`FpduSender::frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// ULPDU_Length, big-endian.
    pub prefix: [u8; 2],
    suffix: [u8; 7],
    suffix_len: u8,
}

impl Frame {
    /// Pad and CRC, to be written after the ULPDU.
    pub fn suffix(&self) -> &[u8] {
        &self.suffix[..usize::from(self.suffix_len)]
    }
}

/// Copies FPDU content into the output, splicing markers in at their stream positions.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
    /// Octets written for this FPDU so far, markers included.
    off: usize,
    next_marker: usize,
    markers_left: usize,
    header_off: usize,
}

impl Writer<'_> {
    fn marker_if_due(&mut self) {
        if self.off != self.next_marker {
            return;
        }
        // A marker before ULPDU_Length (offset 0) points at the FPDU it starts: FPDUPTR 0.
        // pointers_fit() was checked, so the distance fits 16 bits.
        let ptr = self.off.saturating_sub(self.header_off) as u16;
        self.out.extend_from_slice(&marker_bytes(ptr));
        self.off += MARKER_LEN;
        self.markers_left -= 1;
        self.next_marker = if self.markers_left > 0 {
            self.next_marker + MARKER_INTERVAL as usize
        } else {
            usize::MAX
        };
    }

    fn put(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            self.marker_if_due();
            let n = data.len().min(self.next_marker - self.off);
            self.out.extend_from_slice(&data[..n]);
            self.off += n;
            data = &data[n..];
        }
    }
}

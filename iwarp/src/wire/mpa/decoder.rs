//! The receiving side of FPDU framing: a streaming decoder for a TCP byte stream cut anywhere.

use std::io;
use std::ops::Range;

use super::marker::{self, Layout};
use super::{CRC_LEN, LENGTH_LEN, MARKER_LEN, MAX_FPDU_LEN, MAX_ULPDU};
use crate::crc;
use crate::wire::{Error, Result};

/// Storage kept after the stream drains; a burst that needed more is given back.
const KEEP_CAPACITY: usize = 2 * MAX_FPDU_LEN;

/// Turns the received octets of one direction back into ULPDUs.
///
/// Octets go in with [`push`](Self::push) (or straight from a reader with
/// [`read_from`](Self::read_from)); [`next_ulpdu`](Self::next_ulpdu) hands out each complete
/// ULPDU, markers removed and CRC checked. Call it until it returns `Ok(None)` after every push:
/// then the buffer never holds more than one incomplete FPDU plus the last chunk pushed.
///
/// An error means the stream can no longer be framed (RFC 5044 §8: the connection must be
/// closed); every later call returns the same error.
#[derive(Debug, Clone)]
pub struct FpduDecoder {
    markers: bool,
    crc: bool,
    max_ulpdu: usize,
    /// Initialized storage; `buf[start..end]` is received and not yet released.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Stream position of `buf[start]`.
    pos: u64,
    /// Wire octets of the FPDU last handed out, released on the next call.
    handed_out: usize,
    failed: Option<Error>,
}

impl FpduDecoder {
    /// A decoder at stream position 0, expecting markers when `markers` and checking CRCs when
    /// `crc` (otherwise the CRC field is skipped unread).
    pub fn new(markers: bool, crc: bool) -> Self {
        FpduDecoder {
            markers,
            crc,
            max_ulpdu: MAX_ULPDU,
            buf: Vec::new(),
            start: 0,
            end: 0,
            pos: 0,
            handed_out: 0,
            failed: None,
        }
    }

    /// Rejects FPDUs whose ULPDU_Length exceeds `max` (the MULPDU this side advertised) with
    /// `BadLength`, as soon as their length field arrives.
    pub fn set_max_ulpdu(&mut self, max: usize) {
        self.max_ulpdu = max.min(MAX_ULPDU);
    }

    /// Stream position of the next octet to be decoded.
    pub fn stream_pos(&self) -> u64 {
        self.pos + self.handed_out as u64
    }

    /// Octets received and not yet handed out as part of a ULPDU.
    pub fn buffered(&self) -> usize {
        self.end - self.start - self.handed_out
    }

    /// Octets of storage the decoder holds.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Appends received octets.
    pub fn push(&mut self, bytes: &[u8]) {
        self.release();
        self.make_room(bytes.len());
        self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Reads at most `max` octets from `r` straight into the buffer (one `read` call), saving the
    /// copy [`push`](Self::push) makes. Returns what `read` returned; `Ok(0)` is end of stream.
    pub fn read_from<R: io::Read>(&mut self, r: &mut R, max: usize) -> io::Result<usize> {
        self.release();
        self.make_room(max);
        let n = r.read(&mut self.buf[self.end..self.end + max])?;
        self.end += n.min(max);
        Ok(n)
    }

    /// The next complete ULPDU, markers stripped and CRC checked; valid until the next call.
    /// `Ok(None)` until enough octets have arrived.
    pub fn next_ulpdu(&mut self) -> Result<Option<&[u8]>> {
        self.release();
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.decode() {
            Ok(Some((ulpdu, wire_len))) => {
                self.handed_out = wire_len;
                Ok(Some(&self.buf[ulpdu]))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Forgets the FPDU handed out last.
    fn release(&mut self) {
        self.start += self.handed_out;
        self.pos += self.handed_out as u64;
        self.handed_out = 0;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > KEEP_CAPACITY {
                self.buf = Vec::new();
            }
        }
    }

    /// Makes `buf[end..end + n]` available, moving the unreleased octets to the front only when
    /// the tail is too short: at most one partial FPDU plus a chunk moves, once per FPDU.
    fn make_room(&mut self, n: usize) {
        if self.buf.len() - self.end >= n {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < n {
            self.buf.resize(self.end + n, 0);
        }
    }

    /// Decodes the FPDU at `start`: the ULPDU's range in `buf` and the FPDU's wire length.
    fn decode(&mut self) -> Result<Option<(Range<usize>, usize)>> {
        let avail = &self.buf[self.start..self.end];
        let header_off = marker::header_offset(self.markers, self.pos);
        if header_off > 0 {
            let Some(&lead) = avail.first_chunk::<MARKER_LEN>() else {
                return Ok(None);
            };
            if marker::fpduptr_of(lead) != 0 {
                return Err(Error::BadMarker { offset: self.pos });
            }
        }
        let Some(&len) = avail
            .get(header_off..)
            .and_then(|a| a.first_chunk::<LENGTH_LEN>())
        else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes(len));
        if len > self.max_ulpdu {
            return Err(Error::BadLength(len));
        }
        let layout = Layout::new(self.markers, self.pos, len);
        if !layout.pointers_fit() {
            // No sender can frame this FPDU here: its markers could not point back.
            return Err(Error::BadLength(len));
        }
        let wire_len = layout.wire_len;
        let Some(fpdu) = avail.get(..wire_len) else {
            return Ok(None);
        };
        for off in layout.marker_offsets().filter(|&off| off != 0) {
            let mut m = [0; MARKER_LEN];
            m.copy_from_slice(&fpdu[off..off + MARKER_LEN]);
            if usize::from(marker::fpduptr_of(m)) != layout.fpduptr_at(off) {
                return Err(Error::BadMarker {
                    offset: self.pos + off as u64,
                });
            }
        }
        if self.crc {
            let (covered, trailer) = fpdu.split_at(wire_len - CRC_LEN);
            let mut received = [0; CRC_LEN];
            received.copy_from_slice(trailer);
            let received = crc::from_wire(received);
            let computed = crc::crc32c(covered);
            if computed != received {
                return Err(Error::BadCrc { computed, received });
            }
        }
        let ulpdu = self.start + header_off + LENGTH_LEN;
        self.strip_markers(&layout);
        Ok(Some((ulpdu..ulpdu + len, wire_len)))
    }

    /// Closes the gaps the markers inside the FPDU at `start` leave, so its ULPDU is contiguous
    /// right after ULPDU_Length. Octets before the first inner marker stay where they are.
    fn strip_markers(&mut self, layout: &Layout) {
        let fpdu = self.start;
        // Everything up to the CRC moves, pad included: a few octets more than the ULPDU needs.
        let data_end = fpdu + layout.wire_len - CRC_LEN;
        let mut inner = layout.marker_offsets().filter(|&off| off != 0).peekable();
        let Some(&first) = inner.peek() else {
            return;
        };
        let mut write = fpdu + first;
        while let Some(off) = inner.next() {
            let from = fpdu + off + MARKER_LEN;
            let to = inner
                .peek()
                .map_or(data_end, |&next| fpdu + next)
                .min(data_end);
            if from >= to {
                break;
            }
            self.buf.copy_within(from..to, write);
            write += to - from;
        }
    }
}

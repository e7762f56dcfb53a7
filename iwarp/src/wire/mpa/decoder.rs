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
    /// The pad and CRC of an FPDU whose ULPDU was taken past the decoder ([`Bypass`]), next
    /// in the stream.
    trailer: Option<Trailer>,
    /// A ULPDU is being taken past the decoder: nothing is decoded until it is resumed.
    bypassing: bool,
}

#[derive(Debug, Clone, Copy)]
struct Trailer {
    pad: usize,
    /// CRC32c over ULPDU_Length and the ULPDU, when CRCs are checked.
    crc: Option<u32>,
}

/// The rest of an FPDU's ULPDU, read from the stream by the decoder's owner straight into
/// where the octets belong instead of through the decoder's buffer. The owner reports each
/// run of octets it took ([`Bypass::took`]), then hands the bypass back
/// ([`FpduDecoder::resume`]) for the decoder to check the FPDU's CRC.
#[derive(Debug)]
pub struct Bypass {
    rest: usize,
    taken: usize,
    trailer: Trailer,
}

impl Bypass {
    /// ULPDU octets still in the stream.
    pub fn rest(&self) -> usize {
        self.rest
    }

    /// `bytes`, the next octets of the ULPDU, were taken from the stream.
    ///
    /// # Panics
    /// If they are more than [`Bypass::rest`].
    pub fn took(&mut self, bytes: &[u8]) {
        self.rest = self
            .rest
            .checked_sub(bytes.len())
            .expect("no more than the ULPDU's rest");
        self.taken += bytes.len();
        if let Some(c) = &mut self.trailer.crc {
            *c = crc::crc32c_append(*c, bytes);
        }
    }
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
            trailer: None,
            bypassing: false,
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

    /// One `read_vectored` from `r` into `first`, then into the buffer (at most `max` octets
    /// there): the bytes of a bypassed ULPDU's owner and what follows them in the stream come
    /// in one system call. Returns the octets read into `first` and into the buffer.
    pub fn read_after<R: io::Read>(
        &mut self,
        r: &mut R,
        first: &mut [u8],
        max: usize,
    ) -> io::Result<(usize, usize)> {
        self.release();
        self.make_room(max);
        let (end, cap) = (self.end, self.end + max);
        let n = r.read_vectored(&mut [
            io::IoSliceMut::new(first),
            io::IoSliceMut::new(&mut self.buf[end..cap]),
        ])?;
        let mine = n.min(first.len());
        self.end += (n - mine).min(max);
        Ok((mine, n - mine))
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

    /// The FPDU at the front, when it is incomplete, carries no markers and has its
    /// ULPDU_Length here: its ULPDU length and the ULPDU octets received so far. Its owner may
    /// then take the rest past the decoder ([`FpduDecoder::bypass`]).
    pub fn partial(&self) -> Option<(usize, &[u8])> {
        if self.markers || self.bypassing || self.trailer.is_some() || self.failed.is_some() {
            return None;
        }
        let avail = &self.buf[self.start + self.handed_out..self.end];
        let len = usize::from(u16::from_be_bytes(*avail.first_chunk::<LENGTH_LEN>()?));
        let so_far = &avail[LENGTH_LEN..];
        (len <= self.max_ulpdu && so_far.len() < len).then_some((len, so_far))
    }

    /// Takes the FPDU that [`FpduDecoder::partial`] shows out of the decoder, with the ULPDU
    /// octets it holds (the owner used them first): the rest of the ULPDU is the owner's to
    /// read from the stream. Then nothing can be decoded until [`FpduDecoder::resume`].
    ///
    /// # Panics
    /// If [`FpduDecoder::partial`] shows nothing.
    pub fn bypass(&mut self) -> Bypass {
        let (len, so_far) = self.partial().expect("an incomplete FPDU at the front");
        let crc = self.crc.then(|| {
            let field = (len as u16).to_be_bytes();
            crc::crc32c_append(crc::crc32c(&field), so_far)
        });
        let held = LENGTH_LEN + so_far.len();
        let rest = len - so_far.len();
        self.release();
        self.start += held;
        self.release_if_empty();
        self.pos += held as u64;
        self.bypassing = true;
        Bypass {
            rest,
            taken: 0,
            trailer: Trailer {
                pad: super::pad_len(len),
                crc,
            },
        }
    }

    /// The owner took the whole ULPDU of the bypassed FPDU: decoding goes on with the FPDU's pad
    /// and CRC, checked with the next call to [`FpduDecoder::next_ulpdu`].
    ///
    /// # Panics
    /// If octets of the ULPDU are still in the stream.
    pub fn resume(&mut self, b: Bypass) {
        assert_eq!(b.rest, 0, "the ULPDU is taken whole first");
        self.pos += b.taken as u64;
        self.trailer = Some(b.trailer);
        self.bypassing = false;
    }

    /// After [`FpduDecoder::resume`]: checks the bypassed FPDU's pad and CRC. `Ok(true)` once
    /// they checked out (or if none wait), `Ok(false)` until they have arrived; a bad CRC is
    /// an error, as from [`FpduDecoder::next_ulpdu`].
    pub fn check_bypassed(&mut self) -> Result<bool> {
        self.release();
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.bypassing {
            return Ok(false);
        }
        self.take_trailer()
            .inspect_err(|e| self.failed = Some(e.clone()))
    }

    /// Checks and drops the pad and CRC of a bypassed FPDU: `Ok(false)` until they are here.
    fn take_trailer(&mut self) -> Result<bool> {
        let Some(t) = self.trailer else {
            return Ok(true);
        };
        let need = t.pad + CRC_LEN;
        let Some(trailer) = self.buf[self.start..self.end].get(..need) else {
            return Ok(false);
        };
        if let Some(c) = t.crc {
            let computed = crc::crc32c_append(c, &trailer[..t.pad]);
            let mut received = [0; CRC_LEN];
            received.copy_from_slice(&trailer[t.pad..]);
            let received = crc::from_wire(received);
            if computed != received {
                return Err(Error::BadCrc { computed, received });
            }
        }
        self.start += need;
        self.pos += need as u64;
        self.trailer = None;
        self.release_if_empty();
        Ok(true)
    }

    /// Forgets the FPDU handed out last.
    fn release(&mut self) {
        self.start += self.handed_out;
        self.pos += self.handed_out as u64;
        self.handed_out = 0;
        self.release_if_empty();
    }

    /// Starts the buffer afresh when nothing is in it.
    fn release_if_empty(&mut self) {
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
        if self.bypassing || !self.take_trailer()? {
            return Ok(None);
        }
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

//! The send path: a message's untagged segments, framed around the caller's payload and
//! gathered when nothing is queued before them, encoded into the send buffer otherwise.

use std::io::IoSlice;
use std::os::fd::AsRawFd;

use nix::errno::Errno;

use super::super::cq::WorkQueues;
use super::super::io;
use super::super::{SendOpcode, SendWr, VerbsError, WcOpcode};
use super::path::RcPath;
use super::state::{Addr, PendingSend, Segments};
use crate::wire::ddp::UNTAGGED_HEADER_LEN;
use crate::wire::mpa::Frame;
use crate::wire::rdmap::{Opcode, SegmentRepr};

/// FPDUs gathered into one `sendmsg` (four iovecs each, well under IOV_MAX).
const BATCH: usize = 64;

/// Encoded-but-unsent bytes at which encoding pauses for a write attempt.
const ENCODE_CHUNK: usize = 256 * 1024;

impl RcPath {
    pub(crate) fn post_send(
        &mut self,
        q: &mut WorkQueues,
        wr: &SendWr<'_>,
    ) -> Result<(), VerbsError> {
        if u32::try_from(wr.data.len()).is_err() {
            return Err(VerbsError::MessageTooLarge {
                len: wr.data.len(),
                max: u32::MAX as usize,
            });
        }
        q.reserve_send()?;
        let opcode = match wr.opcode {
            SendOpcode::Send => Opcode::Send,
            SendOpcode::SendSolicited => Opcode::SendSolicited,
        };
        let segs = Segments {
            data: wr.data,
            off: 0,
            max: self.settings.segment_payload,
            addr: Addr::Untagged {
                opcode,
                msn: self.tx_msn,
            },
            done: false,
        };
        self.tx_msn = self.tx_msn.wrapping_add(1);
        // Not complete until `end` is known.
        let pending = PendingSend {
            end: u64::MAX,
            wr_id: wr.wr_id,
            len: wr.data.len(),
            signaled: wr.signaled,
            opcode: WcOpcode::Send,
        };
        let result = if !self.tx.is_empty() || self.sender.markers() {
            self.send_buffered(q, segs, pending)
        } else if wr.data.len() <= self.settings.segment_payload {
            self.send_gathered::<1>(q, segs, pending)
        } else {
            self.send_gathered::<BATCH>(q, segs, pending)
        };
        if let Err(e) = result {
            self.fail(q, Some(e));
        }
        Ok(())
    }

    /// Posts `prefix` then `wr.data` as one message. When both fit one segment they are
    /// framed together in place (no copy unless the kernel refuses part of it); longer
    /// messages are joined first.
    pub(crate) fn post_send_prefixed(
        &mut self,
        q: &mut WorkQueues,
        wr: &SendWr<'_>,
        prefix: &[u8],
    ) -> Result<(), VerbsError> {
        let len = prefix.len() + wr.data.len();
        if len > self.settings.segment_payload {
            let mut joined = Vec::with_capacity(len);
            joined.extend_from_slice(prefix);
            joined.extend_from_slice(wr.data);
            return self.post_send(
                q,
                &SendWr {
                    data: &joined,
                    ..*wr
                },
            );
        }
        q.reserve_send()?;
        let opcode = match wr.opcode {
            SendOpcode::Send => Opcode::Send,
            SendOpcode::SendSolicited => Opcode::SendSolicited,
        };
        let seg = SegmentRepr::untagged(opcode, true, 0, self.tx_msn, 0);
        self.tx_msn = self.tx_msn.wrapping_add(1);
        self.tx.pending.push_back(PendingSend {
            end: u64::MAX,
            wr_id: wr.wr_id,
            len,
            signaled: wr.signaled,
            opcode: WcOpcode::Send,
        });
        if let Err(e) = self.send_one(q, seg, &[prefix, wr.data]) {
            self.fail(q, Some(e));
        }
        Ok(())
    }

    /// Sends one FPDU of segment `seg` carrying `parts`, whose send waits last in
    /// `tx.pending`: gathered straight from the parts when nothing is queued before it and
    /// markers are off, else encoded into the send buffer.
    pub(super) fn send_one(
        &mut self,
        q: &mut WorkQueues,
        seg: SegmentRepr,
        parts: &[&[u8]; 2],
    ) -> Result<(), VerbsError> {
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        let hl = seg.emit(&mut header)?;
        let ulpdu = [&header[..hl], parts[0], parts[1]];
        if self.tx.is_queued() || self.sender.markers() {
            let before = self.tx.buf.len();
            self.sender.encode(&ulpdu, &mut self.tx.buf)?;
            self.tx.queued += (self.tx.buf.len() - before) as u64;
            if let Some(p) = self.tx.pending.back_mut() {
                p.end = self.tx.queued;
            }
            self.flush(q)?;
            return Ok(());
        }
        let frame = self.sender.frame(&ulpdu)?;
        let iov = [
            IoSlice::new(&frame.prefix),
            IoSlice::new(&header[..hl]),
            IoSlice::new(parts[0]),
            IoSlice::new(parts[1]),
            IoSlice::new(frame.suffix()),
        ];
        let total: usize = iov.iter().map(|s| s.len()).sum();
        let written = match io::send_gather(self.stream.as_raw_fd(), &iov, None) {
            Ok(w) => w,
            Err(Errno::EAGAIN) => 0,
            Err(e) => return Err(e.into()),
        };
        if written == total {
            if let Some(p) = self.tx.pending.pop_back() {
                q.sq_done(p.opcode, p.wr_id, p.len, p.signaled);
            }
            return Ok(());
        }
        // The kernel is full: keep the rest ourselves.
        self.tx.keep_unwritten(&iov, written);
        self.tx.queued += (total - written) as u64;
        if let Some(p) = self.tx.pending.back_mut() {
            p.end = self.tx.queued;
        }
        Ok(())
    }

    /// The zero-copy path: frames up to `N` FPDUs at a time around the caller's payload and
    /// gathers them into one `sendmsg`; copies only what the kernel refuses. The WR waits in
    /// `tx.pending` meanwhile, so a failure anywhere completes it. `N` is 1 for single-segment
    /// messages, which keeps the latency path's stack arrays small.
    pub(super) fn send_gathered<const N: usize>(
        &mut self,
        q: &mut WorkQueues,
        mut segs: Segments<'_>,
        pending: PendingSend,
    ) -> Result<(), VerbsError> {
        self.tx.pending.push_back(pending);
        let fd = self.stream.as_raw_fd();
        let mut headers = [[0u8; UNTAGGED_HEADER_LEN]; N];
        let mut frames: [Option<Frame>; N] = [None; N];
        let mut payloads: [&[u8]; N] = [&[]; N];
        loop {
            let mut n = 0;
            while n < N {
                let Some((seg, payload)) = segs.next() else {
                    break;
                };
                let hl = seg.emit(&mut headers[n])?;
                frames[n] = Some(self.sender.frame(&[&headers[n][..hl], payload])?);
                payloads[n] = payload;
                n += 1;
            }
            if n == 0 {
                if let Some(p) = self.tx.pending.pop_back() {
                    q.sq_done(p.opcode, p.wr_id, p.len, p.signaled);
                }
                return Ok(());
            }
            let mut iov = [[IoSlice::new(&[]); 4]; N];
            let mut total = 0;
            for (((slot, frame), header), payload) in iov
                .iter_mut()
                .zip(&frames)
                .zip(&headers)
                .zip(payloads)
                .take(n)
            {
                let Some(frame) = frame else { continue };
                *slot = [
                    IoSlice::new(&frame.prefix),
                    IoSlice::new(header),
                    IoSlice::new(payload),
                    IoSlice::new(frame.suffix()),
                ];
                total += slot.iter().map(|s| s.len()).sum::<usize>();
            }
            let iov = &iov.as_flattened()[..4 * n];
            let written = match io::send_gather(fd, iov, None) {
                Ok(w) => w,
                Err(Errno::EAGAIN) => 0,
                Err(e) => return Err(e.into()),
            };
            if written < total {
                // The kernel is full: keep the rest ourselves, in stream order.
                let start = self.tx.buf.len();
                self.tx.keep_unwritten(iov, written);
                let mut header = [0u8; UNTAGGED_HEADER_LEN];
                for (seg, payload) in segs {
                    let hl = seg.emit(&mut header)?;
                    self.sender
                        .encode(&[&header[..hl], payload], &mut self.tx.buf)?;
                }
                self.tx.queued += (self.tx.buf.len() - start) as u64;
                if let Some(p) = self.tx.pending.back_mut() {
                    p.end = self.tx.queued;
                }
                return Ok(());
            }
        }
    }

    /// The copying path (markers on, or earlier sends still queued): encodes into the send
    /// buffer, writing whenever a good chunk has built up and the kernel is taking data.
    pub(super) fn send_buffered(
        &mut self,
        q: &mut WorkQueues,
        segs: Segments<'_>,
        pending: PendingSend,
    ) -> Result<(), VerbsError> {
        self.tx.pending.push_back(pending);
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        let mut blocked = false;
        for (seg, payload) in segs {
            let hl = seg.emit(&mut header)?;
            let before = self.tx.buf.len();
            self.sender
                .encode(&[&header[..hl], payload], &mut self.tx.buf)?;
            self.tx.queued += (self.tx.buf.len() - before) as u64;
            if !blocked && self.tx.unsent() >= ENCODE_CHUNK {
                blocked = !self.flush(q)?;
            }
        }
        if let Some(p) = self.tx.pending.back_mut() {
            p.end = self.tx.queued;
        }
        if !blocked {
            self.flush(q)?;
        }
        Ok(())
    }
}

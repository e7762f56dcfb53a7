//! RC queue pairs: iWARP over MPA over TCP, after the start-up exchange.
//!
//! Sending: a message becomes untagged DDP Send segments of at most `seg_payload` bytes (MSN per
//! message, MO = offset, L on the last), one FPDU each. Without markers the FPDUs are framed in
//! place and gathered, up to [`BATCH`] of them per `sendmsg`, so the payload is never copied;
//! with markers (which must be spliced into the payload) they are encoded into a reusable buffer.
//! Whatever the kernel does not take at once is copied into that buffer and written from
//! `poll_cq`; a send completes once its last byte is in the kernel.
//!
//! Receiving: the socket is read straight into the [`FpduDecoder`]'s buffer, and each segment's
//! payload is copied to its MO in the receive buffer at the head of the receive queue. A message
//! that does not fit completes with `LocalLengthError` when its last segment arrives; its other
//! segments are read and dropped so the stream stays in step. With no receive posted (and no
//! RDMA under way, below) the socket is not read: TCP flow control then holds the sender back
//! (and a peer's close is only noticed once a receive is posted or a send fails).
//! In receiver mode (`QueuePair::poll_cq_with`) no receives are posted: each message is lent to
//! the receiver where it lies in the decoder's buffer when one FPDU carried it, and joined in a
//! buffer first otherwise; one longer than the receiver takes breaks the connection. A long
//! message the receiver knows where to put is read from the socket straight there
//! ([`in_place`](super::in_place)).
//!
//! RDMA (RFC 5040 §4, RFC 5041): an RDMA Write is tagged segments (STag and TO of the peer's
//! region) encoded into the send buffer; it completes as a send does and is silent at the
//! target. An RDMA Read is one Read Request on queue 1 (its own MSN); the responder encodes the
//! whole Read Response into its send buffer, behind whatever is queued, when the request is
//! decoded, and the requester completes its oldest read when the last response segment is
//! placed. Tagged segments and requests are handled as they are decoded, in stream order, in
//! both receive modes, so a Send that follows a Write finds its data in place. With posted
//! receives and none posted, the socket is still read while memory is registered or a read
//! is in flight: the first Send segment that finds no receive is kept aside and stops the
//! reading until one is posted, so Sends still hold the peer back through TCP.
//!
//! Any decoding, CRC, marker or sequencing error, a reset or an end of stream breaks the
//! connection (RFC 5044 §8): the socket is shut down and everything outstanding completes in
//! error. So does an RDMA segment the registrations do not allow. No Terminate message is
//! sent.
//!
//! Not enforced: RFC 5044 §7.1.2 lets the responder send only after the initiator's first FPDU,
//! and RFC 6581's ready-to-receive message is not offered (IRD/ORD go out as 0/0 without the
//! peer-to-peer bits). Between two of these queue pairs either side may send first.

use std::collections::VecDeque;
use std::io::{ErrorKind, IoSlice};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;

use nix::errno::Errno;

use super::cq::WorkQueues;
use super::in_place::{InPlace, Start};
use super::io;
use super::mr::{Fault, MrTable, Use};
use super::startup::Established;
use super::{
    RdReceiver, RdmaReadWr, RdmaWriteWr, SendOpcode, SendWr, VerbsError, WcOpcode, WcStatus,
};
use crate::wire::ddp::{Placement, UNTAGGED_HEADER_LEN};
use crate::wire::mpa::{FpduDecoder, FpduSender, Frame, MAX_ULPDU_MARKERS};
use crate::wire::rdmap::{Opcode, ReadRequestRepr, SegmentRepr, QUEUE_READ_REQUEST};

/// FPDUs gathered into one `sendmsg` (four iovecs each, well under IOV_MAX).
const BATCH: usize = 64;

/// Bytes asked of one `read`. The decoder gives back storage above twice the largest FPDU when
/// it drains; reads of 64 KiB keep it below that, so a busy connection does not free and
/// reallocate its buffer on every message.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// Reads per poll at most, so one poll stays short while a large message streams in.
const READS_PER_POLL: usize = 64;

/// Encoded-but-unsent bytes at which encoding pauses for a write attempt.
const ENCODE_CHUNK: usize = 256 * 1024;

/// Written bytes at the front of the send buffer after which they are dropped by moving the
/// rest, when they are also at least half of it.
const COMPACT_AT: usize = 1 << 20;

/// Send buffer storage kept once it drains; a backlog that needed more gives it back.
const KEEP_TX_CAPACITY: usize = 1 << 20;

/// What the MPA exchange settled for this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcSettings {
    /// This side inserts markers into what it sends.
    pub markers_tx: bool,
    /// The peer inserts markers into what it sends.
    pub markers_rx: bool,
    /// CRC32c in both directions.
    pub crc: bool,
    /// MPA revision in use.
    pub revision: u8,
    /// Payload bytes per outgoing segment.
    pub segment_payload: usize,
}

/// The message being placed into the receive at the head of the receive queue.
struct RxProgress {
    placed: usize,
    overflow: bool,
    solicited: bool,
}

/// A send WR whose bytes are (partly) still in the send buffer.
struct PendingSend {
    /// Stream byte count (`TxBuffer::queued`) at which its last byte is written.
    end: u64,
    wr_id: u64,
    len: usize,
    signaled: bool,
    /// Send or RdmaWrite.
    opcode: WcOpcode,
}

/// An RDMA Read whose Read Request went out and whose data has not all come back.
struct PendingRead {
    wr_id: u64,
    sink_stag: u32,
    sink_to: u64,
    len: usize,
    received: usize,
}

/// RDMA state beside the Send stream: queue 1's MSNs and the reads in flight, oldest first
/// (the peer answers Read Requests in order, so responses come back in order).
struct Rdma {
    tx_read_msn: u32,
    rx_read_msn: u32,
    reads: VecDeque<PendingRead>,
    /// Source bytes of the Read Response segment being encoded.
    scratch: Vec<u8>,
}

/// Bytes for the kernel that it has not taken yet, oldest first.
#[derive(Default)]
struct TxBuffer {
    buf: Vec<u8>,
    pos: usize,
    /// Bytes ever appended to `buf`.
    queued: u64,
    /// Bytes ever written from `buf`.
    written: u64,
    pending: VecDeque<PendingSend>,
}

impl TxBuffer {
    fn unsent(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn is_empty(&self) -> bool {
        self.pos == self.buf.len() && self.pending.is_empty()
    }

    /// Appends what of `iov` the kernel did not take (past its first `written` bytes).
    fn keep_unwritten(&mut self, iov: &[IoSlice<'_>], written: usize) {
        let mut skip = written;
        for s in iov {
            if skip >= s.len() {
                skip -= s.len();
                continue;
            }
            self.buf.extend_from_slice(&s[skip..]);
            skip = 0;
        }
    }

    /// Whether earlier sends wait in the buffer or in the list (the last entry of `pending`
    /// being the send about to go).
    fn is_queued(&self) -> bool {
        self.pos != self.buf.len() || self.pending.len() > 1
    }
}

/// How the segments of a message are addressed.
#[derive(Clone, Copy)]
enum Addr {
    /// A Send: MSN per message, MO = offset.
    Untagged { opcode: Opcode, msn: u32 },
    /// An RDMA Write: TO = `to` + offset.
    Tagged { opcode: Opcode, stag: u32, to: u64 },
}

/// The segments of one message.
struct Segments<'a> {
    data: &'a [u8],
    off: usize,
    max: usize,
    addr: Addr,
    done: bool,
}

impl<'a> Iterator for Segments<'a> {
    type Item = (SegmentRepr, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let end = self.data.len().min(self.off + self.max);
        let last = end == self.data.len();
        let seg = match self.addr {
            // Messages are limited to u32::MAX bytes, so the offset fits MO.
            Addr::Untagged { opcode, msn } => {
                SegmentRepr::untagged(opcode, last, 0, msn, self.off as u32)
            }
            // The poster checked that the last TO does not wrap.
            Addr::Tagged { opcode, stag, to } => {
                SegmentRepr::tagged(opcode, last, stag, to + self.off as u64)
            }
        };
        let payload = &self.data[self.off..end];
        self.off = end;
        self.done = last;
        Some((seg, payload))
    }
}

pub(crate) struct RcPath {
    stream: TcpStream,
    local: SocketAddr,
    peer: SocketAddr,
    settings: RcSettings,
    sender: FpduSender,
    decoder: FpduDecoder,
    tx_msn: u32,
    rx_msn: u32,
    rx: Option<RxProgress>,
    /// Receiver mode: the segments of a message longer than one FPDU, joined.
    assembly: Vec<u8>,
    /// Receiver mode: the message being read in place, and the last message the receiver (or
    /// its size) declined, so that it is not asked again at every read.
    in_place: Option<InPlace>,
    declined: Option<u32>,
    tx: TxBuffer,
    /// Posted receives: the first segment of a Send that came with no receive posted. It
    /// waits here (and nothing after it is read) until one is.
    held: Option<Vec<u8>>,
    rdma: Rdma,
    /// Why the connection broke, for the queue pair to pick up.
    failure: Option<VerbsError>,
}

impl RcPath {
    /// Takes over a connected, handshaken stream. `max_ulpdu` is the configured segment payload.
    pub(crate) fn new(
        stream: TcpStream,
        est: Established,
        max_ulpdu: usize,
    ) -> Result<Self, VerbsError> {
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        stream.set_nonblocking(true)?;
        let local = stream.local_addr()?;
        let peer = stream.peer_addr()?;
        let n = est.negotiated;
        // With markers an FPDU must stay short enough for every marker to point back at it.
        let segment_payload = if n.markers_tx {
            max_ulpdu.min(MAX_ULPDU_MARKERS - UNTAGGED_HEADER_LEN)
        } else {
            max_ulpdu
        };
        let mut decoder = FpduDecoder::new(n.markers_rx, n.crc);
        decoder.push(&est.leftover);
        Ok(RcPath {
            stream,
            local,
            peer,
            settings: RcSettings {
                markers_tx: n.markers_tx,
                markers_rx: n.markers_rx,
                crc: n.crc,
                revision: est.revision,
                segment_payload,
            },
            sender: FpduSender::new(n.markers_tx, n.crc),
            decoder,
            tx_msn: 1,
            rx_msn: 1,
            rx: None,
            assembly: Vec::new(),
            in_place: None,
            declined: None,
            tx: TxBuffer::default(),
            held: None,
            rdma: Rdma {
                tx_read_msn: 1,
                rx_read_msn: 1,
                reads: VecDeque::new(),
                scratch: Vec::new(),
            },
            failure: None,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub(crate) fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    pub(crate) fn settings(&self) -> RcSettings {
        self.settings
    }

    pub(crate) fn socket(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.stream)
    }

    /// Bytes of buffer storage held (send backlog, decoder, a message being joined).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.tx.buf.capacity()
            + self.decoder.capacity()
            + self.assembly.capacity()
            + self.held.as_ref().map_or(0, Vec::capacity)
            + self.rdma.scratch.capacity()
    }

    pub(crate) fn take_failure(&mut self) -> Option<VerbsError> {
        self.failure.take()
    }

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

    /// Posts an RDMA Write: tagged segments through the send buffer (the copying path; the
    /// zero-copy one frames untagged headers only). The caller checked the queue pair's state.
    pub(crate) fn post_rdma_write(
        &mut self,
        q: &mut WorkQueues,
        wr: &RdmaWriteWr<'_>,
    ) -> Result<(), VerbsError> {
        if wr.remote_offset.checked_add(wr.data.len() as u64).is_none() {
            return Err(VerbsError::InvalidArgument(
                "remote_offset + data length wraps".into(),
            ));
        }
        q.reserve_send()?;
        let segs = Segments {
            data: wr.data,
            off: 0,
            max: self.settings.segment_payload,
            addr: Addr::Tagged {
                opcode: Opcode::RdmaWrite,
                stag: wr.remote_stag.raw(),
                to: wr.remote_offset,
            },
            done: false,
        };
        let pending = PendingSend {
            end: u64::MAX,
            wr_id: wr.wr_id,
            len: wr.data.len(),
            signaled: wr.signaled,
            opcode: WcOpcode::RdmaWrite,
        };
        if let Err(e) = self.send_buffered(q, segs, pending) {
            self.fail(q, Some(e));
        }
        Ok(())
    }

    /// Posts an RDMA Read: one Read Request on queue 1. It completes when the last Read
    /// Response segment is placed. The caller checked the state and the local region.
    pub(crate) fn post_rdma_read(
        &mut self,
        q: &mut WorkQueues,
        wr: &RdmaReadWr,
    ) -> Result<(), VerbsError> {
        let len = u32::try_from(wr.len).map_err(|_| VerbsError::MessageTooLarge {
            len: wr.len,
            max: u32::MAX as usize,
        })?;
        if wr.remote_offset.checked_add(wr.len as u64).is_none() {
            return Err(VerbsError::InvalidArgument(
                "remote_offset + len wraps".into(),
            ));
        }
        q.reserve_send()?;
        let req = ReadRequestRepr {
            sink_stag: wr.local_stag.raw(),
            sink_to: wr.local_offset,
            len,
            src_stag: wr.remote_stag.raw(),
            src_to: wr.remote_offset,
        };
        let seg = SegmentRepr::untagged(
            Opcode::ReadRequest,
            true,
            QUEUE_READ_REQUEST,
            self.rdma.tx_read_msn,
            0,
        );
        self.rdma.tx_read_msn = self.rdma.tx_read_msn.wrapping_add(1);
        self.rdma.reads.push_back(PendingRead {
            wr_id: wr.wr_id,
            sink_stag: req.sink_stag,
            sink_to: req.sink_to,
            len: wr.len,
            received: 0,
        });
        let result = encode_read_request(&mut self.sender, &mut self.tx, seg, &req)
            .and_then(|()| self.flush(q).map(|_| ()));
        if let Err(e) = result {
            self.fail(q, Some(e));
        }
        Ok(())
    }

    /// Sends one FPDU of segment `seg` carrying `parts`, whose send waits last in
    /// `tx.pending`: gathered straight from the parts when nothing is queued before it and
    /// markers are off, else encoded into the send buffer.
    fn send_one(
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
    fn send_gathered<const N: usize>(
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
    fn send_buffered(
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

    /// Writes queued bytes until done or the kernel refuses; completes the sends whose last
    /// byte went. Returns whether everything went.
    fn flush(&mut self, q: &mut WorkQueues) -> Result<bool, VerbsError> {
        let fd = self.stream.as_raw_fd();
        let tx = &mut self.tx;
        while tx.pos < tx.buf.len() {
            match io::send_stream(fd, &tx.buf[tx.pos..]) {
                Ok(n) => {
                    tx.pos += n;
                    tx.written += n as u64;
                }
                Err(Errno::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            }
        }
        while let Some(p) = tx.pending.front() {
            if p.end > tx.written {
                break;
            }
            q.sq_done(p.opcode, p.wr_id, p.len, p.signaled);
            tx.pending.pop_front();
        }
        if tx.pos == tx.buf.len() {
            if tx.buf.capacity() > KEEP_TX_CAPACITY {
                tx.buf = Vec::new();
            } else {
                tx.buf.clear();
            }
            tx.pos = 0;
            return Ok(true);
        }
        if tx.pos >= COMPACT_AT && tx.pos * 2 >= tx.buf.len() {
            tx.buf.drain(..tx.pos);
            tx.pos = 0;
        }
        Ok(false)
    }

    /// Writes queued sends, then reads and places whatever the posted receives can take, or
    /// (receiver mode, `lend`) hands every message that arrived to the receiver.
    pub(crate) fn progress(
        &mut self,
        q: &mut WorkQueues,
        lend: Option<&mut dyn RdReceiver>,
        mrs: &MrTable,
    ) {
        let result = if self.tx.unsent() > 0 {
            self.flush(q).map(|_| ())
        } else {
            Ok(())
        };
        let queued = self.tx.queued;
        let result = result.and_then(|()| match lend {
            Some(recv) => self.receive_lending(recv, q, mrs),
            None => self.receive(q, mrs),
        });
        // Read Responses were queued while receiving: start them on their way now.
        let result = result.and_then(|()| {
            if self.tx.queued != queued {
                self.flush(q).map(|_| ())
            } else {
                Ok(())
            }
        });
        if let Err(e) = result {
            self.fail(q, Some(e));
        }
    }

    /// Receiver mode: reads what has come and lends each message to `recv` through
    /// [`RdReceiver::message`], in order, where it lies in the decoder's buffer when one FPDU
    /// carried it (joined first otherwise), or reads it in place. The peer's address is the TCP
    /// one; the owner that knows the peer by another name wraps `recv`.
    fn receive_lending(
        &mut self,
        recv: &mut dyn RdReceiver,
        q: &mut WorkQueues,
        mrs: &MrTable,
    ) -> Result<(), VerbsError> {
        for _ in 0..READS_PER_POLL {
            if let Some(ip) = &mut self.in_place {
                if !ip.read(&mut self.stream, &mut self.decoder, self.peer, recv)? {
                    return Ok(());
                }
            }
            self.lend_decoded(recv, q, mrs)?;
            if self.reading_in_place() {
                continue;
            }
            match self.read_more()? {
                None => return Ok(()),
                Some(n) if n < READ_CHUNK => {
                    self.lend_decoded(recv, q, mrs)?;
                    if !self.reading_in_place() {
                        return Ok(());
                    }
                }
                Some(_) => {}
            }
        }
        self.lend_decoded(recv, q, mrs)
    }

    fn reading_in_place(&self) -> bool {
        self.in_place.as_ref().is_some_and(InPlace::reading)
    }

    /// Reads what the socket holds into the decoder: how many bytes, `None` if nothing.
    fn read_more(&mut self) -> Result<Option<usize>, VerbsError> {
        loop {
            match self.decoder.read_from(&mut self.stream, READ_CHUNK) {
                Ok(0) => return Err(VerbsError::PeerClosed),
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn lend_decoded(
        &mut self,
        recv: &mut dyn RdReceiver,
        q: &mut WorkQueues,
        mrs: &MrTable,
    ) -> Result<(), VerbsError> {
        if let Some(ip) = &self.in_place {
            if !ip.finish(&mut self.decoder, self.peer, recv)? {
                return Ok(());
            }
            self.in_place = None;
            self.rx_msn = self.rx_msn.wrapping_add(1);
        }
        while let Some(ulpdu) = self.decoder.next_ulpdu()? {
            let (seg, payload) = SegmentRepr::parse(ulpdu)?;
            let out = Out {
                sender: &mut self.sender,
                tx: &mut self.tx,
                max: self.settings.segment_payload,
            };
            if rdma_segment(&seg, payload, &mut self.rdma, mrs, q, out)? {
                continue;
            }
            let mo = check_untagged_send(&seg, self.rx_msn)?;
            if mo as usize != self.assembly.len() {
                return Err(VerbsError::Protocol("MO out of sequence"));
            }
            if self.assembly.len() + payload.len() > recv.max_message() {
                return Err(VerbsError::Protocol(
                    "message longer than the receiver takes",
                ));
            }
            if seg.last {
                self.rx_msn = self.rx_msn.wrapping_add(1);
                if self.assembly.is_empty() {
                    recv.message(self.peer, payload);
                } else {
                    self.assembly.extend_from_slice(payload);
                    recv.message(self.peer, &self.assembly);
                    self.assembly.clear();
                }
            } else {
                self.assembly.extend_from_slice(payload);
            }
        }
        if self.assembly.is_empty() && self.declined != Some(self.rx_msn) {
            match InPlace::start(&mut self.decoder, self.rx_msn, self.peer, recv)? {
                Start::Taken(ip) => self.in_place = Some(ip),
                Start::Declined => self.declined = Some(self.rx_msn),
                Start::NotYet => {}
            }
        }
        Ok(())
    }

    fn receive(&mut self, q: &mut WorkQueues, mrs: &MrTable) -> Result<(), VerbsError> {
        for _ in 0..READS_PER_POLL {
            self.place_decoded(q, mrs)?;
            if !self.wants_segments(q, mrs) {
                return Ok(());
            }
            let Some(n) = self.read_more()? else {
                return Ok(());
            };
            if n < READ_CHUNK {
                // The socket is most likely empty: skip the read that would say so.
                return self.place_decoded(q, mrs);
            }
        }
        self.place_decoded(q, mrs)
    }

    /// Whether reading on could lead anywhere: not while a Send waits for a receive; with
    /// none posted, only when the peer may send RDMA traffic (some memory is registered, or
    /// reads are in flight). Otherwise the socket stays unread and TCP holds the peer back.
    fn wants_segments(&self, q: &WorkQueues, mrs: &MrTable) -> bool {
        self.held.is_none()
            && (self.rx.is_some()
                || !q.rq.is_empty()
                || !mrs.is_empty()
                || !self.rdma.reads.is_empty())
    }

    /// Handles decoded segments: RDMA ones always, Sends while some receive can take them.
    fn place_decoded(&mut self, q: &mut WorkQueues, mrs: &MrTable) -> Result<(), VerbsError> {
        if let Some(held) = self.held.take() {
            if self.rx.is_none() && q.rq.is_empty() {
                self.held = Some(held);
                return Ok(());
            }
            let (seg, payload) = SegmentRepr::parse(&held)?;
            place(&seg, payload, &mut self.rx, &mut self.rx_msn, q)?;
        }
        while let Some(ulpdu) = self.decoder.next_ulpdu()? {
            let (seg, payload) = SegmentRepr::parse(ulpdu)?;
            let out = Out {
                sender: &mut self.sender,
                tx: &mut self.tx,
                max: self.settings.segment_payload,
            };
            if rdma_segment(&seg, payload, &mut self.rdma, mrs, q, out)? {
                continue;
            }
            if self.rx.is_none() && q.rq.is_empty() {
                self.held = Some(ulpdu.to_vec());
                return Ok(());
            }
            place(&seg, payload, &mut self.rx, &mut self.rx_msn, q)?;
        }
        Ok(())
    }

    /// The connection is broken: close it and complete everything outstanding.
    pub(crate) fn fail(&mut self, q: &mut WorkQueues, why: Option<VerbsError>) {
        let _ = self.stream.shutdown(Shutdown::Both);
        self.in_place = None;
        if let Some(rx) = self.rx.take() {
            if let Some(wr) = q.rq.pop_front() {
                q.complete_recv(wr, WcStatus::TransportError, rx.placed, None, rx.solicited);
            }
        }
        q.flush_recvs();
        self.held = None;
        // Every Read Request may have reached the peer; only the oldest can have been
        // partly answered.
        let mut status = WcStatus::TransportError;
        for r in self.rdma.reads.drain(..) {
            q.sq_failed(WcOpcode::RdmaRead, r.wr_id, r.received, status);
            status = WcStatus::FlushError;
        }
        // Only the oldest queued send can have been partly on the wire.
        let mut status = WcStatus::TransportError;
        for p in self.tx.pending.drain(..) {
            q.sq_failed(p.opcode, p.wr_id, p.len, status);
            status = WcStatus::FlushError;
        }
        self.tx.buf = Vec::new();
        self.tx.pos = 0;
        if self.failure.is_none() {
            self.failure = why;
        }
    }
}

/// A segment's MO, if it is an untagged Send segment of message `rx_msn` on queue 0.
fn check_untagged_send(seg: &SegmentRepr, rx_msn: u32) -> Result<u32, VerbsError> {
    let Placement::Untagged { qn, msn, mo, .. } = seg.placement else {
        return Err(VerbsError::Protocol("tagged segment where a Send belongs"));
    };
    if !matches!(seg.opcode, Opcode::Send | Opcode::SendSolicited) {
        return Err(VerbsError::Protocol("RDMAP opcode other than Send"));
    }
    if qn != 0 {
        return Err(VerbsError::Protocol("Send segment on a queue other than 0"));
    }
    if msn != rx_msn {
        return Err(VerbsError::Protocol("MSN out of sequence"));
    }
    Ok(mo)
}

/// Checks one received segment against the stream's state and copies its payload into the
/// receive at the head of the queue.
fn place(
    seg: &SegmentRepr,
    payload: &[u8],
    rx: &mut Option<RxProgress>,
    rx_msn: &mut u32,
    q: &mut WorkQueues,
) -> Result<(), VerbsError> {
    let mo = check_untagged_send(seg, *rx_msn)?;
    let progress = match rx {
        Some(p) => p,
        None => rx.insert(RxProgress {
            placed: 0,
            overflow: false,
            solicited: seg.opcode.solicited(),
        }),
    };
    if mo as usize != progress.placed {
        return Err(VerbsError::Protocol("MO out of sequence"));
    }
    let Some(wr) = q.rq.front_mut() else {
        return Err(VerbsError::Protocol("segment without a receive"));
    };
    let end = progress.placed + payload.len();
    if !progress.overflow {
        match wr.buf.get_mut(progress.placed..end) {
            Some(dst) => dst.copy_from_slice(payload),
            None => progress.overflow = true,
        }
    }
    progress.placed = end;
    if seg.last {
        let status = if progress.overflow {
            WcStatus::LocalLengthError
        } else {
            WcStatus::Success
        };
        let (placed, solicited) = (progress.placed, progress.solicited);
        *rx = None;
        *rx_msn = rx_msn.wrapping_add(1);
        if let Some(wr) = q.rq.pop_front() {
            q.complete_recv(wr, status, placed, None, solicited);
        }
    }
    Ok(())
}

/// Where Read Responses are encoded: the send path's framing and buffer.
struct Out<'a> {
    sender: &'a mut FpduSender,
    tx: &'a mut TxBuffer,
    /// Payload bytes per segment.
    max: usize,
}

impl Out<'_> {
    /// Appends one FPDU to the send buffer, after everything already queued.
    fn encode(&mut self, seg: SegmentRepr, payload: &[u8]) -> Result<(), VerbsError> {
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        let hl = seg.emit(&mut header)?;
        let before = self.tx.buf.len();
        self.sender
            .encode(&[&header[..hl], payload], &mut self.tx.buf)?;
        self.tx.queued += (self.tx.buf.len() - before) as u64;
        Ok(())
    }
}

fn encode_read_request(
    sender: &mut FpduSender,
    tx: &mut TxBuffer,
    seg: SegmentRepr,
    req: &ReadRequestRepr,
) -> Result<(), VerbsError> {
    let mut payload = [0u8; ReadRequestRepr::LEN];
    req.emit(&mut payload)?;
    // The request is tiny: its segment size does not matter.
    Out { sender, tx, max: 0 }.encode(seg, &payload)
}

/// Handles a segment that is not part of a Send: places an RDMA Write, answers a Read
/// Request, places a Read Response. Returns false, touching nothing, for anything else (the
/// Send path judges it).
/// A region lookup's refusal as the protocol error that breaks the connection, in the words
/// of the operation: for an unknown STag, missing access, and out of bounds.
fn refused(f: Fault, why: [&'static str; 3]) -> VerbsError {
    VerbsError::Protocol(match f {
        Fault::UnknownStag => why[0],
        Fault::Access => why[1],
        Fault::Bounds => why[2],
    })
}

fn rdma_segment(
    seg: &SegmentRepr,
    payload: &[u8],
    rdma: &mut Rdma,
    mrs: &MrTable,
    q: &mut WorkQueues,
    mut out: Out<'_>,
) -> Result<bool, VerbsError> {
    match (seg.opcode, seg.placement) {
        (Opcode::RdmaWrite, Placement::Tagged { stag, offset }) => {
            let (region, at) = mrs
                .lookup(stag, offset, payload.len(), Use::RemoteWrite)
                .map_err(|f| {
                    refused(
                        f,
                        [
                            "RDMA Write to an unknown STag",
                            "RDMA Write to a region without remote write access",
                            "RDMA Write beyond the region's bounds",
                        ],
                    )
                })?;
            region.write_at(at, payload);
            Ok(true)
        }
        (Opcode::ReadResponse, Placement::Tagged { stag, offset }) => {
            let Some(read) = rdma.reads.front_mut() else {
                return Err(VerbsError::Protocol(
                    "Read Response with no RDMA Read outstanding",
                ));
            };
            // TCP keeps the responder's segments in order: each continues where the last
            // ended, in the sink the request named.
            if stag != read.sink_stag
                || Some(offset) != read.sink_to.checked_add(read.received as u64)
            {
                return Err(VerbsError::Protocol(
                    "Read Response not where the oldest RDMA Read's data goes next",
                ));
            }
            if payload.len() > read.len - read.received {
                return Err(VerbsError::Protocol(
                    "Read Response longer than the RDMA Read",
                ));
            }
            let (region, at) = mrs
                .lookup(stag, offset, payload.len(), Use::LocalWrite)
                .map_err(|f| {
                    refused(
                        f,
                        [
                            "Read Response to an STag no longer registered",
                            "Read Response to a region without local write access",
                            "Read Response beyond the region's bounds",
                        ],
                    )
                })?;
            region.write_at(at, payload);
            read.received += payload.len();
            if seg.last {
                if read.received != read.len {
                    return Err(VerbsError::Protocol(
                        "Read Response shorter than the RDMA Read",
                    ));
                }
                let (wr_id, len) = (read.wr_id, read.len);
                rdma.reads.pop_front();
                q.sq_done(WcOpcode::RdmaRead, wr_id, len, true);
            }
            Ok(true)
        }
        (Opcode::ReadRequest, Placement::Untagged { qn, msn, mo, .. }) => {
            if qn != QUEUE_READ_REQUEST {
                return Err(VerbsError::Protocol("Read Request on a queue other than 1"));
            }
            if msn != rdma.rx_read_msn {
                return Err(VerbsError::Protocol("Read Request MSN out of sequence"));
            }
            if mo != 0 || !seg.last {
                return Err(VerbsError::Protocol(
                    "Read Request in more than one segment",
                ));
            }
            let (req, rest) = ReadRequestRepr::parse(payload)?;
            if !rest.is_empty() {
                return Err(VerbsError::Protocol("Read Request longer than its header"));
            }
            rdma.rx_read_msn = rdma.rx_read_msn.wrapping_add(1);
            respond(&req, rdma, mrs, &mut out)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Queues the Read Response to `req` on the send path, whole: tagged segments into the
/// requester's sink, read from the source region segment by segment.
fn respond(
    req: &ReadRequestRepr,
    rdma: &mut Rdma,
    mrs: &MrTable,
    out: &mut Out<'_>,
) -> Result<(), VerbsError> {
    let len = req.len as usize;
    let (region, at) = mrs
        .lookup(req.src_stag, req.src_to, len, Use::RemoteRead)
        .map_err(|f| {
            refused(
                f,
                [
                    "RDMA Read of an unknown STag",
                    "RDMA Read of a region without remote read access",
                    "RDMA Read beyond the region's bounds",
                ],
            )
        })?;
    if req.sink_to.checked_add(len as u64).is_none() {
        return Err(VerbsError::Protocol("RDMA Read sink offset wraps"));
    }
    let max = out.max.max(1);
    rdma.scratch.resize(len.min(max), 0);
    let mut off = 0;
    loop {
        let n = (len - off).min(max);
        let last = off + n == len;
        let chunk = &mut rdma.scratch[..n];
        region.read_at(at + off, chunk);
        let seg = SegmentRepr::tagged(
            Opcode::ReadResponse,
            last,
            req.sink_stag,
            req.sink_to + off as u64,
        );
        out.encode(seg, chunk)?;
        off += n;
        if last {
            return Ok(());
        }
    }
}

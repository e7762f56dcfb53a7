//! The connection: its socket, framing and state, the flush of the send buffer, and the
//! failure that ends it.

use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;

use nix::errno::Errno;

use super::super::cq::WorkQueues;
use super::super::io;
use super::super::startup::Established;
use super::super::{VerbsError, WcOpcode, WcStatus};
use super::in_place::InPlace;
use super::state::{RcSettings, Rdma, RxProgress, TxBuffer};
use crate::wire::ddp::UNTAGGED_HEADER_LEN;
use crate::wire::mpa::{FpduDecoder, FpduSender, MAX_ULPDU_MARKERS};

/// Written bytes at the front of the send buffer after which they are dropped by moving the
/// rest, when they are also at least half of it.
const COMPACT_AT: usize = 1 << 20;

/// Send buffer storage kept once it drains; a backlog that needed more gives it back.
const KEEP_TX_CAPACITY: usize = 1 << 20;

pub(crate) struct RcPath {
    pub(super) stream: TcpStream,
    pub(super) local: SocketAddr,
    pub(super) peer: SocketAddr,
    pub(super) settings: RcSettings,
    pub(super) sender: FpduSender,
    pub(super) decoder: FpduDecoder,
    pub(super) tx_msn: u32,
    pub(super) rx_msn: u32,
    pub(super) rx: Option<RxProgress>,
    /// Receiver mode: the segments of a message longer than one FPDU, joined.
    pub(super) assembly: Vec<u8>,
    /// Receiver mode: the message being read in place, and the last message the receiver (or
    /// its size) declined, so that it is not asked again at every read.
    pub(super) in_place: Option<InPlace>,
    pub(super) declined: Option<u32>,
    pub(super) tx: TxBuffer,
    /// Posted receives: the first segment of a Send that came with no receive posted. It
    /// waits here (and nothing after it is read) until one is.
    pub(super) held: Option<Vec<u8>>,
    pub(super) rdma: Rdma,
    /// Why the connection broke, for the queue pair to pick up.
    pub(super) failure: Option<VerbsError>,
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

    /// Writes queued bytes until done or the kernel refuses; completes the sends whose last
    /// byte went. Returns whether everything went.
    pub(super) fn flush(&mut self, q: &mut WorkQueues) -> Result<bool, VerbsError> {
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

    /// Writes what waits; once nothing does, shuts the socket's sending side. Whether it did
    /// (a failure fails the connection).
    pub(crate) fn close_send(&mut self, q: &mut WorkQueues) -> bool {
        let result = match self.flush(q) {
            Ok(_) if !self.tx.is_empty() => return false,
            Ok(_) => self
                .stream
                .shutdown(Shutdown::Write)
                .map_err(VerbsError::from),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                self.fail(q, Some(e));
                false
            }
        }
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

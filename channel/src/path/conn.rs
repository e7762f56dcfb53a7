//! One RC connection to a peer: the queue pair, and the messages sent on it that the peer has
//! not acknowledged yet. TCP delivers them unless the connection breaks; then they are sent
//! again over RD with their own numbers, and the peer's sequence drops those it had.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use nix::sys::socket::MsgFlags;

use iwarp::verbs::{
    Bytes, QpState, QueuePair, RcQp, RdReceiver, SendOpcode, SendWrOwned, VerbsError,
    WorkCompletion,
};

use super::set::Rail;
use crate::addr::EpName;
use crate::peer::{covers, PeerHeader, SlotId, HEADER};

/// Longest prefix behind the per-peer header (a chunk's header).
pub const PREFIX_MAX: usize = 32;

/// Messages a connection holds unacknowledged before it takes no more (they wait in the
/// endpoint's backlog instead).
pub const WINDOW: usize = 1024;

/// Every this many messages unacknowledged, one asks for an acknowledgement, so a stream
/// that needs none still lets its copies go.
pub const ACK_EVERY: usize = 64;

/// A message as it went on the wire, kept until acknowledged.
pub struct Unacked<R> {
    pub seq: u32,
    /// When it was sent.
    pub at: Instant,
    head: [u8; HEADER + PREFIX_MAX],
    head_len: u8,
    pub data: Bytes,
    pub role: R,
}

impl<R> Unacked<R> {
    /// The per-peer header and the prefix, as sent.
    pub fn head(&self) -> &[u8] {
        &self.head[..self.head_len as usize]
    }
}

pub struct Conn<R> {
    pub qp: RcQp,
    pub name: EpName,
    /// The peer's slot, and the rail the connection runs on.
    pub slot: SlotId,
    pub rail: Rail,
    /// Demoted: takes no new messages, and closes once they are acknowledged.
    pub draining: bool,
    /// Draining, and the peer was asked to acknowledge.
    pub asked: bool,
    /// Drained, and when its close began: our sending side closes once the kernel took every
    /// byte (`RcQp::close_send`), and the connection ends when the peer's end of stream
    /// answers ours.
    pub closing: Option<Instant>,
    /// When the peer was last asked to acknowledge overdue messages.
    probed: Option<Instant>,
    unacked: VecDeque<Unacked<R>>,
}

/// Lends a connection's arrivals to the data path under the peer's datagram address, the name
/// every path knows it by.
struct AsPeer<'a> {
    inner: &'a mut dyn RdReceiver,
    peer: SocketAddr,
}

impl RdReceiver for AsPeer<'_> {
    fn early(&mut self, _: SocketAddr, payload: &[u8], in_order: bool) -> bool {
        self.inner.early(self.peer, payload, in_order)
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        self.inner.message(self.peer, payload)
    }
    fn max_message(&self) -> usize {
        self.inner.max_message()
    }
    fn in_place(&mut self, _: SocketAddr, head: &[u8], len: usize) -> bool {
        self.inner.in_place(self.peer, head, len)
    }
    fn read_in_place(
        &mut self,
        _: SocketAddr,
        head: &[u8],
        offset: usize,
        max: usize,
        read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        self.inner.read_in_place(self.peer, head, offset, max, read)
    }
    fn placed(&mut self, _: SocketAddr, head: &[u8], len: usize) {
        self.inner.placed(self.peer, head, len)
    }
}

impl<R> Conn<R> {
    pub fn new(qp: RcQp, name: EpName, slot: SlotId, rail: Rail) -> Conn<R> {
        Conn {
            qp,
            name,
            slot,
            rail,
            draining: false,
            asked: false,
            closing: None,
            probed: None,
            unacked: VecDeque::new(),
        }
    }

    /// Takes new messages.
    pub fn open(&self) -> bool {
        !self.draining && self.qp.state() == QpState::Rts && self.unacked.len() < WINDOW
    }

    /// Whether the next message should ask for a prompt acknowledgement.
    pub fn wants_ack(&self) -> bool {
        (self.unacked.len() + 1).is_multiple_of(ACK_EVERY)
    }

    /// Sends `data` behind `header` and `prefix`; kept until acknowledged. On failure the
    /// connection is broken and the message is given back.
    pub fn post(
        &mut self,
        header: PeerHeader,
        prefix: &[u8],
        data: Bytes,
        role: R,
    ) -> Result<(), (Bytes, R)> {
        let mut head = [0u8; HEADER + PREFIX_MAX];
        head[..HEADER].copy_from_slice(&header.encode());
        let head_len = HEADER + prefix.len();
        head[HEADER..head_len].copy_from_slice(prefix);
        let wr = SendWrOwned {
            wr_id: 0,
            opcode: SendOpcode::Send,
            data: data.clone(),
            ah: None,
            signaled: false,
        };
        match self.qp.post_send_prefixed(wr, &head[..head_len]) {
            Ok(()) if self.qp.state() == QpState::Rts => {
                self.unacked.push_back(Unacked {
                    seq: header.seq,
                    at: Instant::now(),
                    head,
                    head_len: head_len as u8,
                    data,
                    role,
                });
                Ok(())
            }
            _ => Err((data, role)),
        }
    }

    /// Sends an acknowledgement alone (best effort: a broken connection's peer has the
    /// messages sent again anyway).
    pub fn post_ack(&mut self, header: PeerHeader) {
        let wr = SendWrOwned {
            wr_id: 0,
            opcode: SendOpcode::Send,
            data: Bytes::new(),
            ah: None,
            signaled: false,
        };
        let _ = self.qp.post_send_prefixed(wr, &header.encode());
    }

    /// Writes what waits and lends what arrived to `rx`; whether the connection still works.
    pub fn poll(&mut self, rx: &mut dyn RdReceiver, wcs: &mut Vec<WorkCompletion>) -> bool {
        let mut lend = AsPeer {
            inner: rx,
            peer: self.name.udp_addr(),
        };
        loop {
            wcs.clear();
            match self.qp.poll_cq_with(&mut lend, wcs, 64) {
                Ok(64) => continue,
                _ => break,
            }
        }
        self.qp.state() != QpState::Error
    }

    /// Whether our sending side is closed: nothing more goes on this connection.
    pub fn send_closed(&self) -> bool {
        self.qp.state() == QpState::Closing
    }

    /// Takes the messages the peer acknowledged (up to `acked`) off the list; their roles
    /// go to `done`.
    pub fn settle(&mut self, acked: u32, done: &mut Vec<R>) {
        while self.unacked.front().is_some_and(|u| covers(acked, u.seq)) {
            let u = self.unacked.pop_front().expect("front exists");
            done.push(u.role);
        }
    }

    /// Whether a connection that stopped working ended by the peer's orderly close (an end of
    /// stream read where a message could begin), not by a reset or an error.
    pub fn ended_in_order(&self) -> bool {
        matches!(self.qp.last_error(), Some(VerbsError::PeerClosed))
    }

    /// Whether the peer's end is closed (an end of stream waits in the socket, with nothing
    /// before it), seen without reading.
    pub fn closed_by_peer(&self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(fd) = self.qp.socket() else {
            return true;
        };
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        matches!(
            nix::sys::socket::recv(fd.as_raw_fd(), &mut [0u8; 1], flags),
            Ok(0)
        )
    }

    /// Whether the peer left a message unacknowledged since before `since`: it acknowledges
    /// at once what asks for it, so a peer that does not is gone (or stopped).
    pub fn silent_since(&self, since: Instant) -> bool {
        self.unacked.front().is_some_and(|u| u.at < since)
    }

    /// Whether to ask the peer again to acknowledge: a message has waited `after` for it, and
    /// the last ask is as old. A live peer answers at once; over a connection its end
    /// dropped (a reset that reached only it), the ask draws a reset that breaks ours, and its
    /// messages go again over RD instead of waiting for the peer timeout.
    pub fn probe_due(&mut self, now: Instant, after: std::time::Duration) -> bool {
        let overdue = self.unacked.front().is_some_and(|u| now >= u.at + after);
        if !overdue || self.probed.is_some_and(|t| now < t + after) {
            return false;
        }
        self.probed = Some(now);
        true
    }

    /// When the oldest message still unacknowledged was sent.
    pub fn oldest(&self) -> Option<Instant> {
        self.unacked.front().map(|u| u.at)
    }

    pub fn is_settled(&self) -> bool {
        self.unacked.is_empty()
    }

    /// What the peer has not acknowledged, in order, for sending again on its RD path.
    pub fn take_unacked(&mut self) -> VecDeque<Unacked<R>> {
        std::mem::take(&mut self.unacked)
    }

    /// Heap bytes: the queue pair's buffers, the list and the messages' bytes it keeps (the
    /// application's own, lent rendezvous chunks, among them: the caller takes those off).
    pub fn memory(&self) -> usize {
        self.qp.memory_bytes()
            + self.qp.work_queue_bytes()
            + self.unacked.capacity() * std::mem::size_of::<Unacked<R>>()
            + self.unacked.iter().map(|u| u.data.len()).sum::<usize>()
    }
}

//! The receiving half of an RD queue pair: which posted receive each message goes to, placement
//! of segments straight into it, and completion in message order per peer.
//!
//! Receives are bound to messages in message order, so a peer's messages complete in the
//! order they were sent and take posted receives in the order they were posted. A segmented
//! message needs its receive when its first datagram arrives — whichever segment that is —
//! so the segments can be placed at once; binding it binds every earlier message of the peer
//! still without one. A small (inline) message needs its receive only when it is delivered;
//! if none is posted then, it is copied into the stash, and the stash is served before any
//! further binding, which keeps the order.
//!
//! A datagram that needs receives that are not posted is not handed to the engine at all
//! ([`gate`]): the engine would acknowledge it, and the data would have nowhere to go.

use std::collections::VecDeque;
use std::net::SocketAddr;

use reliability::header::{Kind, Packet};
use reliability::{Delivery, MsgId, Placement, Sink};

use super::super::cq::WorkQueues;
use super::super::{RecvWr, WcStatus};
use super::stats::RdStats;
use crate::wire::datagram;
use crate::wire::ddp::{Placement as DdpPlacement, UNTAGGED_HEADER_LEN};
use crate::wire::rdmap::{Opcode, SegmentRepr};

/// Each RD message starts with an untagged DDP/RDMAP Send header (the engine is the LLP
/// beneath DDP and carries the whole message; the header says Send or Send with Solicited
/// Event and names the destination queue pair).
pub(crate) const DDP_HEADER: usize = UNTAGGED_HEADER_LEN;

/// Largest RD message: the engine carries up to `u32::MAX` bytes, header included.
pub const RD_MAX_MESSAGE: usize = u32::MAX as usize - DDP_HEADER;

/// Bytes of small messages kept for lack of a posted receive before datagrams that would add
/// more are left unread.
pub(crate) const STASH_LIMIT: usize = 1 << 20;

/// Queue capacity a quiet peer keeps: the first allocation, which a ping-pong reuses. A burst
/// grows the queues; once they drain, what it grew is given back (a peer met once in an
/// all-to-all would otherwise hold it for good). Here, below [`peer`](super::peer), because
/// a peer's receive queues are compacted as its send queues are.
const KEEP: usize = 4;

/// Gives back the room of `q` past [`KEEP`] once it is empty.
pub(super) fn compact<T>(q: &mut VecDeque<T>) {
    if q.is_empty() && q.capacity() > KEEP {
        *q = VecDeque::new();
    }
}

/// The solicited flag of a valid RD message header for queue pair `qpn`, or `None`.
pub(crate) fn check_header(header: &[u8], qpn: u32) -> Option<bool> {
    let (seg, _) = SegmentRepr::parse(header).ok()?;
    let DdpPlacement::Untagged { qn, mo, .. } = seg.placement else {
        return None;
    };
    if !matches!(seg.opcode, Opcode::Send | Opcode::SendSolicited) || !seg.last || mo != 0 {
        return None;
    }
    let (dst, queue) = datagram::split_qn(qn);
    (dst == qpn && queue == 0).then(|| seg.opcode.solicited())
}

/// A posted receive bound to a message not yet delivered.
struct Bound {
    wr: RecvWr,
    /// The message's length with its header, from its first segment placed.
    total: Option<u32>,
    header: [u8; DDP_HEADER],
    /// The payload does not fit: nothing is written, the completion is a length error.
    too_long: bool,
    /// Segments disagreed about the message (a broken peer): the receive goes back.
    bad: bool,
}

impl Bound {
    fn new(wr: RecvWr) -> Bound {
        Bound {
            wr,
            total: None,
            header: [0; DDP_HEADER],
            too_long: false,
            bad: false,
        }
    }

    fn place(&mut self, offset: u32, total: u32, bytes: &[u8]) {
        match self.total {
            None => {
                self.total = Some(total);
                match (total as usize).checked_sub(DDP_HEADER) {
                    None => self.bad = true,
                    Some(payload) => self.too_long = payload > self.wr.buf.len(),
                }
            }
            Some(t) if t != total => self.bad = true,
            Some(_) => {}
        }
        if self.bad {
            return;
        }
        let offset = offset as usize;
        let mut bytes = bytes;
        if offset < DDP_HEADER {
            let n = (DDP_HEADER - offset).min(bytes.len());
            self.header[offset..offset + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if self.too_long || bytes.is_empty() {
            return;
        }
        let at = offset.max(DDP_HEADER) - DDP_HEADER;
        match self.wr.buf.get_mut(at..at + bytes.len()) {
            Some(dst) => dst.copy_from_slice(bytes),
            None => self.bad = true,
        }
    }

    fn finish(self, q: &mut WorkQueues, len: u32, src: SocketAddr, qpn: u32, stats: &mut RdStats) {
        let solicited = if self.bad || self.total != Some(len) {
            None
        } else {
            check_header(&self.header, qpn)
        };
        match solicited {
            Some(solicited) => {
                let status = if self.too_long {
                    WcStatus::LocalLengthError
                } else {
                    WcStatus::Success
                };
                let payload = len as usize - DDP_HEADER;
                q.complete_held(self.wr, status, payload, Some(src), solicited);
            }
            None => {
                stats.protocol_errors += 1;
                q.return_recv(self.wr);
            }
        }
    }
}

/// Completes `wr` with a whole message (header and payload); a message with a bad header
/// gives the receive back.
fn complete_inline(
    q: &mut WorkQueues,
    mut wr: RecvWr,
    msg: &[u8],
    src: SocketAddr,
    qpn: u32,
    stats: &mut RdStats,
) {
    let Some(solicited) = msg.get(..DDP_HEADER).and_then(|h| check_header(h, qpn)) else {
        stats.protocol_errors += 1;
        q.return_recv(wr);
        return;
    };
    let payload = &msg[DDP_HEADER..];
    let status = match wr.buf.get_mut(..payload.len()) {
        Some(dst) => {
            dst.copy_from_slice(payload);
            WcStatus::Success
        }
        None => WcStatus::LocalLengthError,
    };
    q.complete_held(wr, status, payload.len(), Some(src), solicited);
}

/// One peer's messages between delivery and completion.
pub(crate) struct PeerRx {
    /// The next message to be delivered; `bound[i]` and `staged[i]` belong to message
    /// `next + i`.
    next: MsgId,
    bound: VecDeque<Bound>,
    /// Receiver mode ([`RdReceiver`]): what became of segmented messages not yet delivered.
    staged: VecDeque<Option<Staged>>,
}

impl PeerRx {
    pub(crate) fn new(first: MsgId) -> PeerRx {
        PeerRx {
            next: first,
            bound: VecDeque::new(),
            staged: VecDeque::new(),
        }
    }

    /// Bytes of segmented messages staged for their turn.
    pub(crate) fn staged_bytes(&self) -> usize {
        self.staged
            .iter()
            .map(|s| match s {
                Some(Staged::Bytes { buf, .. }) => buf.capacity(),
                _ => 0,
            })
            .sum()
    }

    /// Bytes of the per-message bookkeeping (its queues' capacity).
    pub(crate) fn bookkeeping_bytes(&self) -> usize {
        self.staged.capacity() * std::mem::size_of::<Option<Staged>>()
            + self.bound.capacity() * std::mem::size_of::<Bound>()
    }

    /// Bytes held for this peer's messages: staged buffers and bookkeeping.
    #[cfg(test)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.staged_bytes() + self.bookkeeping_bytes()
    }

    /// How many messages before `msg` the peer skipped (the engine delivers in order, so any
    /// is a broken peer, counted), or `None` for a message already delivered.
    fn skipped(&self, msg: MsgId, stats: &mut RdStats) -> Option<usize> {
        let skip = msg.since(self.next);
        if skip == 0 {
            return Some(0);
        }
        stats.protocol_errors += 1;
        (skip < 1 << 31).then_some(skip as usize)
    }

    /// Receives the messages up to `hi` still need (0 if `hi` was delivered already).
    pub(crate) fn unbound_upto(&self, hi: MsgId) -> u32 {
        let first_unbound = self.next.add(self.bound.len() as u32);
        let d = hi.since(first_unbound);
        if d < 1 << 31 {
            d + 1
        } else {
            0
        }
    }

    /// Binds the head posted receives to the messages up to `hi` (the caller checked there
    /// are enough).
    fn bind_upto(&mut self, hi: MsgId, q: &mut WorkQueues) {
        for _ in 0..self.unbound_upto(hi) {
            match q.take_recv() {
                Some(wr) => self.bound.push_back(Bound::new(wr)),
                None => return,
            }
        }
    }

    /// The session is gone: bound receives go back to the head of the receive queue, in the
    /// order they were posted.
    pub(crate) fn unbind_all(&mut self, q: &mut WorkQueues) {
        while let Some(b) = self.bound.pop_back() {
            q.return_recv(b.wr);
        }
    }

    /// The queue pair failed: bound receives complete with `FlushError`.
    pub(crate) fn flush(&mut self, q: &mut WorkQueues) {
        for b in self.bound.drain(..) {
            q.complete_held(b.wr, WcStatus::FlushError, 0, None, false);
        }
    }

    pub(crate) fn bound_len(&self) -> usize {
        self.bound.len()
    }

    /// The next message to be delivered.
    pub(crate) fn next(&self) -> MsgId {
        self.next
    }

    /// Whether nothing is bound or staged: only `next` would be lost.
    pub(crate) fn idle(&self) -> bool {
        self.bound.is_empty() && self.staged.is_empty()
    }
}

/// Small messages delivered while no receive was posted, oldest first, across all peers.
#[derive(Default)]
pub(crate) struct Stash {
    items: VecDeque<(SocketAddr, Box<[u8]>)>,
    bytes: usize,
}

impl Stash {
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// What one message costs the stash besides its bytes: empty messages must count too, or
    /// a peer could queue them without bound.
    const ENTRY: usize = std::mem::size_of::<(SocketAddr, Box<[u8]>)>();

    fn push(&mut self, src: SocketAddr, msg: &[u8]) {
        self.bytes += msg.len() + Self::ENTRY;
        self.items.push_back((src, msg.into()));
    }

    /// Completes stashed messages with posted receives.
    pub(crate) fn drain(&mut self, q: &mut WorkQueues, qpn: u32, stats: &mut RdStats) {
        while !self.items.is_empty() {
            let Some(wr) = q.take_recv() else { return };
            let (src, msg) = self.items.pop_front().expect("not empty");
            self.bytes -= msg.len() + Self::ENTRY;
            complete_inline(q, wr, &msg, src, qpn, stats);
        }
        self.items = VecDeque::new();
    }

    pub(crate) fn clear(&mut self) {
        *self = Stash::default();
    }
}

/// What to do with a reliability datagram from an established peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Hand it to the engine (receives are bound where it needs them).
    Feed,
    /// Keep it unread until receives are posted.
    Park,
}

/// Decides whether the engine may take `pkt` now, binding the receives it needs. Datagrams
/// whose checksum fails are always fed (the engine drops and counts them), so a corrupted
/// message id never binds or parks anything it names.
pub(crate) fn gate(
    pkt: &Packet<&[u8]>,
    rx: &mut PeerRx,
    q: &mut WorkQueues,
    stash: &Stash,
) -> Gate {
    let (hi, inline) = match pkt.kind() {
        Ok(Kind::Segment) => (pkt.msg(), false),
        Ok(Kind::Single) => (pkt.msg(), true),
        Ok(Kind::Coalesced) => (pkt.msg().add(u32::from(pkt.count().max(1)) - 1), true),
        Ok(Kind::Ack) | Err(_) => return Gate::Feed,
    };
    let need = rx.unbound_upto(hi) as usize;
    if need == 0 {
        return Gate::Feed;
    }
    // The stash is served first: while it holds messages no receive is free to bind.
    let free = if stash.is_empty() { q.rq.len() } else { 0 };
    if inline {
        if need <= free || stash.bytes() + pkt.payload().len() <= STASH_LIMIT {
            return Gate::Feed;
        }
        return if pkt.checksum_ok() {
            Gate::Park
        } else {
            Gate::Feed
        };
    }
    if (need > 1 || need > free) && !pkt.checksum_ok() {
        return Gate::Feed;
    }
    if need > free {
        return Gate::Park;
    }
    rx.bind_upto(hi, q);
    Gate::Feed
}

/// Where the engine puts what one peer sent.
pub(crate) struct RxSink<'a> {
    pub(crate) rx: &'a mut PeerRx,
    pub(crate) q: &'a mut WorkQueues,
    pub(crate) stash: &'a mut Stash,
    pub(crate) src: SocketAddr,
    pub(crate) qpn: u32,
    pub(crate) stats: &'a mut RdStats,
}

impl Sink for RxSink<'_> {
    fn place(&mut self, p: Placement<'_>) {
        let i = p.msg.since(self.rx.next) as usize;
        match self.rx.bound.get_mut(i) {
            Some(b) => b.place(p.offset, p.total_len, p.bytes),
            // The gate binds before it feeds; this is a peer breaking the protocol.
            None => self.stats.protocol_errors += 1,
        }
    }

    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        let Some(skip) = self.rx.skipped(msg, self.stats) else {
            return;
        };
        if skip != 0 {
            // A peer skipping ids gives back what was bound.
            let n = skip.min(self.rx.bound.len());
            for b in self.rx.bound.drain(..n).rev().collect::<Vec<_>>() {
                self.q.return_recv(b.wr);
            }
            self.rx.next = msg;
        }
        let bound = self.rx.bound.pop_front();
        compact(&mut self.rx.bound);
        self.rx.next = msg.next();
        match (d, bound) {
            (Delivery::Inline(bytes), Some(b)) => {
                complete_inline(self.q, b.wr, bytes, self.src, self.qpn, self.stats)
            }
            (Delivery::Inline(bytes), None) => {
                if self.stash.is_empty() {
                    if let Some(wr) = self.q.take_recv() {
                        complete_inline(self.q, wr, bytes, self.src, self.qpn, self.stats);
                        return;
                    }
                }
                self.stats.stashed += 1;
                self.stash.push(self.src, bytes);
            }
            (Delivery::Placed { len }, Some(b)) => {
                b.finish(self.q, len, self.src, self.qpn, self.stats)
            }
            (Delivery::Placed { .. }, None) => self.stats.protocol_errors += 1,
        }
    }
}

/// Takes RD messages without posted receives ([`QueuePair::poll_cq_with`]): the bytes are lent
/// where they lie (the socket's receive ring, mostly), so the consumer copies them once, to
/// wherever they belong.
///
/// [`QueuePair::poll_cq_with`]: crate::verbs::QueuePair::poll_cq_with
pub trait RdReceiver {
    /// A message that arrived whole in one datagram, before its turn if `in_order` is false
    /// (earlier messages of the peer are still missing). Return true to take it now (its
    /// handling does not depend on order); false, and it comes again through
    /// [`RdReceiver::message`] in its turn.
    fn early(&mut self, src: SocketAddr, payload: &[u8], in_order: bool) -> bool;
    /// A message, in the peer's send order.
    fn message(&mut self, src: SocketAddr, payload: &[u8]);
    /// A segment of a message longer than one datagram, offered as it arrives so that it can
    /// go straight where it belongs instead of through a reassembly buffer. `head` is the
    /// start of the message's payload (at most [`SEGMENT_HEAD`] bytes, as many as its first
    /// segment carried) and `bytes` lie at `offset` in that payload.
    ///
    /// The first call brings the first segment (`offset` 0), and only if it is the first of
    /// its message to arrive. Return true to take the message: every later segment comes here
    /// too, and the message is never handed over whole. Return false (the default) and it is
    /// reassembled and comes through [`RdReceiver::early`] or [`RdReceiver::message`]. A
    /// taken message is not in order: only a receiver whose handling does not depend on order
    /// should take one.
    fn segment(&mut self, src: SocketAddr, head: &[u8], offset: usize, bytes: &[u8]) -> bool {
        let _ = (src, head, offset, bytes);
        false
    }
    /// A message taken segment by segment is whole: its last segment came through
    /// [`RdReceiver::segment`] (before its turn, maybe: earlier messages of the peer may still
    /// be missing). `head` is as there; `len` is the message payload's length. A receiver
    /// that settles a message only once it is whole (another copy of it may come another way,
    /// and a copy cut short by a session's end never is) settles it here.
    fn segmented(&mut self, src: SocketAddr, head: &[u8], len: usize) {
        let _ = (src, head, len);
    }
    /// The longest message payload this receiver is ever sent. A segment announcing a longer
    /// message is dropped and counted instead of reassembled: its buffer, sized by the peer's
    /// word, would be as long.
    fn max_message(&self) -> usize {
        RD_MAX_MESSAGE
    }
    /// RC: a message of `len` bytes that one FPDU carries, whose first bytes (`head`, at most
    /// [`SEGMENT_HEAD`]) are here and whose rest is still in the socket. Return true to have
    /// the rest read straight to where it belongs ([`RdReceiver::read_in_place`]) and the
    /// message then handed over with [`RdReceiver::placed`]; false (the default) and it comes
    /// through [`RdReceiver::early`] or [`RdReceiver::message`] as any other.
    ///
    /// Nothing read in place is checked until the message is handed over: the bytes may land
    /// and the message never come (its CRC failed, the connection broke), so only a receiver
    /// that can take the message again, whole, elsewhere should take one.
    fn in_place(&mut self, src: SocketAddr, head: &[u8], len: usize) -> bool {
        let _ = (src, head, len);
        false
    }
    /// Reads bytes of the message taken in place from `offset` on (past its head), at most
    /// `max`, by calling `read` with where they belong; returns what `read` returned.
    fn read_in_place(
        &mut self,
        src: SocketAddr,
        head: &[u8],
        offset: usize,
        max: usize,
        read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let _ = (src, head, offset);
        read(&mut vec![0; max])
    }
    /// The message taken in place is whole and checked, in the peer's send order: its bytes
    /// past `head` are where [`RdReceiver::read_in_place`] put them.
    fn placed(&mut self, src: SocketAddr, head: &[u8], len: usize) {
        let _ = (src, head, len);
    }
    /// A datagram that is neither a control datagram nor one that names a session (too short
    /// for the reliability header, say): something another protocol on the same socket sent.
    /// Return true to take it (the engine then does not count it as dropped). Only such
    /// datagrams come here, so the path of the engine's own is not slowed.
    fn stray(&mut self, src: Option<SocketAddr>, datagram: &[u8]) -> bool {
        let _ = (src, datagram);
        false
    }
}

/// Most payload bytes kept of a segmented message's first segment, for [`RdReceiver::segment`].
pub const SEGMENT_HEAD: usize = 64;

/// A segmented message in receiver mode, between its first segment and its delivery.
enum Staged {
    /// The receiver took it early.
    Taken,
    /// The receiver takes its segments as they come ([`RdReceiver::segment`]).
    Direct {
        head: [u8; SEGMENT_HEAD],
        head_len: u8,
        total: u32,
        /// Bytes of it placed so far, DDP header included.
        got: u32,
    },
    /// Reassembled here (header included) until its turn.
    Bytes { buf: Vec<u8>, total: u32 },
    /// Broken: dropped at delivery.
    Bad,
}

/// Where the engine puts what one peer sent, in receiver mode.
pub(crate) struct ReceiverSink<'a> {
    pub(crate) rx: &'a mut PeerRx,
    pub(crate) recv: &'a mut dyn RdReceiver,
    pub(crate) src: SocketAddr,
    pub(crate) qpn: u32,
    pub(crate) stats: &'a mut RdStats,
}

/// Copies a segment to `offset` of a reassembly buffer of `total` bytes (its capacity); false
/// if it does not fit. The buffer's length grows only as far as the segments reach, so the
/// usual in-order arrival appends and nothing is zeroed first (a 60 KiB chunk parked for an
/// unexpected rendezvous cost a `memset` as long as its copy).
fn fill(buf: &mut Vec<u8>, offset: usize, bytes: &[u8], total: usize) -> bool {
    let Some(end) = offset.checked_add(bytes.len()).filter(|&end| end <= total) else {
        return false;
    };
    if offset == buf.len() {
        buf.extend_from_slice(bytes);
    } else {
        if buf.len() < end {
            buf.resize(end, 0);
        }
        buf[offset..end].copy_from_slice(bytes);
    }
    true
}

/// A message's payload after a valid RD header, or `None` (counted).
fn payload<'b>(msg: &'b [u8], qpn: u32, stats: &mut RdStats) -> Option<&'b [u8]> {
    match msg.get(..DDP_HEADER).and_then(|h| check_header(h, qpn)) {
        Some(_) => Some(&msg[DDP_HEADER..]),
        None => {
            stats.protocol_errors += 1;
            None
        }
    }
}

impl Sink for ReceiverSink<'_> {
    fn place(&mut self, p: Placement<'_>) {
        let i = p.msg.since(self.rx.next) as usize;
        if i >= 1 << 16 {
            // Behind delivery, or absurdly far ahead: not a message the engine would place.
            self.stats.protocol_errors += 1;
            return;
        }
        if self.rx.staged.len() <= i {
            self.rx.staged.resize_with(i + 1, || None);
        }
        let slot = &mut self.rx.staged[i];
        let offset = p.offset as usize;
        let segmented = (p.bytes.len() as u64) < u64::from(p.total_len);
        if slot.is_none() && offset == 0 && (!segmented || p.bytes.len() > DDP_HEADER) {
            let Some(body) = payload(p.bytes, self.qpn, self.stats) else {
                *slot = Some(Staged::Bad);
                return;
            };
            if !segmented {
                if self.recv.early(self.src, body, i == 0) {
                    *slot = Some(Staged::Taken);
                    return;
                }
            } else {
                let head_len = body.len().min(SEGMENT_HEAD);
                if self.recv.segment(self.src, &body[..head_len], 0, body) {
                    let mut head = [0; SEGMENT_HEAD];
                    head[..head_len].copy_from_slice(&body[..head_len]);
                    *slot = Some(Staged::Direct {
                        head,
                        head_len: head_len as u8,
                        total: p.total_len,
                        got: p.bytes.len() as u32,
                    });
                    return;
                }
            }
        }
        if let Some(Staged::Direct {
            head,
            head_len,
            total,
            got,
        }) = slot
        {
            // Only the first segment holds the header; the engine places each datagram once.
            let head = &head[..*head_len as usize];
            let taken = *total == p.total_len
                && offset >= DDP_HEADER
                && self
                    .recv
                    .segment(self.src, head, offset - DDP_HEADER, p.bytes);
            if !taken {
                self.stats.protocol_errors += 1;
                return;
            }
            *got = got.saturating_add(p.bytes.len() as u32);
            if *got == *total {
                let len = (*total as usize).saturating_sub(DDP_HEADER);
                self.recv.segmented(self.src, head, len);
            }
            return;
        }
        if slot.is_none() && p.total_len as usize > DDP_HEADER + self.recv.max_message() {
            self.stats.protocol_errors += 1;
            *slot = Some(Staged::Bad);
            return;
        }
        let st = slot.get_or_insert_with(|| Staged::Bytes {
            buf: Vec::with_capacity(p.total_len as usize),
            total: p.total_len,
        });
        let fits = match st {
            Staged::Bytes { buf, total } if *total == p.total_len => {
                fill(buf, offset, p.bytes, *total as usize)
            }
            _ => false,
        };
        if !fits {
            self.stats.protocol_errors += 1;
            *st = Staged::Bad;
        }
    }

    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        let Some(skip) = self.rx.skipped(msg, self.stats) else {
            return;
        };
        let n = skip.min(self.rx.staged.len());
        self.rx.staged.drain(..n);
        let staged = self.rx.staged.pop_front().flatten();
        compact(&mut self.rx.staged);
        self.rx.next = msg.next();
        match (d, staged) {
            (Delivery::Inline(bytes), None) => {
                if let Some(body) = payload(bytes, self.qpn, self.stats) {
                    self.recv.message(self.src, body);
                }
            }
            (Delivery::Placed { .. }, Some(Staged::Taken | Staged::Direct { .. })) => {}
            (Delivery::Placed { len }, Some(Staged::Bytes { buf, total }))
                if total == len && buf.len() == len as usize =>
            {
                if let Some(body) = payload(&buf, self.qpn, self.stats) {
                    self.recv.message(self.src, body);
                }
            }
            (_, Some(Staged::Bad)) => {}
            _ => self.stats.protocol_errors += 1,
        }
    }
}

#[cfg(test)]
#[path = "rx_tests.rs"]
mod tests;

//! The receiving half: duplicate suppression, the reorder window, placement of segments and
//! in-order delivery of messages, and the ACK state.
//!
//! Whole messages (SINGLE, COALESCED) that arrive ahead of a gap are copied and held until the
//! gap fills. SEGMENTs are never held: each is handed to the caller to place at its offset the
//! moment it arrives, and only a small marker stays in the reorder window. Delivery walks the
//! window in sequence order, so messages come out in the order they were sent, and a segmented
//! message is complete exactly when the walk reaches its last segment.

use std::collections::VecDeque;
use std::time::Instant;

use crate::config::Config;
use crate::dormant::RecvPoint;
use crate::header::{Body, Entries, SACK_BITS};
use crate::seq::{MsgId, Seq};
use crate::stats::Stats;

/// Bytes of a segmented message, to be written at `offset` into the message's destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement<'a> {
    /// The message.
    pub msg: MsgId,
    /// Where `bytes` go in the message.
    pub offset: u32,
    /// The message's full length (the same in each of its segments).
    pub total_len: u32,
    /// The segment's bytes.
    pub bytes: &'a [u8],
}

/// A message handed over in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery<'a> {
    /// A whole message, bytes included.
    Inline(&'a [u8]),
    /// A segmented message whose bytes were all given to [`Sink::place`] already.
    Placed {
        /// Its length.
        len: u32,
    },
}

/// Where a session puts what it receives. Both calls happen inside `handle_datagram`, with
/// slices that borrow the datagram (or the session's reorder storage), so nothing is copied on
/// the way.
pub trait Sink {
    /// A segment of message `p.msg` arrived (maybe before earlier messages): place it. Each
    /// byte of a message is placed exactly once.
    fn place(&mut self, p: Placement<'_>);
    /// Message `msg` is complete and every earlier message was delivered.
    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>);
}

/// A sink that drops everything.
impl Sink for () {
    fn place(&mut self, _: Placement<'_>) {}
    fn deliver(&mut self, _: MsgId, _: Delivery<'_>) {}
}

#[derive(Debug)]
enum Slot {
    Missing,
    /// A SINGLE (count 0) or COALESCED (count entries) body, copied.
    Held {
        msg: MsgId,
        count: u16,
        data: Box<[u8]>,
    },
    /// A SEGMENT already placed.
    Placed {
        msg: MsgId,
        total_len: u32,
        last: bool,
    },
}

/// Why the data part of a datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataDrop {
    Duplicate,
    OutOfWindow,
    ReorderFull,
}

#[derive(Debug)]
pub(crate) struct Receiver {
    /// Every sequence number before this one was received and processed.
    next: Seq,
    next_msg: MsgId,
    /// Segments of `next_msg` were placed and its last is still to come: the caller holds a
    /// message in part, so the session is not frozen under it.
    mid_message: bool,
    /// `slots[i]` is sequence number `next + i`; when not empty, `slots[0]` is `Missing`.
    slots: VecDeque<Slot>,
    held_bytes: usize,
    credit: u16,
    unacked: u32,
    ack_at: Option<Instant>,
    ack_now: bool,
    /// Sequence numbers received twice, to report (a few; more are dropped).
    dsacks: [Seq; 4],
    /// Bit i: `dsacks[i]` had been acknowledged before its copy came.
    dsacks_acked: u8,
    n_dsacks: u8,
    /// The ACKs sent, to tell whether a duplicate had been acknowledged before its copy came.
    sent: SentAcks,
}

/// The last ACK (cumulative point and bitmap) sent, with when, and the last one sent before
/// the caller last found its input empty. A datagram read after that moment came after that
/// ACK left. One read before it may have been waiting in the socket since before the ACK:
/// a rank that gets the CPU back after a time slice reads a full socket in several batches
/// and acknowledges between them, while the copies behind were sent long before.
#[derive(Debug, Default)]
struct SentAcks {
    latest: (Seq, u32),
    latest_at: Option<Instant>,
    settled: (Seq, u32),
    drained_at: Option<Instant>,
}

impl SentAcks {
    /// The record of a receiver resumed at `now` from `p`, whose last ACK covered everything
    /// before `p.seq`. If that ACK had left before the input was last drained it stays settled;
    /// otherwise the settled record covers nothing (the ACK point half the sequence space
    /// behind), and the ACK settles at the next drain after `now`, as one sent then would.
    fn resumed(p: &RecvPoint, now: Instant) -> SentAcks {
        let latest = (p.seq, 0);
        if p.acked {
            SentAcks {
                latest,
                settled: latest,
                ..SentAcks::default()
            }
        } else {
            SentAcks {
                latest,
                latest_at: Some(now),
                settled: (p.seq.add(0x8000_0001), 0),
                drained_at: None,
            }
        }
    }

    fn sent(&mut self, ack: Seq, sack: u32, now: Instant) {
        if self.latest_at < self.drained_at {
            self.settled = self.latest;
        }
        self.latest = (ack, sack);
        self.latest_at = Some(now);
    }

    /// Whether an ACK that left before the input was last drained covered `seq`.
    fn covered(&self, seq: Seq) -> bool {
        let (ack, sack) = if self.latest_at < self.drained_at {
            self.latest
        } else {
            self.settled
        };
        if seq.before(ack) {
            return true;
        }
        let i = seq.since(ack);
        (1..=SACK_BITS).contains(&i) && sack & (1 << (i - 1)) != 0
    }
}

impl Receiver {
    pub(crate) fn new(config: &Config) -> Receiver {
        Receiver {
            next: Seq(config.initial_seq),
            next_msg: MsgId(config.initial_seq),
            mid_message: false,
            slots: VecDeque::new(),
            held_bytes: 0,
            credit: config.recv_window,
            unacked: 0,
            ack_at: None,
            ack_now: false,
            dsacks: [Seq(0); 4],
            dsacks_acked: 0,
            n_dsacks: 0,
            sent: SentAcks {
                latest: (Seq(config.initial_seq), 0),
                settled: (Seq(config.initial_seq), 0),
                ..SentAcks::default()
            },
        }
    }

    /// A receiver continuing at `now` from `p`, as the one frozen there left off.
    pub(crate) fn resume(config: &Config, p: RecvPoint, now: Instant) -> Receiver {
        Receiver {
            next: p.seq,
            next_msg: p.msg,
            credit: p.credit.clamp(1, config.recv_window),
            sent: SentAcks::resumed(&p, now),
            ..Receiver::new(config)
        }
    }

    /// Where an idle receiver stands, or `None` if it is not idle: something is held out of
    /// order, or an ACK or duplicate report is owed.
    pub(crate) fn freeze(&self) -> Option<RecvPoint> {
        if !self.slots.is_empty() || self.held_bytes != 0 || self.mid_message || self.owes_ack() {
            return None;
        }
        Some(RecvPoint {
            seq: self.next,
            msg: self.next_msg,
            credit: self.credit,
            acked: self.sent.covered(self.next.sub(1)),
        })
    }

    /// Cumulative ACK to send.
    pub(crate) fn ack(&self) -> Seq {
        self.next
    }

    /// Selective-ACK bitmap to send: bit i is `next + 1 + i`.
    pub(crate) fn sack(&self) -> u32 {
        // Nothing held past the hole (every datagram of an in-order stream): no bits. Asked
        // for with every datagram sent.
        if self.slots.len() <= 1 {
            return 0;
        }
        let mut bits = 0;
        for (i, s) in self
            .slots
            .iter()
            .skip(1)
            .take(SACK_BITS as usize)
            .enumerate()
        {
            if !matches!(s, Slot::Missing) {
                bits |= 1 << i;
            }
        }
        bits
    }

    pub(crate) fn credit(&self) -> u16 {
        self.credit
    }

    /// Sets the advertised credit (clamped to `1..=recv_window`); an increase is announced at once.
    pub(crate) fn set_credit(&mut self, config: &Config, credit: u16) {
        let credit = credit.clamp(1, config.recv_window);
        if credit > self.credit {
            self.ack_now = true;
        }
        self.credit = credit;
    }

    /// A duplicate to report in a DSACK, if any, and whether it had been acknowledged before
    /// its copy came.
    pub(crate) fn take_dsack(&mut self) -> Option<(Seq, bool)> {
        if self.n_dsacks == 0 {
            return None;
        }
        self.n_dsacks -= 1;
        let i = self.n_dsacks;
        Some((
            self.dsacks[usize::from(i)],
            self.dsacks_acked & (1 << i) != 0,
        ))
    }

    /// The caller read its input to the end at `now`: whatever it reads next arrived later.
    pub(crate) fn input_drained(&mut self, now: Instant) {
        self.sent.drained_at = Some(now);
    }

    fn note_duplicate(&mut self, seq: Seq) {
        if usize::from(self.n_dsacks) < self.dsacks.len() {
            let i = self.n_dsacks;
            self.dsacks[usize::from(i)] = seq;
            self.dsacks_acked &= !(1 << i);
            self.dsacks_acked |= u8::from(self.sent.covered(seq)) << i;
            self.n_dsacks += 1;
        }
        self.ack_now = true;
    }

    pub(crate) fn request_ack(&mut self) {
        self.ack_now = true;
    }

    /// Something received is not acknowledged yet.
    pub(crate) fn owes_ack(&self) -> bool {
        self.ack_now || self.ack_at.is_some() || self.n_dsacks > 0
    }

    /// The ACK should leave by `t` at the latest.
    pub(crate) fn ack_by(&mut self, t: Instant) {
        self.ack_at = Some(self.ack_at.map_or(t, |a| a.min(t)));
    }

    pub(crate) fn ack_due(&self, now: Instant, config: &Config) -> bool {
        self.ack_now
            || self.unacked >= u32::from(config.ack_every)
            || self.ack_at.is_some_and(|t| t <= now)
    }

    pub(crate) fn ack_deadline(&self) -> Option<Instant> {
        self.ack_at
    }

    /// The ACK state went out at `now` (on an ACK or piggybacked on data): cumulative `ack`,
    /// bitmap `sack`.
    pub(crate) fn ack_sent(&mut self, ack: Seq, sack: u32, now: Instant) {
        self.sent.sent(ack, sack, now);
        self.owe_nothing();
    }

    fn owe_nothing(&mut self) {
        self.unacked = 0;
        self.ack_at = None;
        self.ack_now = false;
    }

    pub(crate) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub(crate) fn slot_bytes(&self) -> usize {
        self.slots.capacity() * core::mem::size_of::<Slot>()
    }

    /// Takes the data part of an accepted datagram.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_data<S: Sink + ?Sized>(
        &mut self,
        now: Instant,
        seq: Seq,
        body: Body,
        payload: &[u8],
        config: &Config,
        stats: &mut Stats,
        sink: &mut S,
    ) -> Result<(), DataDrop> {
        let d = seq.since(self.next);
        if (d as i32) < 0 {
            stats.duplicates += 1;
            // The peer did not hear our ACK for it, or retransmitted too early.
            self.note_duplicate(seq);
            return Err(DataDrop::Duplicate);
        }
        if d >= u32::from(config.recv_window) {
            stats.dropped_out_of_window += 1;
            self.ack_now = true;
            return Err(DataDrop::OutOfWindow);
        }
        let d = d as usize;
        if d == 0 {
            let had_later = self.slots.len() > 1;
            self.consume(body, payload, stats, sink);
            self.next = self.next.add(1);
            self.slots.pop_front();
            self.drain(stats, sink);
            if had_later {
                // A hole just closed: tell the sender now so it stops resending.
                self.ack_now = true;
            }
        } else {
            if self
                .slots
                .get(d)
                .is_some_and(|s| !matches!(s, Slot::Missing))
            {
                stats.duplicates += 1;
                self.note_duplicate(seq);
                return Err(DataDrop::Duplicate);
            }
            let slot = match body {
                Body::Segment {
                    msg,
                    offset,
                    total_len,
                } => {
                    sink.place(Placement {
                        msg,
                        offset,
                        total_len,
                        bytes: payload,
                    });
                    Slot::Placed {
                        msg,
                        total_len,
                        last: u64::from(offset) + payload.len() as u64 == u64::from(total_len),
                    }
                }
                Body::Single { msg } | Body::Coalesced { msg, .. } => {
                    if self.held_bytes + payload.len() > config.max_held_bytes {
                        stats.dropped_reorder_full += 1;
                        return Err(DataDrop::ReorderFull);
                    }
                    self.held_bytes += payload.len();
                    let count = match body {
                        Body::Coalesced { count, .. } => count,
                        _ => 0,
                    };
                    Slot::Held {
                        msg,
                        count,
                        data: payload.into(),
                    }
                }
                Body::Ack => unreachable!("ACKs carry no data"),
            };
            if self.slots.len() <= d {
                self.slots.resize_with(d + 1, || Slot::Missing);
            }
            self.slots[d] = slot;
            stats.out_of_order += 1;
            // Out-of-order arrival means a hole: report it at once, it drives fast retransmit.
            self.ack_now = true;
        }
        self.unacked += 1;
        if self.ack_at.is_none() {
            self.ack_at = Some(now + config.ack_delay);
        }
        Ok(())
    }

    /// Delivers the held or placed datagrams that directly follow `next`.
    fn drain<S: Sink + ?Sized>(&mut self, stats: &mut Stats, sink: &mut S) {
        while let Some(front) = self.slots.front() {
            if matches!(front, Slot::Missing) {
                break;
            }
            let slot = self.slots.pop_front().expect("front exists");
            self.next = self.next.add(1);
            match slot {
                Slot::Missing => unreachable!(),
                Slot::Held { msg, count, data } => {
                    self.held_bytes -= data.len();
                    if count == 0 {
                        self.deliver(msg, Delivery::Inline(&data), stats, sink);
                    } else {
                        self.deliver_entries(msg, &data, stats, sink);
                    }
                }
                Slot::Placed {
                    msg,
                    total_len,
                    last,
                } => {
                    if last {
                        self.deliver(msg, Delivery::Placed { len: total_len }, stats, sink);
                    } else {
                        self.mid_message = true;
                    }
                }
            }
        }
        if self.slots.is_empty() && self.slots.capacity() > 0 {
            // Give the reorder memory back: an idle session should cost a few hundred bytes.
            self.slots = VecDeque::new();
        }
    }

    /// Handles a datagram that arrived exactly in order.
    fn consume<S: Sink + ?Sized>(
        &mut self,
        body: Body,
        payload: &[u8],
        stats: &mut Stats,
        sink: &mut S,
    ) {
        match body {
            Body::Ack => {}
            Body::Single { msg } => self.deliver(msg, Delivery::Inline(payload), stats, sink),
            Body::Coalesced { msg, .. } => self.deliver_entries(msg, payload, stats, sink),
            Body::Segment {
                msg,
                offset,
                total_len,
            } => {
                sink.place(Placement {
                    msg,
                    offset,
                    total_len,
                    bytes: payload,
                });
                if u64::from(offset) + payload.len() as u64 == u64::from(total_len) {
                    self.deliver(msg, Delivery::Placed { len: total_len }, stats, sink);
                } else {
                    self.mid_message = true;
                }
            }
        }
    }

    fn deliver_entries<S: Sink + ?Sized>(
        &mut self,
        first: MsgId,
        entries: &[u8],
        stats: &mut Stats,
        sink: &mut S,
    ) {
        // Entries were validated when the datagram was parsed.
        for (i, e) in Entries::new(entries).flatten().enumerate() {
            self.deliver(first.add(i as u32), Delivery::Inline(e), stats, sink);
        }
    }

    fn deliver<S: Sink + ?Sized>(
        &mut self,
        msg: MsgId,
        d: Delivery<'_>,
        stats: &mut Stats,
        sink: &mut S,
    ) {
        if msg != self.next_msg {
            stats.protocol_errors += 1;
        }
        self.next_msg = msg.next();
        self.mid_message = false;
        stats.messages_delivered += 1;
        sink.deliver(msg, d);
    }

    /// Forgets everything held (the session failed).
    pub(crate) fn clear(&mut self) {
        self.slots = VecDeque::new();
        self.mid_message = false;
        self.held_bytes = 0;
        self.n_dsacks = 0;
        self.owe_nothing();
    }
}

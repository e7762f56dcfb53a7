//! The sending half: the message queue, segmentation and coalescing, the retransmission queue,
//! loss detection from selective ACKs and the retransmission timer.
//!
//! Loss detection counts transmissions, not sequence numbers (as RACK does): a datagram is lost
//! once `dup_thresh` datagrams *transmitted after it* are acknowledged. The same rule then covers
//! a lost retransmission, which sequence-number counting cannot see.
//!
//! Reordering makes that rule resend datagrams that were only late. The receiver reports each
//! duplicate it gets (DSACK); a duplicate of something we retransmitted proves the retransmission
//! spurious, and then a loss also has to wait out a reordering window, in time, before it is
//! declared (RACK's `reo_wnd`). The window jumps to at least how long the original had been
//! out when it was resent, doubles on each further spurious retransmission, is capped at the
//! retransmission timeout, and halves after every 1024 datagrams acknowledged without one, so
//! a network that stops reordering gets its fast recovery back.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::{Config, MAX_DUP_THRESH};
use crate::deadline::earliest;
use crate::header::{push_entry, Body, ENTRY_LEN_LEN, SACK_BITS};

/// Appends one COALESCED entry made of `head` then `data`.
fn push_entry_parts(out: &mut Vec<u8>, head: &[u8], data: &[u8]) {
    if head.is_empty() {
        return push_entry(out, data);
    }
    let len = u16::try_from(head.len() + data.len()).expect("entries are at most u16::MAX bytes");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(head);
    out.extend_from_slice(data);
}
use crate::rtt::RttEstimator;
use crate::seq::{MsgId, Seq};
use crate::stats::Stats;

/// What a queued message costs beyond its bytes, so that a flood of empty messages still meets
/// the send-buffer bound.
pub(crate) const MSG_OVERHEAD: usize = 64;

/// Datagrams from the first unacknowledged one that an ACK can speak of: the one its
/// cumulative point names (missing) and the [`SACK_BITS`] after it.
const SACK_REACH: usize = SACK_BITS as usize + 1;

/// A message waiting to be (fully) sent: `head` then `data` (a small header the caller puts in
/// front of a large buffer it handed over, so the buffer need not be copied to make room for it;
/// `head` is empty for messages that travel whole).
#[derive(Debug)]
struct Outgoing {
    id: MsgId,
    head: Bytes,
    data: Bytes,
    /// Bytes already cut into segments.
    sent: usize,
}

impl Outgoing {
    fn len(&self) -> usize {
        self.head.len() + self.data.len()
    }

    /// Bytes `at..at + len` of the message, in at most two shared pieces.
    fn slice(&self, at: usize, len: usize) -> (Bytes, Bytes) {
        let h = self.head.len();
        let end = at + len;
        if at >= h {
            return (self.data.slice(at - h..end - h), Bytes::new());
        }
        let first = self.head.slice(at..end.min(h));
        let second = if end > h {
            self.data.slice(..end - h)
        } else {
            Bytes::new()
        };
        (first, second)
    }
}

/// The payload of one datagram, kept for retransmission; the `Bytes` share the caller's buffer.
/// On the wire it is `data` then `tail` (`tail` is empty unless a segment spans a message's
/// head and body).
#[derive(Debug, Clone)]
pub(crate) struct Payload {
    pub(crate) body: Body,
    pub(crate) data: Bytes,
    pub(crate) tail: Bytes,
}

impl Payload {
    pub(crate) fn len(&self) -> usize {
        self.data.len() + self.tail.len()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Sent, no news.
    Unacked,
    /// Selectively acknowledged; never resent.
    Sacked,
    /// Declared lost; waiting to be resent.
    Lost,
}

#[derive(Debug)]
struct InFlight {
    payload: Payload,
    sent_at: Instant,
    first_sent: Instant,
    /// Stamp of the latest transmission, increasing across all transmissions.
    tx_order: u64,
    tx_count: u32,
    state: State,
    /// Why it was last declared lost.
    cause: Cause,
    /// When this datagram is cumulatively acknowledged, messages up to this one are acknowledged.
    completes: Option<MsgId>,
}

/// What declared a datagram lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// Later datagrams were acknowledged past it.
    Overtaken,
    /// The retransmission timer.
    Timeout,
    /// The tail-loss probe chose it.
    Probe,
    /// A resend by a timer or the probe (or one of these) sent after it was answered first:
    /// it went in a burst.
    Burst,
}

/// A recent retransmission, to match against DSACKs. Times are microseconds since the
/// sender's `epoch`, wrapping (16 bytes an entry: a session's idle size matters at scale).
#[derive(Debug, Clone, Copy)]
struct Retx {
    seq: Seq,
    first_sent: u32,
    resent: u32,
    cause: Cause,
    /// What first acknowledged the datagram after this resend.
    covered: Cover,
}

/// What first acknowledged a resent datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    Not,
    /// An ACK: the original's acknowledgement came after all (late, or the resend was early).
    Ack,
    /// The duplicate report of a lost ACK (its cumulative point covers every datagram the
    /// lost ACK did, and must not make their own reports look late).
    LostAckReport,
}

/// Notes, in the records of `seq`'s resends, what acknowledged it first.
fn mark_covered(recent: &mut [Option<Retx>], seq: Seq, by: Cover) {
    for r in recent.iter_mut().flatten() {
        if r.seq == seq && r.covered == Cover::Not {
            r.covered = by;
        }
    }
}

/// How long a learnt ACK lag is kept before clean ACKs may halve it. A receiver that shares its
/// core with other ranks loses the CPU for a time slice every few milliseconds; a count of clean
/// ACKs alone forgets that between two slices when the stream is fast (1024 Ethernet datagrams
/// pass in about 15 ms at 100 MB/s), and each time it is learnt again through needless timer
/// retransmissions. A lag kept too long only slows the recovery of a lost tail (SACK holes are
/// resent at once), and a lost ACK's duplicate report still halves it at once.
const LAG_MEMORY_US: u32 = 500_000;

/// Halves `d`, down to zero below a microsecond.
fn halve(d: &mut Duration) {
    *d /= 2;
    if *d < Duration::from_micros(1) {
        *d = Duration::ZERO;
    }
}

/// `t` in wrapping microseconds since `epoch`.
fn micros_since(epoch: Instant, t: Instant) -> u32 {
    t.saturating_duration_since(epoch).as_micros() as u32
}

/// A datagram the sender wants to emit now.
pub(crate) struct Outbound {
    pub(crate) seq: Seq,
    pub(crate) payload: Payload,
    pub(crate) retransmit: bool,
    pub(crate) ack_req: bool,
    pub(crate) ack_soon: bool,
}

impl Outbound {
    /// A bare ACK: no payload, nothing asked of the peer.
    pub(crate) fn ack(seq: Seq) -> Outbound {
        Outbound {
            seq,
            payload: Payload {
                body: Body::Ack,
                data: Bytes::new(),
                tail: Bytes::new(),
            },
            retransmit: false,
            ack_req: false,
            ack_soon: false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Sender {
    queue: VecDeque<Outgoing>,
    queued_bytes: usize,
    /// Bytes charged against `max_send_buffer`: queued, in flight, and `MSG_OVERHEAD` per
    /// unacknowledged message.
    charged: usize,
    next_msg: MsgId,
    /// Oldest message not yet acknowledged.
    unacked_msg: MsgId,
    /// One past the newest message whose sender waits for its acknowledgement: while any
    /// such message is unacknowledged, the last datagram queued carries ACK_SOON.
    awaited_end: MsgId,
    una: Seq,
    nxt: Seq,
    flight: VecDeque<InFlight>,
    flight_bytes: usize,
    lost: u32,
    /// Highest cumulative ACK seen and the edge its credit allows.
    ack_high: Seq,
    right_edge: Seq,
    tx_stamp: u64,
    /// Highest sequence number known received (cumulatively or selectively).
    high_acked: Seq,
    /// The largest `tx_order`s acknowledged so far, descending.
    acked_top: [u64; MAX_DUP_THRESH as usize],
    rto_at: Option<Instant>,
    backoff: u32,
    /// When the flight, quiet since its newest transmission, gets a tail-loss probe.
    tlp_at: Option<Instant>,
    /// The probe outstanding: the datagram resent. At most one per tail: the next is armed
    /// once an ACK brings news.
    tlp: Option<Seq>,
    /// The datagram that last asked for an ACK at once because it filled the window, until
    /// an ACK covers it: one such request per window, not one per datagram that refills it.
    full_req: Option<Seq>,
    /// When a datagram already overtaken by `dup_thresh` others outlives the reordering window.
    loss_at: Option<Instant>,
    reo_wnd: Duration,
    /// Datagrams acknowledged since the last spurious retransmission.
    clean_acks: u32,
    /// How late the peer's acknowledgements have been seen to come: a timer retransmission
    /// it proved needless arrived this long after its original was sent. A receiver that
    /// computes instead of polling acknowledges when its progress thread gets the CPU, which
    /// on a busy host takes milliseconds, not the microseconds of the measured RTT (Karn's
    /// rule keeps those late ACKs out of the RTT samples). The probe and retransmission
    /// timers wait at least this long. It halves with the reordering window, but no sooner
    /// than `LAG_MEMORY_US` after it last grew or halved (see there).
    ack_lag: Duration,
    /// When `ack_lag` last grew or halved, in wrapping microseconds since `epoch`.
    lag_changed: u32,
    recent_retx: [Option<Retx>; 8],
    /// Origin of the times in `recent_retx`: the first retransmission.
    epoch: Option<Instant>,
    recent_pos: u8,
    /// `send` refused a message and no `Writable` was issued since.
    pub(crate) blocked: bool,
}

impl Sender {
    pub(crate) fn new(config: &Config) -> Sender {
        let isn = Seq(config.initial_seq);
        Sender {
            queue: VecDeque::new(),
            queued_bytes: 0,
            charged: 0,
            next_msg: MsgId(config.initial_seq),
            unacked_msg: MsgId(config.initial_seq),
            awaited_end: MsgId(config.initial_seq),
            una: isn,
            nxt: isn,
            flight: VecDeque::new(),
            flight_bytes: 0,
            lost: 0,
            ack_high: isn,
            right_edge: isn.add(u32::from(config.initial_credit)),
            tx_stamp: 0,
            high_acked: isn.sub(1),
            acked_top: [0; MAX_DUP_THRESH as usize],
            rto_at: None,
            backoff: 0,
            tlp_at: None,
            tlp: None,
            full_req: None,
            loss_at: None,
            reo_wnd: Duration::ZERO,
            clean_acks: 0,
            ack_lag: Duration::ZERO,
            lag_changed: 0,
            recent_retx: [None; 8],
            epoch: None,
            recent_pos: 0,
            blocked: false,
        }
    }

    /// Whether a message of `len` bytes may be queued now.
    pub(crate) fn has_room(&self, config: &Config, len: usize) -> bool {
        self.charged == 0 || self.charged + len + MSG_OVERHEAD <= config.max_send_buffer
    }

    /// Queues the message `head` then `data`.
    pub(crate) fn push(&mut self, head: Bytes, data: Bytes, awaited: bool) -> MsgId {
        let id = self.next_msg;
        self.next_msg = id.next();
        if awaited {
            self.awaited_end = self.next_msg;
        } else if !self.awaits_ack() {
            // Kept at the window's edge, so it cannot drift 2^31 messages behind and wrap, nor
            // (set past an unacknowledged message) make unawaited messages look awaited.
            self.awaited_end = self.unacked_msg;
        }
        let m = Outgoing {
            id,
            head,
            data,
            sent: 0,
        };
        self.queued_bytes += m.len();
        self.charged += m.len() + MSG_OVERHEAD;
        self.queue.push_back(m);
        id
    }

    /// Whether a message whose sender waits for its acknowledgement is unacknowledged.
    fn awaits_ack(&self) -> bool {
        self.awaited_end.since(self.unacked_msg) as i32 > 0
    }

    /// Whether the queues hold memory.
    pub(crate) fn holds_memory(&self) -> bool {
        self.flight.capacity() + self.queue.capacity() > 0
    }

    /// Gives the queues' memory back if nothing is queued or unacknowledged.
    pub(crate) fn release(&mut self) {
        if self.is_idle() {
            self.flight = VecDeque::new();
            self.queue = VecDeque::new();
        }
    }

    /// Nothing queued and nothing unacknowledged.
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.flight.is_empty()
    }

    pub(crate) fn has_space_after_block(&self, config: &Config) -> bool {
        self.charged < config.max_send_buffer
    }

    pub(crate) fn next_seq(&self) -> Seq {
        self.nxt
    }

    /// The earliest of the retransmission, tail-loss probe and reordering-window timers.
    pub(crate) fn timer(&self) -> Option<Instant> {
        let t = earliest(self.rto_at, self.loss_at);
        earliest(t, self.tlp_at)
    }

    pub(crate) fn reo_wnd(&self) -> Duration {
        self.reo_wnd
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    pub(crate) fn flight_bytes(&self) -> usize {
        self.flight_bytes
    }

    pub(crate) fn bookkeeping_bytes(&self) -> usize {
        self.queue.capacity() * core::mem::size_of::<Outgoing>()
            + self.flight.capacity() * core::mem::size_of::<InFlight>()
    }

    /// Messages not yet acknowledged: `(oldest, count)`.
    pub(crate) fn pending_msgs(&self) -> (MsgId, u32) {
        (self.unacked_msg, self.next_msg.since(self.unacked_msg))
    }

    fn window_open(&self, config: &Config) -> bool {
        self.nxt.since(self.una) < u32::from(config.send_window) && self.nxt.before(self.right_edge)
    }

    /// Next datagram to emit: a lost one first, else new data if the window allows.
    pub(crate) fn next_outbound(
        &mut self,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) -> Option<Outbound> {
        let out = if let Some(i) = self.first_lost() {
            self.lost -= 1;
            self.tx_stamp += 1;
            let e = &mut self.flight[i];
            e.state = State::Unacked;
            e.sent_at = now;
            e.tx_order = self.tx_stamp;
            e.tx_count += 1;
            stats.retransmits += 1;
            let seq = self.una.add(i as u32);
            let epoch = *self.epoch.get_or_insert(e.first_sent);
            self.recent_retx[usize::from(self.recent_pos)] = Some(Retx {
                seq,
                first_sent: micros_since(epoch, e.first_sent),
                resent: micros_since(epoch, now),
                cause: e.cause,
                covered: Cover::Not,
            });
            self.recent_pos = (self.recent_pos + 1) % self.recent_retx.len() as u8;
            Outbound {
                seq,
                payload: e.payload.clone(),
                retransmit: true,
                // The peer may be sitting on a batch of ACKs; a retransmission should get an
                // answer at once so recovery is not paced by the ACK delay.
                ack_req: true,
                ack_soon: false,
            }
        } else if !self.queue.is_empty() && self.window_open(config) {
            let (payload, completes) = self.cut(config);
            self.tx_stamp += 1;
            let seq = self.nxt;
            self.nxt = seq.add(1);
            self.flight_bytes += payload.len();
            self.flight.push_back(InFlight {
                payload: payload.clone(),
                sent_at: now,
                first_sent: now,
                tx_order: self.tx_stamp,
                tx_count: 1,
                state: State::Unacked,
                cause: Cause::Overtaken,
                completes,
            });
            stats.data_sent += 1;
            let full = !self.window_open(config);
            stats.window_full += u64::from(full);
            // Asking on every datagram that refills the window makes the peer answer each
            // few datagrams (at 1472-byte datagrams, an ACK per 3 of them in MPI's bw test).
            let ask = full && self.full_req.is_none();
            if ask {
                self.full_req = Some(seq);
            }
            Outbound {
                seq,
                payload,
                retransmit: false,
                ack_req: ask,
                // The last of what is queued, while a caller waits for a send to complete: no
                // later datagram will fill the peer's ACK batch. A send nobody waits for
                // (its caller already had it copied) leaves its ACK to the usual batching;
                // between computing ranks those extra ACKs cost more than they save.
                ack_soon: !full && self.queue.is_empty() && self.awaits_ack(),
            }
        } else {
            return None;
        };
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto(config, rtt));
        }
        self.arm_tlp(Some(now), config, rtt);
        Some(out)
    }

    fn first_lost(&self) -> Option<usize> {
        if self.lost == 0 {
            return None;
        }
        self.flight.iter().position(|e| e.state == State::Lost)
    }

    /// Takes the next datagram's worth of data off the queue.
    fn cut(&mut self, config: &Config) -> (Payload, Option<MsgId>) {
        let inline = config.effective_inline_limit();
        let front = self.queue.front_mut().expect("cut on an empty queue");
        let len = front.len();
        if len > inline {
            let take = config.segment_payload().min(len - front.sent);
            let (data, tail) = front.slice(front.sent, take);
            let body = Body::Segment {
                msg: front.id,
                offset: front.sent as u32,
                total_len: len as u32,
            };
            front.sent += take;
            self.queued_bytes -= take;
            let last = front.sent == len;
            let msg = front.id;
            if last {
                self.queue.pop_front();
            }
            return (Payload { body, data, tail }, last.then_some(msg));
        }
        let room = config.coalesced_room();
        let mut count = 0usize;
        let mut used = 0usize;
        for m in &self.queue {
            let l = m.len();
            if l > inline || used + ENTRY_LEN_LEN + l > room || count == usize::from(u16::MAX) {
                break;
            }
            used += ENTRY_LEN_LEN + l;
            count += 1;
        }
        if count <= 1 {
            let m = self.queue.pop_front().expect("front exists");
            self.queued_bytes -= m.len();
            let body = Body::Single { msg: m.id };
            let data = if m.head.is_empty() {
                m.data
            } else {
                // Only reachable with a head on a message short enough to travel whole, which
                // `Session::send_parts` joins up front; kept correct all the same.
                let mut v = Vec::with_capacity(m.len());
                v.extend_from_slice(&m.head);
                v.extend_from_slice(&m.data);
                Bytes::from(v)
            };
            let tail = Bytes::new();
            return (Payload { body, data, tail }, Some(m.id));
        }
        let mut buf = Vec::with_capacity(used);
        let first = self.queue.front().expect("front exists").id;
        for _ in 0..count {
            let m = self.queue.pop_front().expect("counted above");
            self.queued_bytes -= m.len();
            push_entry_parts(&mut buf, &m.head, &m.data);
        }
        // The entries gained length prefixes; charge them, as the ACK releases the whole body.
        self.charged += ENTRY_LEN_LEN * count;
        let body = Body::Coalesced {
            msg: first,
            count: count as u16,
        };
        let data = Bytes::from(buf);
        let tail = Bytes::new();
        (
            Payload { body, data, tail },
            Some(first.add(count as u32 - 1)),
        )
    }

    /// Processes the ACK fields of an accepted datagram (`lost_ack_report`: the peer's report
    /// of a duplicate it had acknowledged before). `Err` if it acknowledges data never sent.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        ack: Seq,
        sack: u32,
        credit: u16,
        lost_ack_report: bool,
        config: &Config,
        rtt: &mut RttEstimator,
        stats: &mut Stats,
        acked: &mut impl FnMut(MsgId),
    ) -> Result<(), ()> {
        if ack.after(self.nxt) {
            return Err(());
        }
        if !ack.before(self.ack_high) {
            self.ack_high = ack;
            self.right_edge = ack.add(u32::from(credit.max(1)));
        }
        if sack == 0 && !ack.after(self.una) {
            // Nothing newly acknowledged (the common case for the receiving end of a stream,
            // whose every datagram carries the same ACK): only the highest ACK seen can move.
            let newest = ack.sub(1);
            if newest.after(self.high_acked) {
                self.high_acked = newest;
            }
            return Ok(());
        }
        let mut progress = false;
        let cover = if lost_ack_report {
            Cover::LostAckReport
        } else {
            Cover::Ack
        };
        // The newest transmission acknowledged now: (tx_order, its send time if it was the
        // datagram's only one). An ACK releases everything the receiver got up to its
        // cumulative point, and when a retransmission fills a hole that includes datagrams that
        // arrived long before (beyond the SACK bitmap's reach) but were never reported: their
        // send times say nothing about the path. So only the newest transmission acknowledged
        // makes a sample, and none if it was a retransmission (Karn: which copy got through?).
        let mut sample: Option<(u64, Option<Instant>)> = None;
        // When the newest acknowledged resend by a timer, or by a burst it uncovered, left.
        let mut resend: Option<Instant> = None;
        // A first transmission is among the newly acknowledged.
        let mut original = false;
        // `out`: the entry's latest transmission has left (it was Unacked, not Lost again).
        let mut note = |e: &InFlight, out: bool, top: &mut [u64; MAX_DUP_THRESH as usize]| {
            if sample.is_none_or(|(o, _)| e.tx_order > o) {
                sample = Some((e.tx_order, (e.tx_count == 1).then_some(e.sent_at)));
            }
            // Not a fast retransmit: under reordering its original may be what was
            // acknowledged, and what was sent before it may only be late.
            if out && e.tx_count > 1 && e.cause != Cause::Overtaken {
                resend = resend.max(Some(e.sent_at));
            }
            original |= e.tx_count == 1;
            insert_top(top, e.tx_order);
        };
        if ack.after(self.una) {
            progress = true;
            let n = ack.since(self.una);
            self.clean_acks = self.clean_acks.saturating_add(n);
            if self.clean_acks >= 1024 {
                self.clean_acks = 0;
                halve(&mut self.reo_wnd);
                // (No lag is learnt before the first retransmission sets `epoch`.)
                if let Some(epoch) = self.epoch {
                    let now_us = micros_since(epoch, now);
                    if now_us.wrapping_sub(self.lag_changed) >= LAG_MEMORY_US {
                        halve(&mut self.ack_lag);
                        self.lag_changed = now_us;
                    }
                }
            }
            if self.full_req.is_some_and(|r| r.before(ack)) {
                self.full_req = None;
            }
            for _ in 0..n {
                let e = self.flight.pop_front().expect("ack <= nxt");
                if e.tx_count > 1 && e.state != State::Sacked {
                    mark_covered(&mut self.recent_retx, self.una, cover);
                }
                self.una = self.una.add(1);
                self.flight_bytes -= e.payload.len();
                self.charged -= e.payload.len();
                match e.state {
                    State::Sacked => {}
                    State::Lost => {
                        self.lost -= 1;
                        note(&e, false, &mut self.acked_top);
                    }
                    State::Unacked => note(&e, true, &mut self.acked_top),
                }
                if let Some(last) = e.completes {
                    while self.unacked_msg.since(last) as i32 <= 0 {
                        let m = self.unacked_msg;
                        self.unacked_msg = m.next();
                        self.charged -= MSG_OVERHEAD;
                        stats.messages_acked += 1;
                        acked(m);
                    }
                }
            }
        }
        let mut bits = sack;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            debug_assert!(i < SACK_BITS);
            let idx = ack.add(1 + i).since(self.una) as usize;
            let Some(e) = self.flight.get_mut(idx) else {
                continue;
            };
            let out = match e.state {
                State::Sacked => continue,
                State::Lost => {
                    self.lost -= 1;
                    false
                }
                State::Unacked => true,
            };
            e.state = State::Sacked;
            progress = true;
            if e.tx_count > 1 {
                mark_covered(&mut self.recent_retx, ack.add(1 + i), cover);
            }
            note(e, out, &mut self.acked_top);
        }
        let newest = if sack == 0 {
            ack.sub(1)
        } else {
            ack.add(SACK_BITS - sack.leading_zeros())
        };
        if newest.after(self.high_acked) {
            self.high_acked = newest;
        }
        if let Some((_, Some(sent_at))) = sample {
            rtt.update(now.saturating_duration_since(sent_at));
        }
        if progress {
            self.backoff = 0;
            if let Some(probe) = self.tlp.take() {
                self.tail_losses(probe, now, stats);
            }
            // Only an ACK that answers the resend: it comes within a probe's wait of it (the
            // resend asked for an ACK at once), and acknowledges no first transmission. A
            // receiver that computed and now works through its backlog acknowledges originals,
            // the resent head's among them, while what was sent before the resend is still
            // in that backlog.
            let answered = |t: &Instant| now.saturating_duration_since(*t) <= self.pto(config, rtt);
            let answers = |t: &Instant| !original && ack == self.ack_high && answered(t);
            if let Some(resent) = resend.filter(answers) {
                self.overtaken_by_resend(resent, now, stats);
            }
            self.detect_losses(now, config, rtt, stats);
            self.rearm(config, rtt);
        }
        Ok(())
    }

    /// Declares lost every unacknowledged datagram that `dup_thresh` later transmissions
    /// overtook, once it is also older than the reordering window allows; arms the reordering
    /// timer for the ones that are not yet.
    fn detect_losses(
        &mut self,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        self.loss_at = None;
        let threshold = self.acked_top[usize::from(config.dup_thresh) - 1];
        if threshold == 0 {
            return;
        }
        // With no reordering seen, the count alone decides: recovery within one RTT.
        let wait = if self.reo_wnd.is_zero() {
            Duration::ZERO
        } else {
            rtt.latest() + self.reo_wnd
        };
        // Only datagrams below the highest one known received: beyond it (or beyond the reach
        // of the SACK bitmap) the peer has told us nothing yet, so silence is not loss.
        let below = self.below_high_acked();
        for e in self.flight.iter_mut().take(below) {
            if e.state != State::Unacked || e.tx_order >= threshold {
                continue;
            }
            let due = e.sent_at + wait;
            if due <= now {
                e.state = State::Lost;
                e.cause = Cause::Overtaken;
                self.lost += 1;
                stats.fast_retransmits += 1;
            } else {
                self.loss_at = Some(self.loss_at.map_or(due, |t| t.min(due)));
            }
        }
    }

    /// A datagram resent at `resent` by a timer (or as part of a burst one uncovered) is
    /// acknowledged by the newest ACK, within a probe's wait of the resend (which asked for an
    /// ACK at once): what was sent before it, is still unacknowledged and lies within the reach
    /// of that ACK's SACK bitmap never arrived, or it would have come first. Declaring it all
    /// lost recovers a burst that took the whole tail of a flight (a GSO run dropped at once)
    /// in a few round trips: each wave of resends, once acknowledged, uncovers the next
    /// [`SACK_REACH`] datagrams, where the timer alone would resend one head per backed-off
    /// timeout. Beyond the bitmap's reach silence says nothing, and datagrams younger than the
    /// reordering window may still come.
    fn overtaken_by_resend(&mut self, resent: Instant, now: Instant, stats: &mut Stats) {
        for e in self.flight.iter_mut().take(SACK_REACH) {
            if e.state == State::Unacked && e.sent_at < resent && e.sent_at + self.reo_wnd <= now {
                e.state = State::Lost;
                e.cause = Cause::Burst;
                self.lost += 1;
                stats.burst_losses += 1;
            }
        }
    }

    /// News after a tail-loss probe. If the probe itself is acknowledged, the peer answered it
    /// at once (it asked for an ACK), so the datagrams sent before it and still unacknowledged
    /// below it are holes: lost, unless reordering was seen and they are younger than the
    /// reordering window.
    fn tail_losses(&mut self, probe: Seq, now: Instant, stats: &mut Stats) {
        if probe.before(self.una) {
            // Everything up to the probe arrived.
            return;
        }
        let i = probe.since(self.una) as usize;
        let probe_sent = match self.flight.get(i) {
            Some(e) if e.state == State::Sacked => e.sent_at,
            _ => return,
        };
        for e in self.flight.iter_mut().take(i) {
            if e.state == State::Unacked
                && e.sent_at <= probe_sent
                && e.sent_at + self.reo_wnd <= now
            {
                e.state = State::Lost;
                e.cause = Cause::Burst;
                self.lost += 1;
                stats.tail_losses += 1;
            }
        }
    }

    /// Arms the tail-loss probe for a quiet flight: `pto` after the newest transmission, if
    /// that comes before the retransmission timer, no probe is outstanding and the timer has
    /// not backed off.
    fn arm_tlp(&mut self, newest: Option<Instant>, config: &Config, rtt: &RttEstimator) {
        self.tlp_at = None;
        if config.min_pto.is_zero() || self.tlp.is_some() || self.backoff > 0 {
            return;
        }
        let Some(last) = newest else { return };
        let at = last + self.pto(config, rtt);
        if self.rto_at.is_some_and(|r| at < r) {
            self.tlp_at = Some(at);
        }
    }

    /// The probe timer fired: resend the newest datagram not known received, asking for an
    /// immediate ACK.
    fn fire_tlp(&mut self, stats: &mut Stats) {
        self.tlp_at = None;
        // Within the SACK bitmap's reach, so that the probe's ACK can show the holes below it.
        let Some(i) = self
            .flight
            .iter()
            .take(SACK_REACH)
            .rposition(|e| e.state == State::Unacked)
        else {
            return;
        };
        self.flight[i].state = State::Lost;
        self.flight[i].cause = Cause::Probe;
        self.lost += 1;
        stats.tail_probes += 1;
        self.tlp = Some(self.una.add(i as u32));
    }

    /// The peer received `seq` twice (it said so at `now`); `acked`: it had acknowledged `seq`
    /// before the copy came. If we had retransmitted it, the retransmission was spurious: unless
    /// the ACK was lost, widen the reordering window, and if a timer had resent it, wait longer
    /// for acknowledgements.
    pub(crate) fn on_dsack(
        &mut self,
        seq: Seq,
        acked: bool,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        let Some(epoch) = self.epoch else { return };
        let now_us = micros_since(epoch, now);
        let age = |r: &Retx| now_us.wrapping_sub(r.resent);
        // The record of `seq`'s first resend, whether a timer resent it, and whether an ACK
        // (not a lost ACK's report) covered it before this report; all its records are consumed.
        let mut first: Option<Retx> = None;
        let (mut by_timer, mut ack_came) = (false, false);
        for slot in &mut self.recent_retx {
            let Some(r) = slot.take_if(|r| r.seq == seq) else {
                continue;
            };
            by_timer |= r.cause != Cause::Overtaken;
            ack_came |= r.covered == Cover::Ack;
            if first.as_ref().is_none_or(|f| age(&r) > age(f)) {
                first = Some(r);
            }
        }
        let Some(r) = first else { return };
        let us = |d: u32| Duration::from_micros(u64::from(d));
        stats.spurious_retransmits += 1;
        if acked && by_timer && !ack_came {
            // The peer had acknowledged the first copy to arrive before a timer's copy came,
            // and that ACK was lost. (Had it come before this report, even after the resend
            // left, this side was late, not the ACK lost.) The peer kept up and the network
            // held nothing back. Learning a lag or a reordering window from it would feed on
            // itself: each lost ACK would lengthen the next timeout by the last one. The peer
            // keeping up also outweighs a lag learnt earlier. (Timing cannot tell this from a
            // peer that computed and woke just after the resend; only the peer knows.) With fast
            // retransmissions alone it is different: the ACKs that overtook the original would
            // have covered it, so the copy came first and the original was held back.
            stats.lost_acks += 1;
            halve(&mut self.ack_lag);
            self.lag_changed = now_us;
            return;
        }
        self.clean_acks = 0;
        if r.cause != Cause::Probe {
            // The original was still unacknowledged `waited` after it was sent: the network can
            // hold a datagram back at least that long. Jump there at once rather than creep up.
            // (A probe resends a datagram that is only *probably* lost; its original turning
            // up later says nothing about reordering.)
            let step = (rtt.srtt().unwrap_or(rtt.rto(config)) / 4).max(Duration::from_micros(1));
            self.reo_wnd = (self.reo_wnd * 2)
                .max(step)
                .max(us(r.resent.wrapping_sub(r.first_sent)))
                .min(rtt.rto(config));
        }
        if !matches!(r.cause, Cause::Overtaken | Cause::Burst) {
            // The duplicate was reported with (or after) the original's ACK: that ACK took
            // about `now - first_sent` to come.
            self.ack_lag = self
                .ack_lag
                .max(us(now_us.wrapping_sub(r.first_sent)))
                .min(config.max_rto);
            self.lag_changed = now_us;
        }
    }

    /// The tail-loss probe timeout: the RTT's, or the peer's ACK lag if longer.
    fn pto(&self, config: &Config, rtt: &RttEstimator) -> Duration {
        rtt.pto(config).max(self.ack_lag)
    }

    /// The retransmission timeout after the current backoff, or the peer's ACK lag if longer.
    pub(crate) fn rto(&self, config: &Config, rtt: &RttEstimator) -> Duration {
        rtt.backed_off(config, self.backoff).max(self.ack_lag)
    }

    pub(crate) fn ack_lag(&self) -> Duration {
        self.ack_lag
    }

    /// Timers: the reordering window of an overtaken datagram ran out, or the retransmission
    /// timer fired (everything unacknowledged for a whole timeout is then lost).
    pub(crate) fn on_timeout(
        &mut self,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        if self.loss_at.is_some_and(|t| t <= now) {
            self.detect_losses(now, config, rtt, stats);
        }
        match self.rto_at {
            Some(t) if t <= now => {}
            _ => {
                if self.tlp_at.is_some_and(|t| t <= now) {
                    self.fire_tlp(stats);
                }
                return;
            }
        }
        // The timeout takes over from any probe, if it finds something to resend.
        let probe = self.tlp.take();
        self.tlp_at = None;
        let rto = self.rto(config, rtt);
        let mut any = false;
        // The first expiry resends the head and the holes below what is known received (a
        // lost tail then comes back one datagram per round trip); while expiries repeat
        // without news, only the head is resent, as a probe, so a dead peer is not flooded.
        let (head, below) = (self.head_index(), self.below_high_acked());
        let backoff = self.backoff;
        for (i, e) in self.flight.iter_mut().enumerate() {
            let watched = Self::rto_watches(i, head, below, backoff);
            if watched && e.state == State::Unacked && e.sent_at + rto <= now {
                e.state = State::Lost;
                e.cause = Cause::Timeout;
                self.lost += 1;
                any = true;
            }
        }
        // A selectively acknowledged head means the ACK that would have moved past it was lost
        // (or is late); resending the head makes the receiver repeat it.
        if let Some(front) = self.flight.front_mut() {
            if front.state == State::Sacked && front.sent_at + rto <= now {
                front.state = State::Lost;
                front.cause = Cause::Timeout;
                self.lost += 1;
                any = true;
            }
        }
        if any {
            stats.timeouts += 1;
            self.backoff += 1;
        } else {
            // Armed for a datagram a probe has since resent (or before the timeout grew):
            // nothing is due. A probe still unanswered stays so, or a new one would be armed
            // `pto` after that resend, a moment already past, and fire at once.
            self.tlp = probe;
        }
        self.rearm(config, rtt);
    }

    /// How many datagrams from the head are below the highest one known received.
    fn below_high_acked(&self) -> usize {
        if self.high_acked.before(self.una) {
            0
        } else {
            self.high_acked.add(1).since(self.una) as usize
        }
    }

    /// Whether the retransmission timer watches the `i`-th datagram in flight (`head` is the
    /// index of the first one not selectively acknowledged): the head always; on a first expiry
    /// also every hole below the highest datagram known received. Datagrams beyond it are not
    /// watched: the SACK bitmap reaches only 32 past the cumulative ACK, so their silence says
    /// nothing, and resending them blindly would mostly duplicate what arrived. Once the head
    /// is through, fresh ACKs show what is really missing.
    fn rto_watches(i: usize, head: usize, below: usize, backoff: u32) -> bool {
        i == head || (backoff == 0 && i < below)
    }

    fn head_index(&self) -> usize {
        self.flight
            .iter()
            .position(|e| e.state != State::Sacked)
            .unwrap_or(usize::MAX)
    }

    /// Sets the timer to the earliest moment a watched datagram, or a selectively acknowledged
    /// head, times out. Lost datagrams are left out: the next poll resends them and arms the
    /// timer if need be. The timer never names a moment at which `on_timeout` would find
    /// nothing to do, so it cannot spin.
    fn rearm(&mut self, config: &Config, rtt: &RttEstimator) {
        let rto = self.rto(config, rtt);
        let (head, below) = (self.head_index(), self.below_high_acked());
        let sacked_head = self
            .flight
            .front()
            .filter(|e| e.state == State::Sacked)
            .map(|e| e.sent_at);
        let mut watched: Option<Instant> = None;
        let mut newest: Option<Instant> = None;
        for (i, e) in self.flight.iter().enumerate() {
            if e.state != State::Unacked {
                continue;
            }
            newest = Some(newest.map_or(e.sent_at, |t| t.max(e.sent_at)));
            if Self::rto_watches(i, head, below, self.backoff) {
                watched = Some(watched.map_or(e.sent_at, |t| t.min(e.sent_at)));
            }
        }
        self.rto_at = match (sacked_head, watched) {
            (Some(a), Some(b)) => Some(a.min(b) + rto),
            (a, b) => a.or(b).map(|t| t + rto),
        };
        self.arm_tlp(newest, config, rtt);
    }

    /// Drops everything (the session failed); returns the messages that will never be acked.
    pub(crate) fn abandon(&mut self) -> (MsgId, u32) {
        let pending = self.pending_msgs();
        self.queue = VecDeque::new();
        self.flight = VecDeque::new();
        self.queued_bytes = 0;
        self.flight_bytes = 0;
        self.charged = 0;
        self.lost = 0;
        self.rto_at = None;
        self.loss_at = None;
        self.tlp_at = None;
        self.tlp = None;
        self.unacked_msg = self.next_msg;
        pending
    }
}

fn insert_top(top: &mut [u64; MAX_DUP_THRESH as usize], v: u64) {
    if v <= top[top.len() - 1] {
        return;
    }
    let mut i = top.len() - 1;
    while i > 0 && top[i - 1] < v {
        top[i] = top[i - 1];
        i -= 1;
    }
    top[i] = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_keeps_largest_descending() {
        let mut t = [0u64; MAX_DUP_THRESH as usize];
        for v in [5, 1, 9, 3, 7, 2, 8, 6, 4, 10, 11] {
            insert_top(&mut t, v);
        }
        assert_eq!(t, [11, 10, 9, 8]);
    }
}

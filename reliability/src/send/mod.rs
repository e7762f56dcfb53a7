//! The sending half of a session. [`Sender`] ties together its parts, each in its own module:
//! the messages waiting to be cut into datagrams (`queue`), the datagrams in flight (`flight`),
//! flow control (`window`), loss detection and its timers (`loss`), and what spurious
//! retransmissions teach those timers (`spurious`). The parts import no module above them.

mod flight;
mod loss;
mod queue;
mod spurious;
mod window;

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::Config;
use crate::dormant::SendPoint;
use crate::header::{Body, SACK_BITS};
use crate::rtt::RttEstimator;
use crate::seq::{MsgId, Seq};
use crate::stats::Stats;

use flight::{Flight, News, State};
pub(crate) use loss::timer_seed;
use loss::Recovery;
pub(crate) use queue::Payload;
use queue::SendQueue;
use spurious::{Cover, Spurious};
use window::Window;

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

/// The ACK fields of a datagram accepted at `now`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ack {
    pub(crate) now: Instant,
    /// Everything before it is received.
    pub(crate) ack: Seq,
    /// Bit i: `ack + 1 + i` is received.
    pub(crate) sack: u32,
    pub(crate) credit: u16,
    /// The datagram is the peer's report of a duplicate it had acknowledged before.
    pub(crate) lost_ack_report: bool,
}

impl Ack {
    /// The highest sequence number it reports received.
    fn newest(&self) -> Seq {
        if self.sack == 0 {
            self.ack.sub(1)
        } else {
            self.ack.add(SACK_BITS - self.sack.leading_zeros())
        }
    }
}

#[derive(Debug)]
pub(crate) struct Sender {
    queue: SendQueue,
    flight: Flight,
    window: Window,
    recovery: Recovery,
    spurious: Spurious,
}

impl Sender {
    /// A sender whose timers are jittered by `seed` (see `loss::timer_seed`).
    pub(crate) fn new(config: &Config, seed: u32) -> Sender {
        Sender {
            queue: SendQueue::new(config),
            flight: Flight::new(Seq(config.initial_seq)),
            window: Window::new(config),
            recovery: Recovery::new(seed),
            spurious: Spurious::new(),
        }
    }

    /// A sender continuing from `p`, as the one frozen there left off.
    pub(crate) fn resume(config: &Config, p: SendPoint, seed: u32) -> Sender {
        Sender {
            queue: SendQueue::resume(config, p.msg),
            flight: Flight::new(p.seq),
            window: Window::resume(p.seq, p.peer_credit),
            recovery: Recovery::new(seed),
            spurious: Spurious::new(),
        }
    }

    /// Where an idle sender stands, or `None` if it is not idle: something is queued or
    /// unacknowledged, or a refused caller still waits for [`crate::Event::Writable`].
    pub(crate) fn freeze(&self) -> Option<SendPoint> {
        let (_, pending) = self.queue.pending_msgs();
        if !self.is_idle() || pending != 0 || self.queue.is_blocked() {
            return None;
        }
        let seq = self.flight.nxt;
        Some(SendPoint {
            seq,
            msg: self.queue.next_msg(),
            peer_credit: self.window.credit_from(seq),
        })
    }

    /// Whether a message of `len` bytes may be queued now.
    pub(crate) fn has_room(&self, config: &Config, len: usize) -> bool {
        self.queue.has_room(config, len)
    }

    /// Queues the message `head` then `data`.
    pub(crate) fn push(&mut self, head: Bytes, data: Bytes, awaited: bool) -> MsgId {
        self.queue.push(head, data, awaited)
    }

    /// Whether the queues hold memory.
    pub(crate) fn holds_memory(&self) -> bool {
        self.flight.capacity() + self.queue.capacity() > 0
    }

    /// Gives the queues' memory back if nothing is queued or unacknowledged.
    pub(crate) fn release(&mut self) {
        if self.is_idle() {
            self.flight.release();
            self.queue.release();
        }
    }

    /// Nothing queued and nothing unacknowledged.
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.flight.is_empty()
    }

    /// A message was refused for want of room.
    pub(crate) fn block(&mut self) {
        self.queue.block();
    }

    /// Whether the sender was blocked and has room again; it is no longer blocked then.
    pub(crate) fn unblock(&mut self, config: &Config) -> bool {
        self.queue.unblock(config)
    }

    pub(crate) fn next_seq(&self) -> Seq {
        self.flight.nxt
    }

    /// The earliest of the retransmission, tail-loss probe and reordering-window timers.
    pub(crate) fn timer(&self) -> Option<Instant> {
        self.recovery.timer()
    }

    pub(crate) fn reo_wnd(&self) -> Duration {
        self.spurious.reo_wnd()
    }

    pub(crate) fn ack_lag(&self) -> Duration {
        self.spurious.ack_lag()
    }

    /// The retransmission timeout after the current backoff, or the peer's ACK lag if longer.
    pub(crate) fn rto(&self, config: &Config, rtt: &RttEstimator) -> Duration {
        self.recovery.rto(config, rtt, &self.spurious)
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        self.queue.queued_bytes()
    }

    pub(crate) fn flight_bytes(&self) -> usize {
        self.flight.bytes()
    }

    pub(crate) fn bookkeeping_bytes(&self) -> usize {
        self.queue.capacity() * core::mem::size_of::<queue::Outgoing>()
            + self.flight.capacity() * core::mem::size_of::<flight::InFlight>()
    }

    fn window_open(&self, config: &Config) -> bool {
        self.window.open(self.flight.una, self.flight.nxt, config)
    }

    /// Next datagram to emit: a lost one first, else new data if the window allows.
    pub(crate) fn next_outbound(
        &mut self,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) -> Option<Outbound> {
        let out = if let Some((seq, e)) = self.flight.resend(now, self.window.right_edge()) {
            stats.retransmits += 1;
            self.spurious.resent(seq, e.first_sent, now, e.cause);
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
            let (payload, completes) = self.queue.cut(config);
            let seq = self.flight.push(payload.clone(), now, completes);
            stats.data_sent += 1;
            let full = !self.window_open(config);
            stats.window_full += u64::from(full);
            Outbound {
                seq,
                payload,
                retransmit: false,
                ack_req: self.window.asks_ack(seq, full),
                // The last of what is queued, while a caller waits for a send to complete: no
                // later datagram will fill the peer's ACK batch. A send nobody waits for
                // (its caller already had it copied) leaves its ACK to the usual batching;
                // between computing ranks those extra ACKs cost more than they save.
                ack_soon: !full && self.queue.is_empty() && self.queue.awaits_ack(),
            }
        } else {
            return None;
        };
        self.recovery.on_send(now, config, rtt, &self.spurious);
        Some(out)
    }

    /// Processes the ACK fields of an accepted datagram. `Err` if it acknowledges data never
    /// sent.
    pub(crate) fn on_ack(
        &mut self,
        a: &Ack,
        config: &Config,
        rtt: &mut RttEstimator,
        stats: &mut Stats,
        acked: &mut impl FnMut(MsgId),
    ) -> Result<(), ()> {
        if a.ack.after(self.flight.nxt) {
            return Err(());
        }
        self.window.on_ack(a.ack, a.credit);
        if a.sack == 0 && !a.ack.after(self.flight.una) {
            // Nothing newly acknowledged (the common case for the receiving end of a stream,
            // whose every datagram carries the same ACK): only the highest ACK seen can move.
            self.flight.received(a.newest());
            return Ok(());
        }
        let cover = if a.lost_ack_report {
            Cover::LostAckReport
        } else {
            Cover::Ack
        };
        let mut news = News::default();
        if a.ack.after(self.flight.una) {
            self.take_cumulative(a, cover, &mut news, stats, acked);
        }
        self.take_sack(a, cover, &mut news);
        self.flight.received(a.newest());
        if let Some(sent_at) = news.rtt_sample() {
            rtt.update(a.now.saturating_duration_since(sent_at));
        }
        if news.progress {
            self.after_progress(a, &news, config, rtt, stats);
        }
        Ok(())
    }

    /// Releases the datagrams before `a.ack`, and the messages they complete.
    fn take_cumulative(
        &mut self,
        a: &Ack,
        cover: Cover,
        news: &mut News,
        stats: &mut Stats,
        acked: &mut impl FnMut(MsgId),
    ) {
        news.progress = true;
        let n = a.ack.since(self.flight.una);
        self.spurious.clean_acks(n, a.now);
        self.window.acked(a.ack);
        for _ in 0..n {
            let (seq, e) = self.flight.pop_acked(news);
            if e.tx_count > 1 && e.state != State::Sacked {
                self.spurious.covered(seq, cover);
            }
            self.queue.discharge(e.payload.len());
            if let Some(last) = e.completes {
                self.queue.complete(last, stats, acked);
            }
        }
    }

    /// Marks what `a.sack` reports received beyond the cumulative point.
    fn take_sack(&mut self, a: &Ack, cover: Cover, news: &mut News) {
        let mut bits = a.sack;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            debug_assert!(i < SACK_BITS);
            let seq = a.ack.add(1 + i);
            if self.flight.sack(seq, news) {
                self.spurious.covered(seq, cover);
            }
        }
    }

    /// The loss rules that news from an ACK triggers, and the timers rearmed after them.
    fn after_progress(
        &mut self,
        a: &Ack,
        news: &News,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        let (flight, sp) = (&mut self.flight, &self.spurious);
        self.recovery.on_progress(flight, sp, a.now, stats);
        // Only an ACK that answers the resend: it comes within a probe's wait of it (the
        // resend asked for an ACK at once), and acknowledges no first transmission. A
        // receiver that computed and now works through its backlog acknowledges originals,
        // the resent head's among them, while what was sent before the resend is still
        // in that backlog.
        let answered =
            |t: &Instant| a.now.saturating_duration_since(*t) <= self.recovery.pto(config, rtt, sp);
        let answers =
            |t: &Instant| !news.original && a.ack == self.window.ack_high() && answered(t);
        if let Some(resent) = news.resend.filter(answers) {
            Recovery::overtaken_by_resend(flight, sp, resent, a.now, stats);
        }
        self.recovery
            .detect_losses(flight, sp, a.now, config, rtt, stats);
        self.recovery.rearm(flight, sp, config, rtt);
    }

    /// The peer received `seq` twice (it said so at `now`); `acked`: it had acknowledged `seq`
    /// before the copy came. See [`Spurious::on_dsack`].
    pub(crate) fn on_dsack(
        &mut self,
        seq: Seq,
        acked: bool,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        self.spurious.on_dsack(seq, acked, now, config, rtt, stats);
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
        self.recovery
            .on_timeout(&mut self.flight, &self.spurious, now, config, rtt, stats);
    }

    /// Drops everything (the session failed); returns the messages that will never be acked.
    pub(crate) fn abandon(&mut self) -> (MsgId, u32) {
        let pending = self.queue.abandon();
        self.flight.abandon();
        self.recovery.stop();
        pending
    }
}

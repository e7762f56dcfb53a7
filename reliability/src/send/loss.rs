//! Loss detection and the timers that drive it: the rules that declare datagrams lost, the
//! retransmission timeout (RFC 6298's, backed off) and the tail-loss probe (RFC 8985's TLP).
//!
//! Loss detection counts transmissions, not sequence numbers (as RACK does): a datagram is lost
//! once `dup_thresh` datagrams *transmitted after it* are acknowledged. The same rule then covers
//! a lost retransmission, which sequence-number counting cannot see. How long a datagram may
//! also be only late is learnt from spurious retransmissions (see `spurious`).

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::deadline::earliest;
use crate::header::SACK_BITS;
use crate::rtt::RttEstimator;
use crate::seq::Seq;
use crate::stats::Stats;

use super::flight::{Cause, Flight, State};
use super::spurious::Spurious;

/// Datagrams from the first unacknowledged one that an ACK can speak of: the one its
/// cumulative point names (missing) and the [`SACK_BITS`] after it.
const SACK_REACH: usize = SACK_BITS as usize + 1;

/// The largest share of a timeout that jitter adds: a quarter (a right shift by this much).
const JITTER_SHIFT: u32 = 2;

/// A session's timer seed, from its ids: distinct peers get distinct seeds, and the same
/// session gets the same one on every run, so jitter stays reproducible and needs no random
/// source (the crate reads neither clock nor entropy).
pub(crate) fn timer_seed(words: [u32; 4]) -> u32 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for w in words {
        h = (h ^ u64::from(w)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    (h >> 32) as u32
}

/// The loss timers and the probe outstanding.
#[derive(Debug)]
pub(super) struct Recovery {
    rto_at: Option<Instant>,
    backoff: u32,
    /// Picks this session's jitter (see `jitter`).
    seed: u32,
    /// When the flight, quiet since its newest transmission, gets a tail-loss probe.
    tlp_at: Option<Instant>,
    /// The probe outstanding: the datagram resent. At most one per tail: the next is armed
    /// once an ACK brings news.
    tlp: Option<Seq>,
    /// When a datagram already overtaken by `dup_thresh` others outlives the reordering window.
    loss_at: Option<Instant>,
}

impl Recovery {
    pub(super) fn new(seed: u32) -> Recovery {
        Recovery {
            rto_at: None,
            backoff: 0,
            seed,
            tlp_at: None,
            tlp: None,
            loss_at: None,
        }
    }

    /// The earliest of the retransmission, tail-loss probe and reordering-window timers.
    pub(super) fn timer(&self) -> Option<Instant> {
        let t = earliest(self.rto_at, self.loss_at);
        earliest(t, self.tlp_at)
    }

    /// Stops every timer (the session failed).
    pub(super) fn stop(&mut self) {
        self.rto_at = None;
        self.loss_at = None;
        self.tlp_at = None;
        self.tlp = None;
    }

    /// The tail-loss probe timeout: the RTT's, or the peer's ACK lag if longer; jittered
    /// as the retransmission timeout is, so that before a sample it stays equal to it (and no
    /// probe is armed ahead of the timer).
    pub(super) fn pto(&self, config: &Config, rtt: &RttEstimator, sp: &Spurious) -> Duration {
        self.jitter(config, rtt, rtt.pto(config)).max(sp.ack_lag())
    }

    /// The retransmission timeout after the current backoff, jittered, or the peer's ACK lag
    /// if longer.
    pub(super) fn rto(&self, config: &Config, rtt: &RttEstimator, sp: &Spurious) -> Duration {
        self.jitter(config, rtt, rtt.backed_off(config, self.backoff))
            .max(sp.ack_lag())
    }

    /// `d` lengthened by up to a quarter, by a fraction drawn from the seed and the backoff,
    /// while the timer has backed off or no RTT sample was taken. Senders with no sample
    /// share the same timeout, and those whose datagrams a full receiver dropped together
    /// would otherwise time out together again after every doubling, each wave as large as
    /// the one before. A timeout measured from this session's own samples is left exact: it
    /// already differs from peer to peer, and single-session behaviour stays as before.
    /// Only ever longer, so no timer fires before its floor. Off with `timer_jitter`.
    fn jitter(&self, config: &Config, rtt: &RttEstimator, d: Duration) -> Duration {
        if !config.timer_jitter || (self.backoff == 0 && rtt.srtt().is_some()) {
            return d;
        }
        let draw = timer_seed([self.seed, self.backoff, 0x6a09_e667, 0xbb67_ae85]);
        let ns = d.as_nanos();
        let extra = (ns * u128::from(draw)) >> (32 + JITTER_SHIFT);
        d.saturating_add(Duration::from_nanos(
            u64::try_from(extra).unwrap_or(u64::MAX),
        ))
    }

    /// A datagram left at `now`.
    pub(super) fn on_send(
        &mut self,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        sp: &Spurious,
    ) {
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto(config, rtt, sp));
        }
        self.arm_tlp(Some(now), config, rtt, sp);
    }

    /// An ACK acknowledged something new: the timer's backoff ends, and if a probe was
    /// outstanding, what the ACK says of it shows the holes.
    pub(super) fn on_progress(
        &mut self,
        flight: &mut Flight,
        sp: &Spurious,
        now: Instant,
        stats: &mut Stats,
    ) {
        self.backoff = 0;
        if let Some(probe) = self.tlp.take() {
            Self::tail_losses(flight, sp, probe, now, stats);
        }
    }

    /// Declares lost every unacknowledged datagram that `dup_thresh` later transmissions
    /// overtook, once it is also older than the reordering window allows; arms the reordering
    /// timer for the ones that are not yet.
    pub(super) fn detect_losses(
        &mut self,
        flight: &mut Flight,
        sp: &Spurious,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        self.loss_at = None;
        let threshold = flight.overtaking(config.dup_thresh);
        if threshold == 0 {
            return;
        }
        // With no reordering seen, the count alone decides: recovery within one RTT.
        let wait = if sp.reo_wnd().is_zero() {
            Duration::ZERO
        } else {
            rtt.latest() + sp.reo_wnd()
        };
        // Only datagrams below the highest one known received: beyond it (or beyond the reach
        // of the SACK bitmap) the peer has told us nothing yet, so silence is not loss.
        let below = flight.below_high_acked();
        let loss_at = &mut self.loss_at;
        stats.fast_retransmits += flight.declare_lost(below, Cause::Overtaken, |_, e| {
            if e.state != State::Unacked || e.tx_order >= threshold {
                return false;
            }
            let due = e.sent_at + wait;
            if due > now {
                *loss_at = Some(loss_at.map_or(due, |t| t.min(due)));
            }
            due <= now
        });
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
    pub(super) fn overtaken_by_resend(
        flight: &mut Flight,
        sp: &Spurious,
        resent: Instant,
        now: Instant,
        stats: &mut Stats,
    ) {
        let reo_wnd = sp.reo_wnd();
        stats.burst_losses += flight.declare_lost(SACK_REACH, Cause::Burst, |_, e| {
            e.state == State::Unacked && e.sent_at < resent && e.sent_at + reo_wnd <= now
        });
    }

    /// News after a tail-loss probe. If the probe itself is acknowledged, the peer answered it
    /// at once (it asked for an ACK), so the datagrams sent before it and still unacknowledged
    /// below it are holes: lost, unless reordering was seen and they are younger than the
    /// reordering window.
    fn tail_losses(
        flight: &mut Flight,
        sp: &Spurious,
        probe: Seq,
        now: Instant,
        stats: &mut Stats,
    ) {
        if probe.before(flight.una) {
            // Everything up to the probe arrived.
            return;
        }
        let i = probe.since(flight.una) as usize;
        let probe_sent = match flight.get(i) {
            Some(e) if e.state == State::Sacked => e.sent_at,
            _ => return,
        };
        let reo_wnd = sp.reo_wnd();
        stats.tail_losses += flight.declare_lost(i, Cause::Burst, |_, e| {
            e.state == State::Unacked && e.sent_at <= probe_sent && e.sent_at + reo_wnd <= now
        });
    }

    /// Arms the tail-loss probe for a quiet flight: `pto` after the newest transmission, if
    /// that comes before the retransmission timer, no probe is outstanding and the timer has
    /// not backed off.
    fn arm_tlp(
        &mut self,
        newest: Option<Instant>,
        config: &Config,
        rtt: &RttEstimator,
        sp: &Spurious,
    ) {
        self.tlp_at = None;
        if config.min_pto.is_zero() || self.tlp.is_some() || self.backoff > 0 {
            return;
        }
        let Some(last) = newest else { return };
        let at = last + self.pto(config, rtt, sp);
        if self.rto_at.is_some_and(|r| at < r) {
            self.tlp_at = Some(at);
        }
    }

    /// The probe timer fired: resend the newest datagram not known received, asking for an
    /// immediate ACK.
    fn fire_tlp(&mut self, flight: &mut Flight, stats: &mut Stats) {
        self.tlp_at = None;
        // Within the SACK bitmap's reach, so that the probe's ACK can show the holes below it.
        let Some(i) = flight
            .iter()
            .take(SACK_REACH)
            .rposition(|e| e.state == State::Unacked)
        else {
            return;
        };
        flight.lose(i, Cause::Probe);
        stats.tail_probes += 1;
        self.tlp = Some(flight.una.add(i as u32));
    }

    /// Timers: the reordering window of an overtaken datagram ran out, or the retransmission
    /// timer fired (everything unacknowledged for a whole timeout is then lost).
    pub(super) fn on_timeout(
        &mut self,
        flight: &mut Flight,
        sp: &Spurious,
        now: Instant,
        config: &Config,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) {
        if self.loss_at.is_some_and(|t| t <= now) {
            self.detect_losses(flight, sp, now, config, rtt, stats);
        }
        match self.rto_at {
            Some(t) if t <= now => {}
            _ => {
                if self.tlp_at.is_some_and(|t| t <= now) {
                    self.fire_tlp(flight, stats);
                }
                return;
            }
        }
        // The timeout takes over from any probe, if it finds something to resend.
        let probe = self.tlp.take();
        self.tlp_at = None;
        let rto = self.rto(config, rtt, sp);
        // The first expiry resends the head and the holes below what is known received (a
        // lost tail then comes back one datagram per round trip); while expiries repeat
        // without news, only the head is resent, as a probe, so a dead peer is not flooded.
        let (head, below) = (flight.head_index(), flight.below_high_acked());
        let backoff = self.backoff;
        let mut lost = flight.declare_lost(usize::MAX, Cause::Timeout, |i, e| {
            Self::rto_watches(i, head, below, backoff)
                && e.state == State::Unacked
                && e.sent_at + rto <= now
        });
        // A selectively acknowledged head means the ACK that would have moved past it was lost
        // (or is late); resending the head makes the receiver repeat it.
        lost += flight.declare_lost(1, Cause::Timeout, |_, e| {
            e.state == State::Sacked && e.sent_at + rto <= now
        });
        if lost > 0 {
            stats.timeouts += 1;
            self.backoff += 1;
        } else {
            // Armed for a datagram a probe has since resent (or before the timeout grew):
            // nothing is due. A probe still unanswered stays so, or a new one would be armed
            // `pto` after that resend, a moment already past, and fire at once.
            self.tlp = probe;
        }
        self.rearm(flight, sp, config, rtt);
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

    /// Sets the timer to the earliest moment a watched datagram, or a selectively acknowledged
    /// head, times out. Lost datagrams are left out: the next poll resends them and arms the
    /// timer if need be. The timer never names a moment at which `on_timeout` would find
    /// nothing to do, so it cannot spin.
    pub(super) fn rearm(
        &mut self,
        flight: &Flight,
        sp: &Spurious,
        config: &Config,
        rtt: &RttEstimator,
    ) {
        let rto = self.rto(config, rtt, sp);
        let (head, below) = (flight.head_index(), flight.below_high_acked());
        let sacked_head = flight
            .front()
            .filter(|e| e.state == State::Sacked)
            .map(|e| e.sent_at);
        let mut watched: Option<Instant> = None;
        let mut newest: Option<Instant> = None;
        for (i, e) in flight.iter().enumerate() {
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
        self.arm_tlp(newest, config, rtt, sp);
    }
}

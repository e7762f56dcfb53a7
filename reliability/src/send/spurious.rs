//! What spurious retransmissions teach: how long the network may hold a datagram back (the
//! reordering window) and how late the peer's ACKs may come (the ACK lag).
//!
//! Reordering makes the loss rules resend datagrams that were only late. The receiver reports
//! each duplicate it gets (DSACK); a duplicate of something we retransmitted proves the
//! retransmission spurious, and then a loss also has to wait out a reordering window, in time,
//! before it is declared (RACK's `reo_wnd`). The window jumps to at least how long the original
//! had been out when it was resent, doubles on each further spurious retransmission, is capped
//! at the retransmission timeout, and halves after every 1024 datagrams acknowledged without
//! one, so a network that stops reordering gets its fast recovery back.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::rtt::RttEstimator;
use crate::seq::Seq;
use crate::stats::Stats;

use super::flight::Cause;

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
pub(super) enum Cover {
    Not,
    /// An ACK: the original's acknowledgement came after all (late, or the resend was early).
    Ack,
    /// The duplicate report of a lost ACK (its cumulative point covers every datagram the
    /// lost ACK did, and must not make their own reports look late).
    LostAckReport,
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

/// The reordering window and the ACK lag, and the records of recent resends that duplicate
/// reports are matched against to learn them.
#[derive(Debug)]
pub(super) struct Spurious {
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
}

impl Spurious {
    pub(super) fn new() -> Spurious {
        Spurious {
            reo_wnd: Duration::ZERO,
            clean_acks: 0,
            ack_lag: Duration::ZERO,
            lag_changed: 0,
            recent_retx: [None; 8],
            epoch: None,
            recent_pos: 0,
        }
    }

    pub(super) fn reo_wnd(&self) -> Duration {
        self.reo_wnd
    }

    pub(super) fn ack_lag(&self) -> Duration {
        self.ack_lag
    }

    /// Records a resend of `seq` (first sent at `first_sent`, declared lost for `cause`).
    pub(super) fn resent(&mut self, seq: Seq, first_sent: Instant, now: Instant, cause: Cause) {
        let epoch = *self.epoch.get_or_insert(first_sent);
        self.recent_retx[usize::from(self.recent_pos)] = Some(Retx {
            seq,
            first_sent: micros_since(epoch, first_sent),
            resent: micros_since(epoch, now),
            cause,
            covered: Cover::Not,
        });
        self.recent_pos = (self.recent_pos + 1) % self.recent_retx.len() as u8;
    }

    /// Notes, in the records of `seq`'s resends, what acknowledged it first.
    pub(super) fn covered(&mut self, seq: Seq, by: Cover) {
        for r in self.recent_retx.iter_mut().flatten() {
            if r.seq == seq && r.covered == Cover::Not {
                r.covered = by;
            }
        }
    }

    /// `n` more datagrams were cumulatively acknowledged at `now`.
    pub(super) fn clean_acks(&mut self, n: u32, now: Instant) {
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
    }

    /// The peer received `seq` twice (it said so at `now`); `acked`: it had acknowledged `seq`
    /// before the copy came. If we had retransmitted it, the retransmission was spurious: unless
    /// the ACK was lost, widen the reordering window, and if a timer had resent it, wait longer
    /// for acknowledgements.
    pub(super) fn on_dsack(
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
}

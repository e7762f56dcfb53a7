//! The datagrams in flight: sent and not yet cumulatively acknowledged, each with its
//! transmissions and what is known of it, and what the peer's ACKs said of them.

use std::collections::{vec_deque, VecDeque};
use std::time::Instant;

use crate::config::MAX_DUP_THRESH;
use crate::seq::{MsgId, Seq};

use super::queue::Payload;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Sent, no news.
    Unacked,
    /// Selectively acknowledged; never resent.
    Sacked,
    /// Declared lost; waiting to be resent.
    Lost,
}

/// What declared a datagram lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
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

#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) payload: Payload,
    pub(super) sent_at: Instant,
    pub(super) first_sent: Instant,
    /// Stamp of the latest transmission, increasing across all transmissions.
    pub(super) tx_order: u64,
    pub(super) tx_count: u32,
    pub(super) state: State,
    /// Why it was last declared lost.
    pub(super) cause: Cause,
    /// When this datagram is cumulatively acknowledged, messages up to this one are acknowledged.
    pub(super) completes: Option<MsgId>,
}

/// What one ACK newly acknowledged, gathered datagram by datagram for what follows it: the RTT
/// sample and the loss rules that an answered resend triggers.
#[derive(Debug, Default)]
pub(super) struct News {
    /// Something was newly acknowledged, cumulatively or selectively.
    pub(super) progress: bool,
    /// The newest transmission acknowledged: (tx_order, its send time if it was the
    /// datagram's only one). An ACK releases everything the receiver got up to its
    /// cumulative point, and when a retransmission fills a hole that includes datagrams that
    /// arrived long before (beyond the SACK bitmap's reach) but were never reported: their
    /// send times say nothing about the path. So only the newest transmission acknowledged
    /// makes a sample, and none if it was a retransmission (Karn: which copy got through?).
    sample: Option<(u64, Option<Instant>)>,
    /// When the newest acknowledged resend by a timer, or by a burst it uncovered, left.
    pub(super) resend: Option<Instant>,
    /// A first transmission is among the newly acknowledged.
    pub(super) original: bool,
}

impl News {
    /// Takes in `e`, newly acknowledged; `out`: its latest transmission has left (it was
    /// Unacked, not Lost again).
    fn note(&mut self, e: &InFlight, out: bool, top: &mut [u64; MAX_DUP_THRESH as usize]) {
        if self.sample.is_none_or(|(o, _)| e.tx_order > o) {
            self.sample = Some((e.tx_order, (e.tx_count == 1).then_some(e.sent_at)));
        }
        // Not a fast retransmit: under reordering its original may be what was
        // acknowledged, and what was sent before it may only be late.
        if out && e.tx_count > 1 && e.cause != Cause::Overtaken {
            self.resend = self.resend.max(Some(e.sent_at));
        }
        self.original |= e.tx_count == 1;
        insert_top(top, e.tx_order);
    }

    /// When the datagram that makes the RTT sample was sent, if one does.
    pub(super) fn rtt_sample(&self) -> Option<Instant> {
        self.sample.and_then(|(_, sent_at)| sent_at)
    }
}

/// The datagrams from `una` (the oldest unacknowledged) to `nxt`, in sequence order.
#[derive(Debug)]
pub(super) struct Flight {
    entries: VecDeque<InFlight>,
    pub(super) una: Seq,
    pub(super) nxt: Seq,
    bytes: usize,
    /// Entries in state `Lost`.
    lost: u32,
    tx_stamp: u64,
    /// Highest sequence number known received (cumulatively or selectively).
    high_acked: Seq,
    /// The largest `tx_order`s acknowledged so far, descending.
    acked_top: [u64; MAX_DUP_THRESH as usize],
}

impl Flight {
    pub(super) fn new(isn: Seq) -> Flight {
        Flight {
            entries: VecDeque::new(),
            una: isn,
            nxt: isn,
            bytes: 0,
            lost: 0,
            tx_stamp: 0,
            high_acked: isn.sub(1),
            acked_top: [0; MAX_DUP_THRESH as usize],
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Gives the entries' memory back.
    pub(super) fn release(&mut self) {
        self.entries = VecDeque::new();
    }

    /// Drops every entry (the session failed).
    pub(super) fn abandon(&mut self) {
        self.entries = VecDeque::new();
        self.bytes = 0;
        self.lost = 0;
    }

    pub(super) fn iter(&self) -> vec_deque::Iter<'_, InFlight> {
        self.entries.iter()
    }

    pub(super) fn front(&self) -> Option<&InFlight> {
        self.entries.front()
    }

    /// The `tx_order` that `dup_thresh` acknowledged transmissions have reached (0: not yet).
    pub(super) fn overtaking(&self, dup_thresh: u8) -> u64 {
        self.acked_top[usize::from(dup_thresh) - 1]
    }

    /// Sends `payload` as the next sequence number.
    pub(super) fn push(&mut self, payload: Payload, now: Instant, completes: Option<MsgId>) -> Seq {
        self.tx_stamp += 1;
        let seq = self.nxt;
        self.nxt = seq.add(1);
        self.bytes += payload.len();
        self.entries.push_back(InFlight {
            payload,
            sent_at: now,
            first_sent: now,
            tx_order: self.tx_stamp,
            tx_count: 1,
            state: State::Unacked,
            cause: Cause::Overtaken,
            completes,
        });
        seq
    }

    /// Resends the oldest datagram declared lost before `edge` (the peer's credit), if any.
    /// One past it waits for the credit to reach it: it was sent on credit assumed before the
    /// peer's first ACK, or granted and since withdrawn. The oldest datagram is always within
    /// reach (the credit is at least 1), so recovery cannot stall.
    pub(super) fn resend(&mut self, now: Instant, edge: Seq) -> Option<(Seq, &InFlight)> {
        if self.lost == 0 {
            return None;
        }
        let reach = if edge.after(self.una) {
            edge.since(self.una) as usize
        } else {
            1
        };
        let i = self
            .entries
            .iter()
            .take(reach)
            .position(|e| e.state == State::Lost)?;
        self.lost -= 1;
        self.tx_stamp += 1;
        let e = &mut self.entries[i];
        e.state = State::Unacked;
        e.sent_at = now;
        e.tx_order = self.tx_stamp;
        e.tx_count += 1;
        Some((self.una.add(i as u32), e))
    }

    pub(super) fn get(&self, i: usize) -> Option<&InFlight> {
        self.entries.get(i)
    }

    /// Declares the `i`-th datagram in flight lost, for `cause`.
    pub(super) fn lose(&mut self, i: usize, cause: Cause) {
        let e = &mut self.entries[i];
        e.state = State::Lost;
        e.cause = cause;
        self.lost += 1;
    }

    /// Declares lost, for `cause`, each of the first `take` datagrams that `lost` picks (by its
    /// index and entry); returns how many.
    pub(super) fn declare_lost(
        &mut self,
        take: usize,
        cause: Cause,
        mut lost: impl FnMut(usize, &InFlight) -> bool,
    ) -> u64 {
        let mut n = 0;
        for (i, e) in self.entries.iter_mut().enumerate().take(take) {
            if lost(i, e) {
                e.state = State::Lost;
                e.cause = cause;
                self.lost += 1;
                n += 1;
            }
        }
        n
    }

    /// Pops the oldest datagram, cumulatively acknowledged, into `news`; returns it and its
    /// sequence number.
    pub(super) fn pop_acked(&mut self, news: &mut News) -> (Seq, InFlight) {
        let e = self.entries.pop_front().expect("ack <= nxt");
        let seq = self.una;
        self.una = seq.add(1);
        self.bytes -= e.payload.len();
        match e.state {
            State::Sacked => {}
            State::Lost => {
                self.lost -= 1;
                news.note(&e, false, &mut self.acked_top);
            }
            State::Unacked => news.note(&e, true, &mut self.acked_top),
        }
        (seq, e)
    }

    /// `seq` is selectively acknowledged: noted in `news` if that is news. Returns whether it
    /// is, for a datagram that was retransmitted.
    pub(super) fn sack(&mut self, seq: Seq, news: &mut News) -> bool {
        let idx = seq.since(self.una) as usize;
        let Some(e) = self.entries.get_mut(idx) else {
            return false;
        };
        let out = match e.state {
            State::Sacked => return false,
            State::Lost => {
                self.lost -= 1;
                false
            }
            State::Unacked => true,
        };
        e.state = State::Sacked;
        news.progress = true;
        news.note(e, out, &mut self.acked_top);
        e.tx_count > 1
    }

    /// The peer has received `newest` (and perhaps more).
    pub(super) fn received(&mut self, newest: Seq) {
        if newest.after(self.high_acked) {
            self.high_acked = newest;
        }
    }

    /// How many datagrams from the head are below the highest one known received.
    pub(super) fn below_high_acked(&self) -> usize {
        if self.high_acked.before(self.una) {
            0
        } else {
            self.high_acked.add(1).since(self.una) as usize
        }
    }

    /// The index of the first datagram not selectively acknowledged.
    pub(super) fn head_index(&self) -> usize {
        self.entries
            .iter()
            .position(|e| e.state != State::Sacked)
            .unwrap_or(usize::MAX)
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

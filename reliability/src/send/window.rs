//! Flow control: how far the sender may run ahead, by its own send window and by the credit
//! the peer advertises.

use crate::config::Config;
use crate::seq::Seq;

#[derive(Debug)]
pub(super) struct Window {
    /// Highest cumulative ACK seen and the edge its credit allows.
    ack_high: Seq,
    right_edge: Seq,
    /// The datagram that last asked for an ACK at once because it filled the window, until
    /// an ACK covers it: one such request per window, not one per datagram that refills it.
    full_req: Option<Seq>,
}

impl Window {
    pub(super) fn new(config: &Config) -> Window {
        let isn = Seq(config.initial_seq);
        Window {
            ack_high: isn,
            right_edge: isn.add(u32::from(config.initial_credit)),
            full_req: None,
        }
    }

    /// The window of a resumed sender: everything before `nxt` acknowledged, with `credit`.
    pub(super) fn resume(nxt: Seq, credit: u16) -> Window {
        Window {
            ack_high: nxt,
            right_edge: nxt.add(u32::from(credit.max(1))),
            full_req: None,
        }
    }

    /// Datagrams the peer's credit still allows from `nxt` on (at least 1, as `on_ack` keeps).
    pub(super) fn credit_from(&self, nxt: Seq) -> u16 {
        let left = self.right_edge.diff(nxt).max(1);
        u16::try_from(left).unwrap_or(u16::MAX)
    }

    /// Whether `nxt` may be sent with `una` the oldest unacknowledged.
    pub(super) fn open(&self, una: Seq, nxt: Seq, config: &Config) -> bool {
        nxt.since(una) < u32::from(config.send_window) && nxt.before(self.right_edge)
    }

    /// An ACK for everything before `ack` came with `credit`; an older one moves nothing.
    pub(super) fn on_ack(&mut self, ack: Seq, credit: u16) {
        if !ack.before(self.ack_high) {
            self.ack_high = ack;
            self.right_edge = ack.add(u32::from(credit.max(1)));
        }
    }

    /// The first sequence number past what the peer's credit allows.
    pub(super) fn right_edge(&self) -> Seq {
        self.right_edge
    }

    /// Highest cumulative ACK seen.
    pub(super) fn ack_high(&self) -> Seq {
        self.ack_high
    }

    /// Everything before `ack` is acknowledged: a request for an ACK it covers is answered.
    pub(super) fn acked(&mut self, ack: Seq) {
        if self.full_req.is_some_and(|r| r.before(ack)) {
            self.full_req = None;
        }
    }

    /// `seq` was sent and `full`: it filled the window. Whether it asks for an ACK at once.
    pub(super) fn asks_ack(&mut self, seq: Seq, full: bool) -> bool {
        // Asking on every datagram that refills the window makes the peer answer every few
        // datagrams, where one answer per window keeps it flowing (`BENCHMARKS.md`).
        let ask = full && self.full_req.is_none();
        if ask {
            self.full_req = Some(seq);
        }
        ask
    }
}

//! Per-session counters and the memory a session holds.

use core::time::Duration;

/// Counters of one session. They only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams emitted, of every kind.
    pub datagrams_sent: u64,
    /// Data datagrams emitted for the first time.
    pub data_sent: u64,
    /// Data datagrams emitted again.
    pub retransmits: u64,
    /// Losses detected by selective ACKs (each led to one retransmission).
    pub fast_retransmits: u64,
    /// Retransmissions the peer reported receiving twice (the original was only late).
    pub spurious_retransmits: u64,
    /// Of those, the ones the peer had acknowledged before the copy came: the ACK was lost.
    pub lost_acks: u64,
    /// Retransmission timer expiries that found something to resend.
    pub timeouts: u64,
    /// Tail-loss probes: the newest unacknowledged datagram resent because the flight went
    /// quiet for a probe timeout (well before the retransmission timeout).
    pub tail_probes: u64,
    /// Datagrams declared lost by the answer to a tail-loss probe.
    pub tail_losses: u64,
    /// Datagrams declared lost because a timer's resend sent after them was answered first
    /// (a burst that took a whole tail).
    pub burst_losses: u64,
    /// ACK-only datagrams emitted.
    pub acks_sent: u64,
    /// Data datagrams that filled the window (send window or the peer's credit): the sender
    /// then waits for an ACK before sending more.
    pub window_full: u64,
    /// Datagrams accepted (header valid, for this session and epoch).
    pub datagrams_received: u64,
    /// Data datagrams received again.
    pub duplicates: u64,
    /// Data datagrams that arrived ahead of a gap.
    pub out_of_order: u64,
    /// Datagrams refused for a bad header.
    pub dropped_malformed: u64,
    /// Datagrams refused for a bad CRC32c.
    pub dropped_checksum: u64,
    /// Datagrams for another session id.
    pub dropped_foreign: u64,
    /// Datagrams from another incarnation of the peer.
    pub dropped_stale_epoch: u64,
    /// Datagrams acknowledging data never sent.
    pub dropped_invalid_ack: u64,
    /// Data datagrams beyond the receive window.
    pub dropped_out_of_window: u64,
    /// Out-of-order datagrams refused because the held bytes would pass their bound.
    pub dropped_reorder_full: u64,
    /// Datagrams that arrived after the session failed.
    pub dropped_after_failure: u64,
    /// Messages accepted by `send`.
    pub messages_sent: u64,
    /// Messages the peer acknowledged.
    pub messages_acked: u64,
    /// Messages delivered to the caller.
    pub messages_delivered: u64,
    /// `send` calls answered `WouldBlock`.
    pub would_block: u64,
    /// Delivered message ids that did not follow the previous one (a misbehaving peer).
    pub protocol_errors: u64,
}

impl Stats {
    /// Every datagram refused, whatever the reason (duplicates excluded).
    pub fn dropped(&self) -> u64 {
        self.dropped_malformed
            + self.dropped_checksum
            + self.dropped_foreign
            + self.dropped_stale_epoch
            + self.dropped_invalid_ack
            + self.dropped_out_of_window
            + self.dropped_reorder_full
            + self.dropped_after_failure
    }
}

/// RTT estimate of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttStats {
    /// Smoothed RTT, once sampled.
    pub srtt: Option<Duration>,
    /// RTT variation.
    pub rttvar: Duration,
    /// Retransmission timeout in force, backoff included.
    pub rto: Duration,
    /// Reordering window: how long past its RTT an overtaken datagram is given before it is
    /// declared lost (0 until reordering was seen).
    pub reo_wnd: Duration,
    /// How late the peer's acknowledgements were seen to come (0 until a timer retransmission
    /// proved needless); the probe and retransmission timers wait at least this long.
    pub ack_lag: Duration,
}

/// Bytes a session holds right now, for the memory ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// The session structure itself.
    pub fixed: usize,
    /// Caller bytes queued and not yet sent.
    pub send_queue: usize,
    /// Bytes of sent, unacknowledged datagrams (the retransmission queue).
    pub retransmit: usize,
    /// Out-of-order whole messages held, plus the reorder slots.
    pub reorder: usize,
    /// Queue and event bookkeeping (capacity of the internal deques).
    pub bookkeeping: usize,
}

impl Memory {
    /// Sum of all parts.
    pub fn total(&self) -> usize {
        self.fixed + self.send_queue + self.retransmit + self.reorder + self.bookkeeping
    }
}

/// Bytes an endpoint holds, for the memory ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointMemory {
    /// Sessions open.
    pub count: usize,
    /// The session map's slots, each holding a session whole (so `sessions.fixed` is 0).
    pub slots: usize,
    /// Ready lists, the timer heap and the ACK lists.
    pub tables: usize,
    /// What the sessions hold beyond their slot, summed.
    pub sessions: Memory,
}

impl EndpointMemory {
    /// Sum of all parts.
    pub fn total(&self) -> usize {
        self.slots + self.tables + self.sessions.total()
    }
}

//! Session parameters. The defaults target a LAN or loopback link carrying MPI traffic; the
//! README explains each choice.

use core::time::Duration;

use crate::header::{COALESCED_LEN, CRC_LEN, SEGMENT_LEN, SINGLE_LEN};

/// The most a `dup_thresh` may be (the loss detector keeps this many ACKed transmission stamps).
pub const MAX_DUP_THRESH: u8 = 4;

/// Largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Parameters of a session. Both ends of a session must agree on `initial_seq` and `checksum`;
/// the rest may differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Largest datagram (reliability header, payload and CRC) the session emits.
    pub max_datagram_size: usize,
    /// Messages up to this many bytes travel whole (SINGLE or COALESCED) and are held by the
    /// receiver when they arrive out of order; longer ones are SEGMENTs, placed by the caller
    /// as they arrive. Capped at what fits one datagram and at 65535.
    pub inline_limit: usize,
    /// Most datagrams in flight (sent, not cumulatively acknowledged).
    pub send_window: u16,
    /// Most datagrams this side accepts past its cumulative ACK point: bounds the reorder state.
    /// It is also the largest credit this side advertises.
    pub recv_window: u16,
    /// Credit assumed for the peer before its first ACK arrives.
    pub initial_credit: u16,
    /// Bytes (payload plus a fixed per-message charge) a session holds for the caller, queued or
    /// unacknowledged, before `send` answers `WouldBlock`.
    pub max_send_buffer: usize,
    /// Bytes of out-of-order whole messages the receiver holds; past this an out-of-order
    /// datagram is dropped unacknowledged (and comes again).
    pub max_held_bytes: usize,
    /// Send an ACK after this many unacknowledged data datagrams.
    pub ack_every: u16,
    /// ... or this long after the first of them, whichever comes first.
    pub ack_delay: Duration,
    /// ... or this long after a datagram flagged ACK_SOON (the last its sender had queued, so
    /// no later one will fill the batch), unless data going back carries the ACK first. Short,
    /// because a sender waiting for its send to complete waits this long; not zero, so that a
    /// prompt reply (a ping-pong's) carries the ACK instead of a datagram of its own.
    pub ack_soon_delay: Duration,
    /// Retransmission timeout before the first RTT sample.
    pub initial_rto: Duration,
    /// Floor of the retransmission timeout.
    pub min_rto: Duration,
    /// Ceiling of the retransmission timeout, backoff included.
    pub max_rto: Duration,
    /// Floor of the tail-loss probe timeout (`2·SRTT + ack_delay`, at most the retransmission
    /// timeout): when nothing is acknowledged for that long, the newest unacknowledged datagram
    /// is resent asking for an immediate ACK, whose selective ACK then shows which datagrams of
    /// the tail were lost. `Duration::ZERO` disables probes.
    pub min_pto: Duration,
    /// Lengthen the retransmission and probe timeouts by up to a quarter, by a fraction drawn
    /// from the session's ids, while they are backed off or no RTT sample was taken: senders
    /// whose datagrams a full receiver dropped together then retry apart instead of together
    /// after every doubling. Deterministic (no clock or entropy is read); a timeout measured
    /// from the session's own samples is never jittered. `false` gives the exact RFC 6298
    /// schedule.
    pub timer_jitter: bool,
    /// A datagram is lost once this many datagrams sent after it are acknowledged.
    pub dup_thresh: u8,
    /// A peer that has sent nothing for this long while we have unacknowledged or queued data
    /// fails the session.
    pub idle_timeout: Duration,
    /// A peer silent this long while we have unacknowledged or queued data is reported once
    /// ([`Event::Stalled`](crate::Event::Stalled)), well before `idle_timeout` fails it: a
    /// caller with another way to the peer (another rail) can take the data there. `None`
    /// (the default) reports nothing.
    pub stall_after: Option<Duration>,
    /// Append a CRC32c trailer to every datagram and refuse datagrams without one.
    pub checksum: bool,
    /// First sequence number and first message id, in both directions.
    pub initial_seq: u32,
    /// An [`Endpoint`](crate::Endpoint) freezes a session idle in every respect for this long
    /// into a [`Dormant`](crate::Dormant) and hands it out through
    /// [`Endpoint::poll_dormant`](crate::Endpoint::poll_dormant), so that a peer not talked
    /// to costs the endpoint nothing. `None` (the default) keeps every session open: a caller
    /// has to take dormant sessions and resume them, which one that does not know of them
    /// would not. One second is the value to turn it on with (see the README). A
    /// [`Session`](crate::Session) alone only reports when it would be due
    /// ([`Session::dormant_at`](crate::Session::dormant_at)).
    pub dormant_after: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_datagram_size: MAX_UDP_PAYLOAD,
            inline_limit: 8 * 1024,
            send_window: 128,
            recv_window: 128,
            initial_credit: 16,
            max_send_buffer: 8 << 20,
            max_held_bytes: 1 << 20,
            ack_every: 32,
            ack_delay: Duration::from_micros(100),
            ack_soon_delay: Duration::from_micros(10),
            initial_rto: Duration::from_millis(1),
            min_rto: Duration::from_millis(1),
            max_rto: Duration::from_millis(500),
            min_pto: Duration::from_micros(100),
            timer_jitter: true,
            dup_thresh: 3,
            idle_timeout: Duration::from_secs(30),
            stall_after: None,
            checksum: true,
            initial_seq: 0,
            dormant_after: None,
        }
    }
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid reliability config: {0}")]
pub struct ConfigError(pub &'static str);

impl Config {
    /// Checks that the parameters are usable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = |ok: bool, why| if ok { Ok(()) } else { Err(ConfigError(why)) };
        check(
            self.max_datagram_size >= SEGMENT_LEN + CRC_LEN + 16,
            "max_datagram_size too small",
        )?;
        check(
            self.max_datagram_size <= usize::from(u16::MAX),
            "max_datagram_size above 65535",
        )?;
        check(self.send_window > 0, "send_window is 0")?;
        check(self.recv_window > 0, "recv_window is 0")?;
        check(self.initial_credit > 0, "initial_credit is 0")?;
        check(self.ack_every > 0, "ack_every is 0")?;
        check(
            (1..=MAX_DUP_THRESH).contains(&self.dup_thresh),
            "dup_thresh outside 1..=4",
        )?;
        check(self.min_rto > Duration::ZERO, "min_rto is 0")?;
        check(self.min_rto <= self.max_rto, "min_rto above max_rto")?;
        check(self.idle_timeout > Duration::ZERO, "idle_timeout is 0")?;
        check(self.stall_after != Some(Duration::ZERO), "stall_after is 0")?;
        check(
            self.dormant_after != Some(Duration::ZERO),
            "dormant_after is 0",
        )?;
        Ok(())
    }

    fn trailer(&self) -> usize {
        if self.checksum {
            CRC_LEN
        } else {
            0
        }
    }

    /// Payload bytes of one SEGMENT: what is left of a datagram after header and trailer,
    /// rounded down to 64 bytes once it is large, so placements land on cache-line offsets.
    pub fn segment_payload(&self) -> usize {
        let raw = self.max_datagram_size - SEGMENT_LEN - self.trailer();
        if raw >= 4096 {
            raw & !63
        } else {
            raw
        }
    }

    /// The inline limit in force: `inline_limit` capped by one SINGLE datagram and by 65535.
    pub fn effective_inline_limit(&self) -> usize {
        self.inline_limit
            .min(self.max_datagram_size - SINGLE_LEN - self.trailer())
            .min(usize::from(u16::MAX))
    }

    /// Room for entries in one COALESCED datagram.
    pub(crate) fn coalesced_room(&self) -> usize {
        self.max_datagram_size - COALESCED_LEN - self.trailer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_sized() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(c.segment_payload(), 65_408);
        assert_eq!(c.effective_inline_limit(), 8192);
        let small = Config {
            max_datagram_size: 200,
            ..c
        };
        small.validate().unwrap();
        assert_eq!(small.segment_payload(), 160);
        assert_eq!(small.effective_inline_limit(), 168);
    }

    #[test]
    fn rejects_nonsense() {
        let c = Config {
            recv_window: 0,
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            dup_thresh: 5,
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            dormant_after: Some(Duration::ZERO),
            ..Config::default()
        };
        assert!(c.validate().is_err());
    }
}

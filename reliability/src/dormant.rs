//! A session frozen into a few words. An idle session holds nothing the peer is waiting for,
//! so what the wire needs of it is where each direction stands: the next sequence number and
//! message id it sends, the cumulative point it has received up to, the credit each side last
//! advertised, and whether its last ACK had surely left. [`Dormant`] is that, and
//! [`Session::resume`](crate::Session::resume) continues from it as if the session had never
//! slept; queues, windows, loss and reordering history start afresh, and the RTT estimate from
//! the smoothed RTT kept here.
//!
//! This module is a leaf: the sender and receiver hand their parts over in [`SendPoint`] and
//! [`RecvPoint`], and take them back, without importing the session.

use core::time::Duration;

use crate::seq::{MsgId, Seq};

const CHECKSUM: u8 = 0x01;
const ACKED: u8 = 0x02;

/// What the sending half of an idle session needs to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendPoint {
    /// Next sequence number to send; everything before it is acknowledged.
    pub(crate) seq: Seq,
    /// Next message id to send; every message before it is acknowledged.
    pub(crate) msg: MsgId,
    /// Datagrams the peer last allowed from `seq` on.
    pub(crate) peer_credit: u16,
}

/// What the receiving half of an idle session needs to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvPoint {
    /// Every sequence number before it was received, and nothing after it.
    pub(crate) seq: Seq,
    /// Next message id to deliver.
    pub(crate) msg: MsgId,
    /// The credit this side advertised.
    pub(crate) credit: u16,
    /// An ACK for everything before `seq` left before the input was last drained: a copy of
    /// an old datagram that comes later reports a lost ACK (see [`crate::header::FLAG_ACKED`]).
    pub(crate) acked: bool,
}

/// An idle session frozen by [`Session::freeze`](crate::Session::freeze), to be resumed by
/// [`Session::resume`](crate::Session::resume) or [`Endpoint::resume`](crate::Endpoint::resume)
/// with the same [`SessionIds`](crate::SessionIds). Both ends of the session keep talking to
/// it as before: the peer need not know it slept, nor sleep itself.
///
/// Resume a value once: resuming an old copy after the session moved on would reuse sequence
/// numbers the peer already took, and it would drop them as duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dormant {
    tx_seq: u32,
    tx_msg: u32,
    rx_seq: u32,
    rx_msg: u32,
    peer_credit: u16,
    credit: u16,
    /// Smoothed RTT in microseconds, 0 when there was none or it did not fit.
    srtt_us: u16,
    flags: u8,
}

impl Dormant {
    pub(crate) fn new(
        tx: SendPoint,
        rx: RecvPoint,
        checksum: bool,
        srtt: Option<Duration>,
    ) -> Dormant {
        // A smoothed RTT past 65 ms is not kept: the resumed session measures afresh.
        let srtt_us = srtt
            .map(|d| d.as_micros().max(1))
            .and_then(|us| u16::try_from(us).ok())
            .unwrap_or(0);
        let flags = if checksum { CHECKSUM } else { 0 } | if rx.acked { ACKED } else { 0 };
        Dormant {
            tx_seq: tx.seq.0,
            tx_msg: tx.msg.0,
            rx_seq: rx.seq.0,
            rx_msg: rx.msg.0,
            peer_credit: tx.peer_credit,
            credit: rx.credit,
            srtt_us,
            flags,
        }
    }

    pub(crate) fn send_point(&self) -> SendPoint {
        SendPoint {
            seq: Seq(self.tx_seq),
            msg: MsgId(self.tx_msg),
            peer_credit: self.peer_credit,
        }
    }

    pub(crate) fn recv_point(&self) -> RecvPoint {
        RecvPoint {
            seq: Seq(self.rx_seq),
            msg: MsgId(self.rx_msg),
            credit: self.credit,
            acked: self.flags & ACKED != 0,
        }
    }

    /// The sequence number the session sends next.
    pub fn next_seq(&self) -> Seq {
        Seq(self.tx_seq)
    }

    /// The id of the next message the session sends.
    pub fn next_msg(&self) -> MsgId {
        MsgId(self.tx_msg)
    }

    /// The sequence number the session expects next (its cumulative ACK point).
    pub fn expected_seq(&self) -> Seq {
        Seq(self.rx_seq)
    }

    /// The id of the next message the session delivers.
    pub fn expected_msg(&self) -> MsgId {
        MsgId(self.rx_msg)
    }

    /// Datagrams the peer last allowed the session to have in flight.
    pub fn peer_credit(&self) -> u16 {
        self.peer_credit
    }

    /// The credit the session last advertised.
    pub fn credit(&self) -> u16 {
        self.credit
    }

    /// Whether the session's datagrams carry a CRC32c trailer.
    pub fn checksum(&self) -> bool {
        self.flags & CHECKSUM != 0
    }

    /// The smoothed RTT kept for the resumed session's first timeouts, if any.
    pub fn srtt(&self) -> Option<Duration> {
        (self.srtt_us != 0).then(|| Duration::from_micros(u64::from(self.srtt_us)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_its_parts_in_24_bytes() {
        assert!(core::mem::size_of::<Dormant>() <= 24);
        let tx = SendPoint {
            seq: Seq(u32::MAX),
            msg: MsgId(7),
            peer_credit: 3,
        };
        let rx = RecvPoint {
            seq: Seq(5),
            msg: MsgId(u32::MAX - 1),
            credit: 9,
            acked: true,
        };
        let d = Dormant::new(tx, rx, false, Some(Duration::from_nanos(300)));
        assert_eq!(d.send_point(), tx);
        assert_eq!(d.recv_point(), rx);
        assert!(!d.checksum());
        assert_eq!(d.srtt(), Some(Duration::from_micros(1)));
        let far = Dormant::new(tx, rx, true, Some(Duration::from_millis(70)));
        assert!(far.checksum());
        assert_eq!(far.srtt(), None);
        assert_eq!(Dormant::new(tx, rx, true, None).srtt(), None);
    }
}

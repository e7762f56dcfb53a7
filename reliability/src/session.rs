//! One reliable-datagram session with one peer: the sans-IO state machine the I/O driver feeds
//! with datagrams and time, and drains of datagrams and events.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::{Config, ConfigError};
use crate::deadline::earliest;
use crate::dormant::Dormant;
use crate::header::{self, Body, HeaderError, Repr, MAX_HEADER_LEN};
use crate::reassembly::{DataDrop, Receiver, Sink};
use crate::rtt::RttEstimator;
use crate::send::{timer_seed, Ack, Outbound, Payload, Sender};
use crate::seq::{MsgId, MsgRange, Seq};
use crate::stats::{Memory, RttStats, Stats};

/// The ids that tie two sessions together, agreed out of band (MPI exchanges addresses before
/// any message flows, so each side learns the other's ids with them).
///
/// Each side *chooses the id its peer stamps on datagrams to it* (`local_id`), so a receiver
/// finds the session from the header alone and refuses ids it never gave out. Each side also
/// has an epoch, its incarnation: a restarted peer comes back with a new epoch, and datagrams
/// from its old or new self are refused by sessions that expect the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionIds {
    /// Id the peer puts on datagrams for us.
    pub local_id: u32,
    /// Our incarnation, carried in every datagram we send.
    pub local_epoch: u32,
    /// Id we put on datagrams for the peer.
    pub remote_id: u32,
    /// The peer's incarnation; datagrams with another are refused.
    pub remote_epoch: u32,
}

impl SessionIds {
    /// The peer's view of the same session.
    pub fn mirrored(&self) -> SessionIds {
        SessionIds {
            local_id: self.remote_id,
            local_epoch: self.remote_epoch,
            remote_id: self.local_id,
            remote_epoch: self.local_epoch,
        }
    }

    /// The seed of this session's timer jitter: its ids and epochs hashed, so peers differ and
    /// a run repeats.
    fn seed(&self) -> u32 {
        timer_seed([
            self.local_id,
            self.local_epoch,
            self.remote_id,
            self.remote_epoch,
        ])
    }
}

/// How long a session stays idle before its queues' memory is given back.
pub const RELEASE_AFTER: Duration = Duration::from_millis(1);

/// Something the caller should know about; see [`Session::poll_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The peer acknowledged every datagram of this message (in message order).
    SendAcked(MsgId),
    /// `send` refused a message earlier and there is room again.
    Writable,
    /// The peer was silent for `idle_timeout` while messages were outstanding. These messages
    /// (all that were not acknowledged) will never be; the session is dead and drops
    /// everything from now on.
    PeerFailed {
        /// The messages that failed.
        unacked: MsgRange,
    },
    /// The peer was silent for [`Config::stall_after`] while messages were outstanding. The
    /// session goes on (and still fails at `idle_timeout`); reported once until the peer is
    /// heard again.
    Stalled,
}

/// Why `send` refused a message. The message was not taken; the caller still owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The send buffer is full; retry after [`Event::Writable`] or a [`Event::SendAcked`].
    #[error("send buffer full")]
    WouldBlock,
    /// Longer than `u32::MAX` bytes.
    #[error("message too large")]
    TooLarge,
    /// The session failed.
    #[error("peer failed")]
    PeerFailed,
}

/// A message [`Session::send_parts`] did not take, handed back with the reason: the caller
/// keeps its data without having to hold a second reference while the session may take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub error: SendError,
    pub head: Bytes,
    pub body: Bytes,
}

/// Why a datagram (or its data part) was discarded. Each reason is also counted in [`Stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// The header did not parse or the checksum failed.
    #[error("malformed: {0}")]
    Malformed(#[from] HeaderError),
    /// Addressed to a session id this session does not own.
    #[error("foreign session id {0:#x}")]
    ForeignSession(u32),
    /// Sent by another incarnation of the peer.
    #[error("stale epoch {0:#x}")]
    StaleEpoch(u32),
    /// Acknowledges data that was never sent.
    #[error("ack beyond what was sent")]
    InvalidAck,
    /// Data already received (its ACK fields were used).
    #[error("duplicate")]
    Duplicate,
    /// Data beyond the receive window (its ACK fields were used).
    #[error("beyond the receive window")]
    OutOfWindow,
    /// Out-of-order data refused because too many bytes are held (its ACK fields were used).
    #[error("reorder buffer full")]
    ReorderFull,
    /// The session has failed.
    #[error("session failed")]
    Failed,
    /// No session has this id (reported by [`crate::Endpoint`]).
    #[error("unknown session id {0:#x}")]
    UnknownSession(u32),
}

/// A datagram written by [`Session::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Its length in the buffer.
    pub size: usize,
    /// Its sequence number, or `None` for an ACK.
    pub seq: Option<Seq>,
    /// It is a retransmission.
    pub retransmit: bool,
}

/// A datagram in pieces, for gather I/O (`sendmsg` with three iovecs): no payload copy.
#[derive(Debug, Clone)]
pub struct GatherTransmit {
    /// Bytes of the header in the caller's header buffer.
    pub header_len: usize,
    /// The payload (shares the caller's message buffer).
    pub payload: Bytes,
    /// More payload, following `payload` on the wire: only a segment that spans the head and
    /// the body of a message sent with [`Session::send_parts`] has any.
    pub payload_tail: Bytes,
    /// The CRC32c trailer, when checksums are on.
    pub trailer: Option<[u8; header::CRC_LEN]>,
    /// Its sequence number, or `None` for an ACK.
    pub seq: Option<Seq>,
    /// It is a retransmission.
    pub retransmit: bool,
}

impl GatherTransmit {
    /// Total length on the wire.
    pub fn size(&self) -> usize {
        self.header_len
            + self.payload.len()
            + self.payload_tail.len()
            + self.trailer.map_or(0, |t| t.len())
    }
}

/// A reliable-datagram session with one peer.
///
/// Contract for the driver (as quinn-proto's): after `send`, `handle_datagram`,
/// `handle_timeout` or `set_credit`, call [`Session::poll_transmit`] until it returns `None`
/// and [`Session::poll_event`] until it returns `None`; sleep until [`Session::poll_timeout`]
/// and then call `handle_timeout`.
#[derive(Debug)]
pub struct Session {
    config: Arc<Config>,
    ids: SessionIds,
    tx: Sender,
    rx: Receiver,
    rtt: RttEstimator,
    events: VecDeque<Event>,
    stats: Stats,
    last_heard: Instant,
    /// Since when something has been queued or unacknowledged, without a break.
    busy_since: Option<Instant>,
    /// When the queues' memory goes back if the session is still idle then. Releasing it the
    /// moment a session goes idle would cost a ping-pong allocations on every message.
    release_at: Option<Instant>,
    failed: bool,
    /// [`Event::Stalled`] was reported and the peer not heard since.
    stalled: bool,
}

impl Session {
    /// A new session; nothing is sent until the first `send` (no handshake: the ids and the
    /// initial sequence number are agreed out of band).
    pub fn new(config: Arc<Config>, ids: SessionIds, now: Instant) -> Result<Session, ConfigError> {
        config.validate()?;
        let (tx, rx) = (Sender::new(&config, ids.seed()), Receiver::new(&config));
        Ok(Session::with(config, ids, tx, rx, RttEstimator::new(), now))
    }

    /// A session from its parts, with nothing queued, no events and fresh counters.
    fn with(
        config: Arc<Config>,
        ids: SessionIds,
        tx: Sender,
        rx: Receiver,
        rtt: RttEstimator,
        now: Instant,
    ) -> Session {
        Session {
            tx,
            rx,
            rtt,
            config,
            ids,
            events: VecDeque::new(),
            stats: Stats::default(),
            last_heard: now,
            busy_since: None,
            release_at: None,
            failed: false,
            stalled: false,
        }
    }

    /// Freezes an idle session: `Some` only when nothing is queued or unacknowledged (and no
    /// caller waits for [`Event::Writable`]), nothing received is held out of order or owed an
    /// ACK, no event waits to be polled, and the session has not failed. The session can then
    /// be dropped and later [resumed](Session::resume) from the value; its counters are not
    /// kept, so a caller that totals them takes [`Session::stats`] first.
    pub fn freeze(&self) -> Option<Dormant> {
        if self.failed || !self.events.is_empty() {
            return None;
        }
        let tx = self.tx.freeze()?;
        let rx = self.rx.freeze()?;
        Some(Dormant::new(tx, rx, self.config.checksum, self.rtt.srtt()))
    }

    /// The session frozen into `d`, resumed at `now`: its next datagram and message carry the
    /// numbers that follow those it sent before, and it takes the peer's datagrams as if it
    /// had never slept (a copy of one delivered before is a duplicate). The checksum setting
    /// is the one `d` was frozen with, whatever `config` says, since the peer still expects
    /// it. The advertised credit is `d`'s until [`Session::set_credit`]; queues, loss and
    /// reordering history and counters start afresh, the RTT estimate from `d`'s.
    pub fn resume(
        config: Arc<Config>,
        ids: SessionIds,
        d: Dormant,
        now: Instant,
    ) -> Result<Session, ConfigError> {
        let config = if config.checksum == d.checksum() {
            config
        } else {
            Arc::new(Config {
                checksum: d.checksum(),
                ..(*config).clone()
            })
        };
        config.validate()?;
        let mut rtt = RttEstimator::new();
        if let Some(srtt) = d.srtt() {
            rtt.update(srtt);
        }
        let tx = Sender::resume(&config, d.send_point(), ids.seed());
        let rx = Receiver::resume(&config, d.recv_point(), now);
        Ok(Session::with(config, ids, tx, rx, rtt, now))
    }

    /// When the session may be frozen, by [`Config::dormant_after`]: that long after the peer
    /// was last heard from (or the session made), if it is idle as [`Session::freeze`] wants.
    /// Every datagram the session sends answers one from the peer or waits for one, so the
    /// peer's last datagram starts the quiet. `None` when it is not idle or dormancy is off.
    /// Not part of [`Session::poll_timeout`]: only a driver that freezes sessions wants it.
    pub fn dormant_at(&self) -> Option<Instant> {
        let after = self.config.dormant_after?;
        self.freeze().map(|_| self.last_heard + after)
    }

    /// The session's ids.
    pub fn ids(&self) -> SessionIds {
        self.ids
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Queues a message its caller waits on (see `awaited` in [`Session::send_parts`]),
    /// returning its id (ids count up from `initial_seq`). A `Vec<u8>`,
    /// `Bytes` or `&'static [u8]` is kept as it is and sliced into segments without copying;
    /// [`Session::send_slice`] copies a borrowed slice.
    pub fn send(&mut self, now: Instant, data: impl Into<Bytes>) -> Result<MsgId, SendError> {
        self.send_parts(now, Bytes::new(), data.into(), true)
            .map_err(|r| r.error)
    }

    /// Queues the message `head` then `body` without joining them: for a caller that puts a
    /// small header of its own in front of a large buffer it hands over. The segments are cut
    /// from both in place (the first one gathers the end of `head` and the start of `body`);
    /// a message short enough to travel whole is joined, which copies at most
    /// `inline_limit` bytes.
    ///
    /// `awaited`: the caller waits for the acknowledgement (its send completes on it), so the
    /// peer is asked to acknowledge soon (`ack_soon_delay`) rather than after the usual delay.
    pub fn send_parts(
        &mut self,
        now: Instant,
        head: Bytes,
        body: Bytes,
        awaited: bool,
    ) -> Result<MsgId, Refused> {
        let len = head.len() + body.len();
        let error = if self.failed {
            Some(SendError::PeerFailed)
        } else if u32::try_from(len).is_err() {
            Some(SendError::TooLarge)
        } else if !self.tx.has_room(&self.config, len) {
            self.tx.block();
            self.stats.would_block += 1;
            Some(SendError::WouldBlock)
        } else {
            None
        };
        if let Some(error) = error {
            return Err(Refused { error, head, body });
        }
        let (head, body) = if head.is_empty() || len > self.config.effective_inline_limit() {
            (head, body)
        } else {
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(&head);
            v.extend_from_slice(&body);
            (Bytes::new(), Bytes::from(v))
        };
        self.stats.messages_sent += 1;
        self.busy_since.get_or_insert(now);
        Ok(self.tx.push(head, body, awaited))
    }

    /// Queues a copy of `data`; see [`Session::send`].
    pub fn send_slice(&mut self, now: Instant, data: &[u8]) -> Result<MsgId, SendError> {
        self.send(now, Bytes::copy_from_slice(data))
    }

    /// Takes in a datagram from the peer. Segments and in-order messages go to `sink` before
    /// this returns; ACK-driven news (acknowledged sends) goes to the event queue.
    pub fn handle_datagram<S: Sink + ?Sized>(
        &mut self,
        now: Instant,
        datagram: &[u8],
        sink: &mut S,
    ) -> Result<(), DropReason> {
        let mut acked = None;
        let r = self.take::<S, false>(now, datagram, sink, &mut acked);
        if acked.is_some() {
            self.after_input(now);
        }
        r
    }

    /// [`Session::handle_datagram`] for consecutive datagrams of this peer (a receive offload's
    /// run): the ACK fields, which a stream repeats on every datagram, are taken in only when
    /// they change, and the bookkeeping after an ACK is done once. Returns how many were taken.
    pub(crate) fn handle_run<'d, S: Sink + ?Sized>(
        &mut self,
        now: Instant,
        run: impl Iterator<Item = &'d [u8]>,
        sink: &mut S,
    ) -> usize {
        let mut acked = None;
        let taken = run
            .filter(|d| self.take::<S, true>(now, d, sink, &mut acked).is_ok())
            .count();
        if acked.is_some() {
            self.after_input(now);
        }
        taken
    }

    /// One datagram's part of taking input. `acked`: the ACK fields (cumulative point, bitmap,
    /// credit) the sender last took in for this input, which a datagram repeating them need
    /// not go through again: nothing but ACKs changes what the sender has in flight, so the
    /// same ACK taken in twice in a row finds nothing new the second time. Set once an ACK is
    /// taken in; [`Session::after_input`] is owed from then on.
    fn take<S: Sink + ?Sized, const RUN: bool>(
        &mut self,
        now: Instant,
        datagram: &[u8],
        sink: &mut S,
        acked: &mut Option<(Seq, u32, u16)>,
    ) -> Result<(), DropReason> {
        if self.failed {
            self.stats.dropped_after_failure += 1;
            return Err(DropReason::Failed);
        }
        let (repr, payload) = match Repr::parse(datagram) {
            Ok(r) => r,
            Err(e) => {
                if e == HeaderError::Checksum {
                    self.stats.dropped_checksum += 1;
                } else {
                    self.stats.dropped_malformed += 1;
                }
                return Err(e.into());
            }
        };
        if self.config.checksum && !repr.checksum {
            self.stats.dropped_malformed += 1;
            return Err(HeaderError::ChecksumMissing.into());
        }
        if repr.session != self.ids.local_id {
            self.stats.dropped_foreign += 1;
            return Err(DropReason::ForeignSession(repr.session));
        }
        if repr.epoch != self.ids.remote_epoch {
            self.stats.dropped_stale_epoch += 1;
            return Err(DropReason::StaleEpoch(repr.epoch));
        }
        let fields = (repr.ack, repr.sack, repr.credit);
        if !RUN || repr.dsack || *acked != Some(fields) {
            // The peer's report of a duplicate it had acknowledged before: if nothing else
            // acknowledged that datagram first, the ACK was lost.
            let lost_ack_report = repr.dsack && repr.dsack_acked;
            let events = &mut self.events;
            let ack = Ack {
                now,
                ack: repr.ack,
                sack: repr.sack,
                credit: repr.credit,
                lost_ack_report,
            };
            let r = self.tx.on_ack(
                &ack,
                &self.config,
                &mut self.rtt,
                &mut self.stats,
                &mut |m| events.push_back(Event::SendAcked(m)),
            );
            if r.is_err() {
                self.stats.dropped_invalid_ack += 1;
                return Err(DropReason::InvalidAck);
            }
            *acked = Some(fields);
        }
        self.last_heard = now;
        self.stalled = false;
        self.stats.datagrams_received += 1;
        if repr.dsack {
            self.tx.on_dsack(
                repr.seq,
                repr.dsack_acked,
                now,
                &self.config,
                &self.rtt,
                &mut self.stats,
            );
        }
        if repr.ack_req {
            self.rx.request_ack();
        }
        if repr.body == Body::Ack {
            return Ok(());
        }
        let r = self.rx.on_data(
            now,
            repr.seq,
            repr.body,
            payload,
            &self.config,
            &mut self.stats,
            sink,
        );
        if repr.ack_soon {
            self.rx.ack_by(now + self.config.ack_soon_delay);
        }
        r.map_err(|d| match d {
            DataDrop::Duplicate => DropReason::Duplicate,
            DataDrop::OutOfWindow => DropReason::OutOfWindow,
            DataDrop::ReorderFull => DropReason::ReorderFull,
        })
    }

    /// What follows taking in ACKs: a sender blocked for room that now has it is told so; an
    /// idle one is no longer busy, and its idle memory (the events' too) is released
    /// `RELEASE_AFTER` from now.
    fn after_input(&mut self, now: Instant) {
        if self.tx.unblock(&self.config) {
            self.events.push_back(Event::Writable);
        }
        if self.tx.is_idle() {
            self.busy_since = None;
            if self.release_at.is_none() && (self.tx.holds_memory() || self.events.capacity() > 0) {
                self.release_at = Some(now + RELEASE_AFTER);
            }
        }
    }

    /// Writes the next datagram into `buf` (cleared first), or returns `None` when there is
    /// nothing to send now. Copies the payload; [`Session::poll_transmit_gather`] does not.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let mut header = [0u8; MAX_HEADER_LEN];
        let t = self.poll_transmit_gather(now, &mut header)?;
        buf.clear();
        buf.reserve(t.size());
        buf.extend_from_slice(&header[..t.header_len]);
        buf.extend_from_slice(&t.payload);
        buf.extend_from_slice(&t.payload_tail);
        if let Some(crc) = t.trailer {
            buf.extend_from_slice(&crc);
        }
        Some(Transmit {
            size: buf.len(),
            seq: t.seq,
            retransmit: t.retransmit,
        })
    }

    /// Like [`Session::poll_transmit`], but leaves the datagram in pieces: the header in
    /// `header`, the payload as shared bytes, and the trailer.
    pub fn poll_transmit_gather(
        &mut self,
        now: Instant,
        header: &mut [u8; MAX_HEADER_LEN],
    ) -> Option<GatherTransmit> {
        if self.failed {
            return None;
        }
        // A duplicate report rides alone, ahead of any data: it needs the seq field.
        let dsack = self.rx.take_dsack();
        let out = match dsack {
            Some(_) => None,
            None => self
                .tx
                .next_outbound(now, &self.config, &self.rtt, &mut self.stats),
        };
        let o = match (out, dsack) {
            (Some(o), _) => o,
            (None, Some((dup, _))) => Outbound::ack(dup),
            // An ACK consumes no sequence number; it carries the next one for the record.
            (None, None) if self.rx.ack_due(now, &self.config) => Outbound::ack(self.tx.next_seq()),
            (None, None) => return None,
        };
        let Outbound {
            seq,
            payload:
                Payload {
                    body,
                    data: payload,
                    tail: payload_tail,
                },
            retransmit,
            ack_req,
            ack_soon,
        } = o;
        if body == Body::Ack {
            self.stats.acks_sent += 1;
        }
        let repr = Repr {
            session: self.ids.remote_id,
            epoch: self.ids.local_epoch,
            seq,
            ack: self.rx.ack(),
            sack: self.rx.sack(),
            credit: self.rx.credit(),
            ack_req,
            ack_soon,
            checksum: self.config.checksum,
            dsack: dsack.is_some(),
            dsack_acked: dsack.is_some_and(|(_, acked)| acked),
            body,
        };
        let header_len = repr.header_len();
        repr.emit(&mut header[..]);
        let trailer = self
            .config
            .checksum
            .then(|| header::checksum_parts(&header[..header_len], &payload, &payload_tail));
        self.rx.ack_sent(repr.ack, repr.sack, now);
        self.stats.datagrams_sent += 1;
        Some(GatherTransmit {
            header_len,
            payload,
            payload_tail,
            trailer,
            seq: (body != Body::Ack).then_some(seq),
            retransmit,
        })
    }

    /// Something received is not acknowledged yet.
    pub(crate) fn owes_ack(&self) -> bool {
        !self.failed && self.rx.owes_ack()
    }

    /// Sends the ACK owed with the next transmission, without waiting for its batch or delay.
    pub(crate) fn request_ack(&mut self) {
        self.rx.request_ack();
    }

    /// The earliest moment `handle_timeout` has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.failed {
            return None;
        }
        // Called after every datagram in and out: plain comparisons, no iterator chain.
        let t = earliest(self.rx.ack_deadline(), self.tx.timer());
        let t = earliest(t, self.stall_deadline());
        earliest(earliest(t, self.fail_deadline()), self.release_at)
    }

    fn fail_deadline(&self) -> Option<Instant> {
        self.busy_since
            .map(|b| b.max(self.last_heard) + self.config.idle_timeout)
    }

    fn stall_deadline(&self) -> Option<Instant> {
        match (self.config.stall_after, self.busy_since) {
            (Some(after), Some(b)) if !self.stalled => Some(b.max(self.last_heard) + after),
            _ => None,
        }
    }

    /// Runs the timers due at `now`: delayed ACK, retransmission, peer failure.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.failed {
            return;
        }
        if self.fail_deadline().is_some_and(|t| t <= now) {
            self.fail();
            return;
        }
        if self.stall_deadline().is_some_and(|t| t <= now) {
            self.stalled = true;
            self.events.push_back(Event::Stalled);
        }
        if self.release_at.is_some_and(|t| t <= now) {
            self.release_at = None;
            if self.tx.is_idle() && self.events.is_empty() {
                self.tx.release();
                self.events = VecDeque::new();
            }
        }
        self.tx
            .on_timeout(now, &self.config, &self.rtt, &mut self.stats);
    }

    fn fail(&mut self) {
        self.failed = true;
        let (start, len) = self.tx.abandon();
        self.rx.clear();
        self.busy_since = None;
        self.events.push_back(Event::PeerFailed {
            unacked: MsgRange { start, len },
        });
    }

    /// The caller read every datagram that had arrived for this session by `now` (its socket
    /// was empty). A duplicate read later came after every ACK sent before `now`; if one of
    /// those covered it, that ACK was lost, and the duplicate's report says so, which keeps the
    /// peer from taking the resend for the sign of a slow receiver (see
    /// [`crate::header::FLAG_ACKED`]). Without these calls every duplicate is reported as
    /// unacknowledged.
    pub fn input_drained(&mut self, now: Instant) {
        self.rx.input_drained(now);
    }

    /// Next event, if any. Events queue up (one `SendAcked` per message) until polled.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Changes the credit this side advertises (clamped to `1..=recv_window`). An endpoint
    /// shares its receive budget among its peers with this.
    pub fn set_credit(&mut self, credit: u16) {
        self.rx.set_credit(&self.config, credit);
    }

    /// The credit this side advertises.
    pub fn credit(&self) -> u16 {
        self.rx.credit()
    }

    /// When the last valid datagram from the peer arrived (the session's creation, before).
    pub fn last_heard(&self) -> Instant {
        self.last_heard
    }

    /// Whether the session failed.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// Whether nothing is queued or unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.tx.is_idle()
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// RTT estimate and the timeout in force.
    pub fn rtt(&self) -> RttStats {
        RttStats {
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            rto: self.tx.rto(&self.config, &self.rtt),
            reo_wnd: self.tx.reo_wnd(),
            ack_lag: self.tx.ack_lag(),
        }
    }

    /// Bytes this session holds now.
    pub fn memory(&self) -> Memory {
        Memory {
            fixed: core::mem::size_of::<Session>(),
            send_queue: self.tx.queued_bytes(),
            retransmit: self.tx.flight_bytes(),
            reorder: self.rx.held_bytes() + self.rx.slot_bytes(),
            bookkeeping: self.tx.bookkeeping_bytes()
                + self.events.capacity() * core::mem::size_of::<Event>(),
        }
    }
}

//! Progress: reading the socket in batches and feeding the engine, datagrams set aside for
//! lack of receives, engine events turned into completions, and sends that may go again.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use nix::errno::Errno;
use reliability::header::{Kind, Packet};
use reliability::{Endpoint, Event, SendError};

use super::super::cq::WorkQueues;
use super::super::{VerbsError, WcStatus};
use super::hello;
use super::path::{Parked, RdPath};
use super::rx::{self, Gate, RdReceiver, ReceiverSink, RxSink};
use super::table::PeerIx;

/// Datagrams set aside for lack of receives; more such datagrams are refused unacknowledged
/// (the sender keeps them and retransmits). The socket is never left unread: a datagram that
/// completes a message already bound must always get through, or the receives it holds would
/// never come free.
const PARK_MAX: usize = 32;

/// `recvmmsg` batches per poll, so one poll cannot starve the caller.
const RX_ROUNDS: usize = 4;

/// A shorter-lived handle on the receiver, for one call.
fn reborrow<'b>(r: &'b mut Option<&mut dyn RdReceiver>) -> Option<&'b mut dyn RdReceiver> {
    match r {
        Some(r) => Some(&mut **r),
        None => None,
    }
}

impl RdPath {
    /// One round of progress: release held fault datagrams, complete what waited for
    /// receives, read the socket in batches, run due timers, turn engine events into
    /// completions, and send.
    /// `recv`: receiver mode ([`RdReceiver`]); posted receives are then not used.
    pub(crate) fn progress(
        &mut self,
        q: &mut WorkQueues,
        mut recv: Option<&mut dyn RdReceiver>,
    ) -> Result<(), VerbsError> {
        let now = Instant::now();
        if self.sock.faulty() {
            self.sock.release_faults(now);
        }
        if !self.stash.is_empty() {
            self.stash.drain(q, self.qpn, &mut self.stats);
        }
        if !self.parked.is_empty() {
            self.retry_parked(q, now);
        }
        let lone = self.receive(q, now, reborrow(&mut recv))?;
        self.run_timers(q, now);
        if lone {
            // One datagram, probably the message the caller is polling for: hand it over now
            // and turn the engine's news into completions on the next poll. What must leave at
            // once (ACKs, retransmissions) still does.
            self.events_deferred = true;
            self.transmit(now);
            return Ok(());
        }
        self.events_deferred = false;
        // An empty poll (the common case for a busy-polling caller) has nothing to serve.
        if !self.retry.is_empty() || self.tx.len() > 0 || self.endpoint.has_pending() {
            self.service(q, now);
        }
        Ok(())
    }

    /// Runs what is due without traffic: engine timers (and the sessions they froze),
    /// handshake retransmissions, idle peers' retirement.
    pub(crate) fn run_timers(&mut self, q: &mut WorkQueues, now: Instant) {
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
            self.take_dormant(now);
        }
        self.handshake_timers(q, now);
        if !self.idle.is_empty() {
            self.retire_idle(now);
        }
    }

    /// [`RdPath::run_timers`] at the current time, then what a batch's end does.
    pub(crate) fn timers_now(&mut self, q: &mut WorkQueues) {
        let now = Instant::now();
        self.run_timers(q, now);
        self.service(q, now);
    }

    /// Reads the socket in batches. Returns whether it got a lone datagram (and deferred the
    /// engine's events, which it does at most every other poll).
    fn receive(
        &mut self,
        q: &mut WorkQueues,
        now: Instant,
        mut recv: Option<&mut dyn RdReceiver>,
    ) -> Result<bool, VerbsError> {
        let mut rounds = 0;
        while rounds < RX_ROUNDS {
            let mut ring = self.ring.take().expect("ring is home between calls");
            let r = ring.recv(self.sock.socket());
            let n = match r {
                Ok(n) => {
                    self.stats.datagrams_read += n as u64;
                    if self.auth.is_some() {
                        // Before anything reads a field: a forgery costs one check, nothing else.
                        ring.retain(|data, src| self.authentic(data, src))
                    } else {
                        n
                    }
                }
                Err(e) => {
                    self.ring = Some(ring);
                    match e {
                        Errno::EINTR => continue,
                        // ICMP errors concern earlier sends to somebody; the engine resends.
                        Errno::ECONNREFUSED | Errno::EHOSTUNREACH | Errno::ENETUNREACH => {
                            rounds += 1;
                            continue;
                        }
                        Errno::EAGAIN => {
                            self.drained(now);
                            return Ok(false);
                        }
                        e => return Err(e.into()),
                    }
                }
            };
            let mut i = 0;
            while i < n {
                let (data, src) = ring.get(i);
                // Receiver mode takes every message as it comes (nothing waits for receives):
                // a run of one peer's datagrams (a GRO run, say) goes to its session in one call.
                if let (Some(recv), Some(id)) = (recv.as_deref_mut(), Self::run_session(data)) {
                    let end = (i + 1..n)
                        .find(|&j| {
                            let (d, s) = ring.get(j);
                            s != src || Self::run_session(d) != Some(id)
                        })
                        .unwrap_or(n);
                    self.feed_run(now, id, (i..end).map(|j| ring.get(j).0), recv);
                    i = end;
                    continue;
                }
                if let Some((session, seq)) =
                    self.on_datagram(q, now, data, src, reborrow(&mut recv))
                {
                    let len = data.len();
                    self.park(|| ring.take(i), len, src, session, seq);
                }
                i += 1;
            }
            let ring_drained = ring.drained();
            if ring.known_empty() {
                self.drained(now);
            }
            self.ring = Some(ring);
            if n == 1 && rounds == 0 && !self.events_deferred {
                return Ok(true);
            }
            // ACKs leave between batches, not only at the end of a long poll.
            self.service(q, now);
            if ring_drained {
                return Ok(false);
            }
            rounds += 1;
        }
        Ok(false)
    }

    /// Handles `data` as if it had just been read off the socket from `src`, alone in its
    /// batch: the receive path a read datagram takes (handshake, gate, engine, completions;
    /// with `recv`, receiver mode's), then what a batch's end does (ACKs and sends leave).
    /// For tests that forge peers.
    pub(crate) fn inject(
        &mut self,
        q: &mut WorkQueues,
        data: &[u8],
        src: SocketAddr,
        recv: Option<&mut dyn RdReceiver>,
    ) {
        let now = Instant::now();
        self.stats.datagrams_read += 1;
        let Some(len) = self.authentic(data, Some(src)) else {
            return;
        };
        let data = &data[..len];
        match (recv, Self::run_session(data)) {
            (Some(recv), Some(id)) => self.feed_run(now, id, std::iter::once(data), recv),
            (recv, _) => {
                if let Some((session, seq)) = self.on_datagram(q, now, data, Some(src), recv) {
                    self.park(|| data.to_vec(), data.len(), Some(src), session, seq);
                }
            }
        }
        self.drained(now);
        self.service(q, now);
    }

    /// The socket was read to the end (a read found it empty, or a batch read came up short):
    /// whatever is read next came later. The engine tells lost ACKs from late ones by it.
    fn drained(&mut self, now: Instant) {
        self.endpoint.input_drained(now);
    }

    /// Handles one datagram; returns (session, seq) when it must wait for receives.
    fn on_datagram(
        &mut self,
        q: &mut WorkQueues,
        now: Instant,
        data: &[u8],
        src: Option<SocketAddr>,
        recv: Option<&mut dyn RdReceiver>,
    ) -> Option<(u32, u32)> {
        let Some(&first) = data.first() else {
            self.stats.dropped_control += 1;
            return None;
        };
        if hello::is_control(first) {
            self.on_control(q, now, data, src);
            return None;
        }
        if let Some(recv) = recv {
            // Receiver mode: runs go by `feed_run`, so this names no session; the receiver
            // may know it, else the engine counts it.
            if !recv.stray(src, data) {
                self.feed(q, now, data, None, false);
            }
            return None;
        }
        let pkt = Packet::new_checked(data).ok();
        let peer = pkt.as_ref().and_then(|p| self.peers.find_id(p.session()));
        let carries = pkt.as_ref().is_some_and(Self::carries_data);
        if let (Some(pkt), Some(i)) = (&pkt, peer) {
            self.wake_for(i, pkt.epoch(), now);
        }
        if let (Some(pkt), Some(p)) = (pkt, peer.and_then(|i| self.peers.get_mut(i))) {
            if carries
                && p.remote().is_some_and(|r| r.epoch == pkt.epoch())
                && rx::gate(&pkt, &mut p.active().rx, q, &self.stash) == Gate::Park
            {
                return Some((pkt.session(), pkt.seq().0));
            }
        }
        self.feed(q, now, data, peer, carries);
        None
    }

    /// Wakes the peer at `i` for a datagram of its session from the peer's incarnation
    /// `epoch`: the engine answers it from the resumed session (a copy of data delivered before
    /// the sleep gets its ACK). One from another incarnation leaves it asleep; the engine
    /// drops it as it finds no session.
    fn wake_for(&mut self, i: PeerIx, epoch: u32, now: Instant) {
        let fits = self
            .peers
            .get(i)
            .is_some_and(|p| p.dormant().is_some() && p.remote().is_some_and(|r| r.epoch == epoch));
        if fits {
            self.wake(i, now);
        }
    }

    /// Whether a datagram carries message data, which its peer's receive state takes (an ACK,
    /// or a kind the engine refuses, needs none: an idle peer's ACKs allocate nothing).
    fn carries_data(pkt: &Packet<&[u8]>) -> bool {
        matches!(
            pkt.kind(),
            Ok(Kind::Segment | Kind::Single | Kind::Coalesced)
        )
    }

    /// The session a reliability datagram names (`None` for a control datagram or one too
    /// short to name any).
    fn run_session(data: &[u8]) -> Option<u32> {
        if hello::is_control(*data.first()?) {
            return None;
        }
        Endpoint::peek_session_id(data)
    }

    /// Hands datagrams that all name session `id` to the engine at once (receiver mode).
    fn feed_run<'d>(
        &mut self,
        now: Instant,
        id: u32,
        run: impl Iterator<Item = &'d [u8]> + Clone,
        recv: &mut dyn RdReceiver,
    ) {
        let i = self.peers.find_id(id);
        if let (Some(i), Some(epoch)) = (
            i,
            run.clone()
                .find_map(|d| Packet::new_checked(d).ok())
                .map(|p| p.epoch()),
        ) {
            self.wake_for(i, epoch, now);
        }
        let peer = i.and_then(|i| self.peers.get_mut(i)).filter(|p| {
            p.active.is_some()
                || run
                    .clone()
                    .any(|d| Packet::new_checked(d).is_ok_and(|pkt| Self::carries_data(&pkt)))
        });
        // Drops are counted by the engine.
        match peer {
            Some(p) => {
                let src = p.ah.addr;
                let mut sink = ReceiverSink {
                    rx: &mut p.active().rx,
                    recv,
                    src,
                    qpn: self.qpn,
                    stats: &mut self.stats,
                };
                self.endpoint.handle_run(now, id, run, &mut sink);
            }
            None => {
                self.endpoint.handle_run(now, id, run, &mut ());
            }
        }
        if let Some(i) = i {
            self.note_idle(i, now);
        }
    }

    /// Hands a datagram to the engine (posted-receive mode), with the sink of the peer at
    /// `i` (the one its session id names, if any); `carries`: whether it carries data.
    fn feed(
        &mut self,
        q: &mut WorkQueues,
        now: Instant,
        data: &[u8],
        i: Option<PeerIx>,
        carries: bool,
    ) {
        let peer = i
            .and_then(|i| self.peers.get_mut(i))
            .filter(|p| carries || p.active.is_some());
        // Drops are counted by the engine.
        let _ = match peer {
            Some(p) => {
                let src = p.ah.addr;
                let mut sink = RxSink {
                    rx: &mut p.active().rx,
                    q,
                    stash: &mut self.stash,
                    src,
                    qpn: self.qpn,
                    stats: &mut self.stats,
                };
                self.endpoint
                    .handle_datagram(now, data, &mut sink, |_, _| None)
            }
            None => self
                .endpoint
                .handle_datagram(now, data, &mut (), |_, _| None),
        };
        if let Some(i) = i {
            self.note_idle(i, now);
        }
    }

    /// Sets a datagram aside; `take` hands over its buffer.
    fn park(
        &mut self,
        take: impl FnOnce() -> Vec<u8>,
        len: usize,
        src: Option<SocketAddr>,
        session: u32,
        seq: u32,
    ) {
        // A retransmission of a datagram already set aside adds nothing.
        if self
            .parked
            .iter()
            .any(|p| p.session == session && p.seq == seq)
        {
            return;
        }
        if self.parked.len() >= PARK_MAX {
            self.stats.refused += 1;
            return;
        }
        self.stats.parked += 1;
        self.parked.push_back(Parked {
            buf: take(),
            len,
            src,
            session,
            seq,
        });
    }

    fn retry_parked(&mut self, q: &mut WorkQueues, now: Instant) {
        for _ in 0..self.parked.len() {
            let p = self.parked.pop_front().expect("counted");
            match self.on_datagram(q, now, &p.buf[..p.len], p.src, None) {
                Some(_) => self.parked.push_back(p),
                None => {
                    if let Some(ring) = &mut self.ring {
                        ring.give_back(p.buf, PARK_MAX);
                    }
                }
            }
        }
        if self.parked.is_empty() {
            self.parked = VecDeque::new();
        }
    }

    /// Engine events to completions, waiting sends to the engine, datagrams to the kernel.
    fn service(&mut self, q: &mut WorkQueues, now: Instant) {
        self.events(q, now);
        if !self.retry.is_empty() {
            self.retry_waiting(q, now);
        }
        self.transmit(now);
    }

    fn events(&mut self, q: &mut WorkQueues, now: Instant) {
        while let Some((id, ev)) = self.endpoint.poll_event() {
            let Some(i) = self.peers.find_id(id) else {
                continue;
            };
            match ev {
                Event::SendAcked(msg) => {
                    // What is in flight is in the active part.
                    let Some(a) = self.peers.get_mut(i).and_then(|p| p.active.as_mut()) else {
                        continue;
                    };
                    // Acknowledgements come in message order: this is the front.
                    if let Some(k) = a.inflight.iter().position(|f| f.msg == msg) {
                        let f = a.inflight.remove(k).expect("found");
                        q.send_done(f.wr_id, f.len, f.signaled);
                        if let Some(data) = f.pooled {
                            self.pool.give(data);
                        }
                    }
                    if !a.waiting.is_empty() {
                        self.retry.push(i);
                    } else if a.inflight.is_empty() {
                        a.compact();
                        self.note_idle(i, now);
                    }
                }
                Event::Writable => self.retry.push(i),
                Event::PeerFailed { .. } => {
                    self.stats.peer_failures += 1;
                    self.fail_peer(q, i);
                }
                Event::Stalled => self.stalled(i),
            }
        }
    }

    fn retry_waiting(&mut self, q: &mut WorkQueues, now: Instant) {
        let mut list = std::mem::take(&mut self.retry);
        list.dedup();
        for i in list.drain(..) {
            // A peer with sends waiting holds an active part, so is not dormant; were it, its
            // sends would be refused for an unknown session.
            self.wake(i, now);
            let Some(p) = self.peers.get_mut(i) else {
                continue;
            };
            let local_id = p.local_id;
            let (Some(_), Some(a)) = (p.remote(), p.active.as_mut()) else {
                continue;
            };
            while let Some(m) = a.waiting.pop_front() {
                match m.offer(&mut self.endpoint, local_id, now, self.handback.is_some()) {
                    Ok(f) => a.inflight.push_back(f),
                    Err((SendError::WouldBlock | SendError::PeerFailed, m)) => {
                        a.waiting.push_front(m);
                        break;
                    }
                    Err((SendError::TooLarge, m)) => {
                        q.send_failed(m.wr_id, m.len, WcStatus::TransportError);
                    }
                }
            }
            self.note_idle(i, now);
        }
        // Keep the allocation.
        if self.retry.is_empty() {
            self.retry = list;
        }
    }
}

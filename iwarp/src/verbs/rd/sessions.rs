//! The peers of an RD queue pair: their session ids, the handshake that agrees on them, and
//! what becomes of their work when a session ends.

use std::cmp::Reverse;
use std::net::SocketAddr;
use std::time::Instant;

use reliability::{MsgId, SessionIds};

use super::conn::{self};
use super::hello::{Hello, HelloKind};
use super::path::RdPath;
use super::peer::{same_host, HelloTimer, Peer, Remote};
use super::table::PeerIx;
use crate::verbs::cq::WorkQueues;
use crate::verbs::{AddressHandle, VerbsError, WcStatus};
use crate::wire::datagram::MAX_QPN;

impl RdPath {
    /// Whether this end asks for a CRC32c on its session with the peer at `addr`. Not from a
    /// peer on this host unless configured so: their datagrams go from memory to memory
    /// through the kernel's loopback, which checksums neither UDP nor TCP there.
    fn asks_crc(&self, addr: SocketAddr) -> bool {
        self.config.checksum && (self.crc_same_host || !same_host(self.local, addr))
    }

    /// The peer a send to `ah` goes to, created and greeted on first use.
    pub(super) fn peer_for_send(
        &mut self,
        q: &mut WorkQueues,
        ah: AddressHandle,
        now: Instant,
    ) -> PeerIx {
        if let Some(i) = self.peers.find(ah.addr) {
            if self.peers.get(i).is_some_and(|p| p.ah.qpn == ah.qpn) {
                return i;
            }
            // Another queue pair at that address now: the old one's work fails.
            self.fail_peer(q, i);
        }
        let id = self.fresh_id();
        let i = self.insert_peer(ah, id, self.epoch);
        self.start_handshake(i, now);
        i
    }

    fn insert_peer(&mut self, ah: AddressHandle, local_id: u32, local_epoch: u32) -> PeerIx {
        let first = MsgId(self.config.initial_seq);
        self.peers
            .insert(Peer::new(ah, local_id, local_epoch, first))
    }

    fn start_handshake(&mut self, i: PeerIx, now: Instant) {
        let Some(p) = self.peers.get_mut(i) else {
            return;
        };
        let interval = self.config.initial_rto;
        let next = now + interval;
        p.active().hello = Some(HelloTimer {
            started: now,
            next,
            interval,
        });
        self.hellos.push(Reverse((next, i)));
        self.send_hello(i, HelloKind::Hello, (0, 0));
    }

    fn send_hello(&mut self, i: PeerIx, kind: HelloKind, echo: (u32, u32)) {
        let Some(p) = self.peers.get(i) else {
            return;
        };
        let h = Hello {
            kind,
            checksum: self.asks_crc(p.ah.addr),
            dst_qpn: p.ah.qpn,
            src_qpn: self.qpn,
            id: p.local_id,
            epoch: p.local_epoch,
            echo,
        };
        let dst = p.ah.addr;
        self.send_control(dst, &h.emit());
    }

    /// The peer's ids are known: open the engine session and let waiting sends go.
    /// `checksum`: whether the session's datagrams carry a CRC32c, both ways (MPA's rule: on
    /// if either side asks for it).
    fn establish(&mut self, i: PeerIx, remote: Remote, checksum: bool, now: Instant) {
        let Some(p) = self.peers.get_mut(i) else {
            return;
        };
        p.set_remote(Some(remote));
        self.endpoint.open_with(
            SessionIds {
                local_id: p.local_id,
                local_epoch: p.local_epoch,
                remote_id: remote.id,
                remote_epoch: remote.epoch,
            },
            now,
            checksum,
        );
        let addr = p.ah.addr;
        if self.connect_left > 0 && self.peers.via(i).is_none() {
            if let Some(via) = conn::connect(&conn::PROCESS, self.local, addr, self.send_buffer) {
                self.peers.set_via(i, via);
                self.connect_left -= 1;
            }
        }
        // The timer's entry in `hellos` is left to go stale.
        if let Some(a) = self.peers.get_mut(i).and_then(|p| p.active.as_mut()) {
            a.hello = None;
            if !a.waiting.is_empty() {
                self.retry.push(i);
            }
        }
        self.note_idle(i, now);
    }

    /// Resumes the frozen session of the peer at `i`, if it is dormant: whatever needs the
    /// engine session (a send, a datagram for it) calls this first. Nothing goes on the wire:
    /// the peer never knew the session slept.
    pub(super) fn wake(&mut self, i: PeerIx, now: Instant) {
        let Some(p) = self.peers.get_mut(i) else {
            return;
        };
        if let (Some(ids), Some(_)) = (p.ids(), p.dormant()) {
            let d = p.wake().expect("dormant");
            self.endpoint.resume(ids, d, now);
        }
    }

    /// Takes the sessions the engine froze (idle for `dormant_after`) into their peers'
    /// entries, and totals their counters as a closed session's. A peer with something under
    /// way after all gets its session back at once.
    pub(super) fn take_dormant(&mut self, now: Instant) {
        while let Some(s) = self.endpoint.poll_dormant() {
            self.stats.add_session(&s.stats);
            let i = self.peers.find_id(s.ids.local_id);
            // Every engine session belongs to a peer with these ids (closing one removes it).
            let Some(p) = i
                .and_then(|i| self.peers.get_mut(i))
                .filter(|p| p.ids() == Some(s.ids))
            else {
                continue;
            };
            if let Err(d) = p.sleep(s.dormant) {
                self.endpoint.resume(s.ids, d, now);
            }
        }
    }

    /// Ends the engine session with the peer at `i`: its sends fail, taken by the engine
    /// or not (and what they lend is dropped with them), bound receives go back to the head
    /// of the receive queue.
    fn close_session(&mut self, q: &mut WorkQueues, i: PeerIx) {
        if self.peers.take_via(i).is_some() {
            self.connect_left += 1;
        }
        let Some(p) = self.peers.get_mut(i) else {
            return;
        };
        if p.remote().is_some() {
            p.set_remote(None);
            // A dormant session is not in the engine, and its counters were totalled when it
            // froze; `reset_rx` below drops its words.
            if let Some(s) = self.endpoint.remove(p.local_id) {
                self.stats.add_session(s.stats());
            }
        }
        self.tx.forget(p.ah.addr);
        // Those not yet offered fail too: a caller told that one part of its data failed may
        // take back the buffer the other parts lend from. A caller with another way to the
        // peer gets them back instead.
        match &mut self.handback {
            Some(hb) => {
                let before = hb.returned.len();
                p.give_back_sends(q, &mut hb.returned);
                self.stats.sends_handed_back += (hb.returned.len() - before) as u64;
            }
            None => p.fail_sends(q, WcStatus::TransportError),
        }
        if let Some(a) = &mut p.active {
            a.rx.unbind_all(q);
        }
        p.reset_rx(MsgId(self.config.initial_seq));
    }

    /// Forgets the peer at `i`; everything it had outstanding fails with `TransportError`. A
    /// later send starts a new handshake.
    pub(super) fn fail_peer(&mut self, q: &mut WorkQueues, i: PeerIx) {
        self.close_session(q, i);
        // Its entries in `hellos`, `retry` and `idle` go stale; whoever pops one checks.
        self.peers.remove(i);
    }

    /// Gives the peer at `i` a new local id (so datagrams meant for its old session are
    /// refused as foreign).
    fn renew_id(&mut self, i: PeerIx) {
        let id = self.fresh_id();
        self.peers.set_local_id(i, id);
    }

    pub(super) fn on_control(
        &mut self,
        q: &mut WorkQueues,
        now: Instant,
        data: &[u8],
        src: Option<SocketAddr>,
    ) {
        let (Some(h), Some(src)) = (Hello::parse(data), src) else {
            self.stats.dropped_control += 1;
            return;
        };
        if h.dst_qpn != self.qpn || h.id == 0 {
            self.stats.dropped_control += 1;
            return;
        }
        self.stats.control_received += 1;
        let checksum = h.checksum || self.asks_crc(src);
        let remote = Remote {
            id: h.id,
            epoch: h.epoch,
        };
        let found = self.peers.find(src);
        let known = found.and_then(|i| self.peers.get(i).map(|p| (i, p.ah.qpn, p.remote())));
        match h.kind {
            HelloKind::Hello => {
                let i = match known {
                    // Our HELLO-ACK was lost: answer again.
                    Some((i, qpn, Some(r))) if qpn == h.src_qpn && r == remote => i,
                    // Both sides said HELLO at once.
                    Some((i, qpn, None)) if qpn == h.src_qpn => {
                        self.establish(i, remote, checksum, now);
                        i
                    }
                    // The peer restarted, or gave up on the old session: start afresh.
                    Some((i, qpn, Some(_))) if qpn == h.src_qpn => {
                        self.close_session(q, i);
                        self.renew_id(i);
                        self.establish(i, remote, checksum, now);
                        i
                    }
                    other => {
                        if let Some((i, ..)) = other {
                            self.fail_peer(q, i);
                        }
                        let id = self.fresh_id();
                        let i =
                            self.insert_peer(AddressHandle::new(src, h.src_qpn), id, self.epoch);
                        self.establish(i, remote, checksum, now);
                        i
                    }
                };
                self.send_hello(i, HelloKind::Ack, (h.id, h.epoch));
            }
            HelloKind::Ack => {
                let fits = found.and_then(|i| self.peers.get(i)).is_some_and(|p| {
                    p.ah.qpn == h.src_qpn
                        && h.echo == (p.local_id, p.local_epoch)
                        && p.remote().is_none_or(|r| r == remote)
                });
                if !fits {
                    self.stats.dropped_control += 1;
                    return;
                }
                if let Some((i, _, None)) = known {
                    self.establish(i, remote, checksum, now);
                }
            }
        }
    }

    /// Resends due HELLOs with exponential backoff; a peer silent for `idle_timeout` since
    /// the first one fails. Looks only at the timers due.
    pub(super) fn handshake_timers(&mut self, q: &mut WorkQueues, now: Instant) {
        while let Some(&Reverse((due, i))) = self.hellos.peek() {
            if now < due {
                return;
            }
            self.hellos.pop();
            let timer = self
                .peers
                .get_mut(i)
                .and_then(|p| p.active.as_mut())
                .and_then(|a| a.hello.as_mut());
            // Stale: the handshake ended, or the peer is gone (its place maybe reused).
            let Some(t) = timer.filter(|t| t.next == due) else {
                continue;
            };
            let limit = t.started + self.config.idle_timeout;
            if now >= limit {
                self.stats.handshake_failures += 1;
                self.fail_peer(q, i);
                continue;
            }
            t.interval = (t.interval * 2).min(self.config.max_rto);
            t.next = (now + t.interval).min(limit);
            self.hellos.push(Reverse((t.next, i)));
            self.send_hello(i, HelloKind::Hello, (0, 0));
        }
        if self.hellos.is_empty() && self.hellos.capacity() > 64 {
            self.hellos = Default::default();
        }
    }

    /// Uses `ids` with the peer at `ah` from now on, without a handshake (the caller
    /// exchanged them, as MPI does addresses). An existing session with that peer ends.
    pub(crate) fn set_peer(
        &mut self,
        q: &mut WorkQueues,
        ah: AddressHandle,
        ids: SessionIds,
    ) -> Result<(), VerbsError> {
        if ah.qpn > MAX_QPN {
            return Err(VerbsError::InvalidArgument(
                "address handle QPN above 2^30 - 1".into(),
            ));
        }
        if ids.local_id == 0 || ids.remote_id == 0 {
            return Err(VerbsError::InvalidArgument(
                "session id 0 is reserved".into(),
            ));
        }
        let holder = self.peers.find_id(ids.local_id);
        if holder
            .and_then(|i| self.peers.get(i))
            .is_some_and(|p| p.ah.addr != ah.addr)
        {
            return Err(VerbsError::InvalidArgument(
                "local session id already used for another peer".into(),
            ));
        }
        let now = Instant::now();
        let found = self.peers.find(ah.addr);
        let i = match found.and_then(|i| self.peers.get(i).map(|p| (i, p.ah.qpn))) {
            Some((i, qpn)) if qpn == ah.qpn => {
                self.close_session(q, i);
                self.peers.set_local_id(i, ids.local_id);
                if let Some(p) = self.peers.get_mut(i) {
                    p.local_epoch = ids.local_epoch;
                }
                i
            }
            other => {
                if let Some((i, _)) = other {
                    self.fail_peer(q, i);
                }
                self.insert_peer(ah, ids.local_id, ids.local_epoch)
            }
        };
        let remote = Remote {
            id: ids.remote_id,
            epoch: ids.remote_epoch,
        };
        // Without a handshake neither end learns the other's choice, so the same-host
        // exemption, which the two ends may judge differently, cannot apply.
        let checksum = self.config.checksum;
        self.establish(i, remote, checksum, now);
        Ok(())
    }
}

//! The peers of an RD queue pair: their session ids, the handshake that agrees on them, and
//! what becomes of their work when a session ends.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use nix::sys::socket::SockaddrStorage;
use reliability::{MsgId, SessionIds};

use super::conn::{self};
use super::hello::{Hello, HelloKind};
use super::path::RdPath;
use super::peer::{same_host, HelloTimer, Peer, Remote};
use super::rx::PeerRx;
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
    ) -> SocketAddr {
        if let Some(p) = self.peers.get(&ah.addr) {
            if p.ah.qpn == ah.qpn {
                return ah.addr;
            }
            // Another queue pair at that address now: the old one's work fails.
            self.fail_peer(q, ah.addr);
        }
        let id = self.fresh_id();
        self.insert_peer(ah, id, self.epoch);
        self.start_handshake(ah.addr, now);
        ah.addr
    }

    fn insert_peer(&mut self, ah: AddressHandle, local_id: u32, local_epoch: u32) {
        self.by_id.insert(local_id, ah.addr);
        self.peers.insert(
            ah.addr,
            Peer {
                ah,
                dst: SockaddrStorage::from(ah.addr),
                local_id,
                local_epoch,
                remote: None,
                hello: None,
                waiting: VecDeque::new(),
                inflight: VecDeque::new(),
                rx: PeerRx::new(MsgId(self.config.initial_seq)),
                via: None,
            },
        );
    }

    fn start_handshake(&mut self, addr: SocketAddr, now: Instant) {
        let Some(p) = self.peers.get_mut(&addr) else {
            return;
        };
        let interval = self.config.initial_rto;
        p.hello = Some(HelloTimer {
            started: now,
            next: now + interval,
            interval,
        });
        self.handshaking.push(addr);
        self.send_hello(addr, HelloKind::Hello, (0, 0));
    }

    fn send_hello(&mut self, addr: SocketAddr, kind: HelloKind, echo: (u32, u32)) {
        let Some(p) = self.peers.get(&addr) else {
            return;
        };
        let h = Hello {
            kind,
            checksum: self.asks_crc(addr),
            dst_qpn: p.ah.qpn,
            src_qpn: self.qpn,
            id: p.local_id,
            epoch: p.local_epoch,
            echo,
        };
        let dst = p.dst;
        self.send_control(&dst, &h.emit());
    }

    /// The peer's ids are known: open the engine session and let waiting sends go.
    /// `checksum`: whether the session's datagrams carry a CRC32c, both ways (MPA's rule: on
    /// if either side asks for it).
    fn establish(&mut self, addr: SocketAddr, remote: Remote, checksum: bool, now: Instant) {
        let Some(p) = self.peers.get_mut(&addr) else {
            return;
        };
        p.remote = Some(remote);
        p.hello = None;
        self.handshaking.retain(|a| *a != addr);
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
        if p.via.is_none() && self.connect_left > 0 {
            p.via = conn::connect(&conn::PROCESS, self.local, addr, self.send_buffer);
            if p.via.is_some() {
                self.connect_left -= 1;
            }
        }
        if !p.waiting.is_empty() {
            self.retry.push(addr);
        }
    }

    /// Ends the engine session with the peer at `addr`: its sends fail, taken by the engine
    /// or not (and what they lend is dropped with them), bound receives go back to the head
    /// of the receive queue.
    fn close_session(&mut self, q: &mut WorkQueues, addr: SocketAddr) {
        let Some(p) = self.peers.get_mut(&addr) else {
            return;
        };
        if p.via.take().is_some() {
            self.connect_left += 1;
        }
        if p.remote.take().is_some() {
            if let Some(s) = self.endpoint.remove(p.local_id) {
                self.stats.add_session(s.stats());
            }
        }
        self.tx.forget(&p.dst);
        // Those not yet offered fail too: a caller told that one part of its data failed may
        // take back the buffer the other parts lend from.
        p.fail_sends(q, WcStatus::TransportError);
        p.rx.unbind_all(q);
        p.rx = PeerRx::new(MsgId(self.config.initial_seq));
    }

    /// Forgets the peer at `addr`; everything it had outstanding fails with
    /// `TransportError`. A later send starts a new handshake.
    pub(super) fn fail_peer(&mut self, q: &mut WorkQueues, addr: SocketAddr) {
        self.close_session(q, addr);
        if let Some(p) = self.peers.remove(&addr) {
            self.by_id.remove(&p.local_id);
        }
        self.handshaking.retain(|a| *a != addr);
    }

    /// Gives the peer at `addr` a new local id (so datagrams meant for its old session are
    /// refused as foreign).
    fn renew_id(&mut self, addr: SocketAddr) {
        let id = self.fresh_id();
        if let Some(p) = self.peers.get_mut(&addr) {
            self.by_id.remove(&p.local_id);
            p.local_id = id;
            self.by_id.insert(id, addr);
        }
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
        match h.kind {
            HelloKind::Hello => {
                let known = self.peers.get(&src).map(|p| (p.ah.qpn, p.remote));
                match known {
                    // Our HELLO-ACK was lost: answer again.
                    Some((qpn, Some(r))) if qpn == h.src_qpn && r == remote => {}
                    // Both sides said HELLO at once.
                    Some((qpn, None)) if qpn == h.src_qpn => {
                        self.establish(src, remote, checksum, now)
                    }
                    // The peer restarted, or gave up on the old session: start afresh.
                    Some((qpn, Some(_))) if qpn == h.src_qpn => {
                        self.close_session(q, src);
                        self.renew_id(src);
                        self.establish(src, remote, checksum, now);
                    }
                    other => {
                        if other.is_some() {
                            self.fail_peer(q, src);
                        }
                        let id = self.fresh_id();
                        self.insert_peer(AddressHandle::new(src, h.src_qpn), id, self.epoch);
                        self.establish(src, remote, checksum, now);
                    }
                }
                self.send_hello(src, HelloKind::Ack, (h.id, h.epoch));
            }
            HelloKind::Ack => {
                let fits = self.peers.get(&src).is_some_and(|p| {
                    p.ah.qpn == h.src_qpn
                        && h.echo == (p.local_id, p.local_epoch)
                        && p.remote.is_none_or(|r| r == remote)
                });
                if !fits {
                    self.stats.dropped_control += 1;
                    return;
                }
                if self.peers.get(&src).is_some_and(|p| p.remote.is_none()) {
                    self.establish(src, remote, checksum, now);
                }
            }
        }
    }

    /// Resends due HELLOs with exponential backoff; a peer silent for `idle_timeout` since
    /// the first one fails.
    pub(super) fn handshake_timers(&mut self, q: &mut WorkQueues, now: Instant) {
        let mut i = 0;
        while i < self.handshaking.len() {
            let addr = self.handshaking[i];
            let Some(t) = self.peers.get_mut(&addr).and_then(|p| p.hello.as_mut()) else {
                self.handshaking.swap_remove(i);
                continue;
            };
            if now < t.next {
                i += 1;
                continue;
            }
            let limit = t.started + self.config.idle_timeout;
            if now >= limit {
                self.stats.handshake_failures += 1;
                self.fail_peer(q, addr);
                continue;
            }
            t.interval = (t.interval * 2).min(self.config.max_rto);
            t.next = (now + t.interval).min(limit);
            self.send_hello(addr, HelloKind::Hello, (0, 0));
            i += 1;
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
        if ids.local_id == 0 {
            return Err(VerbsError::InvalidArgument(
                "session id 0 is reserved".into(),
            ));
        }
        if self.by_id.get(&ids.local_id).is_some_and(|a| *a != ah.addr) {
            return Err(VerbsError::InvalidArgument(
                "local session id already used for another peer".into(),
            ));
        }
        let now = Instant::now();
        match self.peers.get(&ah.addr).map(|p| p.ah.qpn) {
            Some(qpn) if qpn == ah.qpn => {
                self.close_session(q, ah.addr);
                let p = self.peers.get_mut(&ah.addr).expect("present");
                self.by_id.remove(&p.local_id);
                p.local_id = ids.local_id;
                p.local_epoch = ids.local_epoch;
                self.by_id.insert(ids.local_id, ah.addr);
            }
            other => {
                if other.is_some() {
                    self.fail_peer(q, ah.addr);
                }
                self.insert_peer(ah, ids.local_id, ids.local_epoch);
            }
        }
        let remote = Remote {
            id: ids.remote_id,
            epoch: ids.remote_epoch,
        };
        // Without a handshake neither end learns the other's choice, so the same-host
        // exemption, which the two ends may judge differently, cannot apply.
        let checksum = self.config.checksum;
        self.establish(ah.addr, remote, checksum, now);
        Ok(())
    }
}

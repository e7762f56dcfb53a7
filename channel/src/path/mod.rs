//! The paths under the per-peer layer. Every peer is reached over the endpoint's RD queue
//! pair; the peers the promotion policy (`policies::promote`) picks also get an RC connection
//! (iWARP over MPA over TCP), set up and torn down here without blocking, inside the data
//! path's progress. A peer's messages go over its connection while it is open, over RD
//! otherwise; the per-peer sequence (`peer`) keeps their order whatever path each took.
//!
//! Set-up: the lower endpoint name's connection wins when both sides connect at once
//! (`hello::initiator_wins`); a responder at its cap refuses with a reason, and the requester
//! stays on RD for the policy's back-off. Tear-down: a demoted connection takes no new
//! messages and, once the peer acknowledged what it carried, closes its sending side; the
//! peer, reading that end of stream, sends again over RD what it had not had acknowledged and
//! closes its own, which ends the connection at the demoting end: a close both ends agree on,
//! with no unread bytes to make a kernel reset it. A broken connection sends again at both
//! ends too. A peer reached by several paths at once is the shape multirail striping takes:
//! a peer's connections are kept per peer, and the per-peer sequence does not care how many.

mod acks;
pub mod conn;
mod hello;
pub mod set;
mod setup;
#[cfg(test)]
mod setup_tests;
pub mod stripe;

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{QpConfig, QueuePair, RcQp, RdReceiver, VerbsError, WorkCompletion};
use policies::promote::{Answer, Decision, Mode, Policy, Refusal};

use crate::addr::EpName;
use crate::diag;
use crate::hash::Map;
use crate::peer::{PeerTable, SlotId};
use crate::waiter::{Interest, Waiter, CONNECTIONS};
pub use conn::{Conn, Unacked};
use hello::Reason;
pub use set::{ConnId, PathSet, Rail, RailSet, Route};
use setup::{Known, Pending, Setups, Stage};

/// What the paths did, for the report.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PathStats {
    /// Connections that came up, and that we started.
    pub connected: u64,
    pub initiated: u64,
    /// Requests we refused (cap, mode, a simultaneous connect we won), and refusals of ours.
    pub refused: u64,
    pub refused_by_peer: u64,
    /// Set-ups that failed (unreachable, timed out, garbled).
    pub failed: u64,
    /// Connections we closed after a demotion, that the peer closed in order (an end of
    /// stream: its demotion, or its end), and that broke under us (a reset, an error).
    pub demoted: u64,
    pub demoted_by_peer: u64,
    pub lost: u64,
    /// Messages sent again over RD after their connection went.
    pub resent: u64,
    /// Messages sent over RC.
    pub rc_messages: u64,
    /// Most connections open at once.
    pub open_peak: u64,
    /// Connections closed because the peer acknowledged nothing for the peer timeout; what
    /// they carried failed.
    pub timed_out: u64,
    /// Times a peer was asked again to acknowledge overdue messages.
    pub probes: u64,
}

/// What became of the messages of connections that went, for the data path.
pub struct Gone<R> {
    /// Sent again over RD, in order, per peer: the connection closed or broke.
    pub resend: Vec<(SlotId, VecDeque<Unacked<R>>)>,
    /// Failed: the peer stopped acknowledging.
    pub failed: Vec<R>,
}

impl<R> Default for Gone<R> {
    fn default() -> Self {
        Gone {
            resend: Vec::new(),
            failed: Vec::new(),
        }
    }
}

/// The paths' counters and the promotion policy's, for the report.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Counters {
    /// Connections open when the report was written.
    pub open: usize,
    #[serde(flatten)]
    pub paths: PathStats,
    /// The policy's decisions: promotions asked, connections kept, demotions for idling and
    /// for a hotter peer, connections the peer closed or that broke.
    pub promotions: u64,
    pub demoted_idle: u64,
    pub demoted_for_hotter: u64,
    pub closed_by_peer: u64,
}

/// What the connections' arrivals are lent to: the data path, which also holds the peer table
/// that the set-ups and the policy's decisions look peers up in.
pub trait Receiver: RdReceiver {
    fn peers(&mut self) -> &mut PeerTable;
}

/// The RC side of an endpoint.
pub struct RcPaths<R> {
    policy: Policy,
    me: EpName,
    listener: Option<TcpListener>,
    setups: Setups,
    /// Every connection, found from its peer's slot (`PathSet`) by its id.
    conns: slab::Slab<Conn<R>>,
    /// Peers whose connection to us won over ours: the slot waits for it until then.
    awaiting: Map<SlotId, Instant>,
    wcs: Vec<WorkCompletion>,
    /// The progress thread's epoll set, and whether it watches the connections now.
    waiter: Option<Arc<Waiter>>,
    watching: bool,
    peer_timeout: Duration,
    /// When the listener is next looked at.
    next_accept: Option<Instant>,
    pub stats: PathStats,
}

/// How long a message sent over a connection may wait for its acknowledgement before the
/// peer is asked again. A live peer acknowledges within its progress thread's wake-up.
const PROBE_AFTER: Duration = Duration::from_millis(100);

/// How soon a close whose last bytes the kernel had no room for tries again.
const CLOSE_RETRY: Duration = Duration::from_millis(1);

/// How often progress looks for connections waiting to be accepted.
const ACCEPT_EVERY: Duration = Duration::from_micros(500);

impl<R> RcPaths<R> {
    /// `listener`: where peers connect (`None` in `ud` mode, whose name says TCP port 0).
    /// A peer that acknowledges nothing sent over its connection for `peer_timeout` is
    /// taken for gone.
    pub fn new(
        policy: policies::promote::Config,
        qp: QpConfig,
        me: EpName,
        listener: Option<TcpListener>,
        peer_timeout: Duration,
    ) -> RcPaths<R> {
        RcPaths {
            peer_timeout,
            next_accept: None,
            policy: Policy::new(policy),
            me,
            listener,
            setups: Setups::new(qp, me.udp_addr()),
            conns: slab::Slab::new(),
            awaiting: Map::default(),
            wcs: Vec::new(),
            waiter: None,
            watching: true,
            stats: PathStats::default(),
        }
    }

    /// The progress thread's epoll set: the listener, every connection and every set-up join
    /// it.
    pub fn set_waiter(&mut self, w: Arc<Waiter>) {
        self.waiter = Some(w);
        self.watch_all();
    }

    /// Whether the progress thread wakes for the listener, the connections and the set-ups.
    pub fn set_watching(&mut self, on: bool) {
        if on != self.watching {
            self.watching = on;
            self.watch_all();
        }
    }

    fn watch_all(&self) {
        let Some(w) = &self.waiter else { return };
        for fd in self.sockets_to_watch() {
            let _ = w.watch(fd, CONNECTIONS, Interest::readable_if(self.watching));
        }
        self.watch_setups();
    }

    /// Each set-up's socket, for what its next step waits on: the connect, room for its
    /// bytes, or the peer's answer. Without this, a set-up with a rank that computes would
    /// move one step per tick.
    fn watch_setups(&self) {
        let Some(w) = &self.waiter else { return };
        for p in &self.setups.list {
            let what = match (self.watching, p.rc.wants_write()) {
                (false, _) => Interest::Quiet,
                (true, true) => Interest::Writable,
                (true, false) => Interest::Readable,
            };
            let _ = w.watch(p.rc.socket(), CONNECTIONS, what);
        }
    }

    /// Takes set-up `i` off the list, and its socket out of the epoll set.
    fn take_setup(&mut self, i: usize) -> Pending {
        let p = self.setups.list.swap_remove(i);
        if let Some(w) = &self.waiter {
            let _ = w.forget(p.rc.socket());
        }
        p
    }

    fn sockets_to_watch(&self) -> Vec<BorrowedFd<'_>> {
        let mut v: Vec<BorrowedFd<'_>> = self.listener.iter().map(|l| l.as_fd()).collect();
        v.extend(self.conns.iter().filter_map(|(_, c)| c.qp.socket()));
        v
    }

    /// Adds a connection, to its peer's paths and to the epoll set.
    fn insert(&mut self, peers: &mut PeerTable, c: Conn<R>) {
        if let (Some(w), Some(fd)) = (&self.waiter, c.qp.socket()) {
            let _ = w.watch(fd, CONNECTIONS, Interest::readable_if(self.watching));
        }
        let (slot, rail) = (c.slot, c.rail);
        let id = ConnId(u32::try_from(self.conns.insert(c)).expect("fewer than 2^32 connections"));
        peers.paths_mut(slot).set_conn(rail, Some(id));
    }

    /// Removes a connection, from the epoll set first, and from its peer's paths.
    fn remove(&mut self, peers: &mut PeerTable, id: ConnId) -> Conn<R> {
        let c = self.conns.remove(id.0 as usize);
        if let (Some(w), Some(fd)) = (&self.waiter, c.qp.socket()) {
            let _ = w.forget(fd);
        }
        peers.paths_mut(c.slot).set_conn(c.rail, None);
        c
    }

    /// Slot `slot`'s connection on the first rail.
    fn conn_of(peers: &PeerTable, slot: SlotId) -> Option<ConnId> {
        peers.paths(slot).conn(Rail(0))
    }

    /// Whether peers may get connections at all.
    pub fn enabled(&self) -> bool {
        self.policy.config().mode != Mode::Ud
    }

    pub fn policy_stats(&self) -> policies::promote::Stats {
        self.policy.stats()
    }

    pub fn counters(&self) -> Counters {
        let p = self.policy.stats();
        Counters {
            open: self.conns.len(),
            paths: self.stats,
            promotions: p.promotions,
            demoted_idle: p.demoted_idle,
            demoted_for_hotter: p.demoted_for_hotter,
            closed_by_peer: p.closed_by_peer,
        }
    }

    /// One message to or from slot `slot`'s peer.
    pub fn traffic(&mut self, now: Instant, slot: SlotId, bytes: usize, rendezvous: bool) {
        if self.enabled() {
            self.policy.traffic(now, slot.0, bytes, rendezvous);
        }
    }

    /// The path of the next message to slot `slot`'s peer: the connection, if it has one
    /// open with room, `None` for RD.
    pub fn route(&mut self, peers: &PeerTable, slot: SlotId) -> Option<&mut Conn<R>> {
        // Every message asks: without connections, no look at the slot's paths.
        if self.conns.is_empty() {
            return None;
        }
        let conns = &self.conns;
        match peers
            .paths(slot)
            .route(Rail(0), |c| conns[c.0 as usize].open())?
        {
            Route::Rc(c) => Some(&mut self.conns[c.0 as usize]),
            Route::Rd(_) => None,
        }
    }

    /// Accepts, drives set-ups, acts on the policy's decisions and polls the connections,
    /// lending their arrivals to `rx`. What connections that went carried goes to `gone`.
    pub fn progress(&mut self, now: Instant, rx: &mut dyn Receiver, gone: &mut Gone<R>) {
        let resend = &mut gone.resend;
        self.accept(now);
        self.drive_setups(now, rx.peers(), resend);
        self.decide(now, rx.peers());
        self.watch_setups();
        let mut wcs = std::mem::take(&mut self.wcs);
        let mut broken = Vec::new();
        for (id, c) in self.conns.iter_mut() {
            if !c.poll(rx, &mut wcs) {
                broken.push(ConnId(id as u32));
            }
        }
        self.wcs = wcs;
        let peers = rx.peers();
        for id in broken {
            let c = &self.conns[id.0 as usize];
            let addr = c.name.udp_addr();
            match (c.ended_in_order(), c.closing.is_some()) {
                // The peer's end of stream answered ours: the close both ends agreed on.
                (true, true) => {
                    diag!(Debug, EpData, "RC connection to {addr}: closed");
                    self.stats.demoted += 1;
                }
                (true, false) => {
                    diag!(Info, EpData, "RC connection to {addr}: closed by the peer");
                    self.stats.demoted_by_peer += 1;
                }
                (false, _) => {
                    diag!(Info, EpData, "RC connection to {addr} broke");
                    self.stats.lost += 1;
                }
            }
            self.drop_conn(now, peers, id, resend);
        }
        if let Some(since) = now.checked_sub(self.peer_timeout) {
            let silent: Vec<ConnId> = self
                .conns
                .iter()
                .filter(|(_, c)| c.silent_since(since))
                .map(|(id, _)| ConnId(id as u32))
                .collect();
            for id in silent {
                diag!(
                    Warn,
                    EpData,
                    "{} acknowledged nothing over its RC connection for {:?}: taken for gone",
                    self.conns[id.0 as usize].name.udp_addr(),
                    self.peer_timeout
                );
                self.stats.timed_out += 1;
                let (_, unacked) = self.close(now, peers, id);
                gone.failed.extend(unacked.into_iter().map(|u| u.role));
            }
        }
        // A peer whose connection was to win over ours and never came.
        self.awaiting
            .retain(|&slot, _| !peers.paths(slot).connected());
        let expired: Vec<SlotId> = self
            .awaiting
            .iter()
            .filter(|(_, &t)| now >= t)
            .map(|(&s, _)| s)
            .collect();
        for slot in expired {
            self.awaiting.remove(&slot);
            self.policy.connect_failed(now, slot.0, Refusal::Failed);
        }
    }

    fn drive_setups(
        &mut self,
        now: Instant,
        peers: &mut PeerTable,
        resend: &mut Vec<(SlotId, VecDeque<Unacked<R>>)>,
    ) {
        let mut i = 0;
        while i < self.setups.list.len() {
            let p = &mut self.setups.list[i];
            if p.stage == Stage::Abandoned {
                self.take_setup(i);
                continue;
            }
            match p.rc.progress(now) {
                Ok(None) => {
                    let Some(pd) = p.rc.asked().map(<[u8]>::to_vec) else {
                        i += 1;
                        continue;
                    };
                    let answer = self.answer(now, peers, &pd, resend);
                    diag!(Debug, EpCtrl, "RC request answered: {answer:?}");
                    let p = &mut self.setups.list[i];
                    match answer {
                        Ok(peer) => {
                            p.stage = Stage::Answered(Some(peer));
                            p.rc.accept_with(&self.me.encode());
                        }
                        Err(why) => {
                            p.stage = Stage::Answered(None);
                            self.stats.refused += 1;
                            p.rc.reject_with(why.encode());
                        }
                    }
                    // Progress again at once: the reply goes out now.
                }
                Ok(Some(est)) => {
                    let p = self.take_setup(i);
                    self.established(now, peers, p, est, resend);
                }
                Err(e) => {
                    let p = self.take_setup(i);
                    self.setup_failed(now, p, e);
                }
            }
        }
    }

    /// Our answer to a peer's request, which carried `pd`: the peer, or why not.
    fn answer(
        &mut self,
        now: Instant,
        peers: &mut PeerTable,
        pd: &[u8],
        resend: &mut Vec<(SlotId, VecDeque<Unacked<R>>)>,
    ) -> Result<Known, Reason> {
        let peer = EpName::decode(pd).map_err(|_| Reason::Foreign)?;
        if !self.enabled() {
            return Err(Reason::Mode);
        }
        // The request says who it is from: the one lookup by address for a connection.
        let slot = peers.slot(peer.udp_addr());
        if let Some(id) = Self::conn_of(peers, slot) {
            let c = &self.conns[id.0 as usize];
            if c.name == peer && !c.draining && !c.closed_by_peer() {
                // The same incarnation asks while our connection with it is up: its request
                // crossed ours, which it accepted, giving its own up (it ignores this answer).
                // Taking it would drop the connection both sides use.
                return Err(Reason::Lost);
            }
            // The peer restarted, or closed its end and we have not seen it yet.
            if c.closing.is_some() {
                self.stats.demoted += 1;
            } else if c.closed_by_peer() {
                self.stats.demoted_by_peer += 1;
            } else {
                self.stats.lost += 1;
            }
            self.drop_conn(now, peers, id, resend);
        }
        if self.setups.connecting_to(slot) {
            if hello::initiator_wins(&self.me, &peer) {
                return Err(Reason::Lost);
            }
            self.setups.abandon(slot);
        }
        self.awaiting.remove(&slot);
        match self.policy.request(now, slot.0) {
            Answer::Accept => Ok(Known { slot, name: peer }),
            Answer::Refuse(Refusal::Mode) => Err(Reason::Mode),
            Answer::Refuse(_) => Err(Reason::Cap),
        }
    }

    fn established(
        &mut self,
        now: Instant,
        peers: &mut PeerTable,
        p: Pending,
        est: iwarp::verbs::Established,
        resend: &mut Vec<(SlotId, VecDeque<Unacked<R>>)>,
    ) {
        let Some(Known {
            slot,
            name: expected,
        }) = p.peer()
        else {
            return;
        };
        let addr = expected.udp_addr();
        let cfg = self
            .setups
            .config_for(SocketAddr::new(expected.ip, expected.tcp_port));
        let id = slot.0;
        let initiator = p.initiator();
        if initiator {
            // The responder must be the endpoint we meant, not a new one on its port.
            let told = EpName::decode(&est.peer_private_data);
            if told.ok() != Some(expected) {
                diag!(
                    Info,
                    EpCtrl,
                    "RC connection to {addr} answered by someone else"
                );
                self.stats.failed += 1;
                return self.policy.connect_failed(now, id, Refusal::Failed);
            }
        }
        let qp = RcQp::create(cfg).and_then(|mut qp| {
            qp.finish(p.rc, est)?;
            Ok(qp)
        });
        let qp = match qp {
            Ok(qp) => qp,
            Err(e) => {
                diag!(Info, EpCtrl, "RC connection to {addr} failed: {e}");
                self.stats.failed += 1;
                return self.policy.connect_failed(now, id, Refusal::Failed);
            }
        };
        if let Some(old) = Self::conn_of(peers, slot) {
            diag!(Debug, EpCtrl, "RC connection to {addr} replaced");
            self.drop_conn(now, peers, old, resend);
        }
        if !self.policy.connected(now, id) {
            diag!(Debug, EpCtrl, "RC connection to {addr} up but not kept");
            return; // dropped: the peer sees it close
        }
        diag!(
            Debug,
            EpCtrl,
            "RC connection to {addr} up (initiator {}, local {:?})",
            initiator,
            qp.local_addr()
        );
        self.stats.connected += 1;
        self.insert(peers, Conn::new(qp, expected, slot, Rail(0)));
        self.stats.open_peak = self.stats.open_peak.max(self.conns.len() as u64);
    }

    fn setup_failed(&mut self, now: Instant, p: Pending, e: VerbsError) {
        let Some(Known { slot, name }) = p.peer() else {
            return; // a request we refused, or one that never said who it was from
        };
        let addr = name.udp_addr();
        let id = slot.0;
        let reason = match &e {
            VerbsError::Rejected { private_data } if p.initiator() => Reason::decode(private_data),
            _ => None,
        };
        diag!(
            Debug,
            EpCtrl,
            "RC set-up with {addr} failed: {e} (initiator {})",
            p.initiator()
        );
        match reason {
            Some(Reason::Lost) => {
                // Its connection to us wins: the slot waits for it.
                self.awaiting.insert(slot, now + self.setups.timeout());
            }
            Some(r) => {
                self.stats.refused_by_peer += 1;
                self.policy.connect_failed(now, id, r.refusal());
            }
            None => {
                diag!(Info, EpCtrl, "RC connection with {addr} failed: {e}");
                self.stats.failed += 1;
                self.policy.connect_failed(now, id, Refusal::Failed);
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        let Some(l) = self.listener.as_ref() else {
            return;
        };
        // A system call per progress pass would tax every message; a peer's connect waits
        // in the backlog meanwhile (and the progress thread wakes for it).
        if self.next_accept.is_some_and(|t| now < t) {
            return;
        }
        self.next_accept = Some(now + ACCEPT_EVERY);
        loop {
            match l.accept() {
                Ok((stream, _)) => self.setups.responder(stream, now),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    diag!(Warn, EpCtrl, "accepting an RC connection failed: {e}");
                    break;
                }
            }
        }
    }

    fn decide(&mut self, now: Instant, peers: &PeerTable) {
        if self.policy.poll_timeout().is_some_and(|t| t <= now) {
            self.policy.handle_timeout(now);
        }
        while let Some(d) = self.policy.poll() {
            match d {
                Decision::Promote(id) => {
                    let slot = SlotId(id);
                    let addr = peers.addr(slot);
                    if peers.paths(slot).connected() || self.setups.involves(slot) {
                        // The peer's own connection got there first (and took the slot).
                        continue;
                    }
                    // A peer that listens: its name says where (a `ud` peer's, port 0).
                    match peers.name(slot).filter(|n| n.tcp_port != 0) {
                        Some(name) => {
                            self.stats.initiated += 1;
                            let to = Known { slot, name };
                            if let Err(e) = self.setups.initiator(&self.me, to, now) {
                                diag!(Info, EpCtrl, "cannot connect to {addr}: {e}");
                                self.stats.failed += 1;
                                self.policy.connect_failed(now, id, Refusal::Failed);
                            }
                        }
                        // Only its datagram address is known (it is not in our AV): it may
                        // connect to us.
                        None => self.policy.connect_failed(now, id, Refusal::Failed),
                    }
                }
                Decision::Demote(id, why) => {
                    let addr = peers.addr(SlotId(id));
                    diag!(Debug, EpCtrl, "demoting {addr}: {why:?}");
                    match Self::conn_of(peers, SlotId(id)) {
                        Some(c) => self.conns[c.0 as usize].draining = true,
                        None => self.policy.closed(now, id),
                    }
                }
            }
        }
    }

    /// Removes connection `id`, its unacknowledged messages to be sent again.
    fn drop_conn(
        &mut self,
        now: Instant,
        peers: &mut PeerTable,
        id: ConnId,
        resend: &mut Vec<(SlotId, VecDeque<Unacked<R>>)>,
    ) {
        let (to, unacked) = self.close(now, peers, id);
        self.stats.resent += unacked.len() as u64;
        if !unacked.is_empty() {
            resend.push((to, unacked));
        }
    }

    /// Removes connection `id` and tells the policy; returns what it had not had
    /// acknowledged, in order.
    fn close(
        &mut self,
        now: Instant,
        peers: &mut PeerTable,
        id: ConnId,
    ) -> (SlotId, VecDeque<Unacked<R>>) {
        let mut c = self.remove(peers, id);
        self.policy.closed(now, c.slot.0);
        (c.slot, c.take_unacked())
    }

    /// Whether every message sent over RC was acknowledged.
    pub fn settled(&self) -> bool {
        self.conns.iter().all(|(_, c)| c.is_settled())
    }

    /// When progress must run next: a set-up's deadline, the policy's next check.
    pub fn next_deadline(&self) -> Option<Instant> {
        let setups = self.setups.next_deadline();
        let policy = self.policy.poll_timeout();
        let awaiting = self.awaiting.values().min().copied();
        let probe = self
            .conns
            .iter()
            .filter_map(|(_, c)| c.oldest())
            .min()
            .map(|t| t + PROBE_AFTER);
        // A close waiting for the kernel to take our last bytes tries again shortly; one
        // waiting for the peer's end of stream gives up after the peer timeout.
        let closing = self
            .conns
            .iter()
            .filter_map(|(_, c)| match c.send_closed() {
                true => c.closing.map(|t| t + self.peer_timeout),
                false => c.closing.map(|_| Instant::now() + CLOSE_RETRY),
            })
            .min();
        [setups, policy, awaiting, probe, closing]
            .into_iter()
            .flatten()
            .min()
    }

    /// Heap bytes of the connections and set-ups.
    pub fn memory(&self) -> usize {
        // A slab's entry is the connection or the next free place.
        let entry = std::mem::size_of::<Conn<R>>() + std::mem::size_of::<usize>();
        self.conns.iter().map(|(_, c)| c.memory()).sum::<usize>()
            + self.conns.capacity() * entry
            + crate::hash::map_bytes(&self.awaiting)
            + self.setups.memory()
    }

    /// Heap bytes of the promotion policy: its per-peer traffic scores are per-peer state.
    pub fn policy_memory(&self) -> usize {
        self.policy.memory()
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The sockets: the listener, each connection's, each set-up's.
    pub fn sockets(&self) -> Vec<BorrowedFd<'_>> {
        let mut v = self.sockets_to_watch();
        v.extend(self.setups.sockets());
        v
    }

    /// Breaks every connection (tests: as a reset would); the next progress finds them
    /// broken.
    #[cfg(test)]
    pub fn break_all(&mut self) {
        for (_, c) in self.conns.iter_mut() {
            c.qp.set_error();
        }
    }
}

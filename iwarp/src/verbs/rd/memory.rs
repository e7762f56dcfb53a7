//! What an RD queue pair holds, by concern, for the memory ledger.

use std::cmp::Reverse;
use std::mem::size_of;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

use super::path::{Parked, RdPath};
use super::peer::{Inflight, OutMsg, PeerActive};
use super::table::PeerIx;

/// Bytes an RD queue pair holds in user space, by concern. Posted receive buffers (the
/// caller's) and kernel socket buffers are not included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdMemory {
    /// Peers known (handshaking or established).
    pub peers: usize,
    /// Per-peer state: peer entries and address maps, the engine's session slots and their
    /// bookkeeping queues, connected send sockets' structures.
    pub peer_state: usize,
    /// Sends not yet taken by the engine, the engine's queued bytes, the socket's batch.
    pub send_queue: usize,
    /// Sent, unacknowledged datagrams.
    pub retransmit: usize,
    /// The receive ring and datagrams set aside.
    pub receive_ring: usize,
    /// Staged segmented messages, the engine's out-of-order messages, the stash.
    pub staged: usize,
    /// Large message buffers kept for reuse.
    pub pool: usize,
    /// The engine's ready lists and timers.
    pub engine: usize,
    /// Datagrams the fault layer holds.
    pub faults: usize,
    /// Of `peers`, those holding an active part (work under way, or idle only briefly).
    pub active_peers: usize,
    /// Of `peer_state`, what the queue pair holds itself (its peer table and lists, active
    /// parts, connected sockets), without the engine's sessions. Not summed again in
    /// [`RdMemory::total`].
    pub peer_entries: usize,
}

/// Several queue pairs' bytes as one (an endpoint's rails).
impl std::ops::AddAssign for RdMemory {
    fn add_assign(&mut self, o: RdMemory) {
        self.peers += o.peers;
        self.peer_state += o.peer_state;
        self.send_queue += o.send_queue;
        self.retransmit += o.retransmit;
        self.receive_ring += o.receive_ring;
        self.staged += o.staged;
        self.pool += o.pool;
        self.engine += o.engine;
        self.faults += o.faults;
        self.active_peers += o.active_peers;
        self.peer_entries += o.peer_entries;
    }
}

impl RdMemory {
    pub fn total(&self) -> usize {
        self.peer_state
            + self.send_queue
            + self.retransmit
            + self.receive_ring
            + self.staged
            + self.pool
            + self.engine
            + self.faults
    }
}

impl RdPath {
    pub(crate) fn memory(&self) -> RdMemory {
        let engine = self.endpoint.memory();
        let mut peer_state = self.peers.memory_bytes()
            + self.hellos.capacity() * size_of::<Reverse<(Instant, PeerIx)>>()
            + self.retry.capacity() * size_of::<PeerIx>()
            + self.idle.capacity() * size_of::<(PeerIx, Instant)>();
        let engine_peers = engine.slots + engine.sessions.bookkeeping;
        let mut waiting = 0;
        let mut staged = 0;
        let mut active_peers = 0;
        for p in self.peers.iter() {
            let Some(a) = &p.active else { continue };
            active_peers += 1;
            peer_state += size_of::<PeerActive>()
                + a.waiting.capacity() * size_of::<OutMsg>()
                + a.inflight.capacity() * size_of::<Inflight>()
                + a.rx.bookkeeping_bytes();
            waiting += a
                .waiting
                .iter()
                .map(|m| m.head.len() + m.data.len())
                .sum::<usize>();
            staged += a.rx.staged_bytes();
        }
        RdMemory {
            peers: self.peers.len(),
            peer_state: peer_state + engine_peers,
            active_peers,
            peer_entries: peer_state,
            send_queue: waiting + engine.sessions.send_queue + self.tx.memory_bytes(),
            retransmit: engine.sessions.retransmit,
            receive_ring: self.ring.as_ref().map_or(0, |r| r.memory_bytes())
                + self.parked.iter().map(|p| p.buf.capacity()).sum::<usize>()
                + self.parked.capacity() * size_of::<Parked>(),
            staged: staged + engine.sessions.reorder + self.stash.bytes(),
            pool: self.pool.memory_bytes(),
            engine: engine.tables,
            faults: self.sock.held_bytes(),
        }
    }

    /// Every socket the queue pair holds: the shared one, then each connected send socket.
    pub(crate) fn sockets(&self) -> Vec<BorrowedFd<'_>> {
        std::iter::once(self.sock.socket().as_fd())
            .chain(self.peers.vias().map(|s| s.as_fd()))
            .collect()
    }
}

//! Handing sends back: for a caller with another way to its peers (an endpoint's other
//! rails), the sends of a session that ends (its peer failed or restarted, its handshake gave
//! up, or the caller gave the peer up) are returned whole instead of failing, and a peer silent
//! for [`stall_after`](reliability::Config::stall_after) while sends are outstanding is
//! reported, so the caller can take them elsewhere well before the peer timeout.
//!
//! Nothing here is on unless `stall_after` is set: a queue pair that is its endpoint's only way
//! keeps no copies.

use std::net::SocketAddr;
use std::time::Instant;

use super::path::RdPath;
use super::returned::Returned;
use super::table::PeerIx;
use crate::verbs::cq::WorkQueues;
use crate::verbs::AddressHandle;

impl RdPath {
    /// The engine reported the session of the peer at `i` stalled.
    pub(super) fn stalled(&mut self, i: PeerIx) {
        let (Some(hb), Some(p)) = (&mut self.handback, self.peers.get(i)) else {
            return;
        };
        self.stats.stalls += 1;
        hb.stalled.push(p.ah.addr);
    }

    /// Gives the peer at `addr` up on this queue pair: its session ends and its sends are
    /// handed back (failed, without hand-back on). A later send, or [`RdPath::probe`], starts a
    /// new handshake. Whether the peer was known.
    pub(crate) fn give_up(&mut self, q: &mut WorkQueues, addr: SocketAddr) -> bool {
        let Some(i) = self.peers.find(addr) else {
            return false;
        };
        // A dormant peer has nothing to hand back: closing drops its frozen words.
        self.fail_peer(q, i);
        true
    }

    /// Starts a handshake with `ah`'s queue pair if there is no session or handshake with it:
    /// [`RdPath::is_open`] then tells whether it answered.
    pub(crate) fn probe(&mut self, q: &mut WorkQueues, ah: AddressHandle) {
        let now = Instant::now();
        let i = self.peer_for_send(q, ah, now);
        self.note_idle(i, now);
    }

    /// Whether a session with the peer at `addr` is open (handshake done).
    pub(crate) fn is_open(&self, addr: SocketAddr) -> bool {
        self.peers
            .find(addr)
            .and_then(|i| self.peers.get(i))
            .is_some_and(|p| p.remote().is_some())
    }

    /// Moves the sends handed back since the last call to `out`, oldest of each peer first.
    pub(crate) fn take_returned(&mut self, out: &mut Vec<Returned>) {
        if let Some(hb) = &mut self.handback {
            out.append(&mut hb.returned);
        }
    }

    /// Moves the peers reported stalled since the last call to `out`.
    pub(crate) fn take_stalled(&mut self, out: &mut Vec<SocketAddr>) {
        if let Some(hb) = &mut self.handback {
            out.append(&mut hb.stalled);
        }
    }
}

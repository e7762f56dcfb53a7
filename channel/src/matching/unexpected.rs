//! The unexpected-message queue of one kind.
//!
//! Each queued message is threaded on three lists at once, all in arrival order: every
//! message, its peer's messages, and its exact (peer, tag) bucket. A receive searches the
//! narrowest list that holds every message it could match: the bucket front when it is exact
//! (O(1)), its peer's list when it ignores tag bits, the global list when it takes any peer.
//! The first match on any of these is the oldest, and, the transport having handed messages
//! over in each peer's send order, MPI's non-overtaking rule holds.
//!
//! A message reserved by FI_PEEK|FI_CLAIM leaves the lists but keeps its slot (and its id and
//! memory charge) until the claiming receive takes it.

use super::arena::{Arena, List};
use super::types::{Header, PeerId, Protocol, RecvSpec};
use crate::hash::{shrink, Map};

const ALL: usize = 0;
const PEER: usize = 1;
const EXACT: usize = 2;

#[derive(Debug)]
pub(super) struct Record<U> {
    pub seq: u64,
    pub header: Header,
    pub payload: U,
    pub charged: usize,
    /// On the lists (false once claimed).
    pub queued: bool,
}

/// What a buffered message is charged: its record, plus the whole body for an eager message,
/// which the endpoint buffers in full; a rendezvous body stays with the sender until matched.
pub fn unexpected_charge<U>(header: &Header) -> usize {
    let body = match header.protocol {
        Protocol::Eager => header.len,
        Protocol::Rendezvous { .. } => 0,
    };
    Arena::<Record<U>, 3>::SLOT_BYTES + body
}

#[derive(Debug)]
pub(super) struct UnexpectedQueue<U> {
    arena: Arena<Record<U>, 3>,
    all: List,
    by_peer: Map<PeerId, List>,
    exact: Map<(PeerId, u64), List>,
}

impl<U> Default for UnexpectedQueue<U> {
    fn default() -> Self {
        UnexpectedQueue {
            arena: Arena::default(),
            all: List::default(),
            by_peer: Map::default(),
            exact: Map::default(),
        }
    }
}

impl<U> UnexpectedQueue<U> {
    /// Bytes of the queue's structures beyond what the account charges per message: the
    /// arena's unused slots and the list maps.
    pub(super) fn memory_bytes(&self) -> usize {
        let used = self.arena.len() * Arena::<Record<U>, 3>::SLOT_BYTES;
        self.arena.capacity_bytes().saturating_sub(used)
            + crate::hash::map_bytes(&self.by_peer)
            + crate::hash::map_bytes(&self.exact)
    }

    /// Messages on the lists (claimed ones excluded).
    pub(super) fn queued(&self) -> usize {
        self.all.len()
    }

    pub(super) fn lists(&self) -> usize {
        self.exact.len() + self.by_peer.len()
    }

    pub(super) fn push(&mut self, record: Record<U>) -> u32 {
        let h = record.header;
        let key = self.arena.insert(record);
        self.arena.push_back(&mut self.all, ALL, key);
        let peer = self.by_peer.entry(h.peer).or_default();
        self.arena.push_back(peer, PEER, key);
        let bucket = self.exact.entry((h.peer, h.tag)).or_default();
        self.arena.push_back(bucket, EXACT, key);
        key
    }

    /// The oldest queued message `spec` matches.
    pub(super) fn find(&self, spec: &RecvSpec) -> Option<u32> {
        if spec.is_exact() {
            return self.exact.get(&(spec.peer, spec.tag))?.first();
        }
        let (list, l) = if spec.peer.is_any() {
            (&self.all, ALL)
        } else {
            (self.by_peer.get(&spec.peer)?, PEER)
        };
        self.arena
            .iter_list(list, l)
            .find(|(_, r)| spec.matches(&r.header))
            .map(|(k, _)| k)
    }

    pub(super) fn get(&self, key: u32) -> Option<&Record<U>> {
        self.arena.get(key)
    }

    pub(super) fn get_mut(&mut self, key: u32) -> Option<&mut Record<U>> {
        self.arena.get_mut(key)
    }

    /// Takes a queued message off the lists, keeping its slot: FI_PEEK|FI_CLAIM.
    pub(super) fn detach(&mut self, key: u32) {
        let r = self.arena.at_mut(key);
        debug_assert!(r.queued, "detaching a claimed message");
        r.queued = false;
        let h = r.header;
        self.arena.unlink(&mut self.all, ALL, key);
        let peer = self
            .by_peer
            .get_mut(&h.peer)
            .expect("message without its peer list");
        self.arena.unlink(peer, PEER, key);
        if peer.is_empty() {
            self.by_peer.remove(&h.peer);
            shrink(&mut self.by_peer);
        }
        let k = (h.peer, h.tag);
        let bucket = self.exact.get_mut(&k).expect("message without its bucket");
        self.arena.unlink(bucket, EXACT, key);
        if bucket.is_empty() {
            self.exact.remove(&k);
            shrink(&mut self.exact);
        }
    }

    /// Moves every queued message of peer `from` to peer `to`, keeping their order (and
    /// their places in arrival order): a sender known by a stand-in id until the AV named it.
    /// `to` must hold no queued message yet, or the moved ones, which are older, would queue
    /// behind its own; if it does, nothing moves.
    pub(super) fn relabel(&mut self, from: PeerId, to: PeerId) {
        if self.by_peer.contains_key(&to) {
            // Cannot happen (AV handles are fresh when they first name a sender); were it to,
            // the messages stay matchable from any peer rather than overtake `to`'s.
            debug_assert!(false, "relabel onto a peer with messages");
            return;
        }
        let Some(list) = self.by_peer.remove(&from) else {
            return;
        };
        // The peer's list and its exact buckets hold exactly its messages, in order: they
        // change keys, not links.
        let keys: Vec<u32> = self.arena.iter_list(&list, PEER).map(|(k, _)| k).collect();
        for key in keys {
            let h = &mut self.arena.at_mut(key).header;
            h.peer = to;
            if let Some(bucket) = self.exact.remove(&(from, h.tag)) {
                self.exact.insert((to, h.tag), bucket);
            }
        }
        self.by_peer.insert(to, list);
    }

    /// Removes a message, queued or claimed.
    pub(super) fn remove(&mut self, key: u32) -> Record<U> {
        if self.arena.at(key).queued {
            self.detach(key);
        }
        self.arena.remove(key)
    }
}

//! The posted-receive queue of one kind.
//!
//! Each receive goes on exactly one list: the exact (peer, tag) bucket when it names a peer and
//! ignores no tag bit, its peer's wildcard list when it names a peer but ignores tag bits
//! (MPI_ANY_TAG), or the any-peer list. Every list is in posting order, so the oldest receive
//! matching a message is the one with the lowest posting sequence among the three list
//! fronts that match — the bucket front always matches, the scans stop at the first match
//! or once they pass the best sequence found so far.

use super::arena::{Arena, List};
use super::multi::MultiBuf;
use super::types::{Context, Delivery, Header, PeerId, RecvSpec};
use crate::hash::{shrink, Map};

const LINK: usize = 0;

#[derive(Debug)]
pub(super) struct Posted<R> {
    pub seq: u64,
    pub spec: RecvSpec,
    pub recv: R,
    pub multi: Option<MultiBuf>,
}

#[derive(Debug)]
pub(super) struct PostedQueue<R> {
    arena: Arena<Posted<R>, 1>,
    exact: Map<(PeerId, u64), List>,
    by_peer: Map<PeerId, List>,
    any: List,
}

impl<R> Default for PostedQueue<R> {
    fn default() -> Self {
        PostedQueue {
            arena: Arena::default(),
            exact: Map::default(),
            by_peer: Map::default(),
            any: List::default(),
        }
    }
}

impl<R> PostedQueue<R> {
    pub(super) fn len(&self) -> usize {
        self.arena.len()
    }

    /// Bytes of the queue's structures: the arena (receives live in it) and the bucket maps.
    pub(super) fn memory_bytes(&self) -> usize {
        self.arena.capacity_bytes()
            + crate::hash::map_bytes(&self.exact)
            + crate::hash::map_bytes(&self.by_peer)
    }

    pub(super) fn lists(&self) -> usize {
        self.exact.len() + self.by_peer.len()
    }

    pub(super) fn push(&mut self, entry: Posted<R>) {
        let spec = entry.spec;
        let key = self.arena.insert(entry);
        let list = if spec.is_exact() {
            self.exact.entry((spec.peer, spec.tag)).or_default()
        } else if !spec.peer.is_any() {
            self.by_peer.entry(spec.peer).or_default()
        } else {
            &mut self.any
        };
        self.arena.push_back(list, LINK, key);
    }

    /// The oldest receive that matches `h`.
    pub(super) fn find(&self, h: &Header) -> Option<u32> {
        let mut best = self
            .exact
            .get(&(h.peer, h.tag))
            .and_then(List::first)
            .map(|k| (self.arena.at(k).seq, k));
        if let Some(list) = self.by_peer.get(&h.peer) {
            best = self.scan(list, h, best);
        }
        self.scan(&self.any, h, best).map(|(_, k)| k)
    }

    fn scan(&self, list: &List, h: &Header, best: Option<(u64, u32)>) -> Option<(u64, u32)> {
        for (key, e) in self.arena.iter_list(list, LINK) {
            if best.is_some_and(|(seq, _)| e.seq > seq) {
                break;
            }
            if e.spec.matches(h) {
                return Some((e.seq, key));
            }
        }
        best
    }

    pub(super) fn remove(&mut self, key: u32) -> Posted<R> {
        let spec = self.arena.at(key).spec;
        if spec.is_exact() {
            let k = (spec.peer, spec.tag);
            let list = self
                .exact
                .get_mut(&k)
                .expect("exact receive without its bucket");
            self.arena.unlink(list, LINK, key);
            if list.is_empty() {
                self.exact.remove(&k);
                shrink(&mut self.exact);
            }
        } else if !spec.peer.is_any() {
            let list = self
                .by_peer
                .get_mut(&spec.peer)
                .expect("receive without its peer list");
            self.arena.unlink(list, LINK, key);
            if list.is_empty() {
                self.by_peer.remove(&spec.peer);
                shrink(&mut self.by_peer);
            }
        } else {
            self.arena.unlink(&mut self.any, LINK, key);
        }
        self.arena.remove(key)
    }

    /// The oldest receive posted with `context`, and its sequence. Cancellation is rare, so a
    /// scan beats keeping a context index on every post.
    pub(super) fn find_context(&self, context: Context) -> Option<(u64, u32)> {
        self.arena
            .iter()
            .filter(|(_, e)| e.spec.context == context)
            .map(|(k, e)| (e.seq, k))
            .min()
    }
}

impl<R: Clone> PostedQueue<R> {
    /// Hands the receive at `key` the message `header`. A multi-receive buffer stays posted,
    /// at its original place in the order, until its free space runs low.
    pub(super) fn deliver(&mut self, key: u32, header: Header) -> Delivery<R> {
        let e = self.arena.at_mut(key);
        let Some(buf) = &mut e.multi else {
            let e = self.remove(key);
            return Delivery::whole(e.recv, &e.spec, header);
        };
        let piece = buf.place(e.spec.capacity, header.len);
        if piece.released {
            let e = self.remove(key);
            Delivery::piece(e.recv, &e.spec, header, piece)
        } else {
            Delivery::piece(e.recv.clone(), &e.spec, header, piece)
        }
    }
}

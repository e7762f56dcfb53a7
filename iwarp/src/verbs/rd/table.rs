//! The table of an RD queue pair's peers: entries side by side in a slab, found by address and
//! by local session id through hash indexes that hold only a slab index each.
//!
//! A map keyed by address would store the 32-byte `SocketAddr` once more per entry, and one by
//! session id the address again; at a million peers the keys alone would cost more than the
//! entries. Here an index entry is a `u32` and its control byte; the keys are read from the
//! entry itself when a lookup compares or a resize rehashes.

use std::hash::BuildHasher;
use std::mem::size_of;
use std::net::SocketAddr;
use std::sync::Arc;

use hashbrown::{HashMap, HashTable};

use super::conn::PeerSocket;
use super::peer::Peer;

/// A peer's place in the table, stable while it is known. A freed place is reused, so an index
/// kept across calls (a timer, a retry list) may name a later peer: such lists are hints, and
/// whoever pops one checks that what it finds is still due.
pub(super) type PeerIx = u32;

#[derive(Default)]
pub(super) struct PeerTable {
    slots: Vec<Option<Peer>>,
    /// Places freed, reused before the slab grows.
    free: Vec<PeerIx>,
    by_addr: HashTable<PeerIx>,
    by_id: HashTable<PeerIx>,
    /// The sockets connected to a few peers, that their datagrams leave from
    /// ([`super::conn`]): beside the entries, since most peers have none and a field would
    /// cost every entry a pointer. Kept while the peer is idle: dropping one would cost a
    /// `socket` and a `connect` at the next burst.
    vias: HashMap<PeerIx, Arc<PeerSocket>, foldhash::fast::RandomState>,
    /// Seeded per process (foldhash: cheap, and keys an attacker picks, peer addresses, still
    /// cannot be aimed at one bucket).
    hasher: foldhash::fast::RandomState,
    len: usize,
}

/// Bytes of a hash table of `capacity` entries of `T`: each bucket holds an entry and a control
/// byte, and a group's width of control bytes more mirror the first ones (hashbrown's layout).
fn table_bytes<T>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    // hashbrown fills small tables to all but one bucket, others to 7/8.
    let buckets = if capacity < 8 {
        capacity + 1
    } else {
        capacity / 7 * 8
    };
    buckets * (size_of::<T>() + 1) + 16
}

impl PeerTable {
    fn slot(slots: &[Option<Peer>], i: PeerIx) -> Option<&Peer> {
        slots.get(i as usize)?.as_ref()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn get(&self, i: PeerIx) -> Option<&Peer> {
        Self::slot(&self.slots, i)
    }

    pub(super) fn get_mut(&mut self, i: PeerIx) -> Option<&mut Peer> {
        self.slots.get_mut(i as usize)?.as_mut()
    }

    /// The peer at `addr`.
    pub(super) fn find(&self, addr: SocketAddr) -> Option<PeerIx> {
        let h = self.hasher.hash_one(addr);
        let slots = &self.slots;
        self.by_addr
            .find(h, |&i| {
                Self::slot(slots, i).is_some_and(|p| p.ah.addr == addr)
            })
            .copied()
    }

    /// The peer whose local session id is `id`.
    pub(super) fn find_id(&self, id: u32) -> Option<PeerIx> {
        let h = self.hasher.hash_one(id);
        let slots = &self.slots;
        self.by_id
            .find(h, |&i| {
                Self::slot(slots, i).is_some_and(|p| p.local_id == id)
            })
            .copied()
    }

    fn index_id(&mut self, i: PeerIx, id: u32) {
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.by_id.insert_unique(hasher.hash_one(id), i, |&j| {
            Self::slot(slots, j).map_or(0, |p| hasher.hash_one(p.local_id))
        });
    }

    fn unindex_id(&mut self, i: PeerIx, id: u32) {
        if let Ok(e) = self.by_id.find_entry(self.hasher.hash_one(id), |&j| j == i) {
            e.remove();
        }
    }

    /// Adds a peer whose address and local id are not in the table yet.
    pub(super) fn insert(&mut self, peer: Peer) -> PeerIx {
        debug_assert!(self.find(peer.ah.addr).is_none() && self.find_id(peer.local_id).is_none());
        let (addr, id) = (peer.ah.addr, peer.local_id);
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(peer);
                i
            }
            None => {
                self.slots.push(Some(peer));
                PeerIx::try_from(self.slots.len() - 1).expect("fewer than 2^32 peers")
            }
        };
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.by_addr.insert_unique(hasher.hash_one(addr), i, |&j| {
            Self::slot(slots, j).map_or(0, |p| hasher.hash_one(p.ah.addr))
        });
        self.index_id(i, id);
        self.len += 1;
        i
    }

    /// The socket connected to the peer at `i`, if it has one.
    pub(super) fn via(&self, i: PeerIx) -> Option<&Arc<PeerSocket>> {
        if self.vias.is_empty() {
            return None;
        }
        self.vias.get(&i)
    }

    /// Gives the peer at `i` a connected socket.
    pub(super) fn set_via(&mut self, i: PeerIx, via: Arc<PeerSocket>) {
        if self.get(i).is_some() {
            self.vias.insert(i, via);
        }
    }

    /// Takes the peer's connected socket away.
    pub(super) fn take_via(&mut self, i: PeerIx) -> Option<Arc<PeerSocket>> {
        self.vias.remove(&i)
    }

    /// Every connected socket.
    pub(super) fn vias(&self) -> impl Iterator<Item = &Arc<PeerSocket>> {
        self.vias.values()
    }

    /// Removes the peer at `i` (and its connected socket, if the caller left it).
    pub(super) fn remove(&mut self, i: PeerIx) -> Option<Peer> {
        let p = self.slots.get_mut(i as usize)?.take()?;
        self.vias.remove(&i);
        if let Ok(e) = self
            .by_addr
            .find_entry(self.hasher.hash_one(p.ah.addr), |&j| j == i)
        {
            e.remove();
        }
        self.unindex_id(i, p.local_id);
        self.len -= 1;
        if self.len == 0 {
            // Nothing left to keep places for.
            *self = PeerTable {
                hasher: self.hasher.clone(),
                ..PeerTable::default()
            };
        } else {
            self.free.push(i);
        }
        Some(p)
    }

    /// Gives the peer at `i` the local session id `id` (not in use by another peer).
    pub(super) fn set_local_id(&mut self, i: PeerIx, id: u32) {
        let Some(old) = self.get(i).map(|p| p.local_id) else {
            return;
        };
        self.unindex_id(i, old);
        if let Some(p) = self.get_mut(i) {
            p.local_id = id;
        }
        self.index_id(i, id);
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Peer> {
        self.slots.iter().flatten()
    }

    /// Empties the table, handing over every peer.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = Peer> {
        let slots = std::mem::take(&mut self.slots);
        *self = PeerTable {
            hasher: self.hasher.clone(),
            ..PeerTable::default()
        };
        slots.into_iter().flatten()
    }

    /// Bytes of the slab, its free list, both indexes and the connected sockets' map (the
    /// sockets' own allocations: an `Arc`'s, the socket and two counts).
    pub(super) fn memory_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Option<Peer>>()
            + self.free.capacity() * size_of::<PeerIx>()
            + table_bytes::<PeerIx>(self.by_addr.capacity())
            + table_bytes::<PeerIx>(self.by_id.capacity())
            + table_bytes::<(PeerIx, Arc<PeerSocket>)>(self.vias.capacity())
            + self.vias.len() * (size_of::<PeerSocket>() + 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::AddressHandle;
    use reliability::MsgId;

    fn peer(n: u32) -> Peer {
        let addr = SocketAddr::from(([10, (n >> 16) as u8, (n >> 8) as u8, n as u8], 7000));
        Peer::new(AddressHandle::new(addr, 1), n + 1, 9, MsgId(0))
    }

    #[test]
    fn peers_are_found_by_address_and_id_and_places_are_reused() {
        let mut t = PeerTable::default();
        let ix: Vec<_> = (0..1000).map(|n| t.insert(peer(n))).collect();
        for n in 0..1000 {
            let p = peer(n);
            assert_eq!(t.find(p.ah.addr), Some(ix[n as usize]));
            assert_eq!(t.find_id(p.local_id), Some(ix[n as usize]));
        }
        let gone = t.remove(ix[10]).unwrap();
        assert_eq!(
            (t.find(gone.ah.addr), t.find_id(gone.local_id)),
            (None, None)
        );
        assert_eq!(t.insert(peer(5000)), ix[10], "a freed place is reused");
        t.set_local_id(ix[11], 77_777);
        assert_eq!(t.find_id(12), None);
        assert_eq!(t.find_id(77_777), Some(ix[11]));
        assert_eq!(t.len(), 1000);
        assert_eq!(t.drain().count(), 1000);
        assert_eq!((t.len(), t.memory_bytes()), (0, 0));
    }

    /// The entry every peer keeps, and what the table adds to it, at a million peers. The
    /// entry holds the engine's dormant session words (24 bytes) too: an idle peer's whole
    /// session, in the budget of 256 bytes it may cost over every layer.
    #[test]
    fn an_idle_peer_is_small() {
        assert!(size_of::<Peer>() <= 88, "{}", size_of::<Peer>());
        // What a peer with work adds, boxed (its queues' room apart).
        let active = size_of::<super::super::peer::PeerActive>();
        assert!(active <= 256, "{active}");
        println!(
            "peer entry {} bytes, active part {active}",
            size_of::<Peer>()
        );
        assert_eq!(size_of::<Option<Peer>>(), size_of::<Peer>());
        let mut t = PeerTable::default();
        let n = 1 << 20;
        for k in 0..n {
            t.insert(peer(k));
        }
        let per_peer = t.memory_bytes() / n as usize;
        assert!(per_peer <= 110, "{per_peer} bytes per peer");
    }
}

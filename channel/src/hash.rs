//! The hasher behind every hot map of the provider: matching buckets, the data path's
//! operations in flight, the address vector's reverse map.
//!
//! hashbrown is built without its default hasher (as in `reliability`), so the lock file stays
//! as it is and bucket placement is the same on every run; std's SipHash costs more than the
//! rest of a small message's handling. Keys are peer indices, (peer, tag) pairs, operation ids
//! and socket addresses; MPI libraries put the communicator in the tag's high bits, so the
//! finish step must spread high bits into the low ones that pick a bucket.

use std::hash::{BuildHasherDefault, Hash, Hasher};

use hashbrown::{HashMap, HashTable};

/// A map keyed by peers, (peer, tag) pairs, ids or addresses.
pub(crate) type Map<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// Empty lists are removed as they empty; this gives the table's memory back too once most of
/// it is unused, at amortised O(1) cost, so memory follows what is queued.
pub(crate) fn shrink<K: Eq + Hash, V>(map: &mut Map<K, V>) {
    if map.capacity() > 64 && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// Bytes a map's table takes from the heap, for the memory ledger.
pub(crate) fn map_bytes<K: Eq + Hash, V>(map: &Map<K, V>) -> usize {
    map.allocation_size()
}

/// An index over entries kept in a dense `Vec`: the table holds only each entry's position
/// (4 bytes and a control byte), and finds keys through the entries themselves (`key_of`),
/// so a table of a million peers costs a few bytes each instead of a copy of every key.
#[derive(Debug, Default)]
pub(crate) struct Index {
    table: HashTable<u32>,
}

impl Index {
    fn hash<K: Hash>(key: &K) -> u64 {
        use std::hash::BuildHasher;
        BuildHasherDefault::<KeyHasher>::default().hash_one(key)
    }

    /// The position of the entry whose key is `key`.
    pub(crate) fn find<K: Hash + Eq>(&self, key: &K, key_of: impl Fn(u32) -> K) -> Option<u32> {
        self.table
            .find(Self::hash(key), |&at| key_of(at) == *key)
            .copied()
    }

    /// Points `key` at position `at`, returning the position it pointed at before.
    pub(crate) fn insert<K: Hash + Eq>(
        &mut self,
        key: &K,
        at: u32,
        key_of: impl Fn(u32) -> K,
    ) -> Option<u32> {
        let h = Self::hash(key);
        match self.table.find_mut(h, |&p| key_of(p) == *key) {
            Some(p) => Some(std::mem::replace(p, at)),
            None => {
                self.table.insert_unique(h, at, |&p| Self::hash(&key_of(p)));
                None
            }
        }
    }

    /// Forgets `key` if it points at position `at`.
    pub(crate) fn remove<K: Hash + Eq>(&mut self, key: &K, at: u32, key_of: impl Fn(u32) -> K) {
        if let Ok(e) = self
            .table
            .find_entry(Self::hash(key), |&p| p == at && key_of(p) == *key)
        {
            e.remove();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Heap bytes of the table.
    pub(crate) fn bytes(&self) -> usize {
        self.table.allocation_size()
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyHasher(u64);

impl KeyHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        // MurmurHash3's 64-bit finalizer.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.mix(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    /// An index finds every key through its entries, follows a re-pointed key, and forgets
    /// a key only for the position it names.
    #[test]
    fn an_index_finds_keys_through_the_entries() {
        let keys: Vec<u64> = (0..1000).map(|i| i * 7919).collect();
        let mut ix = Index::default();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(ix.insert(k, i as u32, |p| keys[p as usize]), None);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(ix.find(k, |p| keys[p as usize]), Some(i as u32));
        }
        assert_eq!(ix.find(&1, |p| keys[p as usize]), None);
        // Position 1000 takes key 0's place.
        let mut more = keys.clone();
        more.push(0);
        assert_eq!(ix.insert(&0, 1000, |p| more[p as usize]), Some(0));
        ix.remove(&0, 0, |p| more[p as usize]);
        assert_eq!(ix.find(&0, |p| more[p as usize]), Some(1000));
        ix.remove(&0, 1000, |p| more[p as usize]);
        assert_eq!(ix.find(&0, |p| more[p as usize]), None);
        assert_eq!(ix.len(), 999);
        assert!(ix.bytes() >= 999 * 5);
    }

    #[test]
    fn high_tag_bits_reach_the_low_hash_bits() {
        let b = BuildHasherDefault::<KeyHasher>::default();
        let mut low = std::collections::HashSet::new();
        for ctx in 0u64..256 {
            low.insert(b.hash_one((7u32, ctx << 40)) & 0xff);
        }
        // 256 keys that differ only above bit 40 must not collapse into a few buckets.
        assert!(low.len() > 128, "only {} distinct low bytes", low.len());
    }
}

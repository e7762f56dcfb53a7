//! The hasher behind every hot map of the provider: matching buckets, the data path's
//! operations in flight, the address vector's reverse map.
//!
//! hashbrown is built without its default hasher (as in `reliability`), so the lock file stays
//! as it is and bucket placement is the same on every run; std's SipHash costs more than the
//! rest of a small message's handling. Keys are peer indices, (peer, tag) pairs, operation ids
//! and socket addresses; MPI libraries put the communicator in the tag's high bits, so the
//! finish step must spread high bits into the low ones that pick a bucket.

use std::hash::{BuildHasherDefault, Hash, Hasher};

use hashbrown::HashMap;

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

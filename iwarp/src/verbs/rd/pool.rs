//! Message buffers kept for reuse. An RD send copies the caller's bytes (they must outlive the
//! acknowledgement); a large copy into fresh memory pays a page fault and a page clearing per
//! 4 KiB, which costs more than the copy itself. Buffers of acknowledged messages come back
//! here when nobody else holds them.

use bytes::Bytes;

/// Smaller buffers are not worth keeping: the allocator serves them from warm memory.
const MIN_POOLED: usize = 64 << 10;
/// Most bytes kept.
const POOL_BYTES: usize = 32 << 20;

/// Whether a buffer of `len` bytes would be kept.
pub(crate) fn worth_pooling(len: usize) -> bool {
    len >= MIN_POOLED
}

#[derive(Default)]
pub(crate) struct BufPool {
    spare: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufPool {
    /// An empty buffer with room for `len` bytes: the smallest spare that fits, or a new one.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        if len >= MIN_POOLED {
            let best = (0..self.spare.len())
                .filter(|&i| self.spare[i].capacity() >= len)
                .min_by_key(|&i| self.spare[i].capacity());
            if let Some(i) = best {
                let mut v = self.spare.swap_remove(i);
                self.bytes -= v.capacity();
                v.clear();
                return v;
            }
        }
        Vec::with_capacity(len)
    }

    /// Keeps the buffer under `b` if `b` is its only owner and there is room.
    pub(crate) fn give(&mut self, b: Bytes) {
        if b.len() < MIN_POOLED {
            return;
        }
        if let Ok(m) = b.try_into_mut() {
            let v = Vec::from(m);
            if self.bytes + v.capacity() <= POOL_BYTES {
                self.bytes += v.capacity();
                self.spare.push(v);
            }
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_unique_large_buffers_only() {
        let mut pool = BufPool::default();
        let v = pool.take(1 << 20);
        let ptr = v.as_ptr();
        let mut v = v;
        v.resize(1 << 20, 7);
        let b = Bytes::from(v);
        let other = b.clone();
        pool.give(b);
        assert_eq!(pool.memory_bytes(), 0, "still shared");
        pool.give(other);
        assert_eq!(pool.memory_bytes(), 1 << 20);
        let again = pool.take(100 << 10);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        assert_eq!(pool.memory_bytes(), 0);
        pool.give(Bytes::from(vec![0u8; 100]));
        assert_eq!(pool.memory_bytes(), 0, "small buffers are not kept");
    }
}

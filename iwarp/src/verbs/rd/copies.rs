//! The queue pair's own copies of short messages, counted while anybody holds them: the
//! owner of the queue pair bounds what it holds for its peers by this count (the provider's
//! `FI_DIWARP_MEM_BUDGET`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// Bytes of copies alive (the engine and the send queue share them).
#[derive(Default)]
pub(crate) struct Copies(Arc<AtomicUsize>);

struct Counted {
    buf: Vec<u8>,
    count: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.count.fetch_sub(self.buf.capacity(), Ordering::Relaxed);
    }
}

impl Copies {
    /// Shares `buf`, counted until its last holder lets go.
    pub(crate) fn freeze(&self, buf: Vec<u8>) -> Bytes {
        self.0.fetch_add(buf.capacity(), Ordering::Relaxed);
        Bytes::from_owner(Counted {
            buf,
            count: Arc::clone(&self.0),
        })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_until_the_last_holder_lets_go() {
        let c = Copies::default();
        let mut v = Vec::with_capacity(1000);
        v.extend_from_slice(&[1, 2, 3]);
        let b = c.freeze(v);
        let b2 = b.slice(1..2);
        assert_eq!(c.bytes(), 1000);
        drop(b);
        assert_eq!(c.bytes(), 1000, "a slice still holds it");
        drop(b2);
        assert_eq!(c.bytes(), 0);
    }
}

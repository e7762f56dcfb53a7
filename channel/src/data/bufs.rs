//! Buffers for copied sends, kept for reuse. An eager send copies the caller's bytes into a
//! buffer the queue pair holds until the peer acknowledges. With a window of such sends in
//! flight, freeing them together hands the top of the heap back to the kernel (glibc trims
//! past 128 KiB), and the next window pays a page fault and a page clearing per 4 KiB, more
//! than the copy itself. These free lists keep the pages, as turning glibc's trimming off
//! (`MALLOC_TRIM_THRESHOLD_`) would, without touching glibc.
//!
//! Buffers come in power-of-two sizes plus room for a message header, one free list per
//! size; a buffer goes back to its list when the last holder of the bytes made from it lets
//! go, whichever thread that is.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

/// Smaller copies come from the allocator's own per-size lists, which stay warm.
const MIN_CLASS: u32 = 11;
/// The eager size is at most a chunk (60 KiB): no copied send needs a larger buffer.
const MAX_CLASS: u32 = 16;
const CLASSES: usize = (MAX_CLASS - MIN_CLASS + 1) as usize;
/// Room past the power of two, for the header in front of a power-of-two payload.
const HEADROOM: usize = 256;
/// Most bytes kept spare by default (`Budget::spare`): a window of 64 sends at the largest
/// eager size, and smaller ones.
#[cfg(test)]
const SPARE_BYTES: usize = 8 << 20;

#[derive(Default)]
struct Spare {
    lists: [Vec<Vec<u8>>; CLASSES],
    bytes: usize,
}

struct Shared {
    spare: Mutex<Spare>,
    /// Most bytes kept spare.
    spare_max: usize,
    /// Capacity of the buffers made into bytes and not yet back: read by every send, so
    /// outside the lock.
    lent: AtomicUsize,
    /// Bytes in use in those buffers (the queue pair counts these as its own).
    lent_len: AtomicUsize,
}

/// The endpoint's spare send buffers.
pub(crate) struct SendBufs(Arc<Shared>);

impl SendBufs {
    /// Keeping at most `spare_max` bytes spare.
    pub(crate) fn new(spare_max: usize) -> SendBufs {
        SendBufs(Arc::new(Shared {
            spare: Mutex::default(),
            spare_max,
            lent: AtomicUsize::new(0),
            lent_len: AtomicUsize::new(0),
        }))
    }
}

#[cfg(test)]
impl Default for SendBufs {
    fn default() -> SendBufs {
        SendBufs::new(SPARE_BYTES)
    }
}

/// The size class holding buffers of at least `len` bytes, if such buffers are kept.
fn class_for(len: usize) -> Option<u32> {
    let c = len
        .saturating_sub(HEADROOM)
        .max(1)
        .next_power_of_two()
        .trailing_zeros();
    (MIN_CLASS..=MAX_CLASS).contains(&c).then_some(c)
}

/// The capacity of the buffers of class `c`.
fn capacity(c: u32) -> usize {
    (1 << c) + HEADROOM
}

/// The class of a buffer this pool made, judged by its capacity.
fn class_of(cap: usize) -> Option<u32> {
    class_for(cap).filter(|&c| capacity(c) == cap)
}

impl SendBufs {
    /// An empty buffer with room for `len` bytes.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let Some(c) = class_for(len) else {
            return Vec::with_capacity(len);
        };
        let mut s = self.0.spare.lock();
        match s.lists[(c - MIN_CLASS) as usize].pop() {
            Some(v) => {
                s.bytes -= v.capacity();
                v
            }
            None => Vec::with_capacity(capacity(c)),
        }
    }

    /// Shares `v`; its buffer comes back here when the bytes are dropped, if it came from
    /// here (its capacity is a kept size) and there is room.
    pub(crate) fn freeze(&self, v: Vec<u8>) -> Bytes {
        if class_of(v.capacity()).is_none() {
            return Bytes::from(v);
        }
        self.0.lent.fetch_add(v.capacity(), Ordering::Relaxed);
        self.0.lent_len.fetch_add(v.len(), Ordering::Relaxed);
        Bytes::from_owner(Pooled {
            buf: v,
            home: Arc::downgrade(&self.0),
        })
    }

    /// Bytes held spare, for the memory report.
    pub(crate) fn spare_bytes(&self) -> usize {
        self.0.spare.lock().bytes
    }

    /// Bytes of copies still held by somebody (queued, or waiting for an acknowledgement).
    pub(crate) fn lent_bytes(&self) -> usize {
        self.0.lent.load(Ordering::Relaxed)
    }

    /// The unused part of the lent buffers, for the memory report: the queue pair counts the
    /// bytes of a copy it holds, not the buffer around them (a 100-byte message may sit in a
    /// reused 32 KiB one). One gap remains: a copy cut into several datagrams whose first ones
    /// are acknowledged keeps its whole buffer until the last, and the acknowledged part is in
    /// neither count (at most one eager message per peer).
    pub(crate) fn slack_bytes(&self) -> usize {
        // Two loads, not one snapshot: a send on another thread may land between them.
        self.lent_bytes()
            .saturating_sub(self.0.lent_len.load(Ordering::Relaxed))
    }
}

struct Pooled {
    buf: Vec<u8>,
    /// Weak: buffers still in flight when the endpoint closes are simply freed.
    home: Weak<Shared>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(home) = self.home.upgrade() else {
            return;
        };
        let cap = self.buf.capacity();
        let Some(c) = class_of(cap) else { return };
        home.lent.fetch_sub(cap, Ordering::Relaxed);
        home.lent_len.fetch_sub(self.buf.len(), Ordering::Relaxed);
        let mut s = home.spare.lock();
        if s.bytes + cap <= home.spare_max {
            let mut v = std::mem::take(&mut self.buf);
            v.clear();
            s.bytes += cap;
            s.lists[(c - MIN_CLASS) as usize].push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_when_its_last_holder_lets_go() {
        let bufs = SendBufs::default();
        let mut v = bufs.take((16 << 10) + 300);
        assert_eq!(v.capacity(), (32 << 10) + HEADROOM);
        let ptr = v.as_ptr();
        v.extend_from_slice(&[7; 100]);
        let b = bufs.freeze(v);
        assert_eq!(&b[..], &[7; 100][..]);
        assert_eq!(bufs.lent_bytes(), (32 << 10) + HEADROOM);
        assert_eq!(bufs.slack_bytes(), (32 << 10) + HEADROOM - 100);
        let other = b.slice(10..20);
        drop(b);
        assert_eq!(bufs.spare_bytes(), 0, "a slice still holds it");
        assert_eq!(bufs.lent_bytes(), (32 << 10) + HEADROOM);
        drop(other);
        assert_eq!(bufs.spare_bytes(), (32 << 10) + HEADROOM);
        assert_eq!((bufs.lent_bytes(), bufs.slack_bytes()), (0, 0));
        // Any length of the same class gets it back, empty: a power of two and a header too.
        let again = bufs.take((32 << 10) + 100);
        assert_eq!((again.as_ptr(), again.len()), (ptr, 0));
        assert_eq!(bufs.spare_bytes(), 0);
        // A smaller class does not.
        drop(bufs.freeze(again));
        let smaller = bufs.take(4 << 10);
        assert_eq!(smaller.capacity(), (4 << 10) + HEADROOM);
        assert_eq!(bufs.spare_bytes(), (32 << 10) + HEADROOM);
    }

    #[test]
    fn small_huge_and_foreign_buffers_are_not_kept() {
        let bufs = SendBufs::default();
        assert_eq!(bufs.take(100).capacity(), 100);
        drop(bufs.freeze(bufs.take(100)));
        drop(bufs.freeze(Vec::with_capacity(3000)));
        drop(bufs.freeze(Vec::with_capacity(4096)));
        drop(bufs.freeze(vec![0; capacity(MAX_CLASS + 1)]));
        assert_eq!(bufs.spare_bytes(), 0);
    }

    #[test]
    fn spare_memory_is_bounded() {
        let bufs = SendBufs::default();
        let each = capacity(16);
        let held: Vec<Bytes> = (0..2 * SPARE_BYTES / each)
            .map(|_| bufs.freeze(bufs.take(64 << 10)))
            .collect();
        assert_eq!(bufs.lent_bytes(), held.len() * each);
        drop(held);
        assert_eq!(bufs.spare_bytes(), SPARE_BYTES / each * each);
        assert_eq!(
            bufs.lent_bytes(),
            0,
            "buffers not kept are no longer lent either"
        );
    }

    #[test]
    fn bytes_outliving_the_pool_stay_intact() {
        let bufs = SendBufs::default();
        let mut v = bufs.take(8 << 10);
        v.extend_from_slice(&[9; 8 << 10]);
        let b = bufs.freeze(v);
        drop(bufs);
        assert_eq!(&b[..], &[9; 8 << 10][..]);
        drop(b);
    }
}

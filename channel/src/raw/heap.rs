//! What the C library and the kernel know of this process's memory, for the memory report:
//! the provider's own heap (a counting allocator), glibc's heap in use (`mallinfo2`), and a
//! socket's memory in the kernel (`SO_MEMINFO`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// Heap bytes the provider's own code holds: every Rust allocation in this library goes
/// through here (the MPI library's C code calls malloc directly, and is not counted), which
/// is how the report tells the provider's heap from the rest of the process.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The most `LIVE` has been since [`watch_peak`]; kept only while `WATCHING`, so that the
/// provider pays one relaxed load per allocation for it and the fuzz runner can bound what one
/// parse allocates.
static PEAK: AtomicIsize = AtomicIsize::new(0);
static WATCHING: AtomicBool = AtomicBool::new(false);

fn grew(by: isize) {
    let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    if WATCHING.load(Ordering::Relaxed) {
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

// SAFETY: every call is passed to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Heap bytes the provider's code holds now (in tests, the whole test program's).
pub(crate) fn provider_heap() -> usize {
    LIVE.load(Ordering::Relaxed).max(0) as usize
}

/// Starts keeping the heap's high-water mark from the bytes held now; returns those.
pub(crate) fn watch_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    WATCHING.store(true, Ordering::Relaxed);
    live.max(0) as usize
}

/// The high-water mark since [`watch_peak`], which stops keeping it.
pub(crate) fn peak() -> usize {
    WATCHING.store(false, Ordering::Relaxed);
    PEAK.load(Ordering::Relaxed).max(0) as usize
}

/// glibc's heap: bytes in use (small and mmapped blocks) and bytes it holds from the kernel.
pub(crate) fn process_heap() -> (usize, usize) {
    // SAFETY: mallinfo2 takes nothing and returns a plain struct.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd, m.arena + m.hblkhd)
}

/// Linux's SO_MEMINFO (asm-generic/socket.h); the libc crate has the offsets, not the option.
const SO_MEMINFO: libc::c_int = 55;
/// Entries SO_MEMINFO fills (SK_MEMINFO_VARS).
const SK_MEMINFO_VARS: usize = 9;

/// A socket's memory as the kernel keeps it (`ss -m`'s skmem), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SocketMemory {
    /// Received data waiting to be read (rmem_alloc).
    pub rmem_alloc: u32,
    pub rcvbuf: u32,
    /// Sent data not yet freed by the device (wmem_alloc).
    pub wmem_alloc: u32,
    pub sndbuf: u32,
    /// Memory the socket reserved ahead of use (fwd_alloc).
    pub fwd_alloc: u32,
    /// Data queued for sending (wmem_queued: TCP's unacknowledged bytes).
    pub wmem_queued: u32,
    pub optmem: u32,
    pub backlog: u32,
    pub drops: u32,
}

/// The kernel's memory for socket `fd`, or `None` where SO_MEMINFO is refused.
pub(crate) fn socket_memory(fd: BorrowedFd<'_>) -> Option<SocketMemory> {
    let mut v = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes, and the kernel writes at most `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (r == 0).then_some(SocketMemory {
        rmem_alloc: v[libc::SK_MEMINFO_RMEM_ALLOC as usize],
        rcvbuf: v[libc::SK_MEMINFO_RCVBUF as usize],
        wmem_alloc: v[libc::SK_MEMINFO_WMEM_ALLOC as usize],
        sndbuf: v[libc::SK_MEMINFO_SNDBUF as usize],
        fwd_alloc: v[libc::SK_MEMINFO_FWD_ALLOC as usize],
        wmem_queued: v[libc::SK_MEMINFO_WMEM_QUEUED as usize],
        optmem: v[libc::SK_MEMINFO_OPTMEM as usize],
        backlog: v[libc::SK_MEMINFO_BACKLOG as usize],
        drops: v[libc::SK_MEMINFO_DROPS as usize],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn counts_this_threads_allocation() {
        // Other tests allocate meanwhile: a large block stands out from their noise.
        let before = provider_heap();
        let v = vec![1u8; 64 << 20];
        let during = provider_heap();
        drop(v);
        assert!(during >= before + (60 << 20), "{before} -> {during}");
        assert!(provider_heap() < during);
    }

    #[test]
    fn the_peak_outlasts_a_freed_block() {
        let base = watch_peak();
        drop(std::hint::black_box(vec![1u8; 64 << 20]));
        let top = peak();
        assert!(top >= base + (64 << 20), "{base} -> {top}");
    }

    #[test]
    fn socket_memory_sees_unread_datagrams() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let empty = socket_memory(a.as_fd()).expect("SO_MEMINFO");
        assert_eq!(empty.rmem_alloc, 0);
        assert!(empty.rcvbuf > 0 && empty.sndbuf > 0);
        for _ in 0..4 {
            b.send_to(&[7u8; 1000], a.local_addr().unwrap()).unwrap();
        }
        let full = socket_memory(a.as_fd()).unwrap();
        assert!(full.rmem_alloc >= 4000, "{full:?}");
        let (in_use, held) = process_heap();
        assert!(in_use > 0 && held > 0);
    }
}

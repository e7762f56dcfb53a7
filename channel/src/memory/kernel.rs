//! What the kernel holds for the endpoint's sockets: a transport that leaves its data in
//! socket buffers looks lean in RSS, so reports add it.

use std::os::fd::BorrowedFd;

use serde::Serialize;

use crate::raw::heap::{socket_memory, SocketMemory};

/// Sums over the endpoint's sockets of `SO_MEMINFO` (`ss -m`'s skmem), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelMemory {
    pub sockets: u64,
    /// Data received and not yet read.
    pub rmem_alloc: u64,
    /// Data sent and not yet released by the device.
    pub wmem_alloc: u64,
    /// Data queued for sending (TCP: not yet acknowledged).
    pub wmem_queued: u64,
    /// Memory reserved ahead of use.
    pub fwd_alloc: u64,
    pub optmem: u64,
    /// The buffer limits (`SO_RCVBUF`, `SO_SNDBUF`): what the kernel may hold at most.
    pub rcvbuf: u64,
    pub sndbuf: u64,
    /// Datagrams the kernel dropped for a full receive buffer.
    pub drops: u64,
    /// What the kernel holds now: received, queued or in flight, reserved, options.
    pub held: u64,
}

impl KernelMemory {
    fn add(&mut self, m: SocketMemory) {
        self.sockets += 1;
        self.rmem_alloc += u64::from(m.rmem_alloc);
        self.wmem_alloc += u64::from(m.wmem_alloc);
        self.wmem_queued += u64::from(m.wmem_queued);
        self.fwd_alloc += u64::from(m.fwd_alloc);
        self.optmem += u64::from(m.optmem);
        self.rcvbuf += u64::from(m.rcvbuf);
        self.sndbuf += u64::from(m.sndbuf);
        self.drops += u64::from(m.drops);
        // A TCP socket's queued data is also in wmem_alloc while the device has it.
        self.held += u64::from(m.rmem_alloc)
            + u64::from(m.wmem_alloc.max(m.wmem_queued))
            + u64::from(m.fwd_alloc)
            + u64::from(m.optmem);
    }
}

/// Reads the kernel's memory for `sockets` now.
pub fn read(sockets: &[BorrowedFd<'_>]) -> KernelMemory {
    let mut k = KernelMemory::default();
    for m in sockets.iter().filter_map(|&fd| socket_memory(fd)) {
        k.add(m);
    }
    k
}

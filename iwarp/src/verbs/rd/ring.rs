//! The receive side of the RD socket: a reusable ring of 64 KiB buffers filled by one
//! `recvmmsg`. Datagrams are placed from here into the posted receives, so the kernel never
//! writes into a caller's buffer at a guessed offset.

use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use nix::errno::Errno;
use nix::sys::socket::{recvmmsg, MsgFlags, MultiHeaders, SockaddrStorage};

use super::super::io;

/// Datagrams per `recvmmsg`.
pub(crate) const RX_BATCH: usize = 16;
/// Room for the largest UDP payload (65 527 bytes over IPv6).
pub(crate) const SLOT: usize = 1 << 16;
/// A datagram this long is part of a bulk transfer: more are probably queued behind it.
const BULK: usize = 16 << 10;

#[derive(Default)]
pub(crate) struct RecvRing {
    slots: Vec<Vec<u8>>,
    meta: [(usize, Option<SocketAddr>); RX_BATCH],
    /// Buffers to swap in for slots whose datagram was set aside.
    spare: Vec<Vec<u8>>,
    /// Datagrams are streaming in: batch the next read.
    busy: bool,
}

impl RecvRing {
    pub(crate) fn new() -> RecvRing {
        RecvRing {
            slots: (0..RX_BATCH).map(|_| vec![0; SLOT]).collect(),
            ..RecvRing::default()
        }
    }

    /// Receives up to [`RX_BATCH`] datagrams without blocking; returns how many. EINTR is
    /// returned to the caller to retry.
    ///
    /// An idle socket, or one carrying a ping-pong of small messages, is read with one
    /// `recvfrom`: a busy-polling caller asks thousands of times per message, `recvmmsg` needs
    /// its headers built each time (and the kernel copies them in), and after a lone datagram
    /// it would ask the kernel again only to hear "empty". `recvfrom` is the cheapest way to
    /// hear that: no message header or iovec to copy in. Bulk traffic (several datagrams at
    /// once, or large ones) is read with `recvmmsg`.
    pub(crate) fn recv(&mut self, sock: &UdpSocket) -> Result<usize, Errno> {
        let r = if self.busy {
            self.recv_batch(sock.as_raw_fd())
        } else {
            self.recv_one(sock)
        };
        self.busy = match r {
            Ok(1) => self.meta[0].0 >= BULK,
            Ok(n) => n > 1,
            Err(_) => false,
        };
        r
    }

    fn recv_one(&mut self, sock: &UdpSocket) -> Result<usize, Errno> {
        // A slot holds the largest UDP payload, so nothing is ever truncated.
        let (len, src) = sock
            .recv_from(&mut self.slots[0])
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc_eio())))?;
        self.meta[0] = (len.min(SLOT), Some(src));
        Ok(1)
    }

    fn recv_batch(&mut self, fd: RawFd) -> Result<usize, Errno> {
        // The headers hold raw pointers, which would make the queue pair !Send if kept; they
        // are a few hundred bytes, built per call.
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(RX_BATCH, None);
        let mut slots = self.slots.iter_mut();
        let mut iovs: [[IoSliceMut<'_>; 1]; RX_BATCH] =
            std::array::from_fn(|_| [IoSliceMut::new(slots.next().expect("RX_BATCH slots"))]);
        let results = recvmmsg(
            fd,
            &mut headers,
            iovs.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )?;
        let mut n = 0;
        for (meta, msg) in self.meta.iter_mut().zip(results) {
            *meta = (msg.bytes, msg.address.as_ref().and_then(io::to_std));
            n += 1;
        }
        Ok(n)
    }

    /// Datagram `i` of the last `recv`, and who sent it.
    pub(crate) fn get(&self, i: usize) -> (&[u8], Option<SocketAddr>) {
        let (len, src) = self.meta[i];
        (&self.slots[i][..len], src)
    }

    /// Takes slot `i`'s buffer (holding datagram `i`) out of the ring, putting a spare in.
    pub(crate) fn take(&mut self, i: usize) -> Vec<u8> {
        let fresh = self.spare.pop().unwrap_or_else(|| vec![0; SLOT]);
        std::mem::replace(&mut self.slots[i], fresh)
    }

    /// Returns a buffer taken with `take`, keeping at most `keep` spares.
    pub(crate) fn give_back(&mut self, buf: Vec<u8>, keep: usize) {
        if self.spare.len() < keep {
            self.spare.push(buf);
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots
            .iter()
            .chain(&self.spare)
            .map(Vec::capacity)
            .sum()
    }
}

/// EIO, for an I/O error without an OS code (never seen from `recvfrom`).
fn libc_eio() -> i32 {
    Errno::EIO as i32
}

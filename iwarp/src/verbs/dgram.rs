//! The UDP socket of a UD or RD queue pair, with the fault layer hooked into its send path.

use std::io::IoSlice;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::socket::SockaddrStorage;

use super::fault::{FaultConfig, FaultLayer, FaultStats};
use super::io;
use super::VerbsError;

pub(crate) struct DatagramSocket {
    socket: UdpSocket,
    // Boxed: off in production, and it would double the size of every UD path.
    faults: Option<Box<FaultLayer>>,
}

impl DatagramSocket {
    /// Takes over `socket` (made non-blocking), with faults when `faults` is given.
    pub(crate) fn new(
        socket: UdpSocket,
        faults: Option<&FaultConfig>,
    ) -> Result<DatagramSocket, VerbsError> {
        socket.set_nonblocking(true)?;
        let faults = faults
            .cloned()
            .map(|c| FaultLayer::new(c).map(Box::new))
            .transpose()?;
        Ok(DatagramSocket { socket, faults })
    }

    pub(crate) fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Whether datagrams pass through the fault layer (batched sends must not bypass it).
    pub(crate) fn faulty(&self) -> bool {
        self.faults.is_some()
    }

    /// Sends one datagram gathered from `iov`, through the fault layer if there is one.
    pub(crate) fn send(
        &mut self,
        iov: &[IoSlice<'_>],
        dst: &SockaddrStorage,
    ) -> Result<usize, Errno> {
        let fd = self.socket.as_raw_fd();
        match &mut self.faults {
            None => io::send_gather(fd, iov, Some(dst)),
            Some(f) => f.submit(Instant::now(), iov, dst, &mut |iov, dst| {
                io::send_gather(fd, iov, Some(dst))
            }),
        }
    }

    /// Sends the held datagrams that are due.
    pub(crate) fn release_faults(&mut self, now: Instant) {
        let fd = self.socket.as_raw_fd();
        if let Some(f) = &mut self.faults {
            f.release(now, &mut |iov, dst| io::send_gather(fd, iov, Some(dst)));
        }
    }

    pub(crate) fn next_fault_release(&self) -> Option<Instant> {
        self.faults.as_ref().and_then(|f| f.next_release())
    }

    pub(crate) fn fault_stats(&self) -> Option<FaultStats> {
        self.faults.as_ref().map(|f| f.stats())
    }

    /// Bytes of datagrams the fault layer holds.
    pub(crate) fn held_bytes(&self) -> usize {
        self.faults.as_ref().map_or(0, |f| f.held_bytes())
    }
}

impl Drop for DatagramSocket {
    // Held datagrams are the network's, not ours to lose: they leave before the socket closes.
    fn drop(&mut self) {
        let fd = self.socket.as_raw_fd();
        if let Some(f) = &mut self.faults {
            f.flush(&mut |iov, dst| io::send_gather(fd, iov, Some(dst)));
        }
    }
}

//! The UDP socket of a UD or RD queue pair, with the fault layer hooked into its send path.

use std::io::IoSlice;
use std::net::{SocketAddr, UdpSocket};
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
    /// A null link, for tests that forge the peers: datagrams are kept here instead of sent
    /// (boxed for the same reason).
    sink: Option<Box<Sent>>,
}

/// Datagrams a null link kept, each with its destination.
pub(crate) type Sent = Vec<(SocketAddr, Vec<u8>)>;

/// Keeps a datagram in `sink` (gathered, with its destination) instead of sending it.
fn keep(sink: &mut Sent, iov: &[IoSlice<'_>], dst: &SockaddrStorage) -> Result<usize, Errno> {
    let dst = io::to_std(dst).ok_or(Errno::EAFNOSUPPORT)?;
    let bytes: Vec<u8> = iov.iter().flat_map(|piece| piece.iter().copied()).collect();
    let n = bytes.len();
    sink.push((dst, bytes));
    Ok(n)
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
        Ok(DatagramSocket {
            socket,
            faults,
            sink: None,
        })
    }

    pub(crate) fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Whether datagrams pass through the fault layer or the null link (batched sends must
    /// not bypass them).
    pub(crate) fn faulty(&self) -> bool {
        self.faults.is_some() || self.sink.is_some()
    }

    /// From now on datagrams (the fault layer's output, if it is on) are kept for
    /// [`DatagramSocket::take_sent`] instead of sent.
    pub(crate) fn null_link(&mut self) {
        self.sink.get_or_insert_default();
    }

    /// Sends datagrams again (what the null link kept is dropped).
    pub(crate) fn restore_link(&mut self) {
        self.sink = None;
    }

    /// The datagrams the null link kept, oldest first.
    pub(crate) fn take_sent(&mut self) -> Sent {
        self.sink
            .as_deref_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Sends one datagram gathered from `iov`, through the fault layer if there is one.
    pub(crate) fn send(
        &mut self,
        iov: &[IoSlice<'_>],
        dst: &SockaddrStorage,
    ) -> Result<usize, Errno> {
        let fd = self.socket.as_raw_fd();
        match (&mut self.faults, self.sink.as_deref_mut()) {
            (None, None) => io::send_gather(fd, iov, Some(dst)),
            (None, Some(sink)) => keep(sink, iov, dst),
            (Some(f), None) => f.submit(Instant::now(), iov, dst, &mut |iov, dst| {
                io::send_gather(fd, iov, Some(dst))
            }),
            (Some(f), Some(sink)) => f.submit(Instant::now(), iov, dst, &mut |iov, dst| {
                keep(sink, iov, dst)
            }),
        }
    }

    /// Sends the held datagrams that are due.
    pub(crate) fn release_faults(&mut self, now: Instant) {
        let fd = self.socket.as_raw_fd();
        match (&mut self.faults, self.sink.as_deref_mut()) {
            (Some(f), None) => f.release(now, &mut |iov, dst| io::send_gather(fd, iov, Some(dst))),
            (Some(f), Some(sink)) => f.release(now, &mut |iov, dst| keep(sink, iov, dst)),
            (None, _) => {}
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
    // Behind a null link they go nowhere, as every other did.
    fn drop(&mut self) {
        let fd = self.socket.as_raw_fd();
        if let (Some(f), None) = (&mut self.faults, &self.sink) {
            f.flush(&mut |iov, dst| io::send_gather(fd, iov, Some(dst)));
        }
    }
}

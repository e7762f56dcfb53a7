//! Socket plumbing shared by UD and RC: gather sends, scatter receives, address conversion, and a
//! view over a datagram that the kernel scattered into several buffers.

use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ops::Range;
use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::sys::socket::{self, MsgFlags, SockaddrStorage};

/// What one `recvmsg` returned.
pub(crate) struct Received {
    /// The datagram's real length (MSG_TRUNC asked for), even if it did not fit.
    pub(crate) len: usize,
    pub(crate) src: Option<SocketAddr>,
}

/// Gathers `iov` into one datagram to `dst`, or onto a stream when `dst` is `None`.
///
/// Never raises SIGPIPE: in a library loaded by a C program nobody has ignored it, and a peer
/// reset must become a completion, not a dead process.
pub(crate) fn send_gather(
    fd: RawFd,
    iov: &[IoSlice<'_>],
    dst: Option<&SockaddrStorage>,
) -> Result<usize, Errno> {
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    loop {
        let r = match dst {
            Some(addr) => socket::sendmsg(fd, iov, &[], flags, Some(addr)),
            None => socket::sendmsg::<()>(fd, iov, &[], flags, None),
        };
        match r {
            Err(Errno::EINTR) => continue,
            r => return r,
        }
    }
}

/// Sends a contiguous buffer on a stream (see [`send_gather`] about SIGPIPE).
pub(crate) fn send_stream(fd: RawFd, buf: &[u8]) -> Result<usize, Errno> {
    loop {
        match socket::send(fd, buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL) {
            Err(Errno::EINTR) => continue,
            r => return r,
        }
    }
}

/// Receives one datagram, scattered over `iov`, without blocking.
pub(crate) fn recv_scatter(fd: RawFd, iov: &mut [IoSliceMut<'_>]) -> Result<Received, Errno> {
    loop {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC;
        match socket::recvmsg::<SockaddrStorage>(fd, iov, None, flags) {
            Ok(msg) => {
                return Ok(Received {
                    len: msg.bytes,
                    src: msg.address.as_ref().and_then(to_std),
                })
            }
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn to_std(addr: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(a) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*a)));
    }
    if let Some(a) = addr.as_sockaddr_in6() {
        return Some(SocketAddr::V6(SocketAddrV6::from(*a)));
    }
    None
}

/// A datagram as the kernel scattered it: the concatenation of up to three buffers, cut to the
/// datagram's length.
pub(crate) struct Scattered<'a> {
    parts: [&'a [u8]; 3],
    len: usize,
}

impl<'a> Scattered<'a> {
    /// `len` is the number of bytes actually written (at most the sum of the parts).
    pub(crate) fn new(parts: [&'a [u8]; 3], len: usize) -> Self {
        debug_assert!(len <= parts.iter().map(|p| p.len()).sum());
        Scattered { parts, len }
    }

    /// Bytes of the datagram held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The pieces of `range` (which must lie within the datagram), in order.
    pub(crate) fn pieces(&self, range: Range<usize>) -> [&'a [u8]; 3] {
        debug_assert!(range.end <= self.len);
        let mut out: [&'a [u8]; 3] = [&[]; 3];
        let mut base = 0;
        for (slot, part) in out.iter_mut().zip(self.parts) {
            let start = range.start.clamp(base, base + part.len()) - base;
            let end = range.end.clamp(base, base + part.len()) - base;
            *slot = &part[start..end];
            base += part.len();
        }
        out
    }

    /// Copies `range` into `out` (`out.len() == range.len()`).
    pub(crate) fn copy_out(&self, range: Range<usize>, out: &mut [u8]) {
        let mut at = 0;
        for piece in self.pieces(range) {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cross_boundaries() {
        let a = [0u8, 1, 2];
        let b = [3u8, 4];
        let c = [5u8, 6, 7, 8];
        let s = Scattered::new([&a, &b, &c], 8);
        let mut out = [0u8; 8];
        for start in 0..=8 {
            for end in start..=8 {
                s.copy_out(start..end, &mut out[..end - start]);
                let want: Vec<u8> = (start as u8..end as u8).collect();
                assert_eq!(&out[..end - start], &want[..]);
            }
        }
    }
}

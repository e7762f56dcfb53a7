//! The send side of the RD socket: datagrams the engine cut, in pieces (header, shared
//! payload, CRC trailer) so the payload is never copied, sent in batches with `sendmmsg`.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::sys::socket::{sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage};
use reliability::header::MAX_HEADER_LEN;
use reliability::GatherTransmit;

use super::super::dgram::DatagramSocket;
use super::super::io;

/// Datagrams per `sendmmsg`.
pub(crate) const TX_BATCH: usize = 16;

/// A lone datagram up to this size is joined on the stack and sent with `sendto`, which costs
/// the kernel less than gathering `sendmsg` pieces (no message header or iovecs to copy in).
const JOIN_MAX: usize = 2048;

pub(crate) struct TxItem {
    pub(crate) dst: SockaddrStorage,
    pub(crate) header: [u8; MAX_HEADER_LEN],
    pub(crate) t: GatherTransmit,
}

impl TxItem {
    fn iov(&self) -> [IoSlice<'_>; 4] {
        [
            IoSlice::new(&self.header[..self.t.header_len]),
            IoSlice::new(&self.t.payload),
            IoSlice::new(&self.t.payload_tail),
            IoSlice::new(self.t.trailer.as_ref().map_or(&[][..], |t| &t[..])),
        ]
    }
}

/// Datagrams cut but not yet taken by the kernel. The engine counts them as sent, so they are
/// kept (not dropped) when the socket is full: a full socket must not look like loss.
#[derive(Default)]
pub(crate) struct TxQueue {
    items: VecDeque<TxItem>,
    /// Where a lone small datagram is joined for `sendto`.
    joined: Vec<u8>,
}

impl TxQueue {
    pub(crate) fn push(&mut self, item: TxItem) {
        self.items.push_back(item);
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Sends what is queued; returns false if the socket filled up first. A datagram the
    /// kernel refuses for another reason is dropped and counted in `errors`: to the engine it
    /// is a loss like any other.
    pub(crate) fn flush(&mut self, sock: &mut DatagramSocket, errors: &mut u64) -> bool {
        while !self.items.is_empty() {
            let r = if sock.faulty() {
                let it = &self.items[0];
                sock.send(&it.iov(), &it.dst).map(|_| 1)
            } else if self.items.len() == 1 {
                let it = &self.items[0];
                if it.t.size() <= JOIN_MAX {
                    Self::send_joined(sock, it, &mut self.joined)
                } else {
                    sock.send(&it.iov(), &it.dst).map(|_| 1)
                }
            } else {
                self.send_batch(sock.fd())
            };
            match r {
                Ok(n) => {
                    self.items.drain(..n);
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN | Errno::ENOBUFS) => return false,
                Err(_) => {
                    *errors += 1;
                    self.items.pop_front();
                }
            }
        }
        true
    }

    fn send_joined(sock: &DatagramSocket, it: &TxItem, buf: &mut Vec<u8>) -> Result<usize, Errno> {
        buf.clear();
        for piece in it.iov() {
            buf.extend_from_slice(&piece);
        }
        let Some(dst) = io::to_std(&it.dst) else {
            return Err(Errno::EAFNOSUPPORT);
        };
        sock.socket()
            .send_to(buf, dst)
            .map(|_| 1)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)))
    }

    fn send_batch(&self, fd: RawFd) -> Result<usize, Errno> {
        let n = self.items.len().min(TX_BATCH);
        let iovs: Vec<[IoSlice<'_>; 4]> = self.items.iter().take(n).map(TxItem::iov).collect();
        let addrs: Vec<Option<SockaddrStorage>> =
            self.items.iter().take(n).map(|it| Some(it.dst)).collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(n, None);
        let cmsgs: [ControlMessage<'_>; 0] = [];
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        let sent = sendmmsg(fd, &mut headers, &iovs, &addrs, cmsgs, flags)?;
        Ok(sent.count())
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<TxItem>() + self.joined.capacity()
    }
}

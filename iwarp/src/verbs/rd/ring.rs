//! The receive side of the RD socket: a reusable ring of 64 KiB buffers filled by one
//! `recvmmsg`. Datagrams are placed from here into the posted receives, so the kernel never
//! writes into a caller's buffer at a guessed offset.
//!
//! With UDP receive offload (GRO, on when datagrams are cut to a small MTU) one buffer may
//! hold a run of datagrams the kernel coalesced, all as long as the first but the last; the
//! `UDP_GRO` control message gives that length, and the ring hands them out one by one.

use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmmsg, recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, MultiHeaders, RecvMsg,
    SockaddrStorage,
};

use super::super::io;

/// Messages (datagrams, or runs of them under GRO) per `recvmmsg`.
pub(crate) const RX_BATCH: usize = 16;
/// Room for the largest UDP payload (65 527 bytes over IPv6), or for a coalesced run.
pub(crate) const SLOT: usize = 1 << 16;
/// A datagram this long is part of a bulk transfer: more are probably queued behind it.
const BULK: usize = 16 << 10;

/// Where datagram `i` of the last `recv` lies: its slot and byte range there.
#[derive(Clone, Copy, Default)]
struct Datagram {
    slot: u16,
    start: u32,
    end: u32,
}

#[derive(Default)]
pub(crate) struct RecvRing {
    slots: Vec<Vec<u8>>,
    /// Per slot: bytes read and who sent them.
    meta: [(usize, Option<SocketAddr>); RX_BATCH],
    /// The datagrams of the last `recv`, in order.
    datagrams: Vec<Datagram>,
    /// Messages the last `recv` read.
    messages: usize,
    /// Buffers to swap in for slots whose datagram was set aside.
    spare: Vec<Vec<u8>>,
    /// Datagrams are streaming in: batch the next read.
    busy: bool,
    /// The last `recv` was a `recvmmsg`.
    batched: bool,
    /// The last `recv` was a single read that found a datagram: a second one in a row means
    /// datagrams are queueing (ACKs that came in while we sent), and the next read batches.
    found_one: bool,
    /// The socket coalesces runs of datagrams (UDP_GRO is on): every read must take the
    /// control message that says how to cut them apart.
    gro: bool,
    /// Room for the UDP_GRO control message of a single read (kept: it is allocated).
    gro_cmsg: Vec<u8>,
    /// Reads that held a coalesced run of two or more datagrams.
    pub(crate) gro_runs: u64,
}

impl RecvRing {
    pub(crate) fn new() -> RecvRing {
        RecvRing {
            slots: (0..RX_BATCH).map(|_| vec![0; SLOT]).collect(),
            datagrams: Vec::with_capacity(RX_BATCH),
            ..RecvRing::default()
        }
    }

    /// Asks the kernel to coalesce runs of datagrams from one sender (Linux 5.0 and later);
    /// returns whether it does. Worth it only for datagrams much smaller than a slot.
    pub(crate) fn enable_gro(&mut self, sock: &UdpSocket) -> bool {
        self.gro = setsockopt(sock, sockopt::UdpGroSegment, &true).is_ok();
        self.gro_cmsg = nix::cmsg_space!(i32);
        self.gro
    }

    /// Receives up to [`RX_BATCH`] messages without blocking; returns how many datagrams they
    /// hold. EINTR is returned to the caller to retry.
    ///
    /// An idle socket, or one carrying a ping-pong of small messages, is read with one
    /// `recvfrom`: a busy-polling caller asks thousands of times per message, `recvmmsg` needs
    /// its headers built each time (and the kernel copies them in), and after a lone datagram
    /// it would ask the kernel again only to hear "empty". `recvfrom` is the cheapest way to
    /// hear that: no message header or iovec to copy in. Bulk traffic (several datagrams at
    /// once, large ones, or two single reads in a row that each found one) is read with
    /// `recvmmsg`. Under GRO a single read is a `recvmsg` with room for the control message,
    /// without which a run could not be cut.
    pub(crate) fn recv(&mut self, sock: &UdpSocket) -> Result<usize, Errno> {
        self.datagrams.clear();
        self.batched = self.busy;
        let r = if self.busy {
            self.recv_batch(sock.as_raw_fd())
        } else if self.gro {
            self.recv_one_gro(sock.as_raw_fd())
        } else {
            self.recv_one(sock)
        };
        self.messages = *r.as_ref().unwrap_or(&0);
        let single = !self.batched && r.is_ok();
        self.busy = match r {
            Ok(1) => self.meta[0].0 >= BULK || (single && self.found_one),
            Ok(n) => n > 1,
            Err(_) => false,
        };
        self.found_one = single;
        r.map(|_| self.datagrams.len())
    }

    /// Whether the last `recv` read fewer messages than it had room for: the socket is
    /// probably empty (a single read always says so).
    pub(crate) fn drained(&self) -> bool {
        self.messages < RX_BATCH
    }

    /// Whether the last `recv` proved the socket empty: a batch read that came up short.
    pub(crate) fn known_empty(&self) -> bool {
        self.batched && self.messages < RX_BATCH
    }

    fn recv_one(&mut self, sock: &UdpSocket) -> Result<usize, Errno> {
        // A slot holds the largest UDP payload, so nothing is ever truncated.
        let (len, src) = sock
            .recv_from(&mut self.slots[0])
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc_eio())))?;
        self.meta[0] = (len.min(SLOT), Some(src));
        self.cut(0, None);
        Ok(1)
    }

    fn recv_one_gro(&mut self, fd: RawFd) -> Result<usize, Errno> {
        let (len, src, seg) = {
            let mut iov = [IoSliceMut::new(&mut self.slots[0])];
            let msg = recvmsg::<SockaddrStorage>(
                fd,
                &mut iov,
                Some(&mut self.gro_cmsg),
                MsgFlags::MSG_DONTWAIT,
            )?;
            let src = msg.address.as_ref().and_then(io::to_std);
            (msg.bytes, src, gro_segment(&msg))
        };
        self.meta[0] = (len.min(SLOT), src);
        self.cut(0, seg);
        Ok(1)
    }

    fn recv_batch(&mut self, fd: RawFd) -> Result<usize, Errno> {
        // The headers hold raw pointers, which would make the queue pair !Send if kept; they
        // are a few hundred bytes, built per call.
        let cmsg = self.gro.then(|| nix::cmsg_space!(i32));
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(RX_BATCH, cmsg);
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
        let mut segs = [None; RX_BATCH];
        let mut n = 0;
        for ((meta, seg), msg) in self.meta.iter_mut().zip(&mut segs).zip(results) {
            *meta = (msg.bytes, msg.address.as_ref().and_then(io::to_std));
            *seg = gro_segment(&msg);
            n += 1;
        }
        for (i, seg) in segs.into_iter().enumerate().take(n) {
            self.cut(i, seg);
        }
        Ok(n)
    }

    /// Lists the datagrams slot `i` holds: one, or a run cut every `seg` bytes.
    fn cut(&mut self, i: usize, seg: Option<usize>) {
        let len = self.meta[i].0;
        let seg = seg.filter(|&s| s > 0).unwrap_or(len.max(1));
        let slot = u16::try_from(i).expect("RX_BATCH fits u16");
        if len > seg {
            self.gro_runs += 1;
        }
        let mut start = 0;
        loop {
            let end = (start + seg).min(len);
            // Offsets within a 64 KiB slot.
            self.datagrams.push(Datagram {
                slot,
                start: start as u32,
                end: end as u32,
            });
            start = end;
            if start >= len {
                break;
            }
        }
    }

    /// Datagram `i` of the last `recv`, and who sent it.
    pub(crate) fn get(&self, i: usize) -> (&[u8], Option<SocketAddr>) {
        let d = self.datagrams[i];
        let slot = usize::from(d.slot);
        (
            &self.slots[slot][d.start as usize..d.end as usize],
            self.meta[slot].1,
        )
    }

    /// Keeps the datagrams of the last `recv` for which `keep` gives a length (each is cut to
    /// it: a tag taken off its end), in order, and forgets the others; returns how many are
    /// left.
    pub(crate) fn retain(
        &mut self,
        mut keep: impl FnMut(&[u8], Option<SocketAddr>) -> Option<usize>,
    ) -> usize {
        let (slots, meta) = (&self.slots, &self.meta);
        self.datagrams.retain_mut(|d| {
            let slot = usize::from(d.slot);
            let data = &slots[slot][d.start as usize..d.end as usize];
            match keep(data, meta[slot].1) {
                Some(len) if len <= data.len() => {
                    d.end = d.start + len as u32;
                    true
                }
                _ => false,
            }
        });
        self.datagrams.len()
    }

    /// A buffer holding datagram `i` from its start, for it to be set aside: the slot's own
    /// buffer (a spare put in its place) if the datagram is alone there, else a copy, since the
    /// rest of its run is still to be read from the slot.
    pub(crate) fn take(&mut self, i: usize) -> Vec<u8> {
        let d = self.datagrams[i];
        let slot = usize::from(d.slot);
        let alone = d.start == 0 && d.end as usize == self.meta[slot].0;
        let mut fresh = self.spare.pop().unwrap_or_else(|| vec![0; SLOT]);
        if alone {
            return std::mem::replace(&mut self.slots[slot], fresh);
        }
        let data = &self.slots[slot][d.start as usize..d.end as usize];
        fresh[..data.len()].copy_from_slice(data);
        fresh
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
            .sum::<usize>()
            + self.datagrams.capacity() * std::mem::size_of::<Datagram>()
    }
}

/// The length the kernel coalesced a run of datagrams at (UDP_GRO), if it did.
fn gro_segment<S>(msg: &RecvMsg<'_, '_, S>) -> Option<usize> {
    msg.cmsgs().ok()?.find_map(|c| match c {
        ControlMessageOwned::UdpGroSegments(s) => usize::try_from(s).ok(),
        _ => None,
    })
}

/// EIO, for an I/O error without an OS code (never seen from `recvfrom`).
fn libc_eio() -> i32 {
    Errno::EIO as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{sendmsg, ControlMessage};
    use std::io::IoSlice;
    use std::time::{Duration, Instant};

    /// Sends `run` as one GSO send of `seg`-byte datagrams (the last may be shorter), then
    /// reads until all its bytes are in; returns the datagrams as the ring hands them out.
    fn gro_round(run: &[u8], seg: u16) -> (RecvRing, Vec<Vec<u8>>) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ring = RecvRing::new();
        assert!(ring.enable_gro(&rx), "UDP_GRO needs Linux 5.0");
        let dst = SockaddrStorage::from(rx.local_addr().unwrap());
        let cmsgs = [ControlMessage::UdpGsoSegments(&seg)];
        sendmsg(
            tx.as_raw_fd(),
            &[IoSlice::new(run)],
            &cmsgs,
            MsgFlags::empty(),
            Some(&dst),
        )
        .unwrap();
        let (mut got, mut bytes) = (Vec::new(), 0);
        let start = Instant::now();
        while bytes < run.len() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "only {bytes} bytes came"
            );
            let n = match ring.recv(&rx) {
                Ok(n) => n,
                Err(Errno::EAGAIN) => continue,
                Err(e) => panic!("{e}"),
            };
            for i in 0..n {
                let (d, src) = ring.get(i);
                assert_eq!(src, Some(tx.local_addr().unwrap()));
                bytes += d.len();
                got.push(d.to_vec());
            }
        }
        (ring, got)
    }

    #[test]
    fn a_coalesced_run_is_cut_where_the_sender_cut_it() {
        let run: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let (ring, got) = gro_round(&run, 1472);
        let want: Vec<&[u8]> = run.chunks(1472).collect();
        assert_eq!(got, want);
        // Loopback hands the GSO run over whole.
        assert_eq!(ring.gro_runs, 1);
    }

    #[test]
    fn a_datagram_taken_from_the_middle_of_a_run_is_copied_out_whole() {
        let run: Vec<u8> = (0..4000u32).map(|i| (i % 253) as u8).collect();
        let (mut ring, got) = gro_round(&run, 1000);
        assert_eq!(got.len(), 4);
        let (second, last) = (ring.take(1), ring.take(3));
        assert_eq!(&second[..1000], &run[1000..2000]);
        assert_eq!(&last[..1000], &run[3000..]);
        // The run's slot stays for the datagrams not taken.
        assert_eq!(ring.get(2).0, &run[2000..3000]);
    }

    #[test]
    fn a_lone_datagram_is_taken_with_its_slot() {
        let run = vec![9u8; 700];
        let (mut ring, got) = gro_round(&run, 1000);
        assert_eq!(got, vec![run.clone()]);
        let slot_ptr = ring.slots[0].as_ptr();
        let taken = ring.take(0);
        assert_eq!(taken.as_ptr(), slot_ptr);
        assert_eq!(&taken[..700], &run[..]);
    }

    /// A single read cannot tell whether more is queued; only a batch read that comes up short
    /// proves the socket empty.
    #[test]
    fn only_a_short_batch_proves_the_socket_empty() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ring = RecvRing::new();
        let read = |ring: &mut RecvRing| loop {
            match ring.recv(&rx) {
                Ok(n) => return n,
                Err(Errno::EAGAIN) => continue,
                Err(e) => panic!("{e}"),
            }
        };
        for len in [100, BULK, 100, 100] {
            tx.send_to(&vec![1u8; len], rx.local_addr().unwrap())
                .unwrap();
        }
        // A small datagram is read alone: more may be queued, or not.
        assert_eq!(read(&mut ring), 1);
        assert!(ring.drained() && !ring.known_empty());
        // A bulk datagram makes the next read a batch, which takes the rest and comes up short.
        assert_eq!(read(&mut ring), 1);
        assert!(!ring.known_empty());
        assert_eq!(read(&mut ring), 2);
        assert!(ring.known_empty());
        // A bulk datagram alone is enough: more are probably queued behind it.
        let mut ring = RecvRing::new();
        for len in [BULK, 100, 100] {
            tx.send_to(&vec![1u8; len], rx.local_addr().unwrap())
                .unwrap();
        }
        assert_eq!(read(&mut ring), 1);
        assert!(!ring.batched);
        assert_eq!(read(&mut ring), 2);
        assert!(ring.batched && ring.known_empty());
    }

    /// ACKs that queued while we were sending are drained by one batch read, not one system
    /// call each; a ping-pong, where a read that finds nothing comes between two datagrams,
    /// stays on single reads.
    #[test]
    fn a_second_datagram_in_a_row_makes_the_next_read_a_batch() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let mut ring = RecvRing::new();
        for _ in 0..3 {
            tx.send_to(&[7u8; 28], to).unwrap();
            assert_eq!(ring.recv(&rx), Ok(1));
            assert!(!ring.batched);
            assert_eq!(ring.recv(&rx), Err(Errno::EAGAIN));
            // The read that found nothing was a single one, and it ends the run.
            assert!(!ring.batched);
        }
        for i in 0..8u8 {
            tx.send_to(&[i; 28], to).unwrap();
        }
        assert_eq!(ring.recv(&rx), Ok(1));
        assert_eq!(ring.recv(&rx), Ok(1));
        assert!(!ring.batched);
        assert_eq!(ring.recv(&rx), Ok(6));
        assert!(ring.batched && ring.known_empty());
        for i in 0..6 {
            assert_eq!(ring.get(i).0, &[i as u8 + 2; 28]);
        }
        // The batch came up short: one more batch read finds nothing, then single reads.
        assert_eq!(ring.recv(&rx), Err(Errno::EAGAIN));
        tx.send_to(&[9u8; 28], to).unwrap();
        assert_eq!(ring.recv(&rx), Ok(1));
        assert!(!ring.batched);
    }
}

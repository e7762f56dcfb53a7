//! The send side of the RD socket: datagrams the engine cut, in pieces (header, shared
//! payload, CRC trailer) so the payload is never copied, sent in batches with `sendmmsg`, or,
//! when the link's MTU makes them small, in runs of up to 64 KiB handed to the kernel as one
//! `sendmsg` with UDP segmentation offload (GSO): one trip down the stack per run instead of
//! per datagram.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::socket::{
    sendmmsg, sendmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};
use reliability::header::MAX_HEADER_LEN;
use reliability::GatherTransmit;

use super::super::dgram::DatagramSocket;
use super::super::io;
use super::conn::PeerSocket;
use crate::auth::{Context, JobKey, TAG_LEN};

/// Datagrams per `sendmmsg`.
const TX_BATCH: usize = 16;
/// Room for this many datagrams is kept in the queue between bursts.
const TX_KEEP: usize = 4;
/// Small datagrams are gathered past [`TX_BATCH`] up to this many bytes, so that GSO runs
/// fill up ...
const TX_BATCH_BYTES: usize = 256 << 10;
/// ... and up to this many datagrams.
const TX_BATCH_MAX: usize = 4 * GSO_MAX_SEGMENTS;
/// Most datagrams in one GSO run (the kernel's UDP_MAX_SEGMENTS before 6.7).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO run: a run is one IP packet to the stack, at most 64 KiB with its
/// IPv6 header (IPv4's is smaller).
const GSO_MAX_BYTES: usize = 65_535 - 40 - 8;

/// A lone datagram up to this size is joined on the stack and sent with `sendto`, which costs
/// the kernel less than gathering `sendmsg` pieces (no message header or iovecs to copy in).
const JOIN_MAX: usize = 2048;

pub(crate) struct TxItem {
    /// Made a `sockaddr` only where a system call names it: a quarter of the size in the queue,
    /// and cheaper to compare.
    pub(crate) dst: SocketAddr,
    /// The peer's connected socket, if it has one: the datagram leaves from it, naming no
    /// address.
    pub(crate) via: Option<Arc<PeerSocket>>,
    pub(crate) header: [u8; MAX_HEADER_LEN],
    pub(crate) t: GatherTransmit,
    /// Authenticated mode's tag, which ends the datagram (set by [`TxQueue::push`]).
    pub(crate) tag: Option<[u8; TAG_LEN]>,
}

impl TxItem {
    fn iov(&self) -> [IoSlice<'_>; 5] {
        [
            IoSlice::new(&self.header[..self.t.header_len]),
            IoSlice::new(&self.t.payload),
            IoSlice::new(&self.t.payload_tail),
            IoSlice::new(self.t.trailer.as_ref().map_or(&[][..], |t| &t[..])),
            IoSlice::new(self.tag.as_ref().map_or(&[][..], |t| &t[..])),
        ]
    }

    /// Bytes on the wire.
    fn size(&self) -> usize {
        self.t.size() + self.tag.map_or(0, |t| t.len())
    }

    /// The socket the datagram leaves from, and the address the send names.
    fn route(&self, shared: RawFd) -> (RawFd, Option<SockaddrStorage>) {
        match &self.via {
            Some(s) => (s.as_raw_fd(), None),
            None => (shared, Some(SockaddrStorage::from(self.dst))),
        }
    }

    /// Whether `self` and `other` leave from the same socket, so one call can send both.
    fn same_route(&self, other: &TxItem) -> bool {
        match (&self.via, &other.via) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Datagrams cut but not yet taken by the kernel. The engine counts them as sent, so they are
/// kept (not dropped) when the socket is full: a full socket must not look like loss.
pub(crate) struct TxQueue {
    items: VecDeque<TxItem>,
    /// Bytes of the datagrams in `items`.
    bytes: usize,
    /// Where a lone small datagram is joined for `sendto`.
    joined: Vec<u8>,
    /// Runs of datagrams may go as one GSO send; cleared for good the first time the kernel
    /// refuses one (no UDP_SEGMENT before Linux 4.18, or datagrams above the link's MTU).
    gso: bool,
    /// GSO sends the kernel took.
    pub(crate) gso_sends: u64,
    /// Datagrams that left from a peer's connected socket.
    pub(crate) via_sends: u64,
    /// Authenticated mode: every datagram gets the job's tag as it is queued.
    auth: Option<Arc<JobKey>>,
    /// Where a datagram's pieces are joined to be tagged.
    scratch: Vec<u8>,
}

impl Default for TxQueue {
    fn default() -> Self {
        TxQueue::new(None)
    }
}

impl TxQueue {
    pub(crate) fn new(auth: Option<Arc<JobKey>>) -> TxQueue {
        TxQueue {
            items: VecDeque::new(),
            bytes: 0,
            joined: Vec::new(),
            gso: true,
            gso_sends: 0,
            via_sends: 0,
            auth,
            scratch: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, mut item: TxItem) {
        if let Some(key) = &self.auth {
            self.scratch.clear();
            for piece in &item.iov()[..4] {
                self.scratch.extend_from_slice(piece);
            }
            item.tag = Some(key.tag(&Context::Datagram { to: item.dst }, &self.scratch));
        }
        self.bytes += item.size();
        self.items.push_back(item);
    }

    /// Drops the datagrams queued for `dst`, whose session closed: what they carry may be
    /// lent from buffers whose sends were just failed, and so given back to their owner.
    pub(crate) fn forget(&mut self, dst: SocketAddr) {
        let bytes = &mut self.bytes;
        self.items.retain(|it| {
            let keep = it.dst != dst;
            if !keep {
                *bytes -= it.size();
            }
            keep
        });
    }

    /// Drops every queued datagram.
    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether a batch should take more datagrams before it is flushed.
    pub(crate) fn wants_more(&self) -> bool {
        let n = self.items.len();
        n < TX_BATCH || (n < TX_BATCH_MAX && self.bytes < TX_BATCH_BYTES)
    }

    fn drain_front(&mut self, n: usize) {
        self.bytes -= self.items.iter().take(n).map(TxItem::size).sum::<usize>();
        // Dropped in place, not moved out one by one.
        self.items.drain(..n);
    }

    /// Sends what is queued; returns false if the socket filled up first. A datagram the
    /// kernel refuses for another reason is dropped and counted in `errors`: to the engine it
    /// is a loss like any other.
    pub(crate) fn flush(&mut self, sock: &mut DatagramSocket, errors: &mut u64) -> bool {
        let mut retried = false;
        while !self.items.is_empty() {
            let mut run = None;
            let r = if sock.faulty() {
                let it = &self.items[0];
                sock.send(&it.iov(), &SockaddrStorage::from(it.dst))
                    .map(|_| 1)
            } else if self.items.len() == 1 {
                let it = &self.items[0];
                // Not a retransmission: its message may have been acknowledged since it was
                // queued, and its payload, lent from a buffer whose owner then had it back, is
                // left for the kernel to read (a fault there is an error, not a crash).
                if it.size() <= JOIN_MAX && !it.t.retransmit {
                    Self::send_joined(sock, it, &mut self.joined)
                } else {
                    let (fd, dst) = it.route(sock.fd());
                    io::send_gather(fd, &it.iov(), dst.as_ref()).map(|_| 1)
                }
            } else if let Some(n) = self.gso_run() {
                run = Some(n);
                self.send_gso(sock.fd(), n)
            } else {
                self.send_batch(sock.fd())
            };
            let r = match r {
                Err(e) if !retried && self.items[0].via.is_some() && !Self::transient(e) => {
                    // A connected socket answers its next send with the ICMP error an earlier
                    // datagram drew (port unreachable, fragmentation needed), and that send
                    // did not go: try it once more before judging it by the error.
                    retried = true;
                    continue;
                }
                Ok(n) => {
                    // One call never mixes sockets (batches and runs stop where they change).
                    if self.items[0].via.is_some() {
                        self.via_sends += n as u64;
                    }
                    Ok(n)
                }
                r => r,
            };
            retried = false;
            match (r, run) {
                (Ok(n), _) => self.drain_front(n),
                (
                    Err(
                        Errno::EINVAL
                        | Errno::EIO
                        | Errno::EMSGSIZE
                        | Errno::EOPNOTSUPP
                        | Errno::ENOPROTOOPT,
                    ),
                    Some(_),
                ) => {
                    // The kernel or the device cannot send runs (or not this long a
                    // segment): datagrams go one by one from now on.
                    self.gso = false;
                }
                (Err(e), _) if Self::transient(e) => {
                    if e != Errno::EINTR {
                        return false;
                    }
                }
                (Err(_), run) => {
                    // Refused for its destination, or dropped on the way out (a netfilter
                    // drop is EPERM): to the engine the datagrams are lost, as on the wire.
                    let n = run.unwrap_or(1);
                    *errors += n as u64;
                    self.drain_front(n);
                }
            }
        }
        // What a burst queued (a full socket, a late-running sender) is given back once sent:
        // the queue's room counts in the ledger's send queue, which returns to its floor.
        if self.items.capacity() > TX_KEEP {
            self.items.shrink_to(TX_KEEP);
        }
        true
    }

    /// Errors that say "not now" (the socket is full, a signal came), not "never".
    fn transient(e: Errno) -> bool {
        matches!(e, Errno::EINTR | Errno::EAGAIN | Errno::ENOBUFS)
    }

    /// How many datagrams at the front can leave as one GSO send: two or more to the same
    /// peer, each as long as the first but the last, which may be shorter (the kernel cuts the
    /// run at the first one's length).
    fn gso_run(&self) -> Option<usize> {
        self.gso_run_at(0)
    }

    /// [`gso_run`](Self::gso_run) for the datagrams from `start` on.
    fn gso_run_at(&self, start: usize) -> Option<usize> {
        if !self.gso {
            return None;
        }
        let first = self.items.get(start)?;
        let seg = first.size();
        let (mut n, mut total) = (1, seg);
        for it in self.items.iter().skip(start + 1) {
            let size = it.size();
            // A connected socket has one peer; only the shared one needs the addresses compared.
            if n == GSO_MAX_SEGMENTS
                || !it.same_route(first)
                || (first.via.is_none() && it.dst != first.dst)
                || size > seg
                || total + size > GSO_MAX_BYTES
            {
                break;
            }
            n += 1;
            total += size;
            if size < seg {
                break;
            }
        }
        (n >= 2).then_some(n)
    }

    fn send_gso(&mut self, fd: RawFd, n: usize) -> Result<usize, Errno> {
        let seg = u16::try_from(self.items[0].size()).map_err(|_| Errno::EMSGSIZE)?;
        let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(4 * n);
        for it in self.items.iter().take(n) {
            iov.extend(it.iov().into_iter().filter(|piece| !piece.is_empty()));
        }
        let cmsgs = [ControlMessage::UdpGsoSegments(&seg)];
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        let (fd, dst) = self.items[0].route(fd);
        sendmsg(fd, &iov, &cmsgs, flags, dst.as_ref())?;
        self.gso_sends += 1;
        Ok(n)
    }

    fn send_joined(sock: &DatagramSocket, it: &TxItem, buf: &mut Vec<u8>) -> Result<usize, Errno> {
        buf.clear();
        for piece in it.iov() {
            buf.extend_from_slice(&piece);
        }
        let sent = match &it.via {
            Some(s) => s.send(buf),
            None => sock.socket().send_to(buf, it.dst),
        };
        sent.map(|_| 1)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)))
    }

    /// Datagrams for one `sendmmsg`: those leaving from the same socket, up to the next run
    /// that can go as one GSO send, so that an ACK or a short datagram in front of a run does
    /// not take the run into single sends.
    fn batch_len(&self) -> usize {
        let most = self.items.len().min(TX_BATCH);
        let first = &self.items[0];
        (1..most)
            .find(|&i| !self.items[i].same_route(first) || self.gso_run_at(i).is_some())
            .unwrap_or(most)
    }

    fn send_batch(&self, fd: RawFd) -> Result<usize, Errno> {
        let n = self.batch_len();
        let iovs: Vec<[IoSlice<'_>; 5]> = self.items.iter().take(n).map(TxItem::iov).collect();
        let (fd, named) = self.items[0].route(fd);
        let named = named.is_some();
        let addrs: Vec<Option<SockaddrStorage>> = self
            .items
            .iter()
            .take(n)
            .map(|it| named.then(|| SockaddrStorage::from(it.dst)))
            .collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(n, None);
        let cmsgs: [ControlMessage<'_>; 0] = [];
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        let sent = sendmmsg(fd, &mut headers, &iovs, &addrs, cmsgs, flags)?;
        Ok(sent.count())
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<TxItem>()
            + self.joined.capacity()
            + self.scratch.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn item(to: u16, size: usize) -> TxItem {
        let addr: SocketAddr = format!("127.0.0.1:{to}").parse().unwrap();
        TxItem {
            dst: addr,
            via: None,
            header: [0; MAX_HEADER_LEN],
            t: GatherTransmit {
                header_len: 20,
                payload: Bytes::from(vec![0; size - 24]),
                payload_tail: Bytes::new(),
                trailer: Some([0; 4]),
                seq: None,
                retransmit: false,
            },
            tag: None,
        }
    }

    /// A socket bound to `at` whose reads give up after 5 s instead of hanging a test.
    fn receiver(at: SocketAddr) -> std::net::UdpSocket {
        let rx = std::net::UdpSocket::bind(at).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        rx
    }

    fn queue(items: &[(u16, usize)]) -> TxQueue {
        let mut q = TxQueue::default();
        for &(to, size) in items {
            q.push(item(to, size));
        }
        q
    }

    #[test]
    fn forgetting_a_peer_drops_its_datagrams_only() {
        let mut q = queue(&[(1, 1000), (2, 500), (1, 300), (3, 200)]);
        q.forget("127.0.0.1:1".parse::<SocketAddr>().unwrap());
        assert_eq!(q.len(), 2);
        assert_eq!(q.bytes, 700);
        let left: Vec<_> = q.items.iter().map(|it| it.dst.port()).collect();
        assert_eq!(left, [2, 3]);
    }

    #[test]
    fn a_run_is_equal_datagrams_to_one_peer_ending_at_a_shorter_one() {
        let q = queue(&[(1, 1472), (1, 1472), (1, 1472), (1, 900), (1, 1472)]);
        assert_eq!(q.gso_run(), Some(4));
        // A longer datagram, another peer or a lone datagram ends or prevents a run.
        assert_eq!(queue(&[(1, 900), (1, 1472)]).gso_run(), None);
        assert_eq!(queue(&[(1, 1472), (2, 1472)]).gso_run(), None);
        assert_eq!(queue(&[(1, 1472)]).gso_run(), None);
        assert_eq!(queue(&[(1, 1472), (1, 1472), (2, 1472)]).gso_run(), Some(2));
    }

    #[test]
    fn a_run_stays_within_64_kib_and_64_datagrams() {
        let q = queue(&[(1, 30_000); 5]);
        assert_eq!(q.gso_run(), Some(2));
        let q = queue(&[(1, 100); 100]);
        assert_eq!(q.gso_run(), Some(GSO_MAX_SEGMENTS));
        assert_eq!(queue(&[(1, 40_000); 2]).gso_run(), None);
    }

    #[test]
    fn single_sends_stop_where_a_run_begins() {
        // An ACK, then a run: the ACK goes alone, the run stays whole for GSO.
        let q = queue(&[(1, 40), (1, 1472), (1, 1472), (1, 1472)]);
        assert_eq!(q.batch_len(), 1);
        let q = queue(&[(2, 40), (1, 40), (3, 1472), (1, 1472), (1, 1472)]);
        assert_eq!(q.batch_len(), 3);
        let mut q = queue(&[(1, 1472), (1, 1472)]);
        q.gso = false;
        assert_eq!((q.gso_run(), q.batch_len()), (None, 2));
    }

    #[test]
    fn the_queue_counts_its_bytes_and_gathers_small_datagrams_past_the_batch() {
        let mut q = queue(&[(1, 1472); TX_BATCH]);
        assert_eq!(q.bytes, TX_BATCH * 1472);
        assert!(q.wants_more());
        q.drain_front(TX_BATCH);
        assert_eq!(q.bytes, 0);
        assert!(!queue(&[(1, 65_000); TX_BATCH]).wants_more());
    }

    /// A GSO run leaves as the datagrams it was cut from, byte for byte: each header, payload,
    /// payload tail and trailer in place.
    #[test]
    fn a_gso_run_carries_every_piece_in_place() {
        let rx = receiver("127.0.0.1:0".parse().unwrap());
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut sock = DatagramSocket::new(tx, None).unwrap();
        let dst = rx.local_addr().unwrap();
        let mut q = TxQueue::default();
        let mut want = Vec::new();
        // Equal sizes but for the last; tails on some, trailers on all but one size class.
        let full = [(36, 1000, 432), (28, 1440, 0), (36, 1432, 0)];
        let shapes = full.iter().cycle().take(8).chain([&(36, 400, 300)]);
        for (k, &(header_len, pay, tail)) in shapes.enumerate() {
            let byte = |i: usize| (k * 31 + i * 7) as u8;
            let mut header = [0u8; MAX_HEADER_LEN];
            header
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = byte(i));
            let payload: Vec<u8> = (0..pay).map(|i| byte(i + 100)).collect();
            let payload_tail: Vec<u8> = (0..tail).map(|i| byte(i + 5000)).collect();
            let trailer = [k as u8, 0xaa, 0xbb, 0xcc];
            let mut d = header[..header_len].to_vec();
            d.extend_from_slice(&payload);
            d.extend_from_slice(&payload_tail);
            d.extend_from_slice(&trailer);
            want.push(d);
            q.push(TxItem {
                dst,
                via: None,
                header,
                t: GatherTransmit {
                    header_len,
                    payload: Bytes::from(payload),
                    payload_tail: Bytes::from(payload_tail),
                    trailer: Some(trailer),
                    seq: None,
                    retransmit: false,
                },
                tag: None,
            });
        }
        // All 1472 bytes but the last (740): one run.
        assert_eq!(q.gso_run(), Some(9));
        let mut errors = 0;
        assert!(q.flush(&mut sock, &mut errors));
        assert_eq!((errors, q.gso_sends), (0, 1));
        let mut buf = [0u8; 2048];
        for (k, w) in want.iter().enumerate() {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &w[..], "datagram {k}");
        }
    }

    /// Datagrams to a peer with a connected socket leave from it, the others from the shared
    /// socket, in queue order, whichever way they are sent (batches, GSO runs, lone ones).
    #[test]
    fn datagrams_leave_from_their_peers_connected_socket() {
        let rx = receiver("127.0.0.1:0".parse().unwrap());
        let shared = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let shared_addr = shared.local_addr().unwrap();
        let via = super::super::conn::connect(
            &super::super::conn::PROCESS,
            shared_addr,
            rx.local_addr().unwrap(),
            1 << 20,
        )
        .expect("connected socket");
        let via_addr = via.local_addr().unwrap();
        let mut sock = DatagramSocket::new(shared, None).unwrap();
        let dst = rx.local_addr().unwrap();
        let mut want = Vec::new();
        let mut push = |q: &mut TxQueue, connected: bool, size: usize| {
            let k = want.len();
            let mut it = item(0, size);
            it.dst = dst;
            it.via = connected.then(|| Arc::clone(&via));
            it.header[0] = k as u8;
            want.push((
                k as u8,
                size,
                if connected { via_addr } else { shared_addr },
            ));
            q.push(it);
        };
        let mut q = TxQueue::default();
        for (connected, size) in [
            (false, 40),
            (true, 40),
            (true, 60),
            (false, 40),
            (true, 3000),
        ] {
            push(&mut q, connected, size);
        }
        push(&mut q, true, 3000);
        push(&mut q, true, 100);
        // The batch stops where the socket changes.
        assert_eq!(q.batch_len(), 1);
        let mut errors = 0;
        assert!(q.flush(&mut sock, &mut errors));
        assert_eq!((errors, q.gso_sends), (0, 1));
        // Lone datagrams: joined (small) and gathered (large).
        push(&mut q, true, 50);
        assert!(q.flush(&mut sock, &mut errors));
        push(&mut q, true, 4000);
        assert!(q.flush(&mut sock, &mut errors));
        assert_eq!(errors, 0);
        assert_eq!(q.via_sends, 7);
        let mut buf = [0u8; 8192];
        for &(k, size, from) in &want {
            let (n, src) = rx.recv_from(&mut buf).unwrap();
            assert_eq!((buf[0], n, src), (k, size, from), "datagram {k}");
        }
    }

    /// A connected socket answers the send after an ICMP error with that error, and that
    /// send does not go: it is tried again rather than lost.
    #[test]
    fn an_earlier_icmp_error_costs_no_datagram() {
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let shared = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let local = shared.local_addr().unwrap();
        let via = super::super::conn::connect(&super::super::conn::PROCESS, local, port, 1 << 20)
            .expect("connected socket");
        // Nobody listens yet: the port-unreachable answer becomes the socket's pending error.
        via.send(b"x").unwrap();
        {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            use std::os::fd::AsFd;
            // Without the pending error this test would prove nothing.
            let mut fds = [PollFd::new(via.as_fd(), PollFlags::empty())];
            poll(&mut fds, PollTimeout::from(5000u16)).unwrap();
            let revents = fds[0].revents().unwrap_or(PollFlags::empty());
            assert!(
                revents.contains(PollFlags::POLLERR),
                "no ICMP error pending"
            );
        }
        let rx = receiver(port);
        let mut sock = DatagramSocket::new(shared, None).unwrap();
        let mut q = TxQueue::default();
        let mut it = item(port.port(), 64);
        it.via = Some(via);
        it.header[0] = 42;
        q.push(it);
        let mut errors = 0;
        assert!(q.flush(&mut sock, &mut errors));
        assert_eq!((errors, q.via_sends), (0, 1));
        let mut buf = [0u8; 128];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!((n, buf[0]), (64, 42));
    }
}

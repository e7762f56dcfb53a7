//! Sockets of their own, connected to one peer each, for sending to that peer.
//!
//! A `sendto` on the queue pair's shared socket makes the kernel look up the route to the
//! destination on every datagram; a socket connected to the peer keeps it, which shortens
//! RD's one-way latency for small messages (`iwarp/BENCHMARKS.md`, "Connected send sockets").
//!
//! Only sends use them. The socket is bound to an ephemeral port, so the peer's datagrams keep
//! coming to the queue pair's socket, the one address peers know, and no extra socket is read
//! while polling. The receiver does not look at the source port of data: sessions are found by
//! the id in the engine's header. Handshake datagrams, whose source the receiver does use,
//! still leave from the shared socket.

use std::net::{SocketAddr, UdpSocket};
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use nix::sys::resource::{getrlimit, Resource};
use socket2::SockRef;

/// How many connected sockets may be open at once, and how many are.
#[derive(Debug)]
pub(super) struct Budget {
    open: AtomicUsize,
    limit: OnceLock<usize>,
}

/// The process's budget, over all queue pairs: a quarter of the descriptors it may open, so
/// the application keeps the rest however many queue pairs it makes.
pub(super) static PROCESS: Budget = Budget::new();

impl Budget {
    const fn new() -> Budget {
        Budget {
            open: AtomicUsize::new(0),
            limit: OnceLock::new(),
        }
    }

    fn limit(&self) -> usize {
        *self.limit.get_or_init(|| {
            getrlimit(Resource::RLIMIT_NOFILE).map_or(256, |(soft, _)| {
                usize::try_from(soft / 4).unwrap_or(usize::MAX)
            })
        })
    }

    fn take(&'static self) -> Option<Share> {
        self.open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.limit()).then_some(n + 1)
            })
            .ok()?;
        Some(Share(self))
    }
}

/// One socket's place in a [`Budget`], given back when dropped.
#[derive(Debug)]
struct Share(&'static Budget);

impl Drop for Share {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A socket connected to one peer.
#[derive(Debug)]
pub(crate) struct PeerSocket {
    sock: UdpSocket,
    _share: Share,
}

impl Deref for PeerSocket {
    type Target = UdpSocket;
    fn deref(&self) -> &UdpSocket {
        &self.sock
    }
}

/// A socket connected to `peer` from `local`'s address, with `send_buffer` bytes of send
/// buffer (as `SO_SNDBUF` reports it, so asked for halved). `None` when `budget` is spent or
/// the kernel refuses one: the peer's datagrams then leave from the shared socket.
pub(super) fn connect(
    budget: &'static Budget,
    local: SocketAddr,
    peer: SocketAddr,
    send_buffer: usize,
) -> Option<Arc<PeerSocket>> {
    let share = budget.take()?;
    let mut bind = local;
    bind.set_port(0); // keeps an IPv6 scope id
    let sock = UdpSocket::bind(bind).ok()?;
    sock.set_nonblocking(true).ok()?;
    // Best effort: a smaller buffer only makes EAGAIN come sooner, and the queue keeps what it
    // could not send.
    let _ = SockRef::from(&sock).set_send_buffer_size(send_buffer / 2);
    sock.connect(peer).ok()?;
    Some(Arc::new(PeerSocket {
        sock,
        _share: share,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: usize) -> &'static Budget {
        let b = Box::leak(Box::new(Budget::new()));
        b.limit.set(limit).unwrap();
        b
    }

    #[test]
    fn sends_reach_the_peer_from_another_port() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let shared = UdpSocket::bind("127.0.0.1:0").unwrap();
        let local = shared.local_addr().unwrap();
        let c = connect(budget(1), local, rx.local_addr().unwrap(), 1 << 20).expect("connects");
        assert_eq!(c.local_addr().unwrap().ip(), local.ip());
        assert_ne!(c.local_addr().unwrap().port(), local.port());
        c.send(b"abc").unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"abc");
        assert_eq!(from, c.local_addr().unwrap());
    }

    #[test]
    fn the_budget_bounds_open_sockets_and_failures_give_their_share_back() {
        let b = budget(2);
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        // An IPv4 socket cannot connect to an IPv6 peer.
        assert!(connect(b, local, "[::1]:9".parse().unwrap(), 1 << 20).is_none());
        assert_eq!(b.open.load(Ordering::Relaxed), 0);
        let first = connect(b, local, peer, 1 << 20).expect("within budget");
        let second = connect(b, local, peer, 1 << 20).expect("within budget");
        assert!(connect(b, local, peer, 1 << 20).is_none(), "budget spent");
        drop(first);
        assert_eq!(b.open.load(Ordering::Relaxed), 1);
        assert!(connect(b, local, peer, 1 << 20).is_some());
        drop(second);
    }
}

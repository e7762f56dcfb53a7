//! Switching a connected socket to a queue pair, or leaving it plain: a stream socket to an
//! RC queue pair, a datagram socket to an RD queue pair.
//!
//! Whoever sent first into a peer that did not switch would corrupt its stream, so the go
//! signal travels out of band. Roles follow the two ends' addresses (the lower one is the MPA
//! initiator, so both ends agree without talking). The responder sends one urgent byte
//! (`MSG_OOB`), which a plain peer's reads never see, then looks (`MSG_PEEK`, consuming
//! nothing) for the initiator's MPA Request; the initiator waits for the urgent byte before
//! it sends anything. A peer that does not switch within the timeout leaves both streams as
//! they were, and the switch fails with `EPROTONOSUPPORT`.
//!
//! A datagram socket has no out-of-band channel: both ends send a hello datagram (magic,
//! QP number) until each has the other's, and a datagram that is not a hello means the peer
//! is not switching (it is left for the program to read). A plain peer sees the hellos as
//! stray datagrams, at most one per [`HELLO_EVERY`] until the timeout.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use iwarp::verbs::{AddressHandle, QpConfig, QueuePair, RcQp, RdQp};

use crate::datagram::Datagram;
use crate::stream::Stream;

/// The option level (`include/diwarp_sockets.h`): above every Linux `SOL_*`, and the kernel
/// refuses it when the library is not loaded.
pub const SOL_DIWARP: i32 = 0x6477;
/// The option that switches a socket (an int, 1).
pub const DIWARP_IWARP_MODE: i32 = 1;

/// The urgent byte the responder sends.
pub const GO: u8 = b'D';
/// The first bytes of an MPA Request (RFC 5044 §7.1).
pub const REQUEST_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// What the initiator says in the Request's private data.
const HELLO: &[u8] = b"diwarp-sockets/1";

/// How long a switch waits for the peer's side of it: `DIWARP_SWITCH_TIMEOUT_MS`, 2000 ms by
/// default.
pub fn timeout() -> Duration {
    std::env::var("DIWARP_SWITCH_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_millis(2000), Duration::from_millis)
}

/// Whether this end starts the MPA exchange: its address is the lower of the two.
pub fn initiates(local: SocketAddr, peer: SocketAddr) -> bool {
    (local.ip(), local.port()) < (peer.ip(), peer.port())
}

/// Why a switch failed, as the errno the caller gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Not a connected TCP socket.
    NotConnected,
    /// The peer did not switch in time; both streams are as they were.
    PeerPlain,
    /// The MPA exchange failed after both ends had switched; the connection is unusable.
    Exchange,
}

impl Failure {
    pub fn errno(self) -> i32 {
        match self {
            Failure::NotConnected => libc::ENOTCONN,
            Failure::PeerPlain => libc::EPROTONOSUPPORT,
            Failure::Exchange => libc::EPROTO,
        }
    }
}

/// The socket calls a switch needs, on the real socket (the `ffi` layer gives libc's).
pub trait Wire {
    fn send_urgent(&mut self, byte: u8) -> bool;
    /// The urgent byte, if it came within `until`.
    fn recv_urgent(&mut self, until: Instant) -> Option<u8>;
    /// The first `buf.len()` bytes waiting, without taking them, if they came within `until`.
    fn peek(&mut self, buf: &mut [u8], until: Instant) -> bool;
}

/// Switches the socket `stream` (a duplicate of the caller's descriptor) on this end.
pub fn switch(stream: TcpStream, wire: &mut dyn Wire) -> Result<Stream, Failure> {
    let (Ok(local), Ok(peer)) = (stream.local_addr(), stream.peer_addr()) else {
        return Err(Failure::NotConnected);
    };
    let wait = timeout();
    let until = Instant::now() + wait;
    let config = QpConfig {
        crc: true,
        connect_timeout: wait,
        ..QpConfig::default()
    };
    let mut qp = RcQp::create(config).map_err(|_| Failure::Exchange)?;
    if initiates(local, peer) {
        if wire.recv_urgent(until) != Some(GO) {
            return Err(Failure::PeerPlain);
        }
        qp.connect_stream(stream, HELLO)
            .map_err(|_| Failure::Exchange)?;
    } else {
        if !wire.send_urgent(GO) {
            return Err(Failure::NotConnected);
        }
        let mut key = [0u8; REQUEST_KEY.len()];
        if !wire.peek(&mut key, until) || &key != REQUEST_KEY {
            return Err(Failure::PeerPlain);
        }
        qp.accept_stream(stream, &[])
            .map_err(|_| Failure::Exchange)?;
    }
    Ok(Stream::new(qp))
}

/// The first bytes of a datagram socket's hello.
pub const HELLO_MAGIC: &[u8; 12] = b"DIWARP-RD/1 ";
/// A hello: the magic, the sender's QP number, whether it has the other's hello already.
pub const HELLO_LEN: usize = HELLO_MAGIC.len() + 5;
/// How often a hello is sent while the peer's has not come.
pub const HELLO_EVERY: Duration = Duration::from_millis(250);

/// The hello a switching end sends: from `qpn`, saying whether it has the peer's.
pub fn hello(qpn: u32, have_peers: bool) -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[..HELLO_MAGIC.len()].copy_from_slice(HELLO_MAGIC);
    h[HELLO_MAGIC.len()..HELLO_MAGIC.len() + 4].copy_from_slice(&qpn.to_be_bytes());
    h[HELLO_LEN - 1] = u8::from(have_peers);
    h
}

/// The QP number in a hello, if `d` is one.
pub fn read_hello(d: &[u8]) -> Option<u32> {
    if d.len() != HELLO_LEN || !d.starts_with(HELLO_MAGIC) {
        return None;
    }
    let q = &d[HELLO_MAGIC.len()..HELLO_MAGIC.len() + 4];
    Some(u32::from_be_bytes([q[0], q[1], q[2], q[3]]))
}

/// The QP number in a peeked datagram `n` bytes long of which `buf` holds the start: one
/// longer than `buf` (the queue pair's first datagram, say) is no hello.
pub fn peeked_hello(buf: &[u8], n: usize) -> Option<u32> {
    buf.get(..n).and_then(read_hello)
}

/// The datagram socket calls a switch needs, on the real socket.
pub trait DatagramWire {
    fn send(&mut self, d: &[u8]) -> bool;
    /// The next datagram waiting, without taking it (its length), if one came by `until`.
    fn peek(&mut self, buf: &mut [u8], until: Instant) -> Option<usize>;
    /// Takes the next datagram.
    fn discard(&mut self);
}

/// Switches the connected datagram socket `sock` (a duplicate of the caller's descriptor).
pub fn switch_datagram(sock: UdpSocket, wire: &mut dyn DatagramWire) -> Result<Datagram, Failure> {
    let Ok(peer) = sock.peer_addr() else {
        return Err(Failure::NotConnected);
    };
    let wait = timeout();
    let until = Instant::now() + wait;
    let mut config = QpConfig {
        crc: true,
        // Everything must leave from the program's socket: the peer's is connected to it.
        connected_peers: 0,
        ..QpConfig::default()
    };
    config.rd.idle_timeout = config.rd.idle_timeout.max(wait);
    let mut qp = RdQp::create(config).map_err(|_| Failure::Exchange)?;
    let mut peer_qpn = None;
    let mut next_hello = Instant::now();
    let mut buf = [0u8; HELLO_LEN + 1];
    loop {
        let now = Instant::now();
        if now >= next_hello {
            if !wire.send(&hello(qp.qpn(), peer_qpn.is_some())) {
                return Err(Failure::NotConnected);
            }
            next_hello = now + HELLO_EVERY;
        }
        if let Some(q) = peer_qpn {
            // Every hello the peer sent before ours came is taken, so that none reaches the
            // queue pair.
            while wire
                .peek(&mut buf, now)
                .and_then(|n| peeked_hello(&buf, n))
                .is_some()
            {
                wire.discard();
            }
            qp.attach_udp(sock).map_err(|_| Failure::Exchange)?;
            return Ok(Datagram::new(qp, AddressHandle::new(peer, q)));
        }
        match wire.peek(&mut buf, until.min(next_hello)) {
            Some(n) => match peeked_hello(&buf, n) {
                Some(q) => {
                    wire.discard();
                    peer_qpn = Some(q);
                    // Answer at once: the peer may be waiting for ours.
                    next_hello = now;
                }
                None => return Err(Failure::PeerPlain),
            },
            None if Instant::now() >= until => return Err(Failure::PeerPlain),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_end_initiates() {
        let a: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:80".parse().unwrap();
        let c: SocketAddr = "10.0.0.1:5001".parse().unwrap();
        for (x, y) in [(a, b), (a, c), (b, c)] {
            assert!(initiates(x, y) != initiates(y, x), "{x} {y}");
        }
        assert!(initiates(a, b) && initiates(a, c));
    }

    /// Datagrams in a queue, as a socket would hold them.
    struct Queue {
        waiting: std::collections::VecDeque<Vec<u8>>,
        sent: Vec<Vec<u8>>,
    }

    impl DatagramWire for Queue {
        fn send(&mut self, d: &[u8]) -> bool {
            self.sent.push(d.to_vec());
            true
        }
        fn peek(&mut self, buf: &mut [u8], _: Instant) -> Option<usize> {
            let d = self.waiting.front()?;
            let n = d.len().min(buf.len());
            buf[..n].copy_from_slice(&d[..n]);
            Some(d.len())
        }
        fn discard(&mut self) {
            self.waiting.pop_front();
        }
    }

    fn connected() -> UdpSocket {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(peer.local_addr().unwrap()).unwrap();
        s
    }

    #[test]
    fn a_hello_is_read_back_and_nothing_else_is_one() {
        let h = hello(0xdead_beef, true);
        assert_eq!(read_hello(&h), Some(0xdead_beef));
        assert_eq!(read_hello(&h[..h.len() - 1]), None);
        assert_eq!(read_hello(b"DIWARP-RD/1 xxxxxxxxxxx"), None);
        let mut other = h;
        other[0] = b'd';
        assert_eq!(read_hello(&other), None);
    }

    #[test]
    fn the_peers_hellos_are_taken_and_its_data_is_left_for_the_queue_pair() {
        let mut w = Queue {
            waiting: [
                hello(7, false).to_vec(),
                hello(7, false).to_vec(),
                b"data".to_vec(),
            ]
            .into(),
            sent: Vec::new(),
        };
        assert!(switch_datagram(connected(), &mut w).is_ok());
        assert_eq!(
            w.waiting,
            [b"data".to_vec()],
            "both hellos taken, the data left"
        );
        // Ours went first, then the answer saying we have the peer's.
        assert_eq!(w.sent.len(), 2);
        assert_eq!(w.sent[1][HELLO_LEN - 1], 1);
    }

    #[test]
    fn the_peers_first_datagrams_behind_its_hello_stay_whatever_their_length() {
        // The peer switched at once and its queue pair spoke: a HELLO of 32 bytes, then data
        // longer than any hello, both longer than the room a hello is peeked into.
        let long = [vec![0xE1; 32], vec![0x10; 2000]];
        let mut w = Queue {
            waiting: [hello(7, true).to_vec(), long[0].clone(), long[1].clone()].into(),
            sent: Vec::new(),
        };
        assert!(switch_datagram(connected(), &mut w).is_ok());
        assert_eq!(w.waiting, long, "the queue pair's datagrams left in order");
    }

    #[test]
    fn a_datagram_that_is_not_a_hello_means_a_plain_peer_and_stays() {
        let mut w = Queue {
            waiting: [b"GET / HTTP/1.0".to_vec()].into(),
            sent: Vec::new(),
        };
        assert_eq!(
            switch_datagram(connected(), &mut w).err(),
            Some(Failure::PeerPlain)
        );
        assert_eq!(w.waiting.len(), 1, "the program's datagram is not taken");
    }

    #[test]
    fn an_unconnected_datagram_socket_cannot_switch() {
        let mut w = Queue {
            waiting: Default::default(),
            sent: Vec::new(),
        };
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            switch_datagram(s, &mut w).err(),
            Some(Failure::NotConnected)
        );
        assert!(w.sent.is_empty());
    }

    #[test]
    fn failures_are_the_errnos_the_header_names() {
        assert_eq!(Failure::PeerPlain.errno(), libc::EPROTONOSUPPORT);
        assert_eq!(Failure::NotConnected.errno(), libc::ENOTCONN);
        assert_eq!(Failure::Exchange.errno(), libc::EPROTO);
    }
}

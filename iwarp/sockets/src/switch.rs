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
//! A datagram socket has no out-of-band channel: both ends exchange hello datagrams
//! (`handshake`, which survives loss), and a datagram that is not a hello means the peer is
//! not switching (it is left for the program to read). A plain peer sees the hellos as stray
//! datagrams, at most one per [`HELLO_EVERY`](crate::handshake::HELLO_EVERY) until the
//! timeout.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use iwarp::verbs::{AddressHandle, QpConfig, QueuePair, RcQp, RdQp};

use crate::datagram::Datagram;
use crate::handshake::{self, Handshake, Hello, Seen, Step};
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

/// The datagram socket calls a switch needs, on the real socket.
pub trait DatagramWire {
    /// Sends `d`; the errno if the kernel refused it.
    fn send(&mut self, d: &[u8]) -> Result<(), i32>;
    /// The next datagram waiting, without taking it (its length), if one came by `until`.
    fn peek(&mut self, buf: &mut [u8], until: Instant) -> Option<usize>;
    /// Takes the next datagram.
    fn discard(&mut self);
}

/// Room for the start of a peeked datagram: more than any hello or RD HELLO, so that a
/// longer datagram is seen to be neither.
const PEEK_ROOM: usize = 64;

/// Switches the connected datagram socket `sock` (a duplicate of the caller's descriptor),
/// running the exchange of `handshake` over `wire`.
pub fn switch_datagram(sock: UdpSocket, wire: &mut dyn DatagramWire) -> Result<Datagram, Failure> {
    let Ok(peer) = sock.peer_addr() else {
        return Err(Failure::NotConnected);
    };
    let wait = timeout();
    let mut config = QpConfig {
        crc: true,
        // Everything must leave from the program's socket: the peer's is connected to it.
        connected_peers: 0,
        ..QpConfig::default()
    };
    config.rd.idle_timeout = config.rd.idle_timeout.max(wait);
    let mut qp = RdQp::create(config).map_err(|_| Failure::Exchange)?;
    // Kept to answer the peer's hellos after the switch, past the queue pair's socket.
    let answers = sock.try_clone().map_err(|_| Failure::Exchange)?;
    let mut hs = Handshake::new(qp.qpn(), Instant::now(), wait);
    let mut buf = [0u8; PEEK_ROOM];
    loop {
        match hs.step(Instant::now()) {
            Step::Send(h) => match wire.send(&h) {
                Err(e) if !handshake::lost(e) => return Err(Failure::NotConnected),
                _ => {}
            },
            Step::Wait(until) => {
                if let Some(n) = wire.peek(&mut buf, until) {
                    if hs.datagram(&buf[..n.min(PEEK_ROOM)]) == Seen::Take {
                        wire.discard();
                    }
                }
            }
            Step::Switched(q) => {
                // Every hello the peer sent before ours came is taken, so that none reaches
                // the queue pair (which would answer it again).
                while wire
                    .peek(&mut buf, Instant::now())
                    .is_some_and(|n| Hello::parse(&buf[..n.min(PEEK_ROOM)]).is_some())
                {
                    wire.discard();
                }
                let own = qp.qpn();
                qp.attach_udp(sock).map_err(|_| Failure::Exchange)?;
                return Ok(Datagram::new(qp, AddressHandle::new(peer, q), own, answers));
            }
            Step::Plain => return Err(Failure::PeerPlain),
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
        /// What each send returns, first to last; then success.
        refusals: Vec<i32>,
    }

    impl Queue {
        fn new(waiting: impl IntoIterator<Item = Vec<u8>>) -> Queue {
            Queue {
                waiting: waiting.into_iter().collect(),
                sent: Vec::new(),
                refusals: Vec::new(),
            }
        }
    }

    impl DatagramWire for Queue {
        fn send(&mut self, d: &[u8]) -> Result<(), i32> {
            if !self.refusals.is_empty() {
                return Err(self.refusals.remove(0));
            }
            self.sent.push(d.to_vec());
            Ok(())
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

    fn hello(qpn: u32, has_yours: bool) -> Vec<u8> {
        Hello { qpn, has_yours }.emit().to_vec()
    }

    fn connected() -> UdpSocket {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(peer.local_addr().unwrap()).unwrap();
        s
    }

    #[test]
    fn the_peers_hellos_are_taken_and_its_data_is_left_for_the_queue_pair() {
        let mut w = Queue::new([hello(7, false), hello(7, false), b"data".to_vec()]);
        assert!(switch_datagram(connected(), &mut w).is_ok());
        assert_eq!(
            w.waiting,
            [b"data".to_vec()],
            "both hellos taken, the data left"
        );
        // Ours went first, then the answer saying we have the peer's.
        assert_eq!(w.sent.len(), 2);
        assert_eq!(Hello::parse(&w.sent[1]).map(|h| h.has_yours), Some(true));
    }

    #[test]
    fn the_peers_first_datagrams_behind_its_hello_stay_whatever_their_length() {
        // The peer switched at once and its queue pair spoke: a HELLO of 32 bytes, then data
        // longer than any hello, both longer than the room a hello is peeked into.
        let long = [vec![0xE1; 32], vec![0x10; 2000]];
        let mut w = Queue::new([hello(7, true), long[0].clone(), long[1].clone()]);
        assert!(switch_datagram(connected(), &mut w).is_ok());
        assert_eq!(w.waiting, long, "the queue pair's datagrams left in order");
    }

    #[test]
    fn a_send_the_kernel_drops_is_a_lost_hello_not_a_failure() {
        // nftables' drop on output is EPERM; a full device queue ENOBUFS.
        let mut w = Queue::new([hello(7, false)]);
        w.refusals = vec![libc::EPERM, libc::ENOBUFS];
        assert!(switch_datagram(connected(), &mut w).is_ok());
        let mut w = Queue::new([hello(7, false)]);
        w.refusals = vec![libc::EBADF];
        assert_eq!(
            switch_datagram(connected(), &mut w).err(),
            Some(Failure::NotConnected)
        );
    }

    #[test]
    fn a_datagram_that_is_not_a_hello_means_a_plain_peer_and_stays() {
        let mut w = Queue::new([b"GET / HTTP/1.0".to_vec()]);
        assert_eq!(
            switch_datagram(connected(), &mut w).err(),
            Some(Failure::PeerPlain)
        );
        assert_eq!(w.waiting.len(), 1, "the program's datagram is not taken");
    }

    #[test]
    fn an_unconnected_datagram_socket_cannot_switch() {
        let mut w = Queue::new([]);
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

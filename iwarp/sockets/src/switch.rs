//! Switching a connected stream socket to an RC queue pair, or leaving it plain.
//!
//! Whoever sent first into a peer that did not switch would corrupt its stream, so the go
//! signal travels out of band. Roles follow the two ends' addresses (the lower one is the MPA
//! initiator, so both ends agree without talking). The responder sends one urgent byte
//! (`MSG_OOB`), which a plain peer's reads never see, then looks (`MSG_PEEK`, consuming
//! nothing) for the initiator's MPA Request; the initiator waits for the urgent byte before
//! it sends anything. A peer that does not switch within the timeout leaves both streams as
//! they were, and the switch fails with `EPROTONOSUPPORT`.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use iwarp::verbs::{QpConfig, RcQp};

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
    Ok(Stream::new(qp, crate::registry::generation()))
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

    #[test]
    fn failures_are_the_errnos_the_header_names() {
        assert_eq!(Failure::PeerPlain.errno(), libc::EPROTONOSUPPORT);
        assert_eq!(Failure::NotConnected.errno(), libc::ENOTCONN);
        assert_eq!(Failure::Exchange.errno(), libc::EPROTO);
    }
}

//! The sockets library's datagram hello (`diwarp_sockets::handshake`): what a switching end and
//! a switched one read of every datagram. The stream switch's go signal is one urgent byte
//! compared with a constant, and the MPA Request that follows it is `mpa_startup`'s.

use std::time::{Duration, Instant};

use diwarp_sockets::handshake::{answer, Handshake, Hello, HELLO_LEN};

/// No panic; a hello reads back as the one sent; a switched end answers only its peer's hello
/// that lacks its own; a switching end takes off the socket only what is a hello.
pub fn hello_datagram(data: &[u8]) -> usize {
    let hello = Hello::parse(data);
    if let Some(h) = hello {
        assert_eq!(data.len(), HELLO_LEN);
        assert_eq!(h.emit()[..], data[..]);
    }
    let peer = hello.map_or(9, |h| h.qpn);
    if answer(7, peer, data).is_some() {
        assert!(hello.is_some_and(|h| !h.has_yours), "answered a non-hello");
    }
    let mut hs = Handshake::new(7, Instant::now(), Duration::from_secs(1));
    let _ = hs.datagram(data);
    data.len()
}

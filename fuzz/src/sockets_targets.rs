//! The sockets library's datagram hello (`diwarp_sockets::switch`). The stream switch's go
//! signal is one urgent byte compared with a constant, and the MPA Request that follows it is
//! `mpa_startup`'s.

use diwarp_sockets::switch::{hello, peeked_hello, read_hello, HELLO_LEN};

/// The first byte is the length the peek reported (a datagram longer than what was peeked is
/// no hello); the rest is the datagram. No panic; a hello reads back as the one sent.
pub fn hello_datagram(data: &[u8]) -> usize {
    let Some((&n, d)) = data.split_first() else {
        return 0;
    };
    if let Some(qpn) = read_hello(d) {
        assert_eq!(d.len(), HELLO_LEN);
        assert_eq!(
            hello(qpn, d[HELLO_LEN - 1] == 1)[..HELLO_LEN - 1],
            d[..HELLO_LEN - 1]
        );
    }
    let peeked = peeked_hello(d, usize::from(n));
    if usize::from(n) > d.len() {
        assert_eq!(peeked, None);
    }
    data.len()
}

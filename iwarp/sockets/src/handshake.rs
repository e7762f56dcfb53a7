//! The hello exchange that switches a connected datagram socket, as a machine without I/O:
//! it is told what came and what time it is, and says what to send and until when to wait,
//! so that the same machine runs over the program's socket (`switch`) and over a simulated
//! lossy network (`tests/handshake_model.rs`).
//!
//! Each end sends a hello (magic, its QP number, whether it has the peer's) every
//! [`HELLO_EVERY`] until it has the peer's, then answers once and is switched. Any one lost
//! datagram is survived: a switched end still answers each hello that says the peer lacks
//! its own ([`answer`], from the queue pair's receive path), and an end whose peer's hellos
//! were all lost knows the peer switched when the peer's queue pair greets its QP number (an
//! RD HELLO naming it). Any other datagram means the peer is not switching; it stays for the
//! program.

use std::time::{Duration, Instant};

use iwarp::verbs::{RdHello, RdHelloKind};

/// The first bytes of a hello.
pub const HELLO_MAGIC: &[u8; 12] = b"DIWARP-RD/1 ";
/// A hello: the magic, the sender's QP number, whether it has the other's hello already.
pub const HELLO_LEN: usize = HELLO_MAGIC.len() + 5;
/// How often a hello is sent while the peer's has not come.
pub const HELLO_EVERY: Duration = Duration::from_millis(250);

/// One end's hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub qpn: u32,
    /// The sender has the receiver's hello: it is switched, or switches at once.
    pub has_yours: bool,
}

impl Hello {
    pub fn emit(&self) -> [u8; HELLO_LEN] {
        let mut h = [0u8; HELLO_LEN];
        h[..HELLO_MAGIC.len()].copy_from_slice(HELLO_MAGIC);
        h[HELLO_MAGIC.len()..HELLO_LEN - 1].copy_from_slice(&self.qpn.to_be_bytes());
        h[HELLO_LEN - 1] = u8::from(self.has_yours);
        h
    }

    /// The hello `d` is, if it is one.
    pub fn parse(d: &[u8]) -> Option<Hello> {
        if d.len() != HELLO_LEN || !d.starts_with(HELLO_MAGIC) || d[HELLO_LEN - 1] > 1 {
            return None;
        }
        let q = &d[HELLO_MAGIC.len()..HELLO_LEN - 1];
        Some(Hello {
            qpn: u32::from_be_bytes([q[0], q[1], q[2], q[3]]),
            has_yours: d[HELLO_LEN - 1] == 1,
        })
    }
}

/// What to do with the datagram just shown to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Take it off the socket: it was a hello.
    Take,
    /// Leave it: the program's, or the peer's queue pair's.
    Leave,
}

/// What the end does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Send this hello (and ask again).
    Send([u8; HELLO_LEN]),
    /// Wait for a datagram until then (and ask again).
    Wait(Instant),
    /// Switched: the peer's QP number.
    Switched(u32),
    /// The peer is not switching (it sent something else, or nothing in time).
    Plain,
}

/// One end of the exchange.
#[derive(Debug, Clone)]
pub struct Handshake {
    qpn: u32,
    peer: Option<u32>,
    answered: bool,
    plain: bool,
    next_hello: Instant,
    until: Instant,
}

impl Handshake {
    /// The end of queue pair `qpn`, starting at `now`, giving up after `timeout`.
    pub fn new(qpn: u32, now: Instant, timeout: Duration) -> Handshake {
        Handshake {
            qpn,
            peer: None,
            answered: false,
            plain: false,
            next_hello: now,
            until: now + timeout,
        }
    }

    /// The datagram at the head of the socket, whole (or its first bytes, when it is longer
    /// than any hello).
    pub fn datagram(&mut self, d: &[u8]) -> Seen {
        if let Some(h) = Hello::parse(d) {
            self.peer.get_or_insert(h.qpn);
            return Seen::Take;
        }
        if self.peer.is_none() {
            match RdHello::parse(d) {
                Some(r) if r.kind == RdHelloKind::Hello && r.dst_qpn == self.qpn => {
                    // Only a peer that has our hello knows our QP number: it switched, and
                    // its queue pair, not a hello, takes our answer.
                    self.peer = Some(r.src_qpn);
                    self.answered = true;
                }
                _ => self.plain = true,
            }
        }
        Seen::Leave
    }

    pub fn step(&mut self, now: Instant) -> Step {
        if self.plain {
            return Step::Plain;
        }
        if let Some(q) = self.peer {
            if !self.answered {
                self.answered = true;
                return Step::Send(self.hello(true));
            }
            return Step::Switched(q);
        }
        if now >= self.until {
            return Step::Plain;
        }
        if now >= self.next_hello {
            self.next_hello = now + HELLO_EVERY;
            return Step::Send(self.hello(false));
        }
        Step::Wait(self.next_hello.min(self.until))
    }

    fn hello(&self, has_yours: bool) -> [u8; HELLO_LEN] {
        Hello {
            qpn: self.qpn,
            has_yours,
        }
        .emit()
    }
}

/// What a switched end (queue pair `qpn`, the peer's `peer`) sends back for datagram `d`: a
/// hello of the peer that lacks ours (our answer was lost) is answered again.
pub fn answer(qpn: u32, peer: u32, d: &[u8]) -> Option<[u8; HELLO_LEN]> {
    Hello::parse(d).filter(|h| h.qpn == peer && !h.has_yours)?;
    Some(
        Hello {
            qpn,
            has_yours: true,
        }
        .emit(),
    )
}

/// Whether a hello's send failing with `errno` is a lost hello rather than a broken socket:
/// a netfilter drop on the way out (`EPERM`), a full device queue (`ENOBUFS`), a full socket
/// or a signal, and a refusal reported for an earlier datagram (the peer's socket was not
/// there yet) are what a network does to datagrams, and the next hello goes as planned.
pub fn lost(errno: i32) -> bool {
    matches!(
        errno,
        libc::EPERM | libc::ENOBUFS | libc::EAGAIN | libc::EINTR | libc::ECONNREFUSED
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_is_read_back_and_nothing_else_is_one() {
        let h = Hello {
            qpn: 0xdead_beef,
            has_yours: true,
        };
        assert_eq!(Hello::parse(&h.emit()), Some(h));
        assert_eq!(Hello::parse(&h.emit()[..HELLO_LEN - 1]), None);
        assert_eq!(Hello::parse(b"DIWARP-RD/1 xxxxxxxxxxx"), None);
        let mut other = h.emit();
        other[0] = b'd';
        assert_eq!(Hello::parse(&other), None);
        other = h.emit();
        other[HELLO_LEN - 1] = 2;
        assert_eq!(Hello::parse(&other), None);
    }

    #[test]
    fn only_a_hello_that_lacks_ours_from_the_peer_is_answered() {
        let lacks = Hello {
            qpn: 7,
            has_yours: false,
        };
        let a = answer(3, 7, &lacks.emit()).map(|a| Hello::parse(&a));
        assert_eq!(
            a,
            Some(Some(Hello {
                qpn: 3,
                has_yours: true
            }))
        );
        let has = Hello {
            has_yours: true,
            ..lacks
        };
        assert_eq!(answer(3, 7, &has.emit()), None, "no answer to an answer");
        assert_eq!(answer(3, 8, &lacks.emit()), None, "another queue pair's");
        assert_eq!(answer(3, 7, b"data"), None);
    }

    #[test]
    fn the_peers_queue_pair_greeting_ours_means_it_switched() {
        let t = Instant::now();
        let mut h = Handshake::new(5, t, Duration::from_secs(1));
        assert!(matches!(h.step(t), Step::Send(_)));
        let rd = RdHello {
            kind: RdHelloKind::Hello,
            checksum: true,
            dst_qpn: 5,
            src_qpn: 9,
            id: 1,
            epoch: 1,
            echo: (0, 0),
        };
        assert_eq!(
            h.datagram(&rd.emit()),
            Seen::Leave,
            "the queue pair's to take"
        );
        assert_eq!(h.step(t), Step::Switched(9));
        let mut other = Handshake::new(5, t, Duration::from_secs(1));
        let to_another = RdHello { dst_qpn: 6, ..rd };
        assert_eq!(other.datagram(&to_another.emit()), Seen::Leave);
        assert_eq!(other.step(t), Step::Plain);
    }

    #[test]
    fn sends_that_the_network_drops_are_loss_and_others_are_not() {
        for e in [libc::EPERM, libc::ENOBUFS, libc::EAGAIN, libc::ECONNREFUSED] {
            assert!(lost(e), "{e}");
        }
        for e in [libc::EBADF, libc::ENOTCONN, libc::EINVAL] {
            assert!(!lost(e), "{e}");
        }
    }
}

//! Connection set-ups between two endpoints' paths, driven by hand: each step of the start-up
//! wakes the progress thread's epoll set (no datagram, timer or poll helps it along), and a
//! request that crossed a connection already up does not take it down.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{QpConfig, RdReceiver};
use policies::promote::{Config as Promote, Mode};

use super::{Gone, RcPaths, Receiver};
use crate::addr::EpName;
use crate::peer::PeerTable;
use crate::waiter::{Waiter, CONNECTIONS};

/// A receiver of no messages, with the peer table the paths look peers up in.
struct Nothing(PeerTable);

impl Receiver for Nothing {
    fn peers(&mut self) -> &mut PeerTable {
        &mut self.0
    }
}

/// One endpoint's paths and its peer table.
struct Side {
    paths: RcPaths<()>,
    rx: Nothing,
}

impl std::ops::Deref for Side {
    type Target = RcPaths<()>;
    fn deref(&self) -> &RcPaths<()> {
        &self.paths
    }
}

impl std::ops::DerefMut for Side {
    fn deref_mut(&mut self) -> &mut RcPaths<()> {
        &mut self.paths
    }
}

impl Side {
    fn learn(&mut self, name: &EpName) {
        self.rx.0.learn(name);
    }

    fn traffic(&mut self, now: Instant, addr: SocketAddr, bytes: usize, rendezvous: bool) {
        let slot = self.rx.0.slot(addr);
        self.paths.traffic(now, slot, bytes, rendezvous);
    }

    fn answer(
        &mut self,
        now: Instant,
        pd: &[u8],
        resend: &mut Vec<(
            crate::peer::SlotId,
            std::collections::VecDeque<super::Unacked<()>>,
        )>,
    ) -> Result<EpName, super::Reason> {
        self.paths
            .answer(now, &mut self.rx.0, pd, resend)
            .map(|k| k.name)
    }
}

impl RdReceiver for Nothing {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        panic!("no message is sent")
    }
    fn message(&mut self, _: SocketAddr, _: &[u8]) {
        panic!("no message is sent")
    }
}

fn side(nonce: u64) -> (Side, EpName) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let name = EpName {
        ip: "127.0.0.1".parse().unwrap(),
        // Not a socket: the paths only use it to name the peer.
        udp_port: 40_000 + nonce as u16,
        qpn: 1,
        tcp_port: listener.local_addr().unwrap().port(),
        nonce,
        more: crate::addr::MoreRails::NONE,
    };
    let promote = Promote {
        mode: Mode::Rc,
        ..Promote::default()
    };
    let paths = RcPaths::new(
        promote,
        QpConfig::default(),
        name,
        Some(listener),
        Duration::from_secs(60),
    );
    let rx = Nothing(PeerTable::new(nonce));
    (Side { paths, rx }, name)
}

fn progress(p: &mut Side) {
    let mut gone = Gone::default();
    p.paths.progress(Instant::now(), &mut p.rx, &mut gone);
    assert!(gone.resend.is_empty() && gone.failed.is_empty());
}

/// Waits up to `within` for the waiter; true if it woke for the connections' token.
fn woke(w: &Waiter, within: Duration) -> bool {
    let mut ready = Vec::new();
    let until = Instant::now() + within;
    while Instant::now() < until {
        w.wait(until - Instant::now(), &mut ready);
        if ready.contains(&CONNECTIONS) {
            return true;
        }
    }
    false
}

#[test]
fn each_step_of_a_set_up_wakes_the_waiter() {
    let (mut a, a_name) = side(1);
    let (mut b, b_name) = side(2);
    a.learn(&b_name);
    b.learn(&a_name);
    let wa = Arc::new(Waiter::new().unwrap());
    let wb = Arc::new(Waiter::new().unwrap());
    a.set_waiter(Arc::clone(&wa));
    b.set_waiter(Arc::clone(&wb));

    // A asks (rc mode: on first use): the connect is under way, and its completion wakes A.
    a.traffic(Instant::now(), b_name.udp_addr(), 10, false);
    progress(&mut a);
    assert_eq!(a.stats.initiated, 1);
    assert!(woke(&wa, Duration::from_secs(5)), "the connect woke nobody");
    // The request goes out; until B answers, nothing wakes A.
    progress(&mut a);
    assert!(
        !woke(&wa, Duration::from_millis(50)),
        "A woke with no answer"
    );
    // B's listener wakes B; B accepts, and the request (there, or on its way) wakes B until
    // B answers.
    assert!(
        woke(&wb, Duration::from_secs(5)),
        "the connect woke no listener"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while b.connections() == 0 {
        progress(&mut b);
        assert!(Instant::now() < until, "B never took the connection");
        if b.connections() == 0 {
            assert!(woke(&wb, Duration::from_secs(5)), "the request woke nobody");
        }
    }
    // The reply wakes A, and A has its connection.
    assert!(woke(&wa, Duration::from_secs(5)), "the reply woke nobody");
    progress(&mut a);
    assert_eq!((a.connections(), a.stats.connected), (1, 1));
    assert_eq!((b.connections(), b.stats.connected), (1, 1));
}

#[test]
fn set_ups_are_quiet_while_the_application_polls() {
    let (mut a, _) = side(3);
    let (_b, b_name) = side(4);
    a.learn(&b_name);
    let wa = Arc::new(Waiter::new().unwrap());
    a.set_waiter(Arc::clone(&wa));
    a.set_watching(false);
    a.traffic(Instant::now(), b_name.udp_addr(), 10, false);
    progress(&mut a);
    assert_eq!(a.stats.initiated, 1);
    // The connect completed (B's kernel accepts it into the backlog) and nobody was woken.
    assert!(!woke(&wa, Duration::from_millis(50)));
    a.set_watching(true);
    assert!(woke(&wa, Duration::from_secs(5)));
}

/// A and B connected (A asked), driven by hand.
fn connected() -> (Side, EpName, Side, EpName) {
    let (mut a, a_name) = side(5);
    let (mut b, b_name) = side(6);
    a.learn(&b_name);
    b.learn(&a_name);
    a.traffic(Instant::now(), b_name.udp_addr(), 10, false);
    let until = Instant::now() + Duration::from_secs(10);
    while a.connections() == 0 || b.connections() == 0 {
        progress(&mut a);
        progress(&mut b);
        assert!(Instant::now() < until, "no connection");
    }
    (a, a_name, b, b_name)
}

/// Both sides connected at once; B took A's request first (giving its own up), and A's
/// connection came up before A read B's request: that request is refused, and the one
/// connection both sides use stays.
#[test]
fn a_request_that_crossed_a_connection_up_is_refused() {
    let (mut a, _, mut b, b_name) = connected();
    let mut resend = Vec::new();
    let answer = a.answer(Instant::now(), &b_name.encode(), &mut resend);
    assert_eq!(answer.err(), Some(super::Reason::Lost));
    assert!(resend.is_empty());
    for _ in 0..20 {
        progress(&mut a);
        progress(&mut b);
    }
    assert_eq!((a.connections(), a.stats.lost), (1, 0));
    assert_eq!((b.connections(), b.stats.lost), (1, 0));
}

/// A request from a new incarnation of the peer (a new nonce), or one that comes after the
/// peer closed its end, replaces the connection.
#[test]
fn a_restarted_or_closed_peer_replaces_the_connection() {
    let (mut a, _, b, b_name) = connected();
    let restarted = EpName {
        nonce: b_name.nonce + 1,
        ..b_name
    };
    let mut resend = Vec::new();
    let answer = a.answer(Instant::now(), &restarted.encode(), &mut resend);
    assert_eq!(answer.ok(), Some(restarted));
    assert_eq!((a.connections(), a.stats.lost), (0, 1));
    drop((a, b));

    let (mut a, _, b, b_name) = connected();
    drop(b);
    // The end of stream reaches A's socket.
    let until = Instant::now() + Duration::from_secs(10);
    while !a.conns.iter().all(|(_, c)| c.closed_by_peer()) {
        assert!(Instant::now() < until, "B's close never reached A");
        std::thread::sleep(Duration::from_millis(1));
    }
    let answer = a.answer(Instant::now(), &b_name.encode(), &mut resend);
    assert_eq!(answer.ok(), Some(b_name));
    // Closed in order: counted as the peer's, not as a connection lost.
    let s = a.stats;
    assert_eq!((a.connections(), s.lost, s.demoted_by_peer), (0, 0, 1));
}

/// A connection the peer closed in order (an end of stream, as its demotion ends one) is
/// counted as the peer's demotion; one reset under us is lost.
#[test]
fn an_orderly_close_is_the_peers_and_a_reset_is_lost() {
    for reset in [false, true] {
        let (mut a, _, b, _) = connected();
        if reset {
            // No linger: closing sends a reset instead of an end of stream.
            let (_, c) = b.conns.iter().next().unwrap();
            let fd = c.qp.socket().unwrap();
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::Linger, &linger).unwrap();
        }
        drop(b);
        let until = Instant::now() + Duration::from_secs(10);
        while a.connections() > 0 {
            progress(&mut a);
            assert!(
                Instant::now() < until,
                "A never saw B's end (reset: {reset})"
            );
        }
        let s = a.stats;
        let want = if reset { (1, 0) } else { (0, 1) };
        assert_eq!((s.lost, s.demoted_by_peer), want, "reset: {reset}");
    }
}

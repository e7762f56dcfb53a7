//! The peer table: sequences across incarnations, acknowledgements, handles, rails.

use super::*;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Messages stamped by `a` for `b` pass `b`'s judgement in order; a restarted `a` starts
/// afresh; one meant for an earlier `b` is dropped.
#[test]
fn sequences_follow_incarnations() {
    let (a_addr, b_addr) = (addr(1), addr(2));
    let mut a = PeerTable::new(10);
    let mut b = PeerTable::new(20);
    let (ab, ba) = (a.slot(b_addr), b.slot(a_addr));
    a.know(ab, 20);
    let m1 = a.stamp(ab, false).encode();
    let m2 = a.stamp(ab, false).encode();
    assert_eq!(b.arrive(ba, &m2).0, Verdict::Ahead);
    b.hold(ba, header::split(&m2).unwrap().0.seq, b"two");
    assert_eq!(b.arrive(ba, &m1).0, Verdict::Now);
    b.handed(ba);
    assert_eq!(b.ready(ba).as_deref(), Some(&b"two"[..]));
    assert_eq!(b.ready(ba), None);
    assert_eq!(b.arrive(ba, &m1).0, Verdict::Dropped);
    assert_eq!(b.stats.duplicates, 1);
    // The acknowledgement carries what was handed over.
    assert_eq!(b.stamp(ba, false).ack, 2);

    // `a` restarts: its first message is in turn again.
    let mut a2 = PeerTable::new(11);
    let a2b = a2.slot(b_addr);
    a2.know(a2b, 20);
    assert_eq!(b.arrive(ba, &a2.stamp(a2b, false).encode()).0, Verdict::Now);
    assert_eq!(b.stats.restarts, 1);

    // A message for an incarnation of `b` that is gone.
    a.know(ab, 21);
    assert_eq!(
        b.arrive(ba, &a.stamp(ab, false).encode()).0,
        Verdict::Dropped
    );
    assert_eq!(b.stats.stale, 1);
    assert_eq!(b.arrive(ba, &[0; 3]).0, Verdict::Dropped);
    assert_eq!(b.stats.short, 1);
}

#[test]
fn an_unsent_stamp_is_given_back() {
    let mut a = PeerTable::new(1);
    let b = a.slot(addr(2));
    a.know(b, 2);
    let first = a.stamp(b, false).seq;
    a.unstamp(b);
    assert_eq!(a.stamp(b, false).seq, first);
}

/// Acknowledgements: asked for with ACK_NOW, owed until a message carries one, taken
/// only within what was sent, and alone they hand nothing over.
#[test]
fn acknowledgements_are_owed_carried_and_bounded() {
    let (a_addr, b_addr) = (addr(1), addr(2));
    let (mut a, mut b) = (PeerTable::new(10), PeerTable::new(20));
    let (ab, ba) = (a.slot(b_addr), b.slot(a_addr));
    a.know(ab, 20);
    for ack_now in [false, true, false] {
        let m = a.stamp(ab, ack_now).encode();
        assert_eq!(b.arrive(ba, &m).0, Verdict::Now);
        b.handed(ba);
    }
    assert_eq!(b.take_owing(), vec![ba]);
    assert_eq!(b.take_owing(), vec![], "listed once");
    let ack = b.ack_only(ba, false);
    assert_eq!((ack.seq, ack.ack), (0, 3));
    assert_eq!(a.acked(ab), 0);
    assert_eq!(a.arrive(ab, &ack.encode()).0, Verdict::Dropped);
    assert_eq!(a.acked(ab), 3);
    assert_eq!((a.stats.acks_received, b.stats.acks_sent), (1, 1));
    // An acknowledgement of what was never sent is not taken; an older one changes nothing.
    for bogus in [7, 1] {
        let mut h = b.ack_only(ba, false);
        h.ack = bogus;
        a.arrive(ab, &h.encode());
        assert_eq!(a.acked(ab), 3, "ack {bogus}");
    }
    // Owed, taken off the list, and not paid (no path could carry it): a later ask lists
    // the peer again.
    let ask = a.ack_only(ab, true).encode();
    b.arrive(ba, &ask);
    assert_eq!(b.take_owing(), vec![ba]);
    assert!(b.owes(ba));
    b.arrive(ba, &ask);
    assert_eq!(b.take_owing(), vec![ba], "asked again: listed again");
    let _ = b.ack_only(ba, false);
    // A message asking for an ACK and answered by one of ours clears the debt.
    let m = a.stamp(ab, true).encode();
    b.arrive(ba, &m);
    b.handed(ba);
    let _ = b.stamp(ba, false);
    assert_eq!(b.take_owing(), vec![]);
}

fn two_rails(port: u16, nonce: u64) -> EpName {
    EpName {
        ip: "127.0.0.1".parse().unwrap(),
        udp_port: port,
        qpn: 3,
        tcp_port: 0,
        nonce,
        more: MoreRails::from_slice(&[crate::addr::RailAddr {
            ip: "127.0.0.2".parse().unwrap(),
            udp_port: port + 1,
            tcp_port: 0,
        }]),
    }
}

/// A peer's second rail is used once it said it knows our name, reached at its address
/// there, which finds its slot at ingress; a new incarnation starts on the first rail
/// again; both ends of a pair pick one home rail, and pairs spread over the rails.
#[test]
fn rails_are_used_once_the_peer_knows_us_and_pairs_spread_over_them() {
    let (na, nb) = (two_rails(10, 100), two_rails(20, 200));
    let (mut a, mut b) = (PeerTable::new(na.nonce), PeerTable::new(nb.nonce));
    let ab = a.bind(0, &nb);
    assert_eq!(a.rails_to(ab), 1, "one rail of ours");
    a.set_rails(2);
    b.set_rails(2);
    let ab = a.bind(0, &nb);
    let ba = b.bind(0, &na);
    a.know(ab, nb.nonce);
    b.know(ba, na.nonce);
    assert_eq!(a.find(nb.rail(1).unwrap().udp_addr()), Some(ab));
    assert_eq!(a.rails_to(ab), 1, "B has not said it knows A");
    assert_eq!(a.home_rail(ab), Rail(0));
    assert_eq!(a.arrive(ab, &b.stamp(ba, false).encode()).0, Verdict::Now);
    a.handed(ab);
    assert_eq!(a.rails_to(ab), 2);
    b.arrive(ba, &a.stamp(ab, false).encode());
    assert_eq!(a.home_rail(ab), b.home_rail(ba), "one home rail per pair");
    let route = a.rd_route(ab, Rail(1)).unwrap();
    assert_eq!((route.addr, route.qpn), (nb.rail(1).unwrap().udp_addr(), 3));
    assert_eq!(a.name(ab), Some(nb));
    // A rail taken down is left for the other, for that peer alone; the last one stays up.
    let home = a.home_rail(ab);
    let other = Rail(1 - home.0);
    assert!(a.set_rail_down(ab, home));
    assert_eq!(a.home_rail(ab), other);
    assert_eq!(a.rails_up(ab), RailSet::first(2).without(home));
    assert!(!a.set_rail_down(ab, other), "the last rail up");
    assert!(!a.set_rail_down(ab, home), "already down");
    assert_eq!(a.rails_down(), [(ab, RailSet(0).with(home))]);
    a.set_rail_up(ab, home);
    assert_eq!((a.home_rail(ab), a.rails_up(ab)), (home, RailSet::first(2)));
    assert!(a.rails_down().is_empty());
    // B restarts: its new incarnation has yet to learn A's name.
    let mut b2 = PeerTable::new(201);
    let b2a = b2.slot(na.udp_addr());
    b2.know(b2a, na.nonce);
    a.arrive(ab, &b2.stamp(b2a, false).encode());
    assert_eq!(a.rails_to(ab), 1);
    // Pairs spread: of 256 peers, each rail is home to some.
    let homes = (0..256u64)
        .filter(|&i| {
            let n = two_rails(1000 + 2 * i as u16, 7000 + i);
            let mut p = PeerTable::new(n.nonce);
            p.set_rails(2);
            let id = p.bind(0, &na);
            p.know(id, na.nonce);
            let mut h = a.stamp(ab, false);
            h.dst_epoch = header::epoch(n.nonce);
            p.arrive(id, &h.encode());
            p.home_rail(id) == Rail(1)
        })
        .count();
    assert!((80..=176).contains(&homes), "{homes} of 256 on rail 1");
}

/// Handles find their peer's slot; two handles of one peer (a restart on the same
/// address) share its slot, and only the one bound last finds it; nothing survives
/// `forget_handles`.
#[test]
fn handles_index_slots() {
    let mut t = PeerTable::new(1);
    let name = |nonce| EpName {
        ip: "127.0.0.1".parse().unwrap(),
        udp_port: 7,
        qpn: 1,
        tcp_port: 0,
        nonce,
        more: MoreRails::NONE,
    };
    let other = t.slot(addr(9));
    assert_eq!(t.of_handle(3), None);
    let s = t.bind(3, &name(10));
    assert_ne!(s, other);
    assert_eq!((t.of_handle(3), t.name(s)), (Some(s), Some(name(10))));
    assert_eq!(t.bind(5, &name(11)), s, "one peer, one slot");
    assert_eq!((t.of_handle(5), t.of_handle(3)), (Some(s), None));
    assert_eq!(t.name(s), Some(name(11)));
    t.set_label(s, 5);
    assert_eq!(t.label(s), Some(5));
    t.forget_handles();
    assert_eq!((t.of_handle(5), t.label(s)), (None, None));
    assert_eq!(t.of_handle(u64::MAX), None);
    assert_eq!(
        t.bind(u64::MAX, &name(12)),
        s,
        "too large to index, still its slot"
    );
    assert_eq!(t.of_handle(u64::MAX), None);
}

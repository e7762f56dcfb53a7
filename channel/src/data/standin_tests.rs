//! Senders the address vector does not hold yet: their messages match, then follow them in.

use std::sync::Arc;

use super::*;
use crate::av::AddressVector;
use crate::endpoint::Bind;
use crate::params::Config;
use crate::testutil::domain_with;

use super::tests::*;

/// Two enabled endpoints: A's AV holds both (handle 1 is B), B's only B (handle 0); B's AV
/// is returned for the test to insert A later.
fn b_knows_only_itself() -> (Side, Side, Arc<AddressVector>) {
    let d = domain_with(Config::default());
    let (a, acq) = open_side(&d);
    let (b, bcq) = open_side(&d);
    let a_av = AddressVector::open(&d, FI_AV_TABLE, 2, 0, false, 0).unwrap();
    let names: Vec<u8> = [a.name(), b.name()]
        .iter()
        .flat_map(|n| n.encode())
        .collect();
    assert_eq!(a_av.insert(&names, 0).unwrap().count, 2);
    let b_av = AddressVector::open(&d, FI_AV_TABLE, 2, 0, false, 0).unwrap();
    assert_eq!(b_av.insert(&b.name().encode(), 0).unwrap().count, 1);
    for (ep, cq, av) in [(&a, &acq, &a_av), (&b, &bcq, &b_av)] {
        ep.bind(Bind::Av(av.clone()), 0).unwrap();
        ep.bind(Bind::Cq(cq.clone()), FI_TRANSMIT | FI_RECV)
            .unwrap();
        ep.enable().unwrap();
    }
    (Side { ep: a, cq: acq }, Side { ep: b, cq: bcq }, b_av)
}

/// A peer may send as soon as it knows our address, before we have inserted its (MPICH's
/// init does). Once inserted, the receive directed at that peer (whose post notices the
/// insert) matches the message and reports the peer as the source.
#[test]
fn a_message_from_a_peer_not_yet_in_the_av_matches_once_it_is_inserted() {
    let (a, b, b_av) = b_knows_only_itself();
    send(&a, 1, Kind::Tagged, 5, pattern(100, 9), 1);
    assert_eq!(ok(next(&a, &b)).op_context, 1, "B acknowledged it");
    // B has taken the message in; now it inserts A (handle 1) and receives from it.
    for _ in 0..100 {
        let _ = b.cq.read(0, |_, _| ());
    }
    assert_eq!(b_av.insert(&a.ep.name().encode(), 0).unwrap().handles, [1]);
    let buf = recv(&b, 1, Kind::Tagged, 5, 100, 2);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.tag, c.len, c.src), (2, 5, 100, Some(1)));
    assert_eq!(*buf.lock(), pattern(100, 9));
}

/// Open MPI inserts a peer only to send to it or to receive from it by name, so a rank takes
/// messages from senders it never inserted (across hosts: rank 0 of a flood). They match
/// receives from any peer at once, rendezvous included, with no source address; once the
/// sender is inserted, its messages still queued match the receives directed at it, in the
/// order sent, the insert noticed by the next arrival (the test above has it noticed by a
/// receive post).
#[test]
fn messages_from_a_sender_never_inserted_match_at_once_and_follow_it_into_the_av() {
    let (a, b, b_av) = b_knows_only_itself();
    // (tag, length): message 2 goes by rendezvous; 3 and 4 share a tag.
    let msgs = [
        (20, 100),
        (21, 100),
        (22, 70_000),
        (23, 100),
        (23, 200),
        (25, 0),
    ];
    for (i, &(tag, len)) in msgs.iter().enumerate() {
        send(&a, 1, Kind::Tagged, tag, pattern(len, i as u8), i + 1);
    }
    let any = FI_ADDR_UNSPEC;
    let first = recv(&b, any, Kind::Tagged, 20, 100, 100);
    let big = recv(&b, any, Kind::Tagged, 22, 70_000, 102);
    let mut got = [next(&b, &a), next(&b, &a)].map(ok);
    got.sort_by_key(|c| c.op_context);
    for (c, (ctx, tag, len)) in got.iter().zip([(100, 20, 100), (102, 22, 70_000)]) {
        assert_eq!((c.op_context, c.tag, c.len), (ctx, tag, len));
        assert_eq!(c.src, Some(ADDR_NOTAVAIL), "B does not know the sender");
    }
    assert_eq!(*first.lock(), pattern(100, 0));
    assert!(*big.lock() == pattern(70_000, 2));
    let mut sent: Vec<usize> = (0..msgs.len())
        .map(|_| ok(next(&a, &b)).op_context)
        .collect();
    sent.sort_unstable();
    assert_eq!(sent, [1, 2, 3, 4, 5, 6], "B acknowledged every message");

    // Noticed by the next arrival: it comes after the stand-in's messages.
    assert_eq!(b_av.insert(&a.ep.name().encode(), 0).unwrap().handles, [1]);
    send(&a, 1, Kind::Tagged, 23, pattern(300, 6), 7);
    assert_eq!(ok(next(&a, &b)).op_context, 7);
    for (i, (tag, len)) in [
        (1, (21, 100)),
        (3, (23, 100)),
        (4, (23, 200)),
        (6, (23, 300)),
        (5, (25, 0)),
    ] {
        let buf = recv(&b, 1, Kind::Tagged, tag, len, 200 + i);
        let c = ok(next(&b, &a));
        assert_eq!(
            (c.op_context, c.tag, c.len, c.src),
            (200 + i, tag, len, Some(1))
        );
        assert_eq!(*buf.lock(), pattern(len, i as u8), "message {i}");
    }
}

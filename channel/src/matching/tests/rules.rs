//! One test per matching rule, each on a hand-made sequence whose answer is known.

use crate::matching::*;

type M = Matcher<usize, u64>;

const ANY_TAG: u64 = u64::MAX;

fn peer(p: Option<u32>) -> PeerId {
    p.map_or(PeerId::ANY, PeerId)
}

fn spec(p: Option<u32>, tag: u64, ignore: u64, capacity: usize, ctx: usize) -> RecvSpec {
    RecvSpec::tagged(peer(p), tag, ignore, capacity, Context(ctx))
}

fn eager(p: u32, tag: u64, len: usize) -> Header {
    Header {
        peer: PeerId(p),
        tag,
        data: None,
        len,
        protocol: Protocol::Eager,
    }
}

/// Posts a receive whose descriptor is its context, so deliveries can be checked against both.
fn post(m: &mut M, kind: Kind, s: RecvSpec) -> Post<usize, u64> {
    m.post(kind, s, s.context.0)
}

fn arrive(m: &mut M, kind: Kind, h: Header, no: u64) -> Arrival<usize> {
    m.arrive(kind, h, |_| no)
}

/// The context of the receive an arrival went to.
fn went_to(a: Arrival<usize>) -> usize {
    match a {
        Arrival::Matched(d) => {
            assert_eq!(d.recv, d.context.0);
            d.context.0
        }
        Arrival::Buffered(id) => panic!("expected a match, message buffered as {id:?}"),
    }
}

fn delivered(a: Arrival<usize>) -> Delivery<usize> {
    match a {
        Arrival::Matched(d) => d,
        Arrival::Buffered(id) => panic!("expected a match, message buffered as {id:?}"),
    }
}

fn buffered(a: Arrival<usize>) -> UnexpectedId {
    match a {
        Arrival::Buffered(id) => id,
        Arrival::Matched(d) => panic!("expected buffering, matched {d:?}"),
    }
}

fn taken(p: Post<usize, u64>) -> Taken<usize, u64> {
    match p {
        Post::Matched(t) => t,
        Post::Queued => panic!("expected the receive to take a waiting message"),
    }
}

/// The number of the message a receive took.
fn took(p: Post<usize, u64>) -> u64 {
    taken(p).message.payload
}

fn queued(p: Post<usize, u64>) {
    if let Post::Matched(t) = p {
        panic!("expected the receive to be queued, it took {t:?}");
    }
}

fn assert_empty(m: &M) {
    for kind in [Kind::Msg, Kind::Tagged] {
        assert_eq!(m.stats(kind), Stats::default(), "{kind:?}");
    }
    assert_eq!(m.account().current(), 0);
}

#[test]
fn exact_receive_and_message_find_each_other_both_ways() {
    let mut m = M::default();
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 5, 0, 64, 1)));
    buffered(arrive(&mut m, Kind::Tagged, eager(1, 5, 8), 10));
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 6, 8), 11));
    let d = delivered(arrive(&mut m, Kind::Tagged, eager(0, 5, 8), 12));
    assert_eq!(
        (d.context, d.header, d.placed),
        (Context(1), eager(0, 5, 8), 8)
    );
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(1), 5, 0, 64, 2))),
        10
    );
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 6, 0, 64, 3))),
        11
    );
    assert_empty(&m);
}

#[test]
fn ignore_mask_bits_need_not_match_and_the_others_must() {
    let r = spec(Some(0), 0b1000, 0b0011, 0, 0);
    for (tag, ok) in [
        (0b1000, true),
        (0b1011, true),
        (0b0001, false),
        (0b1100, false),
    ] {
        assert_eq!(r.matches(&eager(0, tag, 0)), ok, "tag {tag:#b}");
    }
    let high = spec(None, 1 << 63, 0, 0, 0);
    assert!(high.matches(&eager(3, 1 << 63, 0)));
    assert!(!high.matches(&eager(3, 0, 0)));

    let mut m = M::default();
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 0b0001, 0), 1));
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 0b1010, 0), 2));
    assert_eq!(took(post(&mut m, Kind::Tagged, r)), 2);
}

#[test]
fn directed_receives_ignore_other_peers_and_any_takes_every_peer() {
    let mut m = M::default();
    queued(post(&mut m, Kind::Tagged, spec(Some(2), 0, ANY_TAG, 64, 1)));
    buffered(arrive(&mut m, Kind::Tagged, eager(1, 7, 0), 10));
    assert_eq!(went_to(arrive(&mut m, Kind::Tagged, eager(2, 7, 0), 11)), 1);
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(None, 7, 0, 64, 2))),
        10
    );
    assert_empty(&m);
}

#[test]
fn oldest_posted_receive_wins_between_bucket_and_wildcards() {
    let mut m = M::default();
    // Wildcard first: it must beat the exact bucket despite being found by a scan.
    queued(post(&mut m, Kind::Tagged, spec(None, 5, 0, 64, 1)));
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 5, 0, 64, 2)));
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 0, ANY_TAG, 64, 3)));
    let order: Vec<usize> = (0..3)
        .map(|i| went_to(arrive(&mut m, Kind::Tagged, eager(0, 5, 0), i)))
        .collect();
    assert_eq!(order, [1, 2, 3]);

    // Exact first, then a per-peer wildcard, then any-peer.
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 5, 0, 64, 4)));
    queued(post(&mut m, Kind::Tagged, spec(None, 0, ANY_TAG, 64, 5)));
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 4, 1, 64, 6)));
    let order: Vec<usize> = (0..3)
        .map(|i| went_to(arrive(&mut m, Kind::Tagged, eager(0, 5, 0), i)))
        .collect();
    assert_eq!(order, [4, 5, 6]);
    assert_empty(&m);
}

#[test]
fn oldest_waiting_message_wins_across_peers() {
    let mut m = M::default();
    buffered(arrive(&mut m, Kind::Tagged, eager(1, 3, 0), 1));
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 3, 0), 2));
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 4, 0), 3));
    assert_eq!(took(post(&mut m, Kind::Tagged, spec(None, 3, 0, 0, 1))), 1);
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 0, ANY_TAG, 0, 2))),
        2
    );
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(None, 0, ANY_TAG, 0, 3))),
        3
    );
    assert_empty(&m);
}

#[test]
fn messages_from_one_peer_never_overtake_each_other() {
    let mut m = M::default();
    // Peer 0 sends A(1) B(2) C(1) D(1); peer 1 sends E(1) in between.
    for (no, p, tag) in [(1, 0, 1), (2, 0, 2), (5, 1, 1), (3, 0, 1), (4, 0, 1)] {
        buffered(arrive(&mut m, Kind::Tagged, eager(p, tag, 0), no));
    }
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 0, 1))),
        1
    );
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 0, ANY_TAG, 0, 2))),
        2
    );
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 0, ANY_TAG, 0, 3))),
        3
    );
    assert_eq!(took(post(&mut m, Kind::Tagged, spec(None, 1, 0, 0, 4))), 5);
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 0, 5))),
        4
    );

    // Arrival side: two receives that both match take one peer's messages in send order.
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 0, ANY_TAG, 0, 6)));
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 0, 7)));
    assert_eq!(went_to(arrive(&mut m, Kind::Tagged, eager(0, 1, 0), 8)), 6);
    assert_eq!(went_to(arrive(&mut m, Kind::Tagged, eager(0, 1, 0), 9)), 7);
    assert_empty(&m);
}

#[test]
fn untagged_and_tagged_queues_are_separate_and_untagged_ignores_tags() {
    let mut m = M::default();
    buffered(arrive(&mut m, Kind::Msg, eager(0, 0, 4), 1));
    queued(post(&mut m, Kind::Tagged, spec(None, 0, ANY_TAG, 64, 1)));
    assert_eq!(went_to(arrive(&mut m, Kind::Tagged, eager(0, 9, 4), 2)), 1);
    let any = RecvSpec::untagged(PeerId::ANY, 64, Context(2));
    assert_eq!(took(post(&mut m, Kind::Msg, any)), 1);

    // A stray tag on an untagged message or receive changes nothing and is not reported.
    queued(post(&mut m, Kind::Msg, spec(Some(0), 77, 0, 64, 3)));
    let d = delivered(arrive(&mut m, Kind::Msg, eager(0, 12, 4), 3));
    assert_eq!((d.context, d.header.tag), (Context(3), 0));
    assert_empty(&m);
}

#[test]
fn truncation_reports_placed_and_dropped_bytes() {
    let mut m = M::default();
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 10, 1)));
    let d = delivered(arrive(&mut m, Kind::Tagged, eager(0, 1, 25), 1));
    assert_eq!((d.placed, d.truncated()), (10, 15));

    buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 7), 2));
    let d = taken(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 4, 2))).delivery;
    assert_eq!((d.placed, d.truncated(), d.header.len), (4, 3, 7));

    queued(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 7, 3)));
    let d = delivered(arrive(&mut m, Kind::Tagged, eager(0, 1, 7), 3));
    assert_eq!((d.placed, d.truncated()), (7, 0));
    assert_empty(&m);
}

#[test]
fn peek_finds_without_removing_and_a_miss_is_distinct() {
    let mut m = M::default();
    let probe = spec(Some(0), 1, 0, 0, 9);
    assert_eq!(m.peek(Kind::Tagged, &probe), Peek::NoMessage);
    // A posted receive is not a message: peek does not see it.
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 2, 0, 0, 1)));
    assert_eq!(
        m.peek(Kind::Tagged, &spec(Some(0), 2, 0, 0, 9)),
        Peek::NoMessage
    );
    let mut h = eager(0, 1, 3);
    h.data = Some(0xdead);
    buffered(arrive(&mut m, Kind::Tagged, h, 1));
    assert_eq!(m.peek(Kind::Tagged, &probe), Peek::Found(h));
    assert_eq!(m.peek(Kind::Tagged, &probe), Peek::Found(h));
    assert_eq!(m.peek(Kind::Msg, &probe), Peek::NoMessage);
    assert_eq!(took(post(&mut m, Kind::Tagged, probe)), 1);
    assert_eq!(m.peek(Kind::Tagged, &probe), Peek::NoMessage);
    assert!(m.cancel(Context(1)).is_some());
    assert_empty(&m);
}

#[test]
fn peek_claim_reserves_the_message_for_the_claiming_receive() {
    let mut m = M::default();
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 5), 1));
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 6), 2));
    let charged_both = m.account().current();
    let (h, id) = m
        .peek_claim(Kind::Tagged, &spec(Some(0), 1, 0, 0, 9))
        .found()
        .unwrap();
    assert_eq!(h.len, 5);
    assert_eq!(m.unexpected(id).map(|(_, u)| *u), Some(1));
    // The claimed message is invisible to peeks and receives; the next one is found instead.
    assert_eq!(
        m.peek(Kind::Tagged, &spec(Some(0), 1, 0, 0, 0))
            .found()
            .unwrap()
            .len,
        6
    );
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 64, 3))),
        2
    );
    assert_eq!(m.stats(Kind::Tagged).claimed, 1);
    assert_eq!(m.account().current(), unexpected_charge::<u64>(&h));
    assert!(charged_both > m.account().current());
    // A claim under another context or kind finds nothing and hands the receive back.
    assert_eq!(m.claim(Kind::Tagged, spec(None, 0, 0, 64, 8), 8), Err(8));
    assert_eq!(m.claim(Kind::Msg, spec(None, 0, 0, 64, 9), 9), Err(9));
    // Peer and tag of the claiming receive do not matter, only its context.
    let t = m.claim(Kind::Tagged, spec(Some(3), 4, 0, 2, 9), 9).unwrap();
    assert_eq!((t.message.payload, t.delivery.context), (1, Context(9)));
    assert_eq!((t.delivery.placed, t.delivery.truncated()), (2, 3));
    assert_eq!(m.unexpected(id), None);
    assert_eq!(m.claim(Kind::Tagged, spec(None, 0, 0, 64, 9), 9), Err(9));
    assert_empty(&m);
}

#[test]
fn discard_drops_the_message_and_its_charge() {
    let mut m = M::default();
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 100), 1));
    let rts = Header {
        protocol: Protocol::Rendezvous { handle: 77 },
        ..eager(1, 1, 1 << 20)
    };
    buffered(arrive(&mut m, Kind::Tagged, rts, 2));
    let u = m
        .peek_discard(Kind::Tagged, &spec(None, 1, 0, 0, 0))
        .found()
        .unwrap();
    assert_eq!((u.payload, u.header.len), (1, 100));
    assert_eq!(m.account().current(), unexpected_charge::<u64>(&rts));
    assert_eq!(
        m.peek_discard(Kind::Tagged, &spec(Some(0), 1, 0, 0, 0)),
        Peek::NoMessage
    );

    m.peek_claim(Kind::Tagged, &spec(Some(1), 1, 0, 0, 5))
        .found()
        .unwrap();
    assert_eq!(m.claim_discard(Kind::Tagged, Context(6)), None);
    let u = m.claim_discard(Kind::Tagged, Context(5)).unwrap();
    assert_eq!(u.header.protocol, Protocol::Rendezvous { handle: 77 });
    assert_eq!(m.claim_discard(Kind::Tagged, Context(5)), None);
    assert_empty(&m);
}

#[test]
fn cancel_removes_a_waiting_receive_but_not_a_matched_one() {
    let mut m = M::default();
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 0, 1)));
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 0, 2)));
    let c = m.cancel(Context(2)).unwrap();
    assert_eq!(
        (c.kind, c.context, c.recv, c.multi_recv),
        (Kind::Tagged, Context(2), 2, false)
    );
    assert_eq!(went_to(arrive(&mut m, Kind::Tagged, eager(0, 1, 0), 1)), 1);
    assert_eq!(m.cancel(Context(1)), None, "already matched");
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 0), 2));
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(None, 0, ANY_TAG, 0, 3))),
        2
    );

    // Wildcard and multi-receive buffers cancel too.
    queued(post(&mut m, Kind::Tagged, spec(None, 0, ANY_TAG, 0, 4)));
    queued(post(&mut m, Kind::Tagged, spec(Some(1), 0, ANY_TAG, 0, 5)));
    assert!(m.post_multi(
        RecvSpec::untagged(PeerId::ANY, 64, Context(6)),
        16,
        6,
        &mut vec![]
    ));
    assert_eq!(m.cancel(Context(5)).map(|c| c.recv), Some(5));
    assert_eq!(m.cancel(Context(4)).map(|c| c.recv), Some(4));
    let c = m.cancel(Context(6)).unwrap();
    assert_eq!((c.kind, c.multi_recv), (Kind::Msg, true));

    // Duplicate contexts: the oldest operation goes first, whatever its kind.
    queued(m.post(Kind::Msg, RecvSpec::untagged(PeerId(0), 0, Context(7)), 70));
    queued(m.post(Kind::Tagged, spec(Some(0), 1, 0, 0, 7), 71));
    assert_eq!(m.cancel(Context(7)).map(|c| c.recv), Some(70));
    assert_eq!(m.cancel(Context(7)).map(|c| c.recv), Some(71));
    assert_eq!(m.cancel(Context(7)), None);
    for recv in [80, 81, 82] {
        queued(m.post(Kind::Tagged, spec(None, 0, ANY_TAG, 0, 8), recv));
    }
    assert_eq!(m.cancel(Context(8)).map(|c| c.recv), Some(80));
    assert_eq!(m.cancel(Context(8)).map(|c| c.recv), Some(81));
    assert_eq!(m.cancel(Context(8)).map(|c| c.recv), Some(82));
    assert_empty(&m);
}

#[test]
fn multi_recv_packs_messages_and_releases_below_the_threshold() {
    let mut m = M::default();
    let buf = RecvSpec::untagged(PeerId::ANY, 64, Context(1));
    assert!(m.post_multi(buf, 16, 1, &mut vec![]));
    let mut seen = vec![];
    for (no, len) in [5, 0, 16, 20, 9].into_iter().enumerate() {
        let d = delivered(arrive(
            &mut m,
            Kind::Msg,
            eager(no as u32 % 2, 0, len),
            no as u64,
        ));
        assert!(d.multi_recv);
        assert_eq!((d.recv, d.context), (1, Context(1)));
        seen.push((d.offset, d.placed, d.released));
    }
    let want = [
        (0, 5, false),
        (8, 0, false),
        (8, 16, false),
        (24, 20, false),
        (48, 9, true),
    ];
    assert_eq!(seen, want);
    assert!(seen.iter().all(|(off, ..)| off % MULTI_RECV_ALIGN == 0));
    buffered(arrive(&mut m, Kind::Msg, eager(0, 0, 1), 9));
    assert_eq!(m.stats(Kind::Msg).posted, 0);
}

#[test]
fn multi_recv_takes_waiting_messages_when_posted() {
    let mut m = M::default();
    for no in 0..4 {
        buffered(arrive(&mut m, Kind::Msg, eager(no, 0, 10), u64::from(no)));
    }
    buffered(arrive(&mut m, Kind::Tagged, eager(0, 0, 10), 99));
    // Directed: only peer 2's message.
    let mut got = vec![];
    assert!(m.post_multi(
        RecvSpec::untagged(PeerId(2), 100, Context(1)),
        8,
        1,
        &mut got
    ));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message.payload, 2);
    assert_eq!(m.cancel(Context(1)).map(|c| c.multi_recv), Some(true));
    // Room for two: the second fills it past the threshold and releases it.
    let mut got = vec![];
    assert!(!m.post_multi(
        RecvSpec::untagged(PeerId::ANY, 32, Context(2)),
        16,
        2,
        &mut got
    ));
    let pieces: Vec<_> = got
        .iter()
        .map(|t| (t.message.payload, t.delivery.offset, t.delivery.released))
        .collect();
    assert_eq!(pieces, [(0, 0, false), (1, 16, true)]);
    assert_eq!(m.stats(Kind::Msg).unexpected, 1);
    assert_eq!(m.stats(Kind::Tagged).unexpected, 1);
}

#[test]
fn multi_recv_keeps_its_place_in_posting_order() {
    let mut m = M::default();
    assert!(m.post_multi(
        RecvSpec::untagged(PeerId::ANY, 24, Context(1)),
        9,
        1,
        &mut vec![]
    ));
    queued(post(
        &mut m,
        Kind::Msg,
        RecvSpec::untagged(PeerId(0), 64, Context(2)),
    ));
    let to: Vec<usize> = (0..3)
        .map(|no| went_to(arrive(&mut m, Kind::Msg, eager(0, 0, 8), no)))
        .collect();
    assert_eq!(to, [1, 1, 2]);
    assert_empty(&m);
}

#[test]
fn multi_recv_truncates_a_message_larger_than_the_space_left() {
    let mut m = M::default();
    assert!(m.post_multi(
        RecvSpec::untagged(PeerId::ANY, 40, Context(1)),
        4,
        1,
        &mut vec![]
    ));
    assert_eq!(
        delivered(arrive(&mut m, Kind::Msg, eager(0, 0, 30), 0)).placed,
        30
    );
    let d = delivered(arrive(&mut m, Kind::Msg, eager(0, 0, 30), 1));
    assert_eq!(
        (d.offset, d.placed, d.truncated(), d.released),
        (32, 8, 22, true)
    );
    assert_empty(&m);
}

#[test]
fn account_charges_records_and_eager_bodies_until_they_leave() {
    let mut m = M::default();
    // A message that matches on arrival is never charged.
    queued(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 64, 1)));
    let _ = delivered(arrive(&mut m, Kind::Tagged, eager(0, 1, 1000), 0));
    assert_eq!(m.account().peak(), 0);

    let small = eager(0, 1, 100);
    let rts = Header {
        protocol: Protocol::Rendezvous { handle: 1 },
        ..eager(0, 2, 1 << 30)
    };
    buffered(arrive(&mut m, Kind::Tagged, small, 1));
    buffered(arrive(&mut m, Kind::Msg, rts, 2));
    let record = unexpected_charge::<u64>(&rts);
    assert!(
        record > 0 && record < 1024,
        "a rendezvous request holds no body"
    );
    assert_eq!(unexpected_charge::<u64>(&small), record + 100);
    assert_eq!(m.account().current(), 2 * record + 100);
    let _ = took(post(&mut m, Kind::Tagged, spec(None, 0, ANY_TAG, 64, 2)));
    let _ = took(post(
        &mut m,
        Kind::Msg,
        RecvSpec::untagged(PeerId::ANY, 0, Context(3)),
    ));
    assert_eq!(m.account().peak(), 2 * record + 100);
    assert_empty(&m);
}

#[test]
fn relabelled_messages_keep_their_order_and_answer_to_the_new_peer() {
    let mut m = M::default();
    // Peer 900 (a stand-in) sends 1(t5) 2(t6) 3(t5) 4(t5), peer 0 sends 5(t5) in between.
    for (no, p, tag) in [
        (1, 900, 5),
        (2, 900, 6),
        (5, 0, 5),
        (3, 900, 5),
        (4, 900, 5),
    ] {
        buffered(arrive(&mut m, Kind::Tagged, eager(p, tag, 0), no));
    }
    // Untagged messages move too.
    buffered(m.arrive(Kind::Msg, eager(900, 0, 0), |_| 6));
    m.relabel(PeerId(900), PeerId(1));
    // Nothing answers to the stand-in any more; the new peer's exact, peer and global lists
    // all find its messages in send order, and the global order across peers holds.
    queued(post(&mut m, Kind::Tagged, spec(Some(900), 5, 0, 0, 1)));
    assert!(m.cancel(Context(1)).is_some());
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(1), 5, 0, 0, 2))),
        1
    );
    assert_eq!(took(post(&mut m, Kind::Tagged, spec(None, 5, 0, 0, 3))), 5);
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(1), 0, ANY_TAG, 0, 4))),
        2
    );
    assert_eq!(took(post(&mut m, Kind::Tagged, spec(None, 5, 0, 0, 5))), 3);
    let d = taken(post(&mut m, Kind::Tagged, spec(Some(1), 5, 0, 0, 6)));
    assert_eq!((d.message.payload, d.message.header.peer), (4, PeerId(1)));
    let u = RecvSpec::untagged(PeerId(1), 0, Context(7));
    assert_eq!(taken(m.post(Kind::Msg, u, 7)).message.payload, 6);
    // A stand-in with nothing queued is a no-op.
    m.relabel(PeerId(901), PeerId(2));
    assert_empty(&m);
}

#[test]
fn lists_are_removed_as_they_empty() {
    let mut m = M::default();
    for t in 0..500 {
        queued(post(
            &mut m,
            Kind::Tagged,
            spec(Some(t % 7), t.into(), 0, 0, 1),
        ));
        queued(post(&mut m, Kind::Tagged, spec(Some(t % 7), 0, 0xf, 0, 1)));
    }
    for t in 0..500u64 {
        buffered(arrive(&mut m, Kind::Tagged, eager(100, t, 8), t));
    }
    assert_eq!(m.stats(Kind::Tagged).lists, 500 + 7 + 500 + 1);
    for t in 0..500 {
        let _ = went_to(arrive(&mut m, Kind::Tagged, eager(t % 7, t.into(), 0), 0));
        assert_eq!(
            took(post(
                &mut m,
                Kind::Tagged,
                spec(Some(100), t.into(), 0, 8, 2)
            )),
            u64::from(t)
        );
    }
    while m.cancel(Context(1)).is_some() {}
    assert_empty(&m);
}

#[test]
fn ids_go_stale_when_the_message_is_taken() {
    let mut m = M::default();
    // Another waiting message keeps the slab from being reset when the first one leaves.
    buffered(arrive(&mut m, Kind::Tagged, eager(5, 5, 0), 0));
    let id = buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 4), 1));
    *m.payload_mut(id).unwrap() += 10;
    assert_eq!(m.unexpected(id).map(|(h, u)| (h.len, *u)), Some((4, 11)));
    assert_eq!(
        took(post(&mut m, Kind::Tagged, spec(Some(0), 1, 0, 4, 1))),
        11
    );
    assert_eq!(m.payload_mut(id), None);
    // The slot is reused by the next message; the old id must not reach it.
    let id2 = buffered(arrive(&mut m, Kind::Tagged, eager(0, 1, 4), 2));
    assert_ne!(id, id2);
    assert_eq!(m.unexpected(id), None);
    assert_eq!(m.payload_mut(id), None);
    assert_eq!(m.unexpected(id2).map(|(_, u)| *u), Some(2));
}

#[test]
fn rendezvous_requests_keep_their_handle_and_cq_data() {
    let mut m = M::default();
    let rts = Header {
        data: Some(7),
        protocol: Protocol::Rendezvous { handle: 42 },
        ..eager(3, 9, 1 << 20)
    };
    buffered(arrive(&mut m, Kind::Tagged, rts, 1));
    let t = taken(post(&mut m, Kind::Tagged, spec(Some(3), 9, 0, 4096, 1)));
    assert_eq!(t.message.header, rts);
    assert_eq!(
        (t.delivery.placed, t.delivery.truncated()),
        (4096, (1 << 20) - 4096)
    );
}

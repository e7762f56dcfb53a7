//! Rendezvous chunks pushed behind the RTS: into a posted receive, held, refused, discarded.

use std::time::{Duration, Instant};

use super::*;
use crate::params::Config;

use super::tests::*;

/// A clear-to-send names the send by a sequential handle; only the send's receiver may give
/// it (another peer's would send the data to a receive that is not there).
#[test]
fn a_clear_to_send_from_another_address_is_ignored() {
    let (a, b) = pair_with(Config {
        push_size: 0,
        ..Config::default()
    });
    let want = pattern(200_000, 4);
    send(&a, 1, Kind::Tagged, 5, want.clone(), 70);
    // B has posted no receive: A's send waits for its CTS, and a stranger forges one for
    // every handle A could have given it.
    let stranger: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let qpn = b.ep.name().qpn;
    let before = a.ep.data_stats().stray;
    a.ep.with_data(|d| {
        for handle in 0..64 {
            let mut cts = Vec::new();
            wire::cts(&mut cts, qpn, handle, 12_345, want.len() as u64, false);
            d.feed(stranger, &cts);
        }
    });
    assert_eq!(a.ep.data_stats().stray - before, 64);
    let buf = recv(&b, 0, Kind::Tagged, 5, want.len(), 71);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (71, want.len()));
    assert!(*buf.lock() == want);
    assert_eq!(ok(next(&a, &b)).op_context, 70);
}

/// Polls `s` (and `other`) until `done` holds of `s`'s data-path counters, within 10 s.
fn wait_stats(s: &Side, other: &Side, what: &str, done: impl Fn(&Stats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&s.ep.data_stats()) {
        let _ = s.cq.read(0, |_, _| ());
        let _ = other.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "{what}: {:?}", s.ep.data_stats());
    }
}

#[test]
fn rendezvous_without_pushed_chunks_arrives_intact_in_order() {
    let (a, b) = pair_with(Config {
        push_size: 0,
        ..Config::default()
    });
    eager_and_rendezvous_intact_in_order((&a, &b));
}

/// A message's first chunks go behind its RTS: into the receive if one is posted, else held
/// until one is, and the rest follows the CTS.
#[test]
fn pushed_chunks_go_into_a_posted_receive_or_wait_for_one() {
    pushed_chunks_into_a_receive_or_held(pair());
}

/// The same when each chunk spans many datagrams.
#[test]
fn pushed_chunks_go_into_a_posted_receive_or_wait_for_one_at_ethernet_datagrams() {
    pushed_chunks_into_a_receive_or_held(pair_at_ethernet_datagrams());
}

fn pushed_chunks_into_a_receive_or_held((a, b): (Side, Side)) {
    let pushed_chunks = Config::default().push_size.div_ceil(CHUNK) as u64;
    // Posted first: 2.5 chunks, all of them pushed.
    let len = 5 * CHUNK / 2;
    let buf = recv(&b, 0, Kind::Tagged, 1, len, 10);
    send(&a, 1, Kind::Tagged, 1, pattern(len, 1), 1);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (10, len));
    assert!(*buf.lock() == pattern(len, 1));
    assert_eq!(ok(next(&a, &b)).op_context, 1);
    let st = b.ep.data_stats();
    assert_eq!((st.push_placed, st.push_parked, st.push_dropped), (3, 0, 0));
    // Posted first and longer than what is pushed: the rest follows the CTS, from where the
    // pushes ended (a sender starting over would have its extra chunks counted as stray).
    let len = 7 * CHUNK + 5;
    let buf = recv(&b, 0, Kind::Tagged, 3, len, 30);
    send(&a, 1, Kind::Tagged, 3, pattern(len, 3), 3);
    assert_eq!(ok(next(&b, &a)).op_context, 30);
    assert!(*buf.lock() == pattern(len, 3));
    assert_eq!(ok(next(&a, &b)).op_context, 3);
    assert_eq!(b.ep.data_stats().push_placed, 3 + pushed_chunks);
    // Unexpected: the pushed chunks wait (in the unexpected account), the rest follows the CTS.
    let len = 7 * CHUNK + 5;
    send(&a, 1, Kind::Tagged, 2, pattern(len, 2), 2);
    wait_stats(&b, &a, "pushed chunks held", |s| {
        s.push_parked == pushed_chunks
    });
    assert!(
        b.ep.with_data(|d| {
            let m = d.memory();
            m.unexpected + m.held_pushes
        }) >= Config::default().push_size
    );
    let buf = recv(&b, 0, Kind::Tagged, 2, len, 20);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (20, len));
    assert!(
        *buf.lock() == pattern(len, 2),
        "held and later chunks intact"
    );
    assert_eq!(ok(next(&a, &b)).op_context, 2);
    assert!(
        b.ep.with_data(|d| {
            let m = d.memory();
            m.unexpected + m.held_pushes
        }) < CHUNK,
        "held chunks freed"
    );
    let st = b.ep.data_stats();
    assert_eq!((st.push_dropped, st.stray, st.malformed), (0, 0, 0));
    assert_eq!(
        b.ep.with_data(|d| d.push_state()),
        (0, 0),
        "nothing left behind"
    );
}

/// A short receive keeps the part of the pushed chunks it has room for, whether they went
/// into it directly or were held first.
#[test]
fn a_short_receive_keeps_what_fits_of_the_pushed_chunks() {
    let (a, b) = pair();
    let (len, room) = (4 * CHUNK, CHUNK + 100);
    for (i, posted_first) in [true, false].into_iter().enumerate() {
        let tag = 50 + i as u64;
        let mut buf = None;
        if posted_first {
            buf = Some(recv(&b, 0, Kind::Tagged, tag, room, i));
        }
        send(&a, 1, Kind::Tagged, tag, pattern(len, 7), i);
        if !posted_first {
            wait_stats(&b, &a, "pushed chunks held", |s| s.push_parked == 4);
            buf = Some(recv(&b, 0, Kind::Tagged, tag, room, i));
        }
        match next(&b, &a) {
            Got::Err(e) => {
                assert_eq!(e.err, Errno::TRUNC);
                assert_eq!((e.completion.len, e.olen), (room, len - room));
            }
            Got::Ok(c) => panic!("truncation not reported: {c:?}"),
        }
        assert!(buf.unwrap().lock()[..] == pattern(len, 7)[..room]);
        assert_eq!(ok(next(&a, &b)).op_context, i, "the send completes");
    }
    // Posted first, the two chunks past the room were dropped; held, they were clipped at
    // the match.
    assert_eq!(b.ep.data_stats().push_dropped, 2);
    assert_eq!(b.ep.with_data(|d| d.push_state()), (0, 0));
}

/// Past the budget for held chunks, an unexpected message's pushed chunks are dropped and sent
/// again after its CTS: nothing is lost.
#[test]
fn pushes_past_the_holding_budget_are_sent_again_after_the_cts() {
    let (a, b) = pair();
    let len = Config::default().push_size;
    let per = len.div_ceil(CHUNK) as u64;
    let n = push::PARK_MAX / len + 4;
    for i in 0..n {
        send(&a, 1, Kind::Tagged, 9, pattern(len, i as u8), i);
    }
    wait_stats(&b, &a, "every pushed chunk held or dropped", |s| {
        s.push_parked + s.push_dropped == n as u64 * per
    });
    let st = b.ep.data_stats();
    assert!(st.push_dropped >= per, "{st:?}");
    assert!(
        b.ep.with_data(|d| {
            let m = d.memory();
            m.unexpected + m.held_pushes
        }) <= push::PARK_MAX + (1 << 20)
    );
    let bufs: Vec<_> = (0..n)
        .map(|i| recv(&b, 0, Kind::Tagged, 9, len, 1000 + i))
        .collect();
    for (i, buf) in bufs.iter().enumerate() {
        let c = ok(next(&b, &a));
        assert_eq!((c.op_context, c.len), (1000 + i, len));
        assert!(*buf.lock() == pattern(len, i as u8), "message {i} intact");
    }
    let mut done: Vec<usize> = (0..n).map(|_| ok(next(&a, &b)).op_context).collect();
    done.sort_unstable();
    assert_eq!(done, (0..n).collect::<Vec<_>>());
    assert_eq!(b.ep.with_data(|d| d.push_state()), (0, 0));
    assert_eq!(b.ep.data_stats().stray, 0);
}

/// A discarded message's held chunks are freed and its send completes.
#[test]
fn discarding_a_pushed_message_frees_its_chunks_and_completes_the_send() {
    let (a, b) = pair();
    send(&a, 1, Kind::Tagged, 4, pattern(3 * CHUNK, 4), 1);
    wait_stats(&b, &a, "pushed chunks held", |s| s.push_parked == 3);
    peek(&b, 4, 5, FI_PEEK | FI_DISCARD);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (5, 3 * CHUNK));
    assert_eq!(ok(next(&a, &b)).op_context, 1, "the send completes");
    assert!(
        b.ep.with_data(|d| {
            let m = d.memory();
            m.unexpected + m.held_pushes
        }) < CHUNK
    );
    // A zero-length receive takes none of them either.
    send(&a, 1, Kind::Tagged, 6, pattern(3 * CHUNK, 6), 2);
    wait_stats(&b, &a, "pushed chunks held", |s| s.push_parked == 6);
    let _empty = recv(&b, 0, Kind::Tagged, 6, 0, 7);
    match next(&b, &a) {
        Got::Err(e) => assert_eq!(
            (e.err, e.completion.len, e.olen),
            (Errno::TRUNC, 0, 3 * CHUNK)
        ),
        Got::Ok(c) => panic!("truncation not reported: {c:?}"),
    }
    assert_eq!(ok(next(&a, &b)).op_context, 2, "the send completes");
    assert_eq!(b.ep.with_data(|d| d.push_state()), (0, 0));
    assert!(
        b.ep.with_data(|d| {
            let m = d.memory();
            m.unexpected + m.held_pushes
        }) < CHUNK
    );
}

//! A rail that fails, on loopback (127.0.0.1 and 127.0.0.2): rail 1 sends nothing from some
//! moment on, as a link taken down does. Whatever it held goes again over rail 0, every message
//! arrives once, intact and in order; the rail is greeted until it answers and then carries
//! data again; a peer silent on every rail still fails its operations with FI_EIO.

use std::time::{Duration, Instant};

use super::rails_tests::{both_ways, on, one_tag_stream, pair_of, per_rail, TWO};
use super::tests::*;
use super::*;
use crate::params::Config;
use crate::path::Rail;

const RAIL_TIMEOUT: Duration = Duration::from_millis(100);

fn config(peer_timeout: Duration) -> Config {
    Config {
        rail_timeout: RAIL_TIMEOUT,
        peer_timeout,
        // The null link holds back only what leaves from the queue pair's own socket.
        connected_peers: 0,
        ..on(TWO)
    }
}

fn events(s: &Side, rail: usize) -> super::driver::RailEvents {
    s.ep.with_data(|d| d.rail_stats()[rail].2)
}

fn no_errors(s: &Side, who: &str) {
    let _ = s.cq.read(0, |_, _| ());
    if let Ok(e) = s.cq.read_err() {
        panic!("{who}: error completion {e:?}");
    }
}

fn set_rail(s: &Side, rail: Rail, up: bool) {
    s.ep.with_data(|d| match up {
        true => d.mend_rail(rail),
        false => d.cut_rail(rail),
    });
}

/// Progresses both sides for `d`.
/// Progresses both sides until `done`, within 10 s: a mended rail is greeted every rail
/// timeout, but a greeting sent while it was down backs off, and a loaded machine runs late.
fn pump_until(a: &Side, b: &Side, what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        let _ = a.cq.read(0, |_, _| ());
        let _ = b.cq.read(0, |_, _| ());
        assert!(Instant::now() < until, "{what} within 10 s");
    }
}

#[test]
fn a_rail_that_goes_silent_is_left_and_taken_back_once_it_answers() {
    let (a, b) = pair_of(
        config(Duration::from_secs(20)),
        config(Duration::from_secs(20)),
    );
    // Both rails in use at both ends first.
    both_ways(&a, &b, 1);
    let before = [per_rail(&a), per_rail(&b)];
    assert!(before.iter().all(|r| r[1].0 > 0), "{before:?}");
    set_rail(&a, Rail(1), false);
    set_rail(&b, Rail(1), false);
    let cut = Instant::now();
    both_ways(&a, &b, 3);
    one_tag_stream(&a, &b, 90);
    wait_idle(&a, &b, "A's sends");
    wait_idle(&b, &a, "B's sends");
    let took = cut.elapsed();
    // Well inside the peer timeout: nothing waited for it.
    assert!(took < Duration::from_secs(10), "{took:?}");
    no_errors(&a, "A");
    no_errors(&b, "B");
    let down = [events(&a, 1), events(&b, 1)];
    for (who, ev) in ["A", "B"].iter().zip(&down) {
        assert!(ev.taken_down >= 1, "{who}: {ev:?}");
        assert_eq!(ev.failed, 0, "{who}: {ev:?}");
    }
    for (who, s) in [("A", &a), ("B", &b)] {
        let ev = events(s, 0);
        assert_eq!((ev.taken_down, ev.failed), (0, 0), "{who}: rail 0 {ev:?}");
    }
    assert!(
        down.iter().map(|e| e.moved).sum::<u64>() >= 1,
        "something was under way on rail 1: {down:?}"
    );
    // Rail 1 answers again: it is greeted, found, and carries data once more.
    set_rail(&a, Rail(1), true);
    set_rail(&b, Rail(1), true);
    pump_until(&a, &b, "rail 1 taken back at both ends", || {
        [&a, &b].iter().all(|s| {
            let ev = events(s, 1);
            ev.back_up == ev.taken_down
        })
    });
    let mended = [per_rail(&a), per_rail(&b)];
    both_ways(&a, &b, 2);
    one_tag_stream(&a, &b, 30);
    wait_idle(&a, &b, "A's sends");
    no_errors(&a, "A");
    no_errors(&b, "B");
    for (k, s) in [&a, &b].iter().enumerate() {
        let ev = events(s, 1);
        assert_eq!(ev.back_up, ev.taken_down, "side {k}: {ev:?}");
        let after = per_rail(s);
        assert!(
            after[1].0 > mended[k][1].0,
            "side {k}: rail 1 used again: {after:?}"
        );
    }
    for s in [&a, &b] {
        assert_eq!(s.ep.data_stats().malformed, 0);
        // The report carries what happened to the rail, in the schema users check it with.
        let report = crate::testutil::valid_report(&s.ep.memory_report("running"));
        let rail = &report["counters"]["rails"][1];
        let ev = events(s, 1);
        assert_eq!(rail["taken_down"].as_u64(), Some(ev.taken_down), "{rail}");
        assert_eq!(rail["moved"].as_u64(), Some(ev.moved), "{rail}");
    }
}

#[test]
fn a_peer_silent_on_every_rail_fails_its_sends_with_eio_within_the_peer_timeout() {
    const PEER_TIMEOUT: Duration = Duration::from_millis(1000);
    let (a, b) = pair_of(config(PEER_TIMEOUT), config(PEER_TIMEOUT));
    both_ways(&a, &b, 1);
    set_rail(&a, Rail(0), false);
    set_rail(&a, Rail(1), false);
    let start = Instant::now();
    // A rendezvous send: its RTS goes on the home rail, and no CTS can come back. (An eager
    // one completes once copied, as MPI's buffered sends do.)
    send(&a, 1, Kind::Tagged, 9, pattern(4 * CHUNK, 1), 1);
    match next(&a, &b) {
        Got::Err(e) => {
            let eio = crate::error::Errno(crate::sys::FI_EIO as u32);
            assert_eq!((e.err, e.completion.op_context), (eio, 1), "{e:?}");
        }
        Got::Ok(c) => panic!("a send to a peer out of reach completed: {c:?}"),
    }
    let took = start.elapsed();
    // Not at the rail timeout: a rail's silence alone fails nothing.
    assert!(
        took >= PEER_TIMEOUT / 2
            && took <= PEER_TIMEOUT + 2 * RAIL_TIMEOUT + Duration::from_millis(1500),
        "{took:?}"
    );
    // One rail was left for the other, whose session then failed at the peer timeout.
    let ev = [events(&a, 0), events(&a, 1)];
    assert_eq!(ev.iter().map(|e| e.taken_down).sum::<u64>(), 1, "{ev:?}");
    assert!(
        ev.iter().any(|e| e.moved > 0) && ev.iter().any(|e| e.failed > 0),
        "{ev:?}"
    );
}

/// At Ethernet's datagram size a chunk is cut into segments, each placed as it lands. A rail
/// that fails while a chunk is half across leaves that copy cut short for good: the copy sent
/// again over the other rail must still be taken (a chunk counts, and its number is settled,
/// once it is whole), or the receive never completes.
#[test]
fn a_rail_that_fails_mid_chunk_leaves_no_receive_short() {
    let segmented = || Config {
        datagram_size: Some(1472),
        ..config(Duration::from_secs(20))
    };
    let (a, b) = pair_of(segmented(), segmented());
    both_ways(&a, &b, 1);
    let n = 16 << 20;
    let mut attempt = 0u8;
    for round in 0..3u8 {
        // Mid-transfer: rail 1 carried some of it, and is still carrying. On a busy machine
        // rail 1 may measure slow and carry too little of a transfer to cut it halfway; that
        // transfer is let finish, and another tried.
        let (buf, seed) = loop {
            attempt += 1;
            assert!(
                attempt <= 3 + 10,
                "rail 1 never carried 50 datagrams of a transfer"
            );
            let seed = round.wrapping_mul(16).wrapping_add(attempt);
            let buf = recv(&b, 0, Kind::Tagged, 40, n, 1);
            send(&a, 1, Kind::Tagged, 40, pattern(n, seed), 2);
            let rail1 = || b.ep.with_data(|d| d.datagrams_read_of(Some(Rail(1))));
            let start = rail1();
            let mut done = None;
            let deadline = Instant::now() + Duration::from_secs(30);
            while rail1() < start + 50 && done.is_none() {
                let _ = a.cq.read(0, |_, _| ());
                let _ = b.cq.read(1, |_, c| done = Some(*c));
                no_errors(&b, "B");
                assert!(
                    Instant::now() < deadline,
                    "round {round}: no progress in 30 s"
                );
            }
            let Some(c) = done else { break (buf, seed) };
            assert_eq!((c.len, c.tag), (n, 40), "round {round}");
            assert!(*buf.lock() == pattern(n, seed), "round {round}: intact");
            assert_eq!(ok(next(&a, &b)).op_context, 2);
        };
        set_rail(&a, Rail(1), false);
        set_rail(&b, Rail(1), false);
        let c = ok(next(&b, &a));
        assert_eq!((c.len, c.tag, c.src), (n, 40, Some(0)), "round {round}");
        assert!(*buf.lock() == pattern(n, seed), "round {round}: intact");
        assert_eq!(
            ok(next(&a, &b)).op_context,
            2,
            "round {round}: the send completes"
        );
        no_errors(&a, "A");
        no_errors(&b, "B");
        assert!(
            events(&a, 1).moved >= 1,
            "round {round}: {:?}",
            events(&a, 1)
        );
        set_rail(&a, Rail(1), true);
        set_rail(&b, Rail(1), true);
        pump_until(&a, &b, "rail 1 taken back", || {
            events(&a, 1).back_up > u64::from(round)
        });
    }
}

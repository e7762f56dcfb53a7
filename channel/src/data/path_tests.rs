//! The data path over RC connections: every message intact and in order whichever path
//! carried it, across promotions, demotions and broken connections.

use std::time::{Duration, Instant};

use policies::promote::{Config as Promote, Mode};

use super::tests::*;
use super::*;
use crate::params::Config;

fn pair_in(promote: Promote) -> (Side, Side) {
    pair_with(Config {
        promote,
        // Loopback's datagrams are large: hybrid asks for connections all the same.
        rc_datagram_max: 65_507,
        ..Config::default()
    })
}

/// Polls both sides until each has `n` connections, within 10 s.
fn wait_connections(a: &Side, b: &Side, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.ep.with_data(|d| d.connections()) != n || b.ep.with_data(|d| d.connections()) != n {
        let _ = a.cq.read(0, |_, _| ());
        let _ = b.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "connections did not reach {n}");
    }
}

fn rc_mode() -> Promote {
    Promote {
        mode: Mode::Rc,
        ..Promote::default()
    }
}

/// One message A to B, received and checked.
fn one(a: &Side, b: &Side, tag: u64, n: usize) {
    let buf = recv(b, 0, Kind::Tagged, tag, n, 1);
    send(a, 1, Kind::Tagged, tag, pattern(n, tag as u8), 2);
    let c = ok(next(b, a));
    assert_eq!((c.len, c.tag), (n, tag));
    assert!(*buf.lock() == pattern(n, tag as u8));
    assert_eq!(ok(next(a, b)).op_context, 2);
}

#[test]
fn rc_mode_carries_eager_and_rendezvous_over_a_connection() {
    let (a, b) = pair_in(rc_mode());
    one(&a, &b, 1, 10);
    wait_connections(&a, &b, 1);
    let before = a.ep.with_data(|d| d.path_stats().0.rc_messages);
    eager_and_rendezvous_intact_in_order((&a, &b));
    let (paths, policy) = a.ep.with_data(|d| d.path_stats());
    assert!(paths.rc_messages >= before + 7, "{paths:?}");
    assert_eq!(
        (paths.connected, policy.connected),
        (1, 1),
        "{paths:?} {policy:?}"
    );
    let (paths, _) = b.ep.with_data(|d| d.path_stats());
    assert!(paths.rc_messages > 0, "answers too: {paths:?}");
    assert_eq!(paths.connected, 1);
    // Rendezvous chunks were read from the connection straight into the receive.
    assert!(b.ep.data_stats().chunks_in_place > 0);
    // The connection's buffers are in the ledger.
    let conn = a.ep.sample_memory().get(policies::Account::Connections);
    assert!(conn.bytes > 0 && conn.peers == Some(1), "{conn:?}");
}

/// Chunks read in place land where they belong, CRC checked or not (on one host it is off
/// by default), and into receives longer than the message; nothing is counted stray or
/// malformed.
#[test]
fn rendezvous_chunks_read_in_place_are_whole_with_and_without_crc() {
    for crc_same_host in [false, true] {
        let (a, b) = pair_with(Config {
            promote: rc_mode(),
            crc_same_host,
            ..Config::default()
        });
        one(&a, &b, 1, 10);
        wait_connections(&a, &b, 1);
        let n = (8 << 20) + 4097;
        for (tag, room) in [(2, n), (3, n + 100_000)] {
            let buf = recv(&b, 0, Kind::Tagged, tag, room, 5);
            send(&a, 1, Kind::Tagged, tag, pattern(n, tag as u8), 6);
            let c = ok(next(&b, &a));
            assert_eq!((c.op_context, c.tag, c.len), (5, tag, n));
            let got = buf.lock();
            assert!(got[..n] == pattern(n, tag as u8), "crc {crc_same_host}");
            assert!(got[n..].iter().all(|&x| x == 0), "nothing past the message");
            assert_eq!(ok(next(&a, &b)).op_context, 6);
        }
        let st = b.ep.data_stats();
        assert!(st.chunks_in_place > 0, "crc {crc_same_host}: {st:?}");
        assert_eq!((st.stray, st.malformed), (0, 0), "{st:?}");
    }
}

/// Numbered messages of mixed sizes from A to B, `rounds` bursts of `burst`, a pause of
/// `gap` between bursts, received with wildcard receives in order: every byte, tag and
/// source checked, and no message twice (each round posts as many receives as it sends).
/// `between` runs after each burst is sent, while it is in flight.
fn numbered_stream(
    a: &Side,
    b: &Side,
    rounds: usize,
    burst: usize,
    gap: impl Fn(usize) -> Duration,
    mut between: impl FnMut(usize),
) {
    let eager = Config::default().eager_size;
    let sizes = [1, 100, eager, eager + 1, 2 * CHUNK + 5, 0, 4096];
    let mut k = 0u64;
    for round in 0..rounds {
        let ns: Vec<usize> = (0..burst)
            .map(|i| sizes[(round + i) % sizes.len()])
            .collect();
        let max = *ns.iter().max().unwrap();
        let bufs: Vec<_> = ns
            .iter()
            .enumerate()
            .map(|(i, _)| recv_any(b, max, 1000 + i))
            .collect();
        // Tags number the messages; wildcard receives take any tag.
        for (i, &n) in ns.iter().enumerate() {
            let tag = k + i as u64;
            send(a, 1, Kind::Tagged, tag, pattern(n, tag as u8), i);
        }
        between(round);
        for (i, &n) in ns.iter().enumerate() {
            let c = ok(next(b, a));
            let tag = k + i as u64;
            assert_eq!(c.op_context, 1000 + i, "round {round}");
            assert_eq!(
                (c.tag, c.len, c.src),
                (tag, n, Some(0)),
                "round {round} message {i}"
            );
            assert!(
                bufs[i].lock()[..n] == pattern(n, tag as u8)[..],
                "message {tag} intact"
            );
        }
        for _ in 0..burst {
            ok(next(a, b));
        }
        k += burst as u64;
        let until = Instant::now() + gap(round);
        while Instant::now() < until {
            let _ = a.cq.read(0, |_, _| ());
            let _ = b.cq.read(0, |_, _| ());
        }
    }
}

/// A receive from any source and tag (the tag's bits all ignored).
fn recv_any(s: &Side, len: usize, ctx: usize) -> Arc<parking_lot::Mutex<Vec<u8>>> {
    let (mem, v) = crate::raw::mem::UserMem::owned(vec![0; len]);
    s.ep.recv(RecvArgs {
        kind: Kind::Tagged,
        src: FI_ADDR_UNSPEC,
        mem,
        tag: 0,
        ignore: u64::MAX,
        context: ctx,
        flags: FI_COMPLETION,
    })
    .unwrap();
    v
}

/// Hybrid with thresholds so low that each burst promotes A and each pause demotes it: the
/// stream crosses many promotions and demotions, and order and bytes hold.
#[test]
fn promotions_and_demotions_mid_stream_keep_order() {
    let (a, b) = pair_in(Promote {
        mode: Mode::Hybrid,
        cap: 1,
        promote_messages: 3.0,
        hysteresis: Duration::from_millis(1),
        idle_limit: Duration::from_millis(15),
        backoff: Duration::from_millis(1),
        backoff_max: Duration::from_millis(4),
        ..Promote::default()
    });
    // Short pauses keep the connection, every third one is long enough to lose it.
    let gap = |round| Duration::from_millis(if round % 3 == 2 { 40 } else { 3 });
    numbered_stream(&a, &b, 15, 9, gap, |_| {});
    let (pa, policy) = a.ep.with_data(|d| d.path_stats());
    let (pb, _) = b.ep.with_data(|d| d.path_stats());
    assert!(policy.promotions >= 3, "{policy:?}");
    assert!(pa.connected + pb.connected >= 3, "{pa:?} {pb:?}");
    assert!(pa.demoted + pb.demoted >= 2, "{pa:?} {pb:?}");
    assert!(pa.rc_messages > 0, "{pa:?}");
    wait_idle(&a, &b, "the last messages");
    // Every demotion is a close both ends agreed on: none broke, and an end closed by its
    // peer saw one of the peer's own demotions.
    let (pa, _) = a.ep.with_data(|d| d.path_stats());
    let (pb, _) = b.ep.with_data(|d| d.path_stats());
    assert_eq!((pa.lost, pb.lost), (0, 0), "{pa:?} {pb:?}");
    assert!(
        pa.demoted_by_peer <= pb.demoted && pb.demoted_by_peer <= pa.demoted,
        "{pa:?} {pb:?}"
    );
}

/// Numbered messages both ways at once across many promotions and demotions: every byte, tag
/// and source checked at both ends, and every close one both ends agreed on (none counted
/// lost). The churn runs of scripts/mpi-tests hold demotions for a hotter peer, with
/// messages in flight, to the same.
#[test]
fn demotions_with_messages_both_ways_close_in_order() {
    let (a, b) = pair_in(Promote {
        mode: Mode::Hybrid,
        cap: 1,
        promote_messages: 3.0,
        hysteresis: Duration::from_millis(1),
        idle_limit: Duration::from_millis(5),
        backoff: Duration::from_millis(1),
        backoff_max: Duration::from_millis(4),
        ..Promote::default()
    });
    let sizes = [1, 100, 4096, 0, 300, 2000];
    let burst = 12;
    // (side, its peer's handle, its handle at the peer): A is 0, B is 1.
    let ends = [(&a, 1u64, 0u64), (&b, 0, 1)];
    for round in 0..40u64 {
        let base = round * burst as u64;
        let mut bufs = Vec::new();
        for (s, _, _) in ends {
            let v: Vec<_> = (0..burst).map(|i| recv_any(s, 4096, 1000 + i)).collect();
            bufs.push(v);
        }
        for (k, (s, dest, _)) in ends.iter().enumerate() {
            for i in 0..burst {
                let tag = base + i as u64;
                let n = sizes[(tag as usize + k) % sizes.len()];
                send(
                    s,
                    *dest,
                    Kind::Tagged,
                    tag,
                    pattern(n, (tag as u8) ^ k as u8),
                    i,
                );
            }
        }
        let mut got = [Vec::new(), Vec::new()];
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.iter().any(|g| g.len() < 2 * burst) {
            for (k, (s, _, _)) in ends.iter().enumerate() {
                match s.cq.read(1, |_, c| got[k].push(*c)) {
                    Err(e) if e.0 == FI_EAVAIL => panic!("error {:?}", s.cq.read_err()),
                    _ => {}
                }
            }
            assert!(Instant::now() < deadline, "round {round}: {got:?}");
        }
        for (k, g) in got.iter().enumerate() {
            // What end k received came from the other end, numbered in order.
            let from = 1 - k;
            let received: Vec<_> = g.iter().filter(|c| c.op_context >= 1000).collect();
            assert_eq!(received.len(), burst, "round {round}");
            for (i, c) in received.iter().enumerate() {
                let tag = base + i as u64;
                let n = sizes[(tag as usize + from) % sizes.len()];
                assert_eq!(
                    (c.tag, c.len, c.src),
                    (tag, n, Some(ends[from].2)),
                    "round {round}"
                );
                let buf = &bufs[k][c.op_context - 1000];
                assert!(
                    buf.lock()[..n] == pattern(n, (tag as u8) ^ from as u8)[..],
                    "{tag}"
                );
            }
        }
        // Every third pause is long enough to demote.
        let until = Instant::now() + Duration::from_millis(if round % 3 == 2 { 20 } else { 1 });
        while Instant::now() < until {
            let _ = a.cq.read(0, |_, _| ());
            let _ = b.cq.read(0, |_, _| ());
        }
    }
    wait_idle(&a, &b, "A's last messages");
    wait_idle(&b, &a, "B's last messages");
    let (pa, _) = a.ep.with_data(|d| d.path_stats());
    let (pb, _) = b.ep.with_data(|d| d.path_stats());
    assert!(pa.connected + pb.connected >= 6, "{pa:?} {pb:?}");
    assert!(pa.demoted + pb.demoted >= 4, "{pa:?} {pb:?}");
    assert_eq!((pa.lost, pb.lost), (0, 0), "{pa:?} {pb:?}");
}

/// Loopback's datagrams (65507 bytes) exceed the default FI_DIWARP_RC_DATAGRAM_MAX: however hot
/// the peer, hybrid asks for no connection there.
#[test]
fn hybrid_with_large_datagrams_asks_for_no_connection() {
    let (a, b) = pair_with(Config {
        promote: Promote {
            mode: Mode::Hybrid,
            promote_messages: 2.0,
            ..Promote::default()
        },
        ..Config::default()
    });
    numbered_stream(&a, &b, 4, 9, |_| Duration::from_millis(2), |_| {});
    for s in [&a, &b] {
        let (paths, policy) = s.ep.with_data(|d| d.path_stats());
        assert_eq!(
            (policy.promotions, paths.connected),
            (0, 0),
            "{paths:?} {policy:?}"
        );
    }
}

/// A connection that breaks with messages in flight: what it had not had acknowledged goes
/// again over RD, in its turn, nothing lost or handed over twice.
#[test]
fn a_broken_connection_sends_again_over_datagrams() {
    let (a, b) = pair_in(rc_mode());
    one(&a, &b, 1, 10);
    wait_connections(&a, &b, 1);
    // After a break the peer is not asked again for the policy's back-off.
    let backoff = Promote::default().backoff + Duration::from_millis(50);
    let gap = |round| {
        if round % 2 == 0 {
            Duration::ZERO
        } else {
            backoff
        }
    };
    numbered_stream(&a, &b, 8, 12, gap, |round| match round % 4 {
        0 => a.ep.with_data(|d| d.break_connections()),
        2 => b.ep.with_data(|d| d.break_connections()),
        _ => {}
    });
    let (pa, _) = a.ep.with_data(|d| d.path_stats());
    let (pb, _) = b.ep.with_data(|d| d.path_stats());
    // A side's own break is lost to it; the peer's is lost too, or seen as the end of stream
    // the broken side's shutdown sends (closed by the peer): rc demotes nothing, so both
    // counts are breaks here.
    assert_eq!((pa.demoted, pb.demoted), (0, 0), "{pa:?} {pb:?}");
    let ends = |p: &crate::path::PathStats| p.lost + p.demoted_by_peer;
    assert!(ends(&pa) >= 2 && ends(&pb) >= 2, "{pa:?} {pb:?}");
    assert!(pa.resent > 0, "messages were in flight: {pa:?}");
    assert_eq!(b.ep.data_stats().malformed, 0);
    // Each round's receives took exactly its messages: no round found one twice.
    assert_eq!(b.ep.data_stats().received, 1 + 8 * 12);
}

/// A rank that does not poll still acknowledges what arrives over its connection: its
/// progress thread waits on the connection's socket, not on a tick.
#[test]
fn a_rank_that_does_not_poll_acknowledges_over_its_connection() {
    let (a, b) = pair_in(rc_mode());
    one(&a, &b, 1, 10);
    wait_connections(&a, &b, 1);
    b.ep.set_tick(Duration::from_secs(60));
    // The thread is asleep on the old tick (10 ms) until it next looks.
    std::thread::sleep(Duration::from_millis(50));
    let rc_before = a.ep.with_data(|d| d.path_stats().0.rc_messages);
    for i in 0..3u8 {
        let (mem, _) = crate::raw::mem::UserMem::owned(pattern(4096, i));
        a.ep.send(SendArgs {
            kind: Kind::Tagged,
            dest: 1,
            mem,
            tag: 40 + u64::from(i),
            data: None,
            context: 7,
            flags: FI_COMPLETION | FI_DELIVERY_COMPLETE,
        })
        .unwrap();
        let start = Instant::now();
        let c = loop {
            let mut got = None;
            if a.cq.read(1, |_, c| got = Some(*c)).is_ok() {
                break got.expect("one entry");
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "send {i} not acknowledged by a rank that does not poll"
            );
        };
        assert_eq!(c.op_context, 7);
        // Quiet between sends, so each arrival finds the thread asleep.
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(
        a.ep.with_data(|d| d.path_stats().0.rc_messages),
        rc_before + 3
    );
    for i in 0..3u8 {
        let buf = recv(&b, 0, Kind::Tagged, 40 + u64::from(i), 4096, 70);
        let c = ok(next(&b, &a));
        assert_eq!((c.op_context, c.tag, c.len), (70, 40 + u64::from(i), 4096));
        assert_eq!(*buf.lock(), pattern(4096, i));
    }
}

/// A send over a connection waits for the peer's acknowledgement; `flags` as the caller's.
fn send_waiting(s: &Side, tag: u64, n: usize, ctx: usize) {
    let (mem, _) = crate::raw::mem::UserMem::owned(pattern(n, tag as u8));
    s.ep.send(SendArgs {
        kind: Kind::Tagged,
        dest: 1,
        mem,
        tag,
        data: None,
        context: ctx,
        flags: FI_COMPLETION | FI_DELIVERY_COMPLETE,
    })
    .unwrap();
}

/// The error completion `s` gets within `within`.
fn fails_within(s: &Side, within: Duration) -> crate::cq::CompletionError {
    let deadline = Instant::now() + within;
    loop {
        if let Err(e) = s.cq.read(1, |_, c| panic!("completion {c:?}")) {
            if e.0 == FI_EAVAIL {
                return s.cq.read_err().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "no error within {within:?}");
    }
}

/// A pair in rc mode with a peer timeout of `limit`, connected.
fn connected_with_peer_timeout(limit: Duration) -> (Side, Side) {
    let (a, b) = pair_with(Config {
        promote: rc_mode(),
        peer_timeout: limit,
        ..Config::default()
    });
    one(&a, &b, 1, 10);
    wait_connections(&a, &b, 1);
    (a, b)
}

/// A peer that stops answering (its process stopped: no progress at all) fails what waits
/// on it over its connection with FI_EIO, within the peer timeout and not long after.
#[test]
fn a_silent_peer_fails_sends_over_its_connection_within_the_peer_timeout() {
    let limit = Duration::from_millis(300);
    let (a, b) = connected_with_peer_timeout(limit);
    b.ep.stop_progress_thread();
    let started = Instant::now();
    send_waiting(&a, 2, 100, 9);
    let err = fails_within(&a, Duration::from_secs(10));
    assert_eq!(
        (err.err, err.completion.op_context),
        (Errno(FI_EIO as u32), 9)
    );
    let took = started.elapsed();
    assert!(took >= limit && took < 3 * limit, "{took:?}");
    let paths = a.ep.with_data(|d| d.path_stats().0);
    assert_eq!(paths.timed_out, 1);
    // It was asked again meanwhile, every 100 ms.
    assert!(paths.probes >= 2, "{paths:?}");
}

/// A peer that goes away (its endpoint closed) fails a rendezvous send waiting on it over its
/// connection with FI_EIO within the peer timeout, as over datagrams.
#[test]
fn a_peer_that_goes_away_fails_a_rendezvous_over_its_connection() {
    let limit = Duration::from_millis(300);
    let (a, b) = connected_with_peer_timeout(limit);
    // B never posts the receive: the send waits for its answer.
    send(&a, 1, Kind::Tagged, 9, pattern(1 << 20, 7), 5);
    let until = Instant::now() + 3 * limit;
    while Instant::now() < until {
        assert!(a.cq.read(1, |_, c| panic!("completion {c:?}")).is_err());
        let _ = b.cq.read(0, |_, _| ());
    }
    assert_eq!(a.ep.data_stats().failed_sends, 0, "B was alive");
    b.ep.shutdown();
    drop(b);
    let started = Instant::now();
    let err = fails_within(&a, Duration::from_secs(10));
    assert_eq!(
        (err.err, err.completion.op_context),
        (Errno(FI_EIO as u32), 5)
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

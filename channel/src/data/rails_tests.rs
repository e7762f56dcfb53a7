//! Several rails on loopback (127.0.0.1 and 127.0.0.2, each a UDP socket and a queue pair):
//! names carry every rail, rendezvous data is striped over them, the rest keeps to one rail per
//! pair, and every message arrives intact and in order; a peer with fewer rails talks over the
//! rails both have.

use std::time::{Duration, Instant};

use super::tests::*;
use super::*;
use crate::av::AddressVector;
use crate::endpoint::Bind;
use crate::params::Config;
use crate::path::Rail;
use crate::testutil::domain_with;

pub(super) const TWO: &str = "127.0.0.1,127.0.0.2";

pub(super) fn on(iface: &str) -> Config {
    Config {
        iface: Some(iface.into()),
        ..Config::default()
    }
}

/// A and B, each on its own rails; both AVs hold both names (A is 0, B is 1).
fn pair_on(a_iface: &str, b_iface: &str) -> (Side, Side) {
    pair_of(on(a_iface), on(b_iface))
}

pub(super) fn pair_of(a: Config, b: Config) -> (Side, Side) {
    let (da, db) = (domain_with(a), domain_with(b));
    let (a, acq) = open_side(&da);
    let (b, bcq) = open_side(&db);
    let names: Vec<u8> = [a.name(), b.name()]
        .iter()
        .flat_map(|n| n.encode())
        .collect();
    for (d, ep, cq) in [(&da, &a, &acq), (&db, &b, &bcq)] {
        let av = AddressVector::open(d, FI_AV_TABLE, 2, 0, false, 0).unwrap();
        assert_eq!(av.insert(&names, 0).unwrap().count, 2);
        ep.bind(Bind::Av(av), 0).unwrap();
        ep.bind(Bind::Cq(cq.clone()), FI_TRANSMIT | FI_RECV)
            .unwrap();
        ep.enable().unwrap();
    }
    (Side { ep: a, cq: acq }, Side { ep: b, cq: bcq })
}

/// Data datagrams each rail of `s` sent, and the chunks the striping put on each.
pub(super) fn per_rail(s: &Side) -> Vec<(u64, u64)> {
    s.ep.with_data(|d| {
        d.rail_stats()
            .iter()
            .map(|(rd, lane, _)| (rd.data_sent, lane.chunks))
            .collect()
    })
}

/// `n` rounds of a message each way: eager and rendezvous sizes mixed, each checked byte by
/// byte, in order, with its tag and source.
pub(super) fn both_ways(a: &Side, b: &Side, rounds: usize) {
    let eager = Config::default().eager_size;
    let sizes = [1, eager, 4 * CHUNK + 3, 0, 2 << 20, 100];
    for round in 0..rounds {
        for (from, to, src) in [(a, b, 0u64), (b, a, 1u64)] {
            let dest = 1 - src;
            let bufs: Vec<_> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| recv(to, src, Kind::Tagged, i as u64, n, 100 + i))
                .collect();
            for (i, &n) in sizes.iter().enumerate() {
                send(
                    from,
                    dest,
                    Kind::Tagged,
                    i as u64,
                    pattern(n, (round + i) as u8),
                    i,
                );
            }
            // A rendezvous completes once its data is in, after the eager messages behind it.
            let mut got: Vec<_> = sizes.iter().map(|_| ok(next(to, from))).collect();
            got.sort_by_key(|c| c.op_context);
            for (i, (&n, c)) in sizes.iter().zip(&got).enumerate() {
                assert_eq!(c.op_context, 100 + i, "each receive completes once");
                assert_eq!((c.len, c.tag, c.src), (n, i as u64, Some(src)));
                assert!(
                    *bufs[i].lock() == pattern(n, (round + i) as u8),
                    "round {round} message {i} ({n} B) intact"
                );
            }
            let mut done: Vec<usize> = (0..sizes.len())
                .map(|_| ok(next(from, to)).op_context)
                .collect();
            done.sort_unstable();
            assert_eq!(done, (0..sizes.len()).collect::<Vec<_>>());
        }
    }
}

#[test]
fn names_carry_every_rail() {
    let (a, b) = pair_on(TWO, "127.0.0.1");
    let n = a.ep.name();
    assert_eq!(n.rail_count(), 2);
    assert_eq!(
        n.rail(1).unwrap().ip,
        "127.0.0.2".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(EpName::decode(&n.encode()), Ok(n));
    assert_eq!(b.ep.name().rail_count(), 1);
    assert_eq!(per_rail(&a).len(), 2);
    assert_eq!(per_rail(&b).len(), 1);
}

#[test]
fn rendezvous_data_is_striped_and_every_message_is_intact_in_order() {
    let (a, b) = pair_on(TWO, TWO);
    both_ways(&a, &b, 3);
    for (who, s) in [("A", &a), ("B", &b)] {
        let rails = per_rail(s);
        assert_eq!(rails.len(), 2);
        for (r, &(data, chunks)) in rails.iter().enumerate() {
            assert!(
                data > 0 && chunks > 0,
                "{who}: rail {r} carried nothing: {rails:?}"
            );
        }
        let all: u64 = rails.iter().map(|r| r.1).sum();
        for (r, &(_, chunks)) in rails.iter().enumerate() {
            assert!(
                chunks * 5 >= all,
                "{who}: rail {r} took {chunks} of {all} chunks"
            );
        }
        assert_eq!(s.ep.data_stats().malformed, 0);
        assert_eq!(s.ep.data_stats().stray, 0);
    }
}

/// A peer with one rail and a peer with two talk over the first; the second rail of the one
/// that has it carries nothing (its peer could not tell whose its datagrams are).
#[test]
fn a_peer_with_fewer_rails_is_reached_over_the_rails_both_have() {
    let (a, b) = pair_on(TWO, "127.0.0.1");
    both_ways(&a, &b, 2);
    let rails = per_rail(&a);
    assert!(rails[0].0 > 0, "{rails:?}");
    assert_eq!((rails[1].0, rails[1].1), (0, 0), "{rails:?}");
}

/// Rails pair by position: with a second rail named on one side only, and the first rails on
/// different addresses, everything still goes where the names say.
#[test]
fn rails_pair_by_position() {
    let (a, b) = pair_on("127.0.0.1,127.0.0.3", "127.0.0.2,127.0.0.4");
    both_ways(&a, &b, 1);
    for s in [&a, &b] {
        assert!(per_rail(s).iter().all(|&(data, _)| data > 0));
    }
}

#[test]
fn a_rail_list_that_cannot_be_bound_is_refused() {
    for bad in ["127.0.0.1,", "127.0.0.1,127.0.0.1", "127.0.0.1,192.0.2.77"] {
        let d = domain_with(on(bad));
        let v = crate::info::fi_version(1, 17);
        assert!(
            crate::endpoint::Endpoint::open(&d, v, &d.info.clone()).is_err(),
            "{bad}"
        );
    }
}

/// One tag, so MPI's order is what matches each message to its receive: eager and rendezvous
/// messages alternate while the pair's home rail changes (the first messages go on rail 0,
/// until each side has said it knows the other's name) and chunks take both rails.
#[test]
fn one_tag_keeps_send_order_across_rails() {
    let (a, b) = pair_on(TWO, TWO);
    eager_and_rendezvous_intact_in_order((&a, &b));
    one_tag_stream(&a, &b, 120);
    wait_idle(&a, &b, "A's sends");
    let rails = per_rail(&a);
    assert!(
        rails.iter().all(|&(data, chunks)| data > 0 && chunks > 0),
        "{rails:?}"
    );
}

/// A connected pair (rc mode) stripes rendezvous data over its connection, the first rail's
/// lane, and over RD on the second rail beside it; everything else takes the connection.
#[test]
fn a_connection_is_the_first_rails_lane() {
    let rc = || Config {
        promote: policies::promote::Config {
            mode: policies::promote::Mode::Rc,
            ..Default::default()
        },
        rc_datagram_max: 65_507,
        ..on(TWO)
    };
    let (a, b) = pair_of(rc(), rc());
    both_ways(&a, &b, 3);
    for (who, s) in [("A", &a), ("B", &b)] {
        assert!(s.ep.with_data(|d| d.connections()) == 1, "{who} connected");
        assert!(s.ep.with_data(|d| d.path_stats().0.rc_messages) > 0);
        let rails = per_rail(s);
        assert!(
            rails[0].1 > 0,
            "{who}: chunks over the connection: {rails:?}"
        );
        assert!(
            rails[1].0 > 0 && rails[1].1 > 0,
            "{who}: and over rail 1: {rails:?}"
        );
    }
}

/// `n` messages from A to B on one tag, eager and rendezvous alternating, each matched in send
/// order and checked byte by byte, with B answering now and then.
pub(super) fn one_tag_stream(a: &Side, b: &Side, n: usize) {
    let size = |i: usize| if i % 3 == 2 { 2 * CHUNK + i } else { 1 + i };
    let bufs: Vec<_> = (0..n)
        .map(|i| recv(b, 0, Kind::Tagged, 9, size(i), 1000 + i))
        .collect();
    for i in 0..n {
        send(a, 1, Kind::Tagged, 9, pattern(size(i), i as u8), i);
        // Answers now and then, so both sides keep talking.
        if i % 40 == 0 {
            let _ = recv(a, 1, Kind::Tagged, 10, 8, 5000 + i);
            send(b, 0, Kind::Tagged, 10, pattern(8, 1), 6000 + i);
        }
    }
    let mut got = 0;
    // A's own: every send, and every answer it took.
    let (mut a_done, a_all) = (0, n + n.div_ceil(40));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while got < n || a_done < a_all {
        assert!(
            std::time::Instant::now() < deadline,
            "{got} of {n} received"
        );
        let mut c = None;
        if b.cq.read(1, |_, x| c = Some(*x)).is_ok() {
            let c = c.expect("one entry");
            if c.op_context >= 6000 {
                continue; // B's answer went
            }
            let i = c.op_context - 1000;
            assert_eq!((c.len, c.tag, c.src), (size(i), 9, Some(0)));
            assert!(
                *bufs[i].lock() == pattern(size(i), i as u8),
                "message {i} intact"
            );
            got += 1;
        }
        match a.cq.read(1, |_, _| ()) {
            Ok(_) => a_done += 1,
            Err(e) if e.0 == FI_EAVAIL => panic!("A: {:?}", a.cq.read_err()),
            Err(_) => {}
        }
    }
}

/// Names of this process's threads that start with `prefix`.
fn threads_named(prefix: &str) -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| c.starts_with(prefix))
        .collect()
}

/// FI_DIWARP_RAIL_THREADS=1: a progress thread per rail. While neither application polls,
/// the threads alone carry a striped rendezvous through (the second rail's chunks are read by
/// the second rail's thread); with the application polling too, messages stay intact and in
/// order.
#[test]
fn a_thread_per_rail_drives_each_rail() {
    let threaded = || Config {
        rail_threads: true,
        ..on(TWO)
    };
    let (a, b) = pair_of(threaded(), threaded());
    // A thread names itself once it runs.
    let start = Instant::now();
    let at_both_ends = |names: &[String]| {
        ["diwarp-rail0", "diwarp-rail1"]
            .iter()
            .all(|r| names.iter().filter(|n| n == r).count() >= 2)
    };
    let mut names = threads_named("diwarp-rail");
    while !at_both_ends(&names) {
        assert!(start.elapsed() < Duration::from_secs(5), "{names:?}");
        std::thread::sleep(Duration::from_millis(5));
        names = threads_named("diwarp-rail");
    }
    let n = 3 << 20;
    let buf = recv(&b, 0, Kind::Tagged, 9, n, 1);
    send(&a, 1, Kind::Tagged, 9, pattern(n, 3), 2);
    let start = Instant::now();
    while per_rail(&a)[1].1 == 0 || b.ep.with_data(|d| d.datagrams_read_of(Some(Rail(1)))) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            per_rail(&a)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = ok(next(&b, &a));
    assert_eq!((c.len, c.tag, c.src), (n, 9, Some(0)));
    assert!(*buf.lock() == pattern(n, 3), "intact");
    assert_eq!(ok(next(&a, &b)).op_context, 2, "the send completes");
    both_ways(&a, &b, 2);
    one_tag_stream(&a, &b, 60);
    wait_idle(&a, &b, "A's sends");
}

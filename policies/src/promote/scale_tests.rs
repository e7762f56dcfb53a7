//! The policy at a million peers: an idle datagram peer costs its table entry only, and the
//! scans look at the connected and waiting peers, however many peers there are.

use std::time::{Duration, Instant};

use super::*;

/// Four RC peers and two waiting, then one message from each of `n` peers in all; then a
/// fixed run of wakes and messages from the hot peers. Returns the policy's heap bytes after
/// the `n` peers, the full entries it keeps, and the entries its scans looked at in the run.
fn crowd(n: u32) -> (usize, usize, u64) {
    let t = Instant::now();
    let c = Config {
        mode: Mode::Hybrid,
        cap: 4,
        promote_messages: 4.0,
        promote_bytes: 1e9,
        ..Config::default()
    };
    let mut p = Policy::new(c);
    for id in 0..6 {
        for _ in 0..4 {
            p.traffic(t, id, 100, false);
        }
    }
    while let Some(d) = p.poll() {
        let Decision::Promote(id) = d else {
            panic!("{d:?}")
        };
        assert!(p.connected(t, id));
    }
    assert_eq!(p.slots_used(), 4);
    for id in 6..n {
        p.traffic(t, id, 100, false);
    }
    let (memory, full) = (p.memory(), p.peers.len());
    p.visited.set(0);
    let mut now = t;
    for i in 0..10_000u32 {
        now += Duration::from_micros(50);
        if p.poll_timeout().is_some_and(|due| due <= now) {
            p.handle_timeout(now);
        }
        p.handle_timeout(now);
        p.traffic(now, 4 + i % 2, 100, false);
        p.traffic(now, i % 4, 100, false);
        while p.poll().is_some() {}
    }
    (memory, full, p.visited.get())
}

#[test]
fn an_idle_peer_costs_16_bytes_and_the_scans_do_not_grow_with_peers() {
    let (small_memory, small_full, small_visits) = crowd(1 << 10);
    let n = 1 << 20;
    let (memory, full, visits) = crowd(n);
    assert_eq!(
        (small_full, full),
        (6, 6),
        "only the RC and waiting peers in full"
    );
    assert!(
        memory / n as usize <= 16,
        "{memory} bytes for {n} peers ({small_memory} for 1024)"
    );
    assert!(small_visits > 0);
    assert_eq!(small_visits, visits, "entries the scans looked at");
}

#[test]
fn a_peer_whose_back_off_lapses_returns_to_the_table_and_keeps_its_refusals() {
    let t = Instant::now();
    let c = Config {
        promote_messages: 1.0,
        ..Config::default()
    };
    let mut p = Policy::new(c);
    p.traffic(t, 3, 10, false);
    assert_eq!(p.poll(), Some(Decision::Promote(3)));
    p.connect_failed(t, 3, Refusal::Cap);
    assert_eq!(p.peers.len(), 1, "backing off");
    // Nothing more from it: the next wake after the back-off returns it to the table.
    let later = t + c.backoff;
    p.handle_timeout(later);
    assert!(p.peers.is_empty());
    assert_eq!(p.path(3), Path::Ud);
    // Refused again: the back-off has doubled.
    p.traffic(later, 3, 10, false);
    assert_eq!(p.poll(), Some(Decision::Promote(3)));
    p.connect_failed(later, 3, Refusal::Cap);
    assert_eq!(p.peers[&3].retry_at, Some(later + 2 * c.backoff));
    // Connected at last: the refusals are forgotten.
    let up = later + 2 * c.backoff;
    p.traffic(up, 3, 10, false);
    assert_eq!(p.poll(), Some(Decision::Promote(3)));
    assert!(p.connected(up, 3));
    p.closed(up, 3);
    assert_eq!(p.peers[&3].retry_at, Some(up + c.backoff));
}

#[test]
fn a_peer_in_the_table_cools_as_one_in_full_does() {
    let t = Instant::now();
    let c = Config {
        promote_messages: 10.0,
        initiate: false,
        ..Config::default()
    };
    let mut p = Policy::new(c);
    for _ in 0..10 {
        p.traffic(t, 1, 10, false);
    }
    assert!(p.peers.is_empty(), "not initiating: only a score");
    let (mut s, _) = p.table.take(t, 1);
    assert!((s.heat(t + c.half_life, &c) - 0.5).abs() < 1e-6);
    s.add(t, c.half_life, 0.0, 0.0);
    assert!((s.heat(t, &c) - 1.0).abs() < 1e-6);
}

#[test]
fn back_offs_double_up_to_the_most() {
    let c = Config::default();
    let got: Vec<Duration> = (0..12).map(|k| backoff(&c, k)).collect();
    let ms = |n| Duration::from_millis(n);
    assert_eq!(
        got,
        [0, 100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000, 10_000].map(ms)
    );
    assert_eq!(backoff(&c, u8::MAX), c.backoff_max);
}

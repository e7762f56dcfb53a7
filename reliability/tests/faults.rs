//! Pairs of sessions over a lossy, duplicating, reordering, corrupting, rate-limited network:
//! every message arrives exactly once, in order and intact, and retransmissions stay in
//! proportion to what the network destroyed.

mod util;

use std::time::Duration;

use util::{assert_idle, small_config, Faults, MsgGen, Sim};

fn gen(seed: u64, max_datagram: usize) -> MsgGen {
    MsgGen {
        seed,
        max_len: 4 * max_datagram,
        tiny: 0.4,
        small: 0.3,
        small_len: max_datagram / 3,
    }
}

/// One seed: two nodes sending to each other.
fn pair(seed: u64, faults: Faults, max_datagram: usize, count: u64) -> Sim {
    let cfg = small_config(max_datagram);
    let mut sim = Sim::new(seed, faults, gen(seed, max_datagram), [cfg.clone(), cfg]);
    sim.connect(0, 1);
    sim.flow(0, 1, count);
    sim.flow(1, 0, count / 2);
    sim.run(Duration::from_secs(20));
    assert_idle(&sim);
    sim
}

fn mixes() -> Vec<(&'static str, Faults)> {
    let base = Faults::none();
    vec![
        ("clean", base.clone()),
        (
            "loss30",
            Faults {
                loss: 0.3,
                ..base.clone()
            },
        ),
        (
            "reorder",
            Faults {
                reorder: 0.5,
                reorder_delay: Duration::from_micros(200),
                jitter: Duration::from_micros(20),
                ..base.clone()
            },
        ),
        (
            "dup_corrupt",
            Faults {
                duplicate: 0.2,
                corrupt: 0.1,
                ..base.clone()
            },
        ),
        (
            "everything",
            Faults {
                loss: 0.15,
                duplicate: 0.1,
                reorder: 0.3,
                reorder_delay: Duration::from_micros(300),
                corrupt: 0.05,
                jitter: Duration::from_micros(10),
                rate: Some(200_000_000),
                ..base.clone()
            },
        ),
        (
            "loss30_reorder",
            Faults {
                loss: 0.3,
                reorder: 0.5,
                reorder_delay: Duration::from_millis(2),
                ..base
            },
        ),
    ]
}

#[test]
fn thousands_of_seeds() {
    for (name, faults) in mixes() {
        let (mut retx, mut destroyed, mut reordered) = (0u64, 0u64, 0u64);
        let mut runs = 0;
        for seed in 0..1000u64 {
            let sim = pair(seed, faults.clone(), 300, 60);
            runs += sim.runs_taken;
            let r = sim.total(|s| s.retransmits);
            let d = sim.net.stats.destroyed();
            let o = sim.net.stats.reordered;
            retx += r;
            destroyed += d;
            reordered += o;
            // A retransmission is owed to a destroyed datagram (or to a timeout that fired
            // because the news of it was destroyed too), or, when the network reorders, to a
            // datagram held back past the loss detector's patience.
            assert!(
                r <= 3 * d + 2 * o + 2,
                "{name} seed {seed}: {r} retransmissions for {d} destroyed, {o} reordered"
            );
        }
        eprintln!(
            "{name}: {retx} retransmissions for {destroyed} destroyed, {reordered} reordered, \
             {runs} runs taken whole"
        );
        // Without jitter or a rate limit, datagrams sent together arrive together, and half
        // the seeds hand them over as runs: the receiving side's run path must be exercised.
        if faults.jitter.is_zero() && faults.rate.is_none() {
            assert!(runs > 100, "{name}: only {runs} runs taken whole");
        }
        match name {
            "clean" => assert_eq!(retx, 0, "a clean network needs no retransmission"),
            // Only the lost ones are resent: about one retransmission per destroyed datagram
            // (go-back-N would resend the rest of the window after each).
            "loss30" | "dup_corrupt" => assert!(
                retx * 10 <= destroyed * 12,
                "{name}: {retx} retransmissions for {destroyed} destroyed"
            ),
            _ => assert!(
                retx <= destroyed + reordered,
                "{name}: {retx} retransmissions for {destroyed} destroyed, {reordered} reordered"
            ),
        }
    }
}

/// Default-sized (64 KiB) datagrams, messages up to four of them, under loss and reordering.
#[test]
fn full_size_datagrams() {
    let faults = Faults {
        loss: 0.1,
        reorder: 0.2,
        reorder_delay: Duration::from_micros(100),
        corrupt: 0.02,
        rate: Some(2_000_000_000),
        ..Faults::none()
    };
    for seed in 0..12u64 {
        let cfg = reliability::Config::default();
        let gen = MsgGen {
            seed,
            max_len: 4 * cfg.max_datagram_size,
            tiny: 0.3,
            small: 0.3,
            small_len: 8192,
        };
        let mut sim = Sim::new(seed, faults.clone(), gen, [cfg.clone(), cfg]);
        sim.connect(0, 1);
        sim.flow(0, 1, 30);
        sim.flow(1, 0, 10);
        sim.run(Duration::from_secs(20));
        assert_idle(&sim);
    }
}

/// One datagram lost in the middle of a long stream costs exactly one retransmission, and
/// the datagrams behind it are not resent (no go-back-N).
#[test]
fn single_loss_single_retransmission() {
    for victim in [0u64, 1, 17, 100, 250] {
        let cfg = small_config(300);
        let gen = MsgGen {
            seed: 7,
            max_len: 250,
            tiny: 0.5,
            small: 0.5,
            small_len: 90,
        };
        let mut sim = Sim::new(victim, Faults::none(), gen, [cfg.clone(), cfg]);
        let mut data_seen = 0u64;
        sim.net.filter = Some(Box::new(move |from, _to, _n, bytes| {
            // Count only data datagrams from node 0 (kind nibble != 0).
            if from != 0 || bytes[0] & 0x0f == 0 {
                return false;
            }
            data_seen += 1;
            data_seen == victim + 1
        }));
        sim.connect(0, 1);
        sim.flow(0, 1, 3000);
        sim.run(Duration::from_secs(5));
        let s = sim.nodes[0]
            .ep
            .session(util::session_id(0, 1))
            .unwrap()
            .stats();
        assert_eq!(sim.net.stats.filtered, 1, "{:?}", sim.net.stats);
        assert_eq!(s.retransmits, 1, "victim {victim}: {s:?}");
        assert_idle(&sim);
    }
}

/// Under steady heavy reordering the loss detector learns the reordering window from DSACKs,
/// and spurious retransmissions become rare.
#[test]
fn reordering_window_adapts() {
    let faults = Faults {
        reorder: 0.5,
        reorder_delay: Duration::from_micros(200),
        ..Faults::none()
    };
    for seed in 0..4 {
        let sim = pair(seed, faults.clone(), 300, 2000);
        let sent = sim.total(|s| s.data_sent);
        let retx = sim.total(|s| s.retransmits);
        assert!(
            retx * 100 <= sent * 5,
            "seed {seed}: {retx} retransmissions for {sent} datagrams"
        );
        let reo = sim.nodes[0]
            .ep
            .session(util::session_id(0, 1))
            .unwrap()
            .rtt()
            .reo_wnd;
        assert!(!reo.is_zero(), "seed {seed}: no reordering window learnt");
    }
}

/// Lost ACKs make timers resend datagrams the peer had, and it reports them as duplicates.
/// That is neither a slow peer nor a reordering network: the timeout must not learn from it,
/// or each lost ACK lengthens the next timeout by the last one. One loss in ten, both ways,
/// 1000 messages up to 64 KiB in 1472-byte datagrams: a timeout that learned from them would
/// show as an ACK lag of milliseconds and many more timeouts than losses call for.
#[test]
fn lost_acks_do_not_lengthen_the_timeout() {
    for seed in 0..4u64 {
        let cfg = reliability::Config {
            max_datagram_size: 1472,
            ..reliability::Config::default()
        };
        let gen = MsgGen {
            seed,
            max_len: 64 << 10,
            tiny: 0.0,
            small: 0.0,
            small_len: 0,
        };
        let faults = Faults {
            latency: Duration::from_micros(20),
            rate: Some(2_000_000_000),
            ..Faults::none()
        };
        let mut sim = Sim::new(seed, faults, gen, [cfg.clone(), cfg]);
        let mut rng = util::Rng::new(seed ^ 0xac);
        // One datagram in ten is lost, ACKs included.
        sim.net.filter = Some(Box::new(move |_from, _to, _n, _bytes| rng.chance(0.1)));
        sim.connect(0, 1);
        sim.flow(0, 1, 1000);
        sim.run(Duration::from_secs(20));
        assert_idle(&sim);
        let s = sim.nodes[0].ep.session(util::session_id(0, 1)).unwrap();
        let (rtt, stats) = (s.rtt(), s.stats());
        assert!(
            rtt.ack_lag < Duration::from_millis(1),
            "seed {seed}: {rtt:?}"
        );
        assert!(
            sim.net.elapsed() < Duration::from_millis(300),
            "seed {seed}: {:?}, {stats:?}",
            sim.net.elapsed()
        );
    }
}

//! The policy alone, and ranks of policies joined by a simulated connection layer over
//! simulated time: the cap holds on both sides, no peer is promoted and demoted within the
//! hysteresis, refusals do not loop, and the same inputs give the same decisions.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

fn hybrid(cap: usize) -> Config {
    Config {
        mode: Mode::Hybrid,
        cap,
        promote_messages: 4.0,
        promote_bytes: 1e9,
        ..Config::default()
    }
}

fn drain(p: &mut Policy) -> Vec<Decision> {
    std::iter::from_fn(|| p.poll()).collect()
}

#[test]
fn ud_mode_never_promotes_and_refuses_requests() {
    let t = Instant::now();
    let mut p = Policy::new(Config {
        mode: Mode::Ud,
        ..Config::default()
    });
    for i in 0..1000 {
        p.traffic(t + Duration::from_micros(i), 1, 1 << 20, true);
    }
    assert_eq!(drain(&mut p), vec![]);
    assert_eq!(p.request(t, 2), Answer::Refuse(Refusal::Mode));
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn rc_mode_connects_every_peer_on_first_use_without_a_cap() {
    let t = Instant::now();
    let mut p = Policy::new(Config {
        mode: Mode::Rc,
        cap: 1,
        ..Config::default()
    });
    for peer in 0..100 {
        p.traffic(t, peer, 1, false);
    }
    assert_eq!(
        drain(&mut p),
        (0..100).map(Decision::Promote).collect::<Vec<_>>()
    );
    assert_eq!(p.slots_used(), 100);
    p.connected(t, 7);
    p.handle_timeout(t + Duration::from_secs(3600));
    assert_eq!(drain(&mut p), vec![], "no idle demotion in rc mode");
}

#[test]
fn a_hot_peer_is_promoted_and_an_idle_one_demoted() {
    let t = Instant::now();
    let c = hybrid(2);
    let mut p = Policy::new(c);
    for i in 0..3 {
        p.traffic(t, 5, 100, false);
        assert_eq!(drain(&mut p), vec![], "message {i}: not hot yet");
    }
    p.traffic(t, 5, 100, false);
    assert_eq!(drain(&mut p), vec![Decision::Promote(5)]);
    assert_eq!(p.path(5), Path::Connecting);
    p.connected(t, 5);
    assert_eq!(p.poll_timeout(), Some(t + c.idle_limit()));
    p.handle_timeout(t + c.idle_limit() - Duration::from_millis(1));
    assert_eq!(drain(&mut p), vec![]);
    p.handle_timeout(t + c.idle_limit());
    assert_eq!(drain(&mut p), vec![Decision::Demote(5, Why::Idle)]);
    assert_eq!(p.slots_used(), 1, "closing holds its slot");
    p.closed(t + c.idle_limit(), 5);
    assert_eq!((p.path(5), p.slots_used()), (Path::Ud, 0));
}

#[test]
fn a_side_that_does_not_initiate_only_accepts() {
    let t = Instant::now();
    let mut p = Policy::new(Config {
        initiate: false,
        ..hybrid(2)
    });
    for i in 0..1000 {
        p.traffic(t + Duration::from_micros(i), 1, 1 << 20, true);
    }
    assert_eq!(drain(&mut p), vec![], "hot, but not asked for");
    assert_eq!(p.request(t, 1), Answer::Accept);
    assert_eq!(p.request(t, 2), Answer::Accept);
    assert_eq!(
        p.request(t, 3),
        Answer::Refuse(Refusal::Cap),
        "the cap still holds"
    );
    assert!(p.connected(t, 1));
    p.handle_timeout(t + Duration::from_secs(3600));
    assert!(
        drain(&mut p)
            .iter()
            .any(|d| matches!(d, Decision::Demote(1, _))),
        "an idle connection still closes"
    );
}

#[test]
fn rendezvous_traffic_weighs_more() {
    let t = Instant::now();
    let mut p = Policy::new(Config {
        rendezvous_weight: 4.0,
        ..hybrid(2)
    });
    p.traffic(t, 1, 100_000, true);
    assert_eq!(drain(&mut p), vec![Decision::Promote(1)]);
}

#[test]
fn a_hotter_peer_takes_the_lru_slot_after_the_hysteresis() {
    let t = Instant::now();
    let c = hybrid(1);
    let mut p = Policy::new(c);
    for _ in 0..4 {
        p.traffic(t, 1, 10, false);
    }
    assert_eq!(drain(&mut p), vec![Decision::Promote(1)]);
    p.connected(t, 1);
    // Peer 2 gets hot at once: peer 1 is within the hysteresis.
    let t1 = t + Duration::from_millis(10);
    for _ in 0..8 {
        p.traffic(t1, 2, 10, false);
    }
    assert_eq!(drain(&mut p), vec![]);
    let due = p.poll_timeout().expect("a wake when peer 1 may go");
    assert_eq!(due, t + c.hysteresis);
    for _ in 0..8 {
        p.traffic(due, 2, 10, false);
    }
    p.handle_timeout(due);
    assert_eq!(drain(&mut p), vec![Decision::Demote(1, Why::Hotter(2))]);
    // One victim per waiting peer.
    for _ in 0..8 {
        p.traffic(due, 2, 10, false);
    }
    assert_eq!(drain(&mut p), vec![]);
    p.closed(due, 1);
    assert_eq!(drain(&mut p), vec![Decision::Promote(2)]);
    assert_eq!(p.slots_used(), 1);
}

#[test]
fn requests_past_the_cap_are_refused_and_refusals_back_off() {
    let t = Instant::now();
    let c = hybrid(1);
    let mut p = Policy::new(c);
    assert_eq!(p.request(t, 1), Answer::Accept);
    assert_eq!(p.request(t, 2), Answer::Refuse(Refusal::Cap));
    assert_eq!(
        p.request(t, 1),
        Answer::Accept,
        "the same peer again (a simultaneous connect)"
    );
    assert_eq!(p.slots_used(), 1);
    // Our own requests to a peer at its cap: asked again only after a doubling back-off.
    let mut q = Policy::new(hybrid(4));
    let mut asked = vec![];
    let mut now = t;
    while now < t + Duration::from_secs(60) {
        q.traffic(now, 9, 10, false);
        for d in drain(&mut q) {
            assert_eq!(d, Decision::Promote(9));
            asked.push(now);
            q.connect_failed(now, 9, Refusal::Cap);
        }
        now += Duration::from_millis(10);
    }
    // 100, 200, ... 6400 ms, then every 10 s: a handful, not thousands.
    assert!(asked.len() <= 16, "{} requests in a minute", asked.len());
    assert!(asked.len() >= 8, "{} requests in a minute", asked.len());
    for w in asked.windows(2) {
        assert!(w[1] - w[0] >= c.backoff, "{:?}", w[1] - w[0]);
    }
}

/// A rank's policy and what it believes of its connections.
struct Rank {
    policy: Policy,
    /// When each peer's connection was asked for (by us, or by it and accepted), while it is
    /// not back on UD.
    promoted: BTreeMap<PeerId, Instant>,
}

#[derive(Clone, Debug)]
enum Event {
    /// Rank `from` sends `rank` a message.
    Send {
        from: u8,
        to: u8,
        bytes: u32,
        rndv: bool,
    },
    /// Time passes.
    Wait { ms: u16 },
    /// The connection layer tells rank `at` something out of turn about `peer`: a late
    /// failure, a second `connected`, a close it did not ask for.
    Stray { at: u8, peer: u8, what: u8 },
}

fn events(ranks: u8) -> impl Strategy<Value = Vec<Event>> {
    let send = (0..ranks, 0..ranks, 0u32..1 << 20, any::<bool>())
        .prop_filter("to another rank", |(f, t, _, _)| f != t)
        .prop_map(|(from, to, bytes, rndv)| Event::Send {
            from,
            to,
            bytes,
            rndv,
        });
    let wait = (1u16..400).prop_map(|ms| Event::Wait { ms });
    let stray = (0..ranks, 0..ranks, 0u8..3)
        .prop_filter("another rank", |(a, p, _)| a != p)
        .prop_map(|(at, peer, what)| Event::Stray { at, peer, what });
    proptest::collection::vec(prop_oneof![12 => send, 2 => wait, 1 => stray], 1..400)
}

/// Runs `ranks` policies over the events with a connection layer that answers requests at
/// once and opens or closes both ends together; checks the cap at every step, and returns
/// every decision made, in order, with its time.
fn simulate(config: Config, ranks: u8, evs: &[Event]) -> Vec<(u64, u8, Decision)> {
    let t0 = Instant::now();
    let mut now = t0;
    let mut rs: Vec<Rank> = (0..ranks)
        .map(|_| Rank {
            policy: Policy::new(config),
            promoted: BTreeMap::new(),
        })
        .collect();
    let mut log = vec![];
    let cap = config.effective_cap();
    // The connections that are really up, as (lower rank, higher rank).
    let mut conns: std::collections::BTreeSet<(u8, u8)> = Default::default();
    let key = |a: usize, b: usize| (a.min(b) as u8, a.max(b) as u8);
    let real = |conns: &std::collections::BTreeSet<(u8, u8)>, r: usize| {
        conns
            .iter()
            .filter(|&&(a, b)| a as usize == r || b as usize == r)
            .count()
    };
    let step = |rs: &mut Vec<Rank>,
                now: Instant,
                log: &mut Vec<(u64, u8, Decision)>,
                conns: &mut std::collections::BTreeSet<(u8, u8)>| {
        // Decisions can lead to more (a closed slot promotes a waiting peer).
        loop {
            let mut any = false;
            for me in 0..rs.len() {
                while let Some(d) = rs[me].policy.poll() {
                    any = true;
                    log.push(((now - t0).as_millis() as u64, me as u8, d));
                    match d {
                        Decision::Promote(peer) => {
                            rs[me].promoted.insert(peer, now);
                            let peer = peer as usize;
                            match rs[peer].policy.request(now, me as PeerId) {
                                Answer::Accept => {
                                    // The accepting side's slot dates from now too.
                                    rs[peer].promoted.entry(me as PeerId).or_insert(now);
                                    let a = rs[me].policy.connected(now, peer as PeerId);
                                    let b = rs[peer].policy.connected(now, me as PeerId);
                                    if a && b {
                                        conns.insert(key(me, peer));
                                    } else if !conns.contains(&key(me, peer)) {
                                        // One end will not keep it: the connection closes.
                                        rs[me].policy.closed(now, peer as PeerId);
                                        rs[peer].policy.closed(now, me as PeerId);
                                        rs[me].promoted.remove(&(peer as PeerId));
                                        rs[peer].promoted.remove(&(me as PeerId));
                                    }
                                }
                                Answer::Refuse(why) => {
                                    rs[me].policy.connect_failed(now, peer as PeerId, why);
                                    rs[me].promoted.remove(&(peer as PeerId));
                                }
                            }
                        }
                        Decision::Demote(peer, why) => {
                            let since = rs[me].promoted.remove(&peer);
                            let hyst = config.hysteresis;
                            if let Some(since) = since {
                                assert!(
                                    now - since >= hyst,
                                    "rank {me} demoted {peer} ({why:?}) {:?} after promoting it",
                                    now - since
                                );
                            }
                            rs[me].policy.closed(now, peer);
                            rs[peer as usize].policy.closed(now, me as PeerId);
                            rs[peer as usize].promoted.remove(&(me as PeerId));
                            conns.remove(&key(me, peer as usize));
                        }
                    }
                    for (i, r) in rs.iter().enumerate() {
                        assert!(
                            r.policy.slots_used() <= cap,
                            "rank {i}: {} slots, cap {cap}",
                            r.policy.slots_used()
                        );
                        let up = real(conns, i);
                        assert!(up <= cap, "rank {i}: {up} connections up, cap {cap}");
                    }
                }
            }
            if !any {
                break;
            }
        }
    };
    for e in evs {
        match *e {
            Event::Send {
                from,
                to,
                bytes,
                rndv,
            } => {
                rs[from as usize]
                    .policy
                    .traffic(now, to as PeerId, bytes as usize, rndv);
                rs[to as usize]
                    .policy
                    .traffic(now, from as PeerId, bytes as usize, rndv);
                step(&mut rs, now, &mut log, &mut conns);
            }
            Event::Stray { at, peer, what } => {
                let (a, b) = (at as usize, peer as usize);
                let up = conns.contains(&key(a, b));
                match what {
                    // A failure reported late (the other of two connects came up meanwhile).
                    0 => rs[a]
                        .policy
                        .connect_failed(now, peer as PeerId, Refusal::Failed),
                    // The second of two simultaneous connects comes up: one is kept.
                    1 if up => assert!(rs[a].policy.connected(now, peer as PeerId)),
                    1 => {}
                    // The connection breaks: both ends hear of it.
                    _ => {
                        conns.remove(&key(a, b));
                        rs[a].policy.closed(now, peer as PeerId);
                        rs[b].policy.closed(now, at as PeerId);
                        rs[a].promoted.remove(&(peer as PeerId));
                        rs[b].promoted.remove(&(at as PeerId));
                    }
                }
                for (i, r) in rs.iter().enumerate() {
                    assert!(
                        r.policy.slots_used() <= cap,
                        "rank {i}: {} slots, cap {cap}",
                        r.policy.slots_used()
                    );
                }
                step(&mut rs, now, &mut log, &mut conns);
            }
            Event::Wait { ms } => {
                let until = now + Duration::from_millis(ms.into());
                loop {
                    let next = rs.iter().filter_map(|r| r.policy.poll_timeout()).min();
                    match next {
                        Some(t) if t <= until => {
                            now = now.max(t);
                            for r in rs.iter_mut() {
                                r.policy.handle_timeout(now);
                            }
                            step(&mut rs, now, &mut log, &mut conns);
                        }
                        _ => break,
                    }
                }
                now = until;
            }
        }
    }
    log
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Six ranks, a cap of two: never more slots than the cap on any rank, never a demotion
    /// within the hysteresis of the promotion, and the same events give the same decisions.
    #[test]
    fn cap_and_hysteresis_hold_and_decisions_repeat(evs in events(6), cap in 1usize..3) {
        let c = Config {
            idle_limit: Duration::from_millis(300),
            ..hybrid(cap)
        };
        let a = simulate(c, 6, &evs);
        let b = simulate(c, 6, &evs);
        prop_assert_eq!(a, b);
    }
}

/// Sixteen ranks all-to-all with a cap of two, a storm: the cap holds on every rank and
/// connections come and go many times.
#[test]
fn the_cap_holds_under_an_all_to_all_storm() {
    let mut evs = vec![];
    for round in 0..50u32 {
        for from in 0..16u8 {
            for d in 1..16u8 {
                evs.push(Event::Send {
                    from,
                    to: (from + d) % 16,
                    bytes: 1 << (round % 21),
                    rndv: round % 3 == 0,
                });
            }
        }
        evs.push(Event::Wait { ms: 150 });
    }
    let c = Config {
        idle_limit: Duration::from_millis(300),
        ..hybrid(2)
    };
    let log = simulate(c, 16, &evs);
    let promotions = log
        .iter()
        .filter(|(_, _, d)| matches!(d, Decision::Promote(_)))
        .count();
    let demotions = log
        .iter()
        .filter(|(_, _, d)| matches!(d, Decision::Demote(..)))
        .count();
    assert!(
        promotions >= 16 && demotions >= 16,
        "{promotions} promotions, {demotions} demotions"
    );
}

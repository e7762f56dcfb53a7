//! A peer that vanishes fails the sends pending to it, within the configured silence limit,
//! instead of being retried forever; a peer that is merely quiet does not.

mod util;

use std::time::Duration;

use reliability::{Config, Event, SendError};
use util::{session_id, small_config, Faults, MsgGen, Sim};

const IDLE: Duration = Duration::from_millis(50);

fn config() -> Config {
    Config {
        idle_timeout: IDLE,
        max_rto: Duration::from_millis(8),
        ..small_config(300)
    }
}

fn gen(seed: u64) -> MsgGen {
    MsgGen {
        seed,
        max_len: 900,
        tiny: 0.3,
        small: 0.3,
        small_len: 100,
    }
}

#[test]
fn vanished_peer_fails_pending_sends_in_time() {
    for seed in 0..20u64 {
        let faults = Faults {
            loss: 0.1,
            ..Faults::none()
        };
        let mut sim = Sim::new(seed, faults, gen(seed), [config(), config()]);
        sim.connect(0, 1);
        sim.flow(0, 1, 500);
        // Let some traffic through, then pull the plug on node 1.
        while sim.nodes[1].inboxes[&session_id(1, 0)].delivered < 20 + seed {
            assert!(sim.step());
        }
        sim.nodes[1].alive = false;
        let died = sim.net.now;
        let failed_at = loop {
            let more = sim.step();
            if sim.nodes[0].outboxes[0].failed.is_some() {
                break sim.net.now;
            }
            assert!(more, "seed {seed}: nothing left to do and no failure");
            assert!(
                sim.net.now - died < 10 * IDLE,
                "seed {seed}: no failure after 10x limit"
            );
        };
        // A dead peer is probed, not flooded: after the first timeout only the head is resent.
        let retx = sim.total(|s| s.retransmits);
        assert!(
            retx < 300,
            "seed {seed}: {retx} retransmissions to a dead peer"
        );
        // It fails exactly the limit after the last word from the peer, so no later than the
        // limit after the peer died.
        let heard = sim.nodes[0]
            .ep
            .session(session_id(0, 1))
            .unwrap()
            .last_heard();
        assert!(heard <= died);
        assert_eq!(failed_at - heard, IDLE, "seed {seed}");
        assert!(failed_at - died <= IDLE, "seed {seed}");
        let ob = &sim.nodes[0].outboxes[0];
        let unacked = ob.failed.unwrap();
        assert_eq!(u64::from(unacked.len) + ob.acked, ob.next, "seed {seed}");
        let s = sim.nodes[0].ep.session(session_id(0, 1)).unwrap();
        assert!(s.is_failed());
        let m = s.memory();
        assert_eq!(m.send_queue + m.retransmit + m.reorder, 0);
        // Once failed, the session has no timers left: the driver can forget it.
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(
            sim.nodes[0]
                .ep
                .send(session_id(0, 1), sim.net.now, vec![1u8]),
            Err(SendError::PeerFailed)
        );
    }
}

#[test]
fn quiet_peer_is_not_failed() {
    let mut sim = Sim::new(1, Faults::none(), gen(1), [config(), config()]);
    sim.connect(0, 1);
    sim.flow(0, 1, 10);
    sim.run(Duration::from_secs(1));
    // Nothing outstanding: silence for many limits is fine, and once the idle session has
    // given its queues back, no timer is even armed.
    sim.net.now += reliability::session::RELEASE_AFTER;
    sim.nodes[0].ep.handle_timeout(sim.net.now);
    let s = sim.nodes[0].ep.session(session_id(0, 1)).unwrap();
    assert_eq!(s.poll_timeout(), None);
    sim.net.now += 20 * IDLE;
    sim.nodes[0].ep.handle_timeout(sim.net.now);
    assert!(!sim.nodes[0]
        .ep
        .session(session_id(0, 1))
        .unwrap()
        .is_failed());
    // A new send to a peer that has meanwhile died is given the full limit from the send on.
    sim.nodes[1].alive = false;
    let sent_at = sim.net.now;
    sim.nodes[0].outboxes[0].count = 11;
    let failed_at = loop {
        let more = sim.step();
        let evs = &sim.nodes[0].events;
        if evs
            .iter()
            .any(|(_, e)| matches!(e, Event::PeerFailed { .. }))
        {
            break sim.net.now;
        }
        assert!(more);
    };
    let waited = failed_at - sent_at;
    assert!(
        waited >= IDLE && waited <= IDLE + Duration::from_millis(1),
        "{waited:?}"
    );
}

/// How many stalls node 0 has reported.
fn stalls(sim: &Sim) -> usize {
    sim.nodes[0]
        .events
        .iter()
        .filter(|(_, e)| *e == Event::Stalled)
        .count()
}

/// A caller with another way to the peer hears of its silence early, once, and the session
/// goes on: it still fails at the limit, and a peer heard again re-arms the report.
#[test]
fn silent_peer_is_reported_stalled_once_before_it_fails() {
    const STALL: Duration = Duration::from_millis(10);
    let config = || Config {
        stall_after: Some(STALL),
        ..config()
    };
    for seed in 0..10u64 {
        let mut sim = Sim::new(seed, Faults::none(), gen(seed), [config(), config()]);
        sim.connect(0, 1);
        sim.flow(0, 1, 400);
        while sim.nodes[1].inboxes[&session_id(1, 0)].delivered < 10 + seed {
            assert!(sim.step());
        }
        // Traffic so far never went quiet long enough to be reported.
        assert_eq!(stalls(&sim), 0, "seed {seed}");
        sim.nodes[1].alive = false;
        let died = sim.net.now;
        let mut stalled_at = None;
        while sim.nodes[0].outboxes[0].failed.is_none() {
            let more = sim.step();
            if sim.nodes[0].outboxes[0].failed.is_some() {
                break;
            }
            assert!(more, "seed {seed}: no failure");
            if stalled_at.is_none() && stalls(&sim) == 1 {
                stalled_at = Some(sim.net.now);
            }
        }
        let heard = sim.nodes[0]
            .ep
            .session(session_id(0, 1))
            .unwrap()
            .last_heard();
        let stalled_at = stalled_at.expect("reported before the failure");
        // Seen when the next step takes the events: by the next retransmission at the latest.
        let seen = stalled_at - heard;
        assert!(
            seen >= STALL && seen <= STALL + config().max_rto,
            "seed {seed}: {seen:?}"
        );
        assert!(stalled_at - died <= STALL + config().max_rto, "seed {seed}");
        assert_eq!(stalls(&sim), 1, "seed {seed}: reported more than once");
    }
}

#[test]
fn a_stalled_peer_heard_again_is_reported_again_when_silent_again() {
    const STALL: Duration = Duration::from_millis(10);
    let cfg = Config {
        stall_after: Some(STALL),
        idle_timeout: Duration::from_secs(10),
        ..config()
    };
    let mut sim = Sim::new(3, Faults::none(), gen(3), [cfg.clone(), cfg]);
    sim.connect(0, 1);
    sim.flow(0, 1, 200);
    let heard = |sim: &Sim| {
        sim.nodes[0]
            .ep
            .session(session_id(0, 1))
            .unwrap()
            .last_heard()
    };
    let mut revived = sim.net.now;
    for round in 1..=2usize {
        // Until the peer was heard since it came back, with messages still to go.
        while heard(&sim) <= revived {
            assert!(sim.step());
        }
        assert!(!sim.done());
        sim.nodes[1].alive = false;
        let until = sim.net.now + 5 * STALL;
        while sim.net.now < until {
            assert!(sim.step());
        }
        // Events are taken at the start of a step.
        assert!(sim.step());
        assert_eq!(stalls(&sim), round, "round {round}");
        sim.nodes[1].alive = true;
        revived = sim.net.now;
    }
    sim.run(Duration::from_secs(5));
    assert!(
        sim.done(),
        "every message delivered after the peer came back"
    );
    assert_eq!(stalls(&sim), 2);
}

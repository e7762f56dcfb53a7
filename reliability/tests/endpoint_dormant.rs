//! An endpoint with `dormant_after` set: idle sessions leave it through `poll_dormant` and come
//! back with `resume`; the timer heap does not grow across cycles; opening sessions costs the
//! same however many are open; the receive budget's share is taken up lazily and only open
//! sessions count in it; and endpoints whose sessions sleep between bursts interoperate over a
//! faulty network with one that keeps its own.

mod util;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reliability::header::{Kind, Packet};
use reliability::{Config, Delivery, Endpoint, Event, MsgId, Placement, SessionIds, Sink, Slept};

#[derive(Default)]
struct Collect {
    delivered: Vec<(u32, MsgId, Vec<u8>)>,
    id: u32,
}

impl Sink for Collect {
    fn place(&mut self, _: Placement<'_>) {}
    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        if let Delivery::Inline(b) = d {
            self.delivered.push((self.id, msg, b.to_vec()));
        }
    }
}

fn ids(n: u32) -> SessionIds {
    SessionIds {
        local_id: n,
        local_epoch: 10,
        remote_id: 1000 + n,
        remote_epoch: 20,
    }
}

const AFTER: Duration = Duration::from_millis(1);

fn sleepy() -> Config {
    Config {
        dormant_after: Some(AFTER),
        ..Config::default()
    }
}

/// An endpoint and the dormant sessions its caller keeps, as the RD queue pair keeps them.
struct Node {
    ep: Endpoint,
    dormant: HashMap<u32, Slept>,
    sink: Collect,
    events: Vec<(u32, Event)>,
}

impl Node {
    fn new(cfg: Config) -> Node {
        Node {
            ep: Endpoint::new(cfg).unwrap(),
            dormant: HashMap::new(),
            sink: Collect::default(),
            events: Vec::new(),
        }
    }

    fn wake(&mut self, id: u32, now: Instant) {
        if let Some(s) = self.dormant.remove(&id) {
            self.ep.resume(s.ids, s.dormant, now);
        }
    }

    fn send(&mut self, id: u32, now: Instant, data: Vec<u8>) -> MsgId {
        self.wake(id, now);
        self.ep.send(id, now, data).unwrap()
    }

    fn take(&mut self, now: Instant, d: &[u8]) {
        let id = Endpoint::peek_session_id(d).unwrap();
        self.wake(id, now);
        self.sink.id = id;
        let _ = self.ep.handle_datagram(now, d, &mut self.sink, |_, _| None);
    }

    fn transmit(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while self.ep.poll_transmit(now, &mut buf).is_some() {
            out.push(buf.clone());
        }
        while let Some(e) = self.ep.poll_event() {
            self.events.push(e);
        }
        out
    }

    fn timers(&mut self, now: Instant) {
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        while let Some(s) = self.ep.poll_dormant() {
            assert!(self.ep.session(s.ids.local_id).is_none());
            self.dormant.insert(s.ids.local_id, s);
        }
    }
}

/// Exchanges datagrams and runs timers until `until`, every microsecond of simulated time
/// (a lossless network with no delay).
fn run(a: &mut Node, b: &mut Node, mut now: Instant, until: Instant) -> Instant {
    while now < until {
        loop {
            let (x, y) = (a.transmit(now), b.transmit(now));
            if x.is_empty() && y.is_empty() {
                break;
            }
            x.iter().for_each(|d| b.take(now, d));
            y.iter().for_each(|d| a.take(now, d));
        }
        a.timers(now);
        b.timers(now);
        let next = [a.ep.poll_timeout(), b.ep.poll_timeout(), Some(until)]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        now = next.max(now + Duration::from_micros(1)).min(until);
    }
    now
}

fn mirrored_pair(n: u32, a_cfg: Config, b_cfg: Config, now: Instant) -> (Node, Node) {
    let (mut a, mut b) = (Node::new(a_cfg), Node::new(b_cfg));
    for i in 1..=n {
        a.ep.open(ids(i), now);
        b.ep.open(ids(i).mirrored(), now);
    }
    (a, b)
}

#[test]
fn idle_sessions_go_dormant_and_come_back() {
    let t0 = Instant::now();
    // Only `a` lets sessions sleep; `b` keeps its own, as a peer that knows nothing of it.
    let (mut a, mut b) = mirrored_pair(3, sleepy(), Config::default(), t0);
    assert_eq!(a.ep.len(), 3);
    a.send(1, t0, vec![1u8; 100]);
    let now = run(&mut a, &mut b, t0, t0 + AFTER / 2);
    assert_eq!(b.sink.delivered.len(), 1);
    assert!(a.dormant.is_empty(), "not idle long enough yet");
    // The two sessions never used go first; the used one a little later.
    let now = run(&mut a, &mut b, now, t0 + AFTER + Duration::from_micros(1));
    assert_eq!(a.dormant.len(), 2);
    assert_eq!(a.ep.len(), 1);
    let now = run(&mut a, &mut b, now, now + AFTER);
    assert_eq!(a.ep.len(), 0);
    assert_eq!(b.ep.len(), 3);
    assert_eq!(a.ep.stats().sessions_frozen, 3);
    let slept = &a.dormant[&1];
    assert_eq!(slept.stats.messages_sent, 1);
    assert_eq!(slept.dormant.next_msg(), MsgId(1));
    assert_eq!(a.events, [(1, Event::SendAcked(MsgId(0)))]);

    // A message from `b` wakes `a`'s session 2; `a` sends again on session 1.
    b.ep.send(1002, now, vec![2u8; 50]).unwrap();
    assert_eq!(a.send(1, now, vec![3u8; 60]), MsgId(1));
    assert_eq!(a.ep.len(), 1);
    let now = run(&mut a, &mut b, now, now + AFTER / 2);
    assert_eq!(a.ep.len(), 2);
    assert_eq!(a.ep.stats().sessions_resumed, 2);
    assert_eq!(a.sink.delivered, [(2, MsgId(0), vec![2u8; 50])]);
    assert_eq!(b.sink.delivered[1], (1001, MsgId(1), vec![3u8; 60]));
    assert_eq!(b.sink.delivered.len(), 2);
    assert_eq!(a.events.last(), Some(&(1, Event::SendAcked(MsgId(1)))));
    // And they sleep again.
    run(&mut a, &mut b, now, now + 2 * AFTER);
    assert_eq!(a.ep.len(), 0);
    assert_eq!(a.dormant.len(), 3);
    assert!(b.events.iter().all(|e| matches!(e.1, Event::SendAcked(_))));
}

#[test]
fn the_timer_heap_stays_bounded_across_sleeps() {
    let t0 = Instant::now();
    let (mut a, mut b) = mirrored_pair(4, sleepy(), sleepy(), t0);
    let mut now = t0;
    let mut tables = Vec::new();
    for cycle in 0..400u32 {
        let id = 1 + cycle % 4;
        a.send(id, now, vec![cycle as u8; 40]);
        now = run(&mut a, &mut b, now, now + AFTER / 4);
        b.send(1000 + id, now, vec![!cycle as u8; 40]);
        now = run(&mut a, &mut b, now, now + 2 * AFTER);
        assert_eq!(a.ep.len() + b.ep.len(), 0, "cycle {cycle}: all asleep");
        tables.push(a.ep.memory().tables + b.ep.memory().tables);
    }
    assert_eq!(a.sink.delivered.len(), 400);
    assert_eq!(b.sink.delivered.len(), 400);
    // Stale entries of sleeping sessions are dropped as they are reached or by compaction,
    // so the tables reach their size early and keep it.
    assert!(
        tables[399] <= tables[199],
        "the endpoints' tables grew: {} then {}",
        tables[199],
        tables[399]
    );
    let st = a.ep.stats();
    assert_eq!((st.sessions_frozen, st.sessions_resumed), (4 + 399, 399));
}

/// A burst of many sessions leaves nothing of its size behind once they are all asleep: the
/// session map, the timer heap and the queue of sessions handed out give their room back.
#[test]
fn a_peak_of_open_sessions_gives_its_room_back_when_they_sleep() {
    let t0 = Instant::now();
    let (mut a, mut b) = mirrored_pair(4096, sleepy(), sleepy(), t0);
    for id in 1..=4096 {
        a.send(id, t0, vec![id as u8; 16]);
    }
    let peak = a.ep.memory();
    assert_eq!(peak.count, 4096);
    run(&mut a, &mut b, t0, t0 + 4 * AFTER);
    assert_eq!(b.sink.delivered.len(), 4096, "every message delivered");
    assert_eq!((a.ep.len(), a.dormant.len()), (0, 4096), "all asleep");
    let idle = a.ep.memory();
    assert!(
        idle.slots * 16 <= peak.slots,
        "the session map kept {} of its {} bytes",
        idle.slots,
        peak.slots
    );
    assert!(
        idle.tables * 8 <= peak.tables,
        "the endpoint's tables kept {} bytes (at the peak {})",
        idle.tables,
        peak.tables
    );
    // And it grows again as they wake.
    for id in 1..=4096 {
        a.send(id, t0 + 4 * AFTER, vec![!(id as u8); 16]);
    }
    assert_eq!(a.ep.memory().count, 4096);
    run(&mut a, &mut b, t0 + 4 * AFTER, t0 + 8 * AFTER);
    assert_eq!(b.sink.delivered.len(), 8192);
}

#[test]
fn opening_sessions_costs_the_same_however_many_are_open() {
    const N: u32 = 1 << 16;
    let t0 = Instant::now();
    let mut ep = Endpoint::new(sleepy()).unwrap();
    ep.set_recv_budget(1 << 20);
    let start = Instant::now();
    for i in 0..N {
        ep.open(ids(i), t0);
    }
    let opened = start.elapsed();
    assert_eq!(ep.len(), N as usize);
    // Opening visited no other session: none was queued to advertise a new share.
    assert!(!ep.has_pending());
    assert_eq!(ep.session(N - 1).unwrap().credit(), 16);
    // All of them go dormant in one call, which costs as much per session.
    let start = Instant::now();
    ep.handle_timeout(t0 + AFTER);
    let slept = std::iter::from_fn(|| ep.poll_dormant()).count();
    let frozen = start.elapsed();
    assert_eq!(slept, N as usize);
    assert!(ep.is_empty());
    // Pushing the share to every session on each open would take minutes here.
    assert!(
        opened + frozen < Duration::from_secs(10),
        "{opened:?} to open, {frozen:?} to freeze"
    );
}

/// The credit in the ACK `b` sends for a datagram `a` sends on session `id`.
fn advertised(a: &mut Node, b: &mut Node, id: u32, now: Instant) -> u16 {
    a.send(id, now, vec![0u8; 10]);
    for d in a.transmit(now) {
        b.take(now, &d);
    }
    b.ep.flush_acks();
    let acks = b.transmit(now);
    assert_eq!(acks.len(), 1);
    let p = Packet::new_checked(&acks[0][..]).unwrap();
    assert_eq!(p.kind(), Ok(Kind::Ack));
    for d in &acks {
        a.take(now, d);
    }
    p.credit()
}

#[test]
fn the_budget_is_shared_among_open_sessions_lazily() {
    let t0 = Instant::now();
    let (mut a, mut b) = (Node::new(Config::default()), Node::new(sleepy()));
    b.ep.set_recv_budget(64);
    a.ep.open(ids(1).mirrored(), t0);
    b.ep.open(ids(1), t0);
    assert_eq!(advertised(&mut a, &mut b, 1001, t0), 64);
    // 63 more sessions: session 1 was not visited, yet its next ACK carries the new share.
    for i in 2..=64 {
        b.ep.open(ids(i), t0);
    }
    assert_eq!(b.ep.session(64).unwrap().credit(), 1);
    let t1 = t0 + AFTER / 2;
    assert_eq!(advertised(&mut a, &mut b, 1001, t1), 1);
    // The 63 go dormant: dormant sessions have no share, and session 1 has it all again.
    b.timers(t0 + AFTER);
    assert_eq!(b.ep.len(), 1);
    assert_eq!(advertised(&mut a, &mut b, 1001, t0 + AFTER), 64);
    // Resumed, they count again.
    for i in 2..=4 {
        b.wake(i, t0 + AFTER);
    }
    assert_eq!(b.ep.session(4).unwrap().credit(), 16);
    assert_eq!(advertised(&mut a, &mut b, 1001, t0 + AFTER), 16);
}

/// Paced flows both ways between an endpoint whose sessions sleep between bursts and one whose
/// sessions never do (or, for odd seeds, both sleep), over a network that loses, duplicates,
/// delays and reorders: every message arrives once, in order and intact.
#[test]
fn sleeping_endpoints_interoperate_over_a_faulty_network() {
    let mut slept = 0;
    for seed in 0..16u64 {
        let cfg = util::small_config(600);
        let sleepy = Config {
            dormant_after: Some(Duration::from_micros(300)),
            ..cfg.clone()
        };
        let other = if seed % 2 == 1 { sleepy.clone() } else { cfg };
        let faults = util::Faults {
            loss: 0.1,
            duplicate: 0.05,
            reorder: 0.3,
            reorder_delay: Duration::from_micros(300),
            jitter: Duration::from_micros(10),
            ..util::Faults::none()
        };
        let gen = util::MsgGen {
            seed,
            max_len: 2000,
            tiny: 0.4,
            small: 0.3,
            small_len: 200,
        };
        let mut sim = util::Sim::new(seed, faults, gen, [sleepy, other]);
        sim.connect(0, 1);
        sim.flow(0, 1, 120);
        sim.pace(0, 4, Duration::from_millis(2));
        sim.flow(1, 0, 60);
        sim.pace(1, 3, Duration::from_micros(2500));
        sim.run(Duration::from_secs(20));
        util::assert_idle(&sim);
        assert!(
            sim.nodes[0].slept >= 10,
            "seed {seed}: {}",
            sim.nodes[0].slept
        );
        if seed % 2 == 0 {
            assert_eq!(sim.nodes[1].slept, 0);
        }
        slept += sim.nodes[0].slept + sim.nodes[1].slept;
    }
    assert!(slept >= 300, "{slept}");
}

//! Sessions frozen into a `Dormant` and resumed: freezing waits for a session idle in every
//! respect; a resumed session continues on the wire as if it had never slept, so its peer (which
//! keeps its own session) cannot tell; and that holds over a lossy, reordering network across
//! many sleeps, with every byte checked.

mod util;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reliability::header::{Kind, Packet, FLAG_ACKED, FLAG_DSACK};
use reliability::{
    Config, Delivery, Dormant, DropReason, Event, MsgId, Placement, Seq, Session, SessionIds, Sink,
};
use util::{MsgGen, Rng};

#[derive(Default)]
struct Collect {
    delivered: Vec<(MsgId, Vec<u8>)>,
}

impl Sink for Collect {
    fn place(&mut self, _: Placement<'_>) {}
    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        match d {
            Delivery::Inline(b) => self.delivered.push((msg, b.to_vec())),
            Delivery::Placed { .. } => self.delivered.push((msg, Vec::new())),
        }
    }
}

const IDS: SessionIds = SessionIds {
    local_id: 7,
    local_epoch: 100,
    remote_id: 9,
    remote_epoch: 200,
};

fn pair(cfg: &Arc<Config>, now: Instant) -> (Session, Session) {
    let a = Session::new(cfg.clone(), IDS, now).unwrap();
    let b = Session::new(cfg.clone(), IDS.mirrored(), now).unwrap();
    (a, b)
}

fn drain(s: &mut Session, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while s.poll_transmit(now, &mut buf).is_some() {
        out.push(buf.clone());
    }
    out
}

fn feed(to: &mut Session, now: Instant, dgs: &[Vec<u8>], sink: &mut Collect) {
    for d in dgs {
        let _ = to.handle_datagram(now, d, sink);
    }
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// Runs both sessions' timers and exchanges what they send until neither has anything left.
fn settle(a: &mut Session, b: &mut Session, mut now: Instant, sink: &mut Collect) -> Instant {
    for _ in 0..1000 {
        let (x, y) = (drain(a, now), drain(b, now));
        feed(b, now, &x, sink);
        feed(a, now, &y, &mut Collect::default());
        if x.is_empty() && y.is_empty() {
            match [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
            {
                Some(t) => now = now.max(t),
                None => return now,
            }
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
    }
    panic!("the pair did not settle");
}

#[test]
fn dormant_is_small() {
    assert!(std::mem::size_of::<Dormant>() <= 24);
}

#[test]
fn freeze_waits_for_a_session_idle_in_every_respect() {
    let t0 = Instant::now();
    let cfg = Arc::new(Config::default());
    let (mut a, mut b) = pair(&cfg, t0);
    let mut sink = Collect::default();
    assert!(a.freeze().is_some(), "a new session is idle");

    // Queued, then unacknowledged.
    a.send(t0, vec![1u8; 10]).unwrap();
    assert_eq!(a.freeze(), None, "queued");
    let x = drain(&mut a, t0);
    assert_eq!(a.freeze(), None, "unacknowledged");

    // The receiver owes an ACK until it sends it.
    feed(&mut b, t0, &x, &mut sink);
    assert_eq!(b.freeze(), None, "owes an ACK");
    let t1 = b.poll_timeout().unwrap();
    b.handle_timeout(t1);
    let ack = drain(&mut b, t1);
    assert_eq!(ack.len(), 1);
    assert!(b.freeze().is_some(), "acknowledged everything");

    // The sender's SendAcked waits to be polled.
    feed(&mut a, t1, &ack, &mut Collect::default());
    assert!(a.is_idle());
    assert_eq!(a.freeze(), None, "an event pending");
    assert_eq!(events(&mut a), [Event::SendAcked(MsgId(0))]);
    assert!(a.freeze().is_some());

    // Held out of order: the second message came, the first did not.
    a.send(t1, vec![2u8; 10]).unwrap();
    let lost = drain(&mut a, t1);
    a.send(t1, vec![3u8; 10]).unwrap();
    let ahead = drain(&mut a, t1);
    feed(&mut b, t1, &ahead, &mut sink);
    let sack = drain(&mut b, t1);
    assert_eq!(sack.len(), 1, "a hole is reported at once");
    assert_eq!(b.freeze(), None, "holds a datagram out of order");
    feed(&mut b, t1, &lost, &mut sink);
    let t2 = settle(&mut a, &mut b, t1, &mut sink);
    let _ = events(&mut a);
    assert!(a.freeze().is_some() && b.freeze().is_some());
    assert_eq!(sink.delivered.len(), 3);

    // Part of a segmented message placed in order, the rest still to come.
    a.send(t2, vec![7u8; 200_000]).unwrap();
    let segments = drain(&mut a, t2);
    assert!(segments.len() > 2);
    feed(&mut b, t2, &segments[..1], &mut sink);
    let t3 = b.poll_timeout().unwrap();
    b.handle_timeout(t3);
    feed(&mut a, t3, &drain(&mut b, t3), &mut Collect::default());
    assert_eq!(b.freeze(), None, "the caller holds part of a message");
    feed(&mut b, t3, &segments[1..], &mut sink);
    let t2 = settle(&mut a, &mut b, t3, &mut sink);
    let _ = events(&mut a);
    assert!(b.freeze().is_some());
    assert_eq!(sink.delivered.len(), 4);

    // Failed: the peer went silent with data outstanding.
    a.send(t2, vec![4u8; 10]).unwrap();
    let _lost = drain(&mut a, t2);
    while !a.is_failed() {
        let now = a.poll_timeout().unwrap();
        a.handle_timeout(now);
        let _ = drain(&mut a, now);
    }
    assert!(matches!(events(&mut a)[..], [Event::PeerFailed { .. }]));
    assert_eq!(a.freeze(), None, "failed");
}

#[test]
fn a_refused_caller_waiting_for_writable_keeps_the_session_awake() {
    let t0 = Instant::now();
    let cfg = Arc::new(Config {
        max_send_buffer: 200,
        ..Config::default()
    });
    let (mut a, mut b) = pair(&cfg, t0);
    a.send(t0, vec![0u8; 100]).unwrap();
    assert!(a.send(t0, vec![0u8; 100]).is_err());
    settle(&mut a, &mut b, t0, &mut Collect::default());
    assert!(a.is_idle());
    assert_eq!(a.freeze(), None);
    assert_eq!(
        events(&mut a),
        [Event::SendAcked(MsgId(0)), Event::Writable]
    );
    assert!(a.freeze().is_some());
}

#[test]
fn a_resumed_pair_continues_at_once_with_the_next_numbers() {
    let t0 = Instant::now();
    // Across the wrap of both sequence numbers and message ids.
    let cfg = Arc::new(Config {
        initial_seq: u32::MAX - 1,
        ..Config::default()
    });
    let (mut a, mut b) = pair(&cfg, t0);
    let mut sink = Collect::default();
    let mut now = t0;
    for i in 0..3u8 {
        a.send(now, vec![i; 20]).unwrap();
        now = settle(&mut a, &mut b, now, &mut sink);
    }
    let _ = events(&mut a);
    assert_eq!(sink.delivered.len(), 3);
    assert!(a.rtt().srtt.is_some());

    let (da, db) = (a.freeze().unwrap(), b.freeze().unwrap());
    assert_eq!(da.next_seq(), Seq(1));
    assert_eq!(da.next_msg(), MsgId(1));
    assert_eq!(db.expected_seq(), Seq(1));
    assert_eq!(db.expected_msg(), MsgId(1));
    assert!(da.checksum());
    assert!(da.srtt().is_some());
    drop((a, b));

    // Only the sender sleeps long; the receiver is resumed when its datagram comes.
    let later = now + Duration::from_secs(5);
    let mut a = Session::resume(cfg.clone(), IDS, da, later).unwrap();
    assert!(a.rtt().srtt.is_some(), "the smoothed RTT is kept");
    assert_eq!(a.send(later, vec![9u8; 20]).unwrap(), MsgId(1));
    let x = drain(&mut a, later);
    assert_eq!(x.len(), 1, "sent at once: no handshake");
    let p = Packet::new_checked(&x[0][..]).unwrap();
    assert_eq!(
        (p.kind(), p.seq(), p.msg()),
        (Ok(Kind::Single), Seq(1), MsgId(1))
    );
    let mut b = Session::resume(cfg, IDS.mirrored(), db, later).unwrap();
    b.handle_datagram(later, &x[0], &mut sink).unwrap();
    assert_eq!(sink.delivered.len(), 4);
    assert_eq!(sink.delivered[3], (MsgId(1), vec![9u8; 20]));
    settle(&mut a, &mut b, later, &mut sink);
    assert_eq!(events(&mut a), [Event::SendAcked(MsgId(1))]);
    assert_eq!(sink.delivered.len(), 4, "delivered once");
    assert_eq!(a.stats().retransmits, 0);
}

/// `b` took `a`'s datagram and acknowledged it, and the ACK was lost; `b` is frozen and
/// resumed before `a`'s resend comes. Returns the resumed `b`'s answer and `a` after it.
fn resend_to_a_resumed_receiver(drained: bool) -> (Vec<Vec<u8>>, Session, Collect) {
    let t0 = Instant::now();
    let cfg = Arc::new(Config::default());
    let (mut a, mut b) = pair(&cfg, t0);
    let mut sink = Collect::default();
    a.send(t0, vec![5u8; 30]).unwrap();
    let x = drain(&mut a, t0);
    feed(&mut b, t0, &x, &mut sink);
    let t1 = b.poll_timeout().unwrap();
    b.handle_timeout(t1);
    let _lost_ack = drain(&mut b, t1);
    if drained {
        b.input_drained(t1 + Duration::from_micros(1));
    }
    let d = b.freeze().unwrap();
    drop(b);
    let t2 = a.poll_timeout().unwrap();
    a.handle_timeout(t2);
    let copy = drain(&mut a, t2);
    let seq = |d: &[u8]| Packet::new_checked(d).unwrap().seq();
    assert_eq!(seq(&copy[0]), seq(&x[0]), "the resend is the same datagram");
    let mut b = Session::resume(cfg, IDS.mirrored(), d, t2).unwrap();
    assert_eq!(
        b.handle_datagram(t2, &copy[0], &mut sink),
        Err(DropReason::Duplicate)
    );
    let answer = drain(&mut b, t2);
    feed(&mut a, t2, &answer, &mut Collect::default());
    (answer, a, sink)
}

#[test]
fn a_resend_of_what_was_delivered_before_the_sleep_is_acknowledged_not_delivered() {
    for drained in [true, false] {
        let (answer, mut a, sink) = resend_to_a_resumed_receiver(drained);
        assert_eq!(sink.delivered.len(), 1, "delivered once");
        assert_eq!(answer.len(), 1);
        let p = Packet::new_checked(&answer[0][..]).unwrap();
        assert_eq!(p.kind(), Ok(Kind::Ack));
        assert_ne!(p.flags() & FLAG_DSACK, 0, "reported as a duplicate");
        // Its ACK had left before the input was drained: the report says the ACK was lost.
        assert_eq!(p.flags() & FLAG_ACKED != 0, drained);
        assert!(a.is_idle());
        assert_eq!(events(&mut a), [Event::SendAcked(MsgId(0))]);
    }
}

/// One side of the long test: awake, or frozen.
enum Side {
    Awake(Box<Session>),
    Asleep(Dormant),
}

struct Party {
    side: Side,
    ids: SessionIds,
    /// Messages sent so far, acknowledged, and received from the other side.
    sent: u64,
    acked: u64,
    inbox: u64,
    sleeps: u64,
}

impl Party {
    fn wake(&mut self, cfg: &Arc<Config>, now: Instant) -> &mut Session {
        if let Side::Asleep(d) = self.side {
            self.side = Side::Awake(Box::new(
                Session::resume(cfg.clone(), self.ids, d, now).unwrap(),
            ));
        }
        match &mut self.side {
            Side::Awake(s) => s,
            Side::Asleep(_) => unreachable!(),
        }
    }
}

/// Checks each message against the generator as it is delivered.
struct Check<'a> {
    gen: &'a MsgGen,
    from: usize,
    to: usize,
    isn: u32,
    next: &'a mut u64,
}

impl Sink for Check<'_> {
    fn place(&mut self, _: Placement<'_>) {
        panic!("messages here travel whole");
    }
    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        let i = u64::from(msg.0.wrapping_sub(self.isn));
        assert_eq!(i, *self.next, "delivered out of order or twice");
        let Delivery::Inline(bytes) = d else {
            panic!("placed")
        };
        assert!(bytes == self.gen.make(self.from, self.to, i), "corrupted");
        *self.next += 1;
    }
}

/// Two sessions exchange bursts of messages with quiet gaps over a network that loses,
/// duplicates, delays and reorders datagrams. Whenever a side can be frozen it may be, and it
/// sleeps until a datagram comes for it or its next burst is due, as the layer above an
/// endpoint resumes it. Every message arrives once, in order, intact.
/// Returns how often each side slept, and how many datagrams woke a side.
fn sleepy_pair(seed: u64) -> (u64, u64, u64) {
    const BURSTS: u64 = 40;
    let mut rng = Rng::new(seed);
    let cfg = Arc::new(Config {
        max_datagram_size: 400,
        inline_limit: 300,
        initial_seq: rng.next_u64() as u32,
        ..Config::default()
    });
    let gen = MsgGen {
        seed,
        max_len: 300,
        tiny: 0.5,
        small: 0.3,
        small_len: 100,
    };
    let t0 = Instant::now();
    let (a, b) = pair(&cfg, t0);
    let mut parties = [(a, IDS), (b, IDS.mirrored())].map(|(s, ids)| Party {
        side: Side::Awake(Box::new(s)),
        ids,
        sent: 0,
        acked: 0,
        inbox: 0,
        sleeps: 0,
    });
    let mut bursts: [VecDeque<Instant>; 2] = Default::default();
    for q in &mut bursts {
        let mut t = t0;
        for _ in 0..BURSTS {
            t += Duration::from_micros(50 + rng.below(3000));
            q.push_back(t);
        }
    }
    // (arrival, to, datagram)
    let mut wire: Vec<(Instant, usize, Vec<u8>)> = Vec::new();
    let mut now = t0;
    let mut buf = Vec::new();
    let mut woken = 0;
    for _step in 0..200_000 {
        // Bursts due: the sender wakes to send.
        for i in 0..2 {
            while bursts[i].front().is_some_and(|&t| t <= now) {
                bursts[i].pop_front();
                let p = &mut parties[i];
                let (first, end) = (p.sent, p.sent + 1 + rng.below(6));
                p.sent = end;
                let s = p.wake(&cfg, now);
                for n in first..end {
                    s.send(now, gen.make(i, 1 - i, n)).unwrap();
                }
            }
        }
        // Datagrams due: a sleeping receiver wakes to take them.
        let mut k = 0;
        while k < wire.len() {
            if wire[k].0 > now {
                k += 1;
                continue;
            }
            let (_, to, d) = wire.swap_remove(k);
            let p = &mut parties[to];
            let mut next = p.inbox;
            let isn = cfg.initial_seq;
            woken += u64::from(matches!(p.side, Side::Asleep(_)));
            let s = p.wake(&cfg, now);
            let mut sink = Check {
                gen: &gen,
                from: 1 - to,
                to,
                isn,
                next: &mut next,
            };
            let _ = s.handle_datagram(now, &d, &mut sink);
            p.inbox = next;
        }
        for (i, p) in parties.iter_mut().enumerate() {
            let Side::Awake(s) = &mut p.side else {
                continue;
            };
            s.input_drained(now);
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
            while s.poll_transmit(now, &mut buf).is_some() {
                if rng.chance(0.1) {
                    continue;
                }
                let copies = if rng.chance(0.05) { 2 } else { 1 };
                for _ in 0..copies {
                    let mut at = now + Duration::from_micros(5 + rng.below(10));
                    if rng.chance(0.2) {
                        at += Duration::from_micros(rng.below(400));
                    }
                    wire.push((at, 1 - i, buf.clone()));
                }
            }
            while let Some(ev) = s.poll_event() {
                match ev {
                    Event::SendAcked(m) => {
                        assert_eq!(u64::from(m.0.wrapping_sub(cfg.initial_seq)), p.acked);
                        p.acked += 1;
                    }
                    Event::Writable | Event::Stalled => {}
                    Event::PeerFailed { .. } => panic!("seed {seed}: peer failed"),
                }
            }
            let Side::Awake(s) = &mut p.side else {
                unreachable!()
            };
            if rng.chance(0.7) {
                if let Some(d) = s.freeze() {
                    p.side = Side::Asleep(d);
                    p.sleeps += 1;
                }
            }
        }
        let done = bursts.iter().all(VecDeque::is_empty)
            && (0..2).all(|i| {
                parties[i].acked == parties[i].sent && parties[1 - i].inbox == parties[i].sent
            });
        if done {
            return (parties[0].sleeps, parties[1].sleeps, woken);
        }
        let timers = parties.iter().filter_map(|p| match &p.side {
            Side::Awake(s) => s.poll_timeout(),
            Side::Asleep(_) => None,
        });
        let next = timers
            .chain(wire.iter().map(|w| w.0))
            .chain(bursts.iter().filter_map(|q| q.front().copied()))
            .min()
            .unwrap_or_else(|| panic!("seed {seed}: stuck"));
        now = now.max(next);
    }
    panic!("seed {seed}: not done");
}

#[test]
fn sleepy_peers_interoperate_over_a_faulty_network() {
    let mut woken = 0;
    for seed in 0..12 {
        let (a, b, w) = sleepy_pair(seed);
        assert!(a >= 20 && b >= 20, "seed {seed}: slept {a} and {b} times");
        woken += w;
    }
    // Datagrams for a sleeping side: new data, and ACKs and copies of what it had before.
    assert!(woken >= 100, "{woken}");
}

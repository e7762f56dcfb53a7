//! The datagram switch's hello exchange (`handshake`) over a simulated network, in simulated
//! time: two ends that start apart, a network that delays, reorders and loses datagrams (each
//! single datagram in turn, or at random from a seed), and after the switch each end's queue
//! pair greeting the other while a switched end answers repeated hellos. The two ends must
//! agree: both switched, to each other's queue pair, or both plain.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use diwarp_sockets::handshake::{answer, Handshake, Hello, Seen, Step};
use iwarp::verbs::{RdHello, RdHelloKind};

const TIMEOUT: Duration = Duration::from_millis(2000);
/// How often a switched end's queue pair greets its peer (RD HELLO) until the model ends.
const RD_EVERY: Duration = Duration::from_millis(50);

use fastrand::Rng;

/// Which datagrams the network loses.
#[derive(Clone, Copy)]
enum Loss {
    /// The `n`th datagram sent (counting both directions, from 0).
    Nth(usize),
    /// The `n`th datagram sent by end `from`.
    NthFrom(usize, usize),
    /// Each with this probability.
    Random(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Switched(u32),
    Plain,
}

enum State {
    Starting(Instant),
    Shaking(Handshake),
    Done(Outcome),
}

struct End {
    qpn: u32,
    state: State,
    socket: VecDeque<Vec<u8>>,
    next_rd: Option<Instant>,
}

struct Net {
    rng: Rng,
    loss: Loss,
    sent: usize,
    sent_by: [usize; 2],
    /// (arrival, to, datagram)
    flight: Vec<(Instant, usize, Vec<u8>)>,
}

impl Net {
    fn send(&mut self, now: Instant, from: usize, d: &[u8]) {
        let (n, k) = (self.sent, self.sent_by[from]);
        self.sent += 1;
        self.sent_by[from] += 1;
        let lost = match self.loss {
            Loss::Nth(i) => i == n,
            Loss::NthFrom(f, i) => f == from && i == k,
            Loss::Random(p) => self.rng.f64() < p,
        };
        if !lost {
            // 0.1 to 3 ms: enough spread to reorder a hello and its answer.
            let delay = Duration::from_micros(100 + self.rng.u64(..2900));
            self.flight.push((now + delay, 1 - from, d.to_vec()));
        }
    }
}

/// What a switched end does.
#[derive(Clone, Copy)]
struct Switched {
    /// Answers a hello that lacks its own (the fix).
    answers: bool,
    /// Its queue pair greets the peer's (a program that sends at once).
    greets: bool,
}

const BOTH: Switched = Switched {
    answers: true,
    greets: true,
};

/// Runs the exchange; B starts `offset` after A. Returns both outcomes.
fn run(seed: u64, loss: Loss, offset: Duration, sw: Switched) -> [Outcome; 2] {
    let t0 = Instant::now();
    let mut rng = Rng::with_seed(seed);
    let qpns = [
        1 + rng.u64(..1 << 20) as u32,
        (1 << 21) + rng.u64(..1 << 20) as u32,
    ];
    let mut ends = [0, 1].map(|i| End {
        qpn: qpns[i],
        state: State::Starting(if i == 0 { t0 } else { t0 + offset }),
        socket: VecDeque::new(),
        next_rd: None,
    });
    let mut net = Net {
        rng,
        loss,
        sent: 0,
        sent_by: [0, 0],
        flight: Vec::new(),
    };
    let end_of_model = t0 + offset + TIMEOUT * 2;
    let mut now = t0;
    while now < end_of_model {
        // Arrivals due.
        let (due, later): (Vec<_>, Vec<_>) = net.flight.drain(..).partition(|f| f.0 <= now);
        net.flight = later;
        for (_, to, d) in due {
            ends[to].socket.push_back(d);
        }
        let mut wake = end_of_model;
        for (i, e) in ends.iter_mut().enumerate() {
            loop {
                match &mut e.state {
                    State::Starting(at) if *at <= now => {
                        e.state = State::Shaking(Handshake::new(e.qpn, now, TIMEOUT));
                    }
                    State::Starting(at) => {
                        wake = wake.min(*at);
                        break;
                    }
                    State::Shaking(h) => match h.step(now) {
                        Step::Send(d) => net.send(now, i, &d),
                        Step::Wait(until) => match e.socket.front() {
                            Some(d) => {
                                if h.datagram(d) == Seen::Take {
                                    e.socket.pop_front();
                                }
                            }
                            None => {
                                wake = wake.min(until);
                                break;
                            }
                        },
                        Step::Switched(q) => {
                            while e.socket.front().is_some_and(|d| Hello::parse(d).is_some()) {
                                e.socket.pop_front();
                            }
                            e.state = State::Done(Outcome::Switched(q));
                            e.next_rd = Some(now);
                        }
                        Step::Plain => e.state = State::Done(Outcome::Plain),
                    },
                    State::Done(Outcome::Switched(q)) => {
                        let q = *q;
                        // The queue pair reads everything; hellos are offered for an answer.
                        while let Some(d) = e.socket.pop_front() {
                            if let Some(a) = answer(e.qpn, q, &d).filter(|_| sw.answers) {
                                net.send(now, i, &a);
                            }
                        }
                        let at = e.next_rd.expect("a switched end greets");
                        if at <= now && sw.greets {
                            let rd = RdHello {
                                kind: RdHelloKind::Hello,
                                checksum: true,
                                dst_qpn: q,
                                src_qpn: e.qpn,
                                id: 1,
                                epoch: 1,
                                echo: (0, 0),
                            };
                            net.send(now, i, &rd.emit());
                            e.next_rd = Some(now + RD_EVERY);
                        }
                        if sw.greets {
                            wake = wake.min(e.next_rd.unwrap());
                        }
                        break;
                    }
                    State::Done(Outcome::Plain) => {
                        e.socket.clear();
                        break;
                    }
                }
            }
        }
        if let Some(t) = net.flight.iter().map(|f| f.0).min() {
            wake = wake.min(t);
        }
        now = wake.max(now + Duration::from_micros(1));
    }
    let out = ends.map(|e| match e.state {
        State::Done(o) => o,
        _ => panic!("an end never finished"),
    });
    // A switched end switched to the other's queue pair.
    for (i, o) in out.iter().enumerate() {
        if let Outcome::Switched(q) = o {
            assert_eq!(
                *q,
                qpns[1 - i],
                "seed {seed}: end {i} took a wrong QP number"
            );
        }
    }
    out
}

fn offsets() -> [Duration; 5] {
    [0, 1, 120, 260, 900].map(Duration::from_millis)
}

#[test]
fn any_single_lost_datagram_leaves_both_ends_switched() {
    let answers_only = Switched {
        greets: false,
        ..BOTH
    };
    for sw in [BOTH, answers_only] {
        for offset in offsets() {
            for n in 0..30 {
                for seed in 0..3 {
                    for loss in [Loss::Nth(n), Loss::NthFrom(0, n), Loss::NthFrom(1, n)] {
                        let out = run(seed, loss, offset, sw);
                        assert!(
                            matches!(out, [Outcome::Switched(_), Outcome::Switched(_)]),
                            "offset {offset:?}, datagram {n}, seed {seed}: {out:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn random_loss_never_leaves_the_ends_disagreeing() {
    for (p, seeds) in [(0.1, 2000), (0.3, 1000), (0.6, 500)] {
        let mut switched = 0;
        for seed in 0..seeds {
            let offset = Duration::from_millis(seed % 1000);
            let out = run(seed, Loss::Random(p), offset, BOTH);
            match out {
                [Outcome::Switched(_), Outcome::Switched(_)] => switched += 1,
                [Outcome::Plain, Outcome::Plain] => {}
                _ => panic!("loss {p}, seed {seed}: the ends disagree: {out:?}"),
            }
        }
        if p <= 0.1 {
            assert_eq!(switched, seeds, "at {p} loss every pair switches");
        }
    }
}

#[test]
fn the_exchange_as_it_was_splits_the_ends_on_one_lost_answer() {
    // The model can tell: a switched end silent to hellos, and a program that sends nothing
    // that would tell the waiting end, disagree after some single loss.
    let silent = Switched {
        answers: false,
        greets: false,
    };
    let split = offsets().iter().any(|&offset| {
        (0..12).any(|n| {
            let out = run(1, Loss::Nth(n), offset, silent);
            out[0] != out[1]
        })
    });
    assert!(split);
    assert!(matches!(
        run(1, Loss::Random(0.0), Duration::ZERO, silent),
        [Outcome::Switched(_), Outcome::Switched(_)]
    ));
}

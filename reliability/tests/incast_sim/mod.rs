//! The simulation behind `tests/incast.rs`: N sender `Session`s, one root `Endpoint`, a seeded
//! network with per-link latency and jitter, independent loss each way, and the root's socket
//! as a bounded queue drained at a fixed rate.
//!
//! Discrete-event: one heap of datagram arrivals and timers. A session is only touched when a
//! datagram reaches it or its own `poll_timeout` is due (kept in the heap lazily, one entry per
//! earlier deadline), so idle senders cost nothing and 16,383 of them run in seconds.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reliability::header::Repr;
use reliability::{
    Config, Delivery, Endpoint, Event, MsgId, Placement, Seq, Session, SessionIds, Sink,
};

/// The root's receive budget, in datagrams: what the RD path (`iwarp/src/verbs/rd/path.rs`)
/// computes for 1472-byte datagrams, `granted / max(2·size, size + 4096)`, from a granted
/// buffer of 5.4 MiB (a 2.7 MiB `SO_RCVBUF`, which Linux doubles). The receive queue holds as
/// many datagrams as the budget: the budget is the socket buffer counted in datagrams.
pub const BUDGET: u32 = 1024;
/// Ethernet MTU less the IPv4 and UDP headers: what the RD path uses on a 1500-byte link.
const DATAGRAM: usize = 1472;
/// The root reads one datagram per microsecond (about 12 Gb/s of full datagrams): slower than
/// N senders together, so the queue fills.
pub const SERVICE: Duration = Duration::from_micros(1);
const LOSS: f64 = 0.01;
const WAVE_GAP: Duration = Duration::from_micros(100);
/// Messages per sender.
const MESSAGES: u64 = 6;
/// Id the root chooses for sender s's session (s stamps it on its datagrams): RX_BASE + s.
const RX_BASE: u32 = 0x0100_0000;
/// Id sender s chooses for its session to the root: TX_BASE + s.
const TX_BASE: u32 = 0x0200_0000;

/// splitmix64.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Message `i` of sender `s`: 40 % tiny (0–64 bytes, coalesced), 35 % one datagram, 25 % two
/// to three segments. Length and bytes both follow from (seed, s, i).
fn message(seed: u64, s: usize, i: u64) -> Vec<u8> {
    let mut r = Rng::new(seed ^ ((s as u64) << 20) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let len = match r.below(100) {
        0..40 => r.below(65),
        40..75 => 65 + r.below(1440 - 65),
        _ => 1441 + r.below(4300 - 1441),
    } as usize;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// What the root's application has received from one sender.
#[derive(Default)]
struct Inbox {
    delivered: u64,
    /// Segmented messages being placed (a later one's segments may come before an earlier
    /// one is whole): their bytes and how many were placed.
    partial: Vec<(MsgId, Vec<u8>, usize)>,
}

/// Checks every placement and delivery of sender `s` against the generated messages.
struct Check<'a> {
    seed: u64,
    s: usize,
    isn: u32,
    inbox: &'a mut Inbox,
}

impl Sink for Check<'_> {
    fn place(&mut self, p: Placement<'_>) {
        let index = u64::from(p.msg.0.wrapping_sub(self.isn));
        let ib = &mut *self.inbox;
        assert!(
            index >= ib.delivered,
            "sender {}: placement for a delivered message",
            self.s
        );
        let k = match ib.partial.iter().position(|(m, _, _)| *m == p.msg) {
            Some(k) => k,
            None => {
                ib.partial.push((p.msg, vec![0; p.total_len as usize], 0));
                ib.partial.len() - 1
            }
        };
        let (_, buf, placed) = &mut ib.partial[k];
        assert_eq!(buf.len(), p.total_len as usize);
        let o = p.offset as usize;
        buf[o..o + p.bytes.len()].copy_from_slice(p.bytes);
        *placed += p.bytes.len();
        assert!(
            *placed <= buf.len(),
            "sender {}: bytes placed twice",
            self.s
        );
    }

    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        let ib = &mut *self.inbox;
        let index = u64::from(msg.0.wrapping_sub(self.isn));
        assert_eq!(
            index, ib.delivered,
            "sender {}: out of order or twice",
            self.s
        );
        assert!(index < MESSAGES, "sender {}: a message never sent", self.s);
        let want = message(self.seed, self.s, index);
        match d {
            Delivery::Inline(bytes) => {
                assert!(bytes == want, "sender {} message {index} corrupted", self.s)
            }
            Delivery::Placed { len } => {
                let k = ib.partial.iter().position(|(m, _, _)| *m == msg);
                let (_, buf, placed) = ib.partial.swap_remove(k.expect("placed before delivered"));
                assert_eq!(len as usize, want.len());
                assert_eq!(
                    placed,
                    want.len(),
                    "sender {} message {index}: bytes missing",
                    self.s
                );
                assert!(buf == want, "sender {} message {index} corrupted", self.s);
            }
        }
        ib.delivered += 1;
    }
}

enum What {
    /// Sender s begins: queues its messages.
    Start(usize),
    /// A datagram from sender s reaches the root's socket (or is dropped at a full one).
    AtSocket(usize, Vec<u8>),
    /// The root reads a datagram of sender s from its socket.
    Read(usize, Vec<u8>),
    /// A datagram from the root reaches sender s.
    AtSender(usize, Vec<u8>),
    SenderTimer(usize),
    RootTimer,
}

struct Item {
    at: Instant,
    id: u64,
    what: What,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.id) == (o.at, o.id)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    // Reversed: the heap pops the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.id).cmp(&(self.at, self.id))
    }
}

/// One sender and what the test saw of it.
struct Sender {
    session: Session,
    armed: Option<Instant>,
    acked: u64,
    /// One-way latency of its link, and when the last datagram each way arrives (links are
    /// FIFO: jitter delays datagrams but does not reorder one sender's).
    latency: Duration,
    up_free: Instant,
    down_free: Instant,
    /// The credit edge the root granted, as this sender heard it: the newest cumulative ACK
    /// plus the credit carried with it. `None` before any datagram of the root arrived.
    heard: Option<(Seq, Seq)>,
    /// Transmissions of each sequence number (offset from `initial_seq`).
    sent: Vec<u8>,
}

/// Everything counted over a run.
#[derive(Debug, Default)]
pub struct Counts {
    /// First transmissions of data datagrams (the senders' `Stats::data_sent`).
    pub data: u64,
    /// Data datagrams sent again (`Transmit::retransmit`).
    pub retransmits: u64,
    /// ACK-only datagrams the root sent.
    pub acks: u64,
    /// ACK-only datagrams the senders sent (they receive no data, so none are expected).
    pub sender_acks: u64,
    /// Data datagrams the network lost on the way to the root.
    pub data_lost: u64,
    /// Datagrams from the root the network lost on the way back.
    pub acks_lost: u64,
    /// Data datagrams dropped at the root's full socket.
    pub overflow: u64,
    /// Bursts of those drops, each separated from the next by more than `WAVE_GAP`: senders
    /// whose timers keep firing together overflow the socket together, once per backoff.
    pub overflow_waves: u64,
    /// First transmissions beyond the credit the root granted: before a sender heard from the
    /// root, past `isn + share` (allowed by `initial_credit`, assumed and not granted); after,
    /// past the newest ACK plus its credit (a breach of the engine's promise).
    pub pre_ack_excess: u64,
    pub beyond_granted: u64,
    /// Retransmissions past the granted edge (of datagrams first sent on assumed credit).
    pub resent_beyond_granted: u64,
    /// Most datagrams ever waiting in the root's socket.
    pub peak_queue: usize,
    /// Most data datagrams ever on the way to, or waiting in, the root's socket.
    pub peak_in_flight: u64,
    /// Most transmissions of any one datagram.
    pub max_transmissions: u8,
    /// `handle_timeout` calls on sessions whose deadline was due, senders and root.
    pub timer_firings: u64,
    /// Most entries in this simulation's event heap.
    pub peak_events: usize,
    /// Bytes of the root endpoint's own tables (ready lists, timer heap, ACK lists) at the end.
    pub root_tables: usize,
    pub sim_time: Duration,
    /// Why the senders resent, from their `Stats`: retransmission timeouts, tail-loss probes,
    /// losses found by selective ACKs, by probe answers and by bursts; and the retransmissions
    /// the root reported as duplicates (spurious: the original had arrived, or was queued).
    pub timeouts: u64,
    pub probes: u64,
    pub fast: u64,
    pub tail_losses: u64,
    pub burst_losses: u64,
    pub spurious: u64,
    /// Data datagrams the root received twice.
    pub duplicates: u64,
}

impl Counts {
    pub fn destroyed(&self) -> u64 {
        self.data_lost + self.acks_lost + self.overflow
    }
}

struct Sim {
    seed: u64,
    n: usize,
    rng: Rng,
    start: Instant,
    now: Instant,
    heap: BinaryHeap<Item>,
    next_id: u64,
    root: Endpoint,
    root_armed: Option<Instant>,
    inboxes: Vec<Inbox>,
    senders: Vec<Sender>,
    share: u16,
    isn: u32,
    /// The root's socket: datagrams held, and when the last one queued will have been read.
    queue: usize,
    read_free: Instant,
    in_flight: u64,
    last_overflow: Option<Instant>,
    c: Counts,
    buf: Vec<u8>,
}

/// The defaults, with 1472-byte datagrams.
pub fn config(initial_credit: u16) -> Config {
    Config {
        max_datagram_size: DATAGRAM,
        initial_credit,
        ..Config::default()
    }
}

/// Timer floors for this socket. A full socket takes `BUDGET x SERVICE` (1.024 ms) to drain,
/// so the datagram at its tail waits that long before the root reads it, and a timer shorter
/// than that fires for datagrams that are only queued: the defaults' 1 ms RTO floor and 100 µs
/// probe floor are (`incast_1023_senders_default_timers`). Twice the drain time, 2 ms.
pub fn sized(mut c: Config) -> Config {
    let floor = 2 * SERVICE * BUDGET;
    c.initial_rto = floor;
    c.min_rto = floor;
    c.min_pto = floor;
    c
}

fn ids(s: usize, root_epoch: u32, sender_epoch: u32) -> SessionIds {
    SessionIds {
        local_id: TX_BASE + s as u32,
        local_epoch: sender_epoch,
        remote_id: RX_BASE + s as u32,
        remote_epoch: root_epoch,
    }
}

impl Sim {
    fn new(seed: u64, n: usize, cfg: Config) -> Sim {
        let mut rng = Rng::new(seed);
        let start = Instant::now();
        let root_epoch = rng.next_u64() as u32;
        let root_cfg = cfg.clone();
        let cfg = Arc::new(cfg);
        let senders: Vec<Sender> = (0..n)
            .map(|s| {
                let ids = ids(s, root_epoch, rng.next_u64() as u32);
                Sender {
                    session: Session::new(cfg.clone(), ids, start).expect("valid config"),
                    armed: None,
                    acked: 0,
                    latency: Duration::from_nanos(5_000 + rng.below(15_000)),
                    up_free: start,
                    down_free: start,
                    heard: None,
                    sent: Vec::new(),
                }
            })
            .collect();
        // The root opens every session before it sets the budget: `open` with a budget set
        // rebalances every session (O(N) per open, O(N²) in all), setting it last costs one
        // pass. The ids were exchanged out of band, as MPI does at startup.
        let mut root = Endpoint::new(root_cfg).expect("valid config");
        let t = Instant::now();
        for (s, tx) in senders.iter().enumerate() {
            let ids = tx.session.ids().mirrored();
            assert_eq!(ids.local_id, RX_BASE + s as u32);
            root.open(ids, start);
        }
        root.set_recv_budget(BUDGET);
        let opened = t.elapsed();
        let share = root.session(RX_BASE).expect("opened").credit();
        assert_eq!(u32::from(share), (BUDGET / n as u32).max(1));
        eprintln!("incast {n}: root opened {n} sessions and set its budget in {opened:.2?}");
        let mut sim = Sim {
            seed,
            n,
            rng,
            start,
            now: start,
            heap: BinaryHeap::new(),
            next_id: 0,
            root,
            root_armed: None,
            inboxes: (0..n).map(|_| Inbox::default()).collect(),
            senders,
            share,
            isn: config(1).initial_seq,
            queue: 0,
            read_free: start,
            in_flight: 0,
            last_overflow: None,
            c: Counts::default(),
            buf: Vec::new(),
        };
        // A collective: every sender starts within 10 µs of the others.
        for s in 0..n {
            let at = start + Duration::from_nanos(sim.rng.below(10_000));
            sim.push(at, What::Start(s));
        }
        sim
    }

    fn push(&mut self, at: Instant, what: What) {
        self.next_id += 1;
        self.heap.push(Item {
            at,
            id: self.next_id,
            what,
        });
        self.c.peak_events = self.c.peak_events.max(self.heap.len());
    }

    /// Arrival time over a FIFO link with up to 1 µs of jitter.
    fn arrival(&mut self, latency: Duration, free: Instant) -> Instant {
        let jitter = Duration::from_nanos(self.rng.below(1_000));
        (self.now + latency + jitter).max(free)
    }

    fn run(&mut self, limit: Duration) -> bool {
        while let Some(item) = self.heap.pop() {
            assert!(item.at >= self.now, "time ran backwards");
            self.now = item.at;
            assert!(
                self.now - self.start < limit,
                "seed {}: not done after {limit:?}: {} of {} senders acknowledged",
                self.seed,
                self.senders.iter().filter(|t| t.acked == MESSAGES).count(),
                self.n
            );
            match item.what {
                What::Start(s) => {
                    for i in 0..MESSAGES {
                        let m = message(self.seed, s, i);
                        self.senders[s].session.send(self.now, m).expect("room");
                    }
                    self.flush_sender(s);
                }
                What::AtSocket(s, d) => {
                    if self.queue >= BUDGET as usize {
                        // Drops less than 100 µs apart belong to one wave.
                        if self.last_overflow.is_none_or(|t| self.now - t > WAVE_GAP) {
                            self.c.overflow_waves += 1;
                        }
                        self.last_overflow = Some(self.now);
                        self.c.overflow += 1;
                        self.in_flight -= 1;
                        continue;
                    }
                    self.queue += 1;
                    self.c.peak_queue = self.c.peak_queue.max(self.queue);
                    self.read_free = self.read_free.max(self.now) + SERVICE;
                    self.push(self.read_free, What::Read(s, d));
                }
                What::Read(s, d) => self.read(s, &d),
                What::AtSender(s, d) => self.at_sender(s, &d),
                What::SenderTimer(s) => {
                    let t = &mut self.senders[s];
                    if t.armed == Some(item.at) {
                        t.armed = None;
                    }
                    if t.session.poll_timeout().is_some_and(|t| t <= self.now) {
                        t.session.handle_timeout(self.now);
                        self.c.timer_firings += 1;
                    }
                    self.flush_sender(s);
                }
                What::RootTimer => {
                    if self.root_armed == Some(item.at) {
                        self.root_armed = None;
                    }
                    if self.root.poll_timeout().is_some_and(|t| t <= self.now) {
                        self.root.handle_timeout(self.now);
                        self.c.timer_firings += 1;
                    }
                    self.flush_root();
                }
            }
            if self.done() {
                self.c.sim_time = self.now - self.start;
                self.c.data = self
                    .senders
                    .iter()
                    .map(|t| t.session.stats().data_sent)
                    .sum();
                self.c.root_tables = self.root.memory().tables;
                for t in &self.senders {
                    let st = t.session.stats();
                    self.c.timeouts += st.timeouts;
                    self.c.probes += st.tail_probes;
                    self.c.fast += st.fast_retransmits;
                    self.c.tail_losses += st.tail_losses;
                    self.c.burst_losses += st.burst_losses;
                    self.c.spurious += st.spurious_retransmits;
                }
                self.c.duplicates = self
                    .root
                    .sessions()
                    .map(|(_, r)| r.stats().duplicates)
                    .sum();
                return true;
            }
        }
        false
    }

    fn done(&self) -> bool {
        // Acknowledged implies delivered (checked at the end): the cheap test first.
        self.senders.last().is_some_and(|t| t.acked == MESSAGES)
            && self.senders.iter().all(|t| t.acked == MESSAGES)
    }

    fn read(&mut self, s: usize, d: &[u8]) {
        self.queue -= 1;
        self.in_flight -= 1;
        let sid = Endpoint::peek_session_id(d).expect("a header");
        assert_eq!(sid, RX_BASE + s as u32, "misrouted");
        let mut sink = Check {
            seed: self.seed,
            s,
            isn: self.isn,
            inbox: &mut self.inboxes[s],
        };
        match self
            .root
            .handle_datagram(self.now, d, &mut sink, |_, _| None)
        {
            // A retransmission the root already had: the engine reports it, nothing is wrong.
            Ok(_) | Err(reliability::DropReason::Duplicate) => {}
            Err(e) => panic!("sender {s}: root refused a datagram: {e}"),
        }
        if self.queue == 0 {
            // The socket is empty: the root has read it to the end.
            self.root.input_drained(self.now);
        }
        self.flush_root();
    }

    fn flush_root(&mut self) {
        while let Some((sid, t)) = self.root.poll_transmit(self.now, &mut self.buf) {
            assert!(t.seq.is_none(), "the root sends no data");
            self.c.acks += 1;
            let s = (sid - RX_BASE) as usize;
            if self.rng.chance(LOSS) {
                self.c.acks_lost += 1;
                continue;
            }
            let (latency, free) = (self.senders[s].latency, self.senders[s].down_free);
            let at = self.arrival(latency, free);
            self.senders[s].down_free = at;
            let d = self.buf.clone();
            self.push(at, What::AtSender(s, d));
        }
        if let Some((_, ev)) = self.root.poll_event() {
            panic!("the root sent nothing, yet: {ev:?}");
        }
        if let Some(t) = self.root.poll_timeout() {
            if self.root_armed.is_none_or(|a| t < a) {
                // A deadline already past (a stale heap entry) is handled at once.
                let t = t.max(self.now);
                self.root_armed = Some(t);
                self.push(t, What::RootTimer);
            }
        }
    }

    fn at_sender(&mut self, s: usize, d: &[u8]) {
        let (repr, _) = Repr::parse(d).expect("intact");
        let t = &mut self.senders[s];
        // The sender takes in the newest cumulative ACK's credit (an older ACK moves nothing).
        let edge = repr.ack.add(u32::from(repr.credit.max(1)));
        match t.heard {
            Some((ack, _)) if repr.ack.before(ack) => {}
            _ => t.heard = Some((repr.ack, edge)),
        }
        t.session
            .handle_datagram(self.now, d, &mut ())
            .unwrap_or_else(|e| panic!("sender {s} refused an ACK: {e}"));
        t.session.input_drained(self.now);
        self.flush_sender(s);
    }

    fn flush_sender(&mut self, s: usize) {
        let now = self.now;
        let isn = Seq(self.isn);
        loop {
            let t = &mut self.senders[s];
            let Some(x) = t.session.poll_transmit(now, &mut self.buf) else {
                break;
            };
            let Some(seq) = x.seq else {
                self.c.sender_acks += 1;
                continue;
            };
            let i = seq.since(isn) as usize;
            if t.sent.len() <= i {
                t.sent.resize(i + 1, 0);
            }
            t.sent[i] += 1;
            self.c.max_transmissions = self.c.max_transmissions.max(t.sent[i]);
            assert_eq!(x.retransmit, t.sent[i] > 1, "sender {s}: retransmit flag");
            if x.retransmit {
                self.c.retransmits += 1;
                if t.heard.is_some_and(|(_, edge)| !seq.before(edge)) {
                    self.c.resent_beyond_granted += 1;
                }
            } else {
                match t.heard {
                    None if !seq.before(isn.add(u32::from(self.share))) => {
                        self.c.pre_ack_excess += 1
                    }
                    Some((_, edge)) if !seq.before(edge) => self.c.beyond_granted += 1,
                    _ => {}
                }
            }
            if self.rng.chance(LOSS) {
                self.c.data_lost += 1;
                continue;
            }
            let (latency, free) = (t.latency, t.up_free);
            let at = self.arrival(latency, free);
            self.senders[s].up_free = at;
            self.in_flight += 1;
            self.c.peak_in_flight = self.c.peak_in_flight.max(self.in_flight);
            let d = self.buf.clone();
            self.push(at, What::AtSocket(s, d));
        }
        let t = &mut self.senders[s];
        while let Some(ev) = t.session.poll_event() {
            match ev {
                Event::SendAcked(m) => {
                    assert_eq!(u64::from(m.0.wrapping_sub(self.isn)), t.acked, "sender {s}");
                    t.acked += 1;
                }
                Event::Writable | Event::Stalled => {}
                Event::PeerFailed { .. } => panic!("sender {s}: the root failed"),
            }
        }
        if let Some(at) = t.session.poll_timeout() {
            if t.armed.is_none_or(|a| at < a) {
                let at = at.max(now);
                t.armed = Some(at);
                self.push(at, What::SenderTimer(s));
            }
        }
    }

    /// Checks what must hold once every message is acknowledged.
    fn check_end(&self) {
        for (s, (t, ib)) in self.senders.iter().zip(&self.inboxes).enumerate() {
            assert_eq!(
                ib.delivered, MESSAGES,
                "sender {s}: acknowledged, not delivered"
            );
            assert!(ib.partial.is_empty());
            assert!(t.session.is_idle(), "sender {s} not idle");
            let st = t.session.stats();
            assert_eq!(st.messages_acked, MESSAGES);
            assert_eq!(
                st.retransmits,
                t.sent.iter().map(|&k| u64::from(k) - 1).sum()
            );
            let rx = self.root.session(RX_BASE + s as u32).expect("open");
            assert_eq!(rx.stats().messages_delivered, MESSAGES);
            assert_eq!(rx.credit(), self.share);
        }
        let sent: u64 = self.senders.iter().map(|t| t.sent.len() as u64).sum();
        assert_eq!(sent, self.c.data);
    }
}

/// Runs N senders and prints the summary line.
pub fn incast(seed: u64, n: usize, cfg: Config) -> Counts {
    let wall = Instant::now();
    let initial_credit = cfg.initial_credit;
    let mut sim = Sim::new(seed, n, cfg);
    assert!(sim.run(Duration::from_secs(60)), "seed {seed}: stuck");
    sim.check_end();
    let c = sim.c;
    let all_data = c.data + c.retransmits;
    eprintln!(
        "incast {n} senders x {MESSAGES} msgs (initial_credit {initial_credit}, credit {} each, \
         budget {BUDGET}): data {} + {} resent, acks {} ({:.3} per data datagram), lost {} data \
         + {} acks, overflow {} in {} waves, retransmits/destroyed {:.3}, max sends of one \
         datagram {}, peak queue {} in flight {}, pre-ack excess {}, timer firings {}, sim \
         {:.2?}, wall {:.2?}; resent by: {} timeouts, {} probes, {} fast, {} tail, {} burst; {} \
         spurious, {} dups, {} resent past the granted edge",
        sim.share,
        c.data,
        c.retransmits,
        c.acks + c.sender_acks,
        (c.acks + c.sender_acks) as f64 / all_data as f64,
        c.data_lost,
        c.acks_lost,
        c.overflow,
        c.overflow_waves,
        c.retransmits as f64 / c.destroyed().max(1) as f64,
        c.max_transmissions,
        c.peak_queue,
        c.peak_in_flight,
        c.pre_ack_excess,
        c.timer_firings,
        c.sim_time,
        wall.elapsed(),
        c.timeouts,
        c.probes,
        c.fast,
        c.tail_losses,
        c.burst_losses,
        c.spurious,
        c.duplicates,
        c.resent_beyond_granted,
    );
    c
}

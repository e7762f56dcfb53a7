//! A simulated clock and a seeded, faulty network carrying datagrams between endpoints, with
//! an application on each node that sends generated messages and checks every byte it gets
//! (in the manner of quinn-proto's tests/util.rs).
#![allow(dead_code)]

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use reliability::header::MAX_HEADER_LEN;
use reliability::{
    Config, Delivery, Endpoint, Event, MsgId, MsgRange, Placement, SendError, SessionIds, Sink,
    Slept,
};

/// splitmix64: tiny, seedable, good enough for fault injection.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn duration(&mut self, max: Duration) -> Duration {
        Duration::from_nanos(self.below(max.as_nanos() as u64 + 1))
    }
}

fn mix(a: u64, b: u64) -> u64 {
    let mut r = Rng::new(a.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ b);
    r.next_u64()
}

/// What the network does to each datagram.
#[derive(Clone, Debug)]
pub struct Faults {
    pub loss: f64,
    pub duplicate: f64,
    /// Probability that a datagram is held back by up to `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Probability that 1–3 bytes are flipped.
    pub corrupt: f64,
    pub latency: Duration,
    /// Every datagram gets up to this much extra delay (mild reordering).
    pub jitter: Duration,
    /// Link rate in bytes per second (serialisation delay), per directed link.
    pub rate: Option<u64>,
}

impl Faults {
    pub fn none() -> Faults {
        Faults {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            corrupt: 0.0,
            latency: Duration::from_micros(5),
            jitter: Duration::ZERO,
            rate: None,
        }
    }
}

/// Network counters.
#[derive(Clone, Debug, Default)]
pub struct NetStats {
    pub submitted: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub reordered: u64,
    /// Dropped at a full receive queue (a socket buffer overrun).
    pub overflowed: u64,
    /// Dropped by a test's filter.
    pub filtered: u64,
    pub delivered: u64,
}

impl NetStats {
    /// Datagrams that never reached (or could not be used by) their receiver.
    pub fn destroyed(&self) -> u64 {
        self.lost + self.corrupted + self.overflowed + self.filtered
    }
}

struct Pending {
    at: Instant,
    id: u64,
    from: usize,
    to: usize,
    /// Already through the receiver's queue.
    queued: bool,
    data: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.id) == (o.at, o.id)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.id).cmp(&(self.at, self.id))
    }
}

/// A receiver's socket buffer: holds at most `cap` datagrams, drained at one per `service`.
#[derive(Clone, Copy, Debug)]
pub struct RxQueue {
    pub cap: usize,
    pub service: Duration,
}

/// Decides, given (from, to, n-th datagram submitted overall, bytes), whether to drop it.
pub type Filter = Box<dyn FnMut(usize, usize, u64, &[u8]) -> bool>;

pub struct Net {
    pub now: Instant,
    pub start: Instant,
    pub rng: Rng,
    pub faults: Faults,
    pub stats: NetStats,
    pub filter: Option<Filter>,
    heap: BinaryHeap<Pending>,
    next_id: u64,
    link_free: HashMap<(usize, usize), Instant>,
    rxq: HashMap<usize, (RxQueue, usize, Instant)>,
}

impl Net {
    pub fn new(seed: u64, faults: Faults) -> Net {
        let start = Instant::now();
        Net {
            now: start,
            start,
            rng: Rng::new(seed),
            faults,
            stats: NetStats::default(),
            filter: None,
            heap: BinaryHeap::new(),
            next_id: 0,
            link_free: HashMap::new(),
            rxq: HashMap::new(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    pub fn set_rx_queue(&mut self, node: usize, q: RxQueue) {
        self.rxq.insert(node, (q, 0, self.now));
    }

    pub fn submit(&mut self, from: usize, to: usize, data: &[u8]) {
        let n = self.stats.submitted;
        self.stats.submitted += 1;
        if let Some(f) = self.filter.as_mut() {
            if f(from, to, n, data) {
                self.stats.filtered += 1;
                return;
            }
        }
        if self.rng.chance(self.faults.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut d = data.to_vec();
            if !d.is_empty() && self.rng.chance(self.faults.corrupt) {
                self.stats.corrupted += 1;
                for _ in 0..1 + self.rng.below(3) {
                    let i = self.rng.below(d.len() as u64) as usize;
                    d[i] ^= 1 + self.rng.below(255) as u8;
                }
            }
            let mut depart = self.now;
            if let Some(rate) = self.faults.rate {
                let free = self.link_free.entry((from, to)).or_insert(self.now);
                *free = (*free).max(self.now)
                    + Duration::from_nanos(d.len() as u64 * 1_000_000_000 / rate);
                depart = *free;
            }
            let mut at = depart + self.faults.latency + self.rng.duration(self.faults.jitter);
            if self.rng.chance(self.faults.reorder) {
                self.stats.reordered += 1;
                at += self.rng.duration(self.faults.reorder_delay);
            }
            self.push(at, from, to, false, d);
        }
    }

    fn push(&mut self, at: Instant, from: usize, to: usize, queued: bool, data: Vec<u8>) {
        self.next_id += 1;
        self.heap.push(Pending {
            at,
            id: self.next_id,
            from,
            to,
            queued,
            data,
        });
    }

    pub fn next_time(&self) -> Option<Instant> {
        self.heap.peek().map(|p| p.at)
    }

    /// Next datagram due at or before `now`, after the receiver queue (if any).
    pub fn pop_due(&mut self) -> Option<(usize, usize, Vec<u8>)> {
        loop {
            if self.heap.peek().is_none_or(|p| p.at > self.now) {
                return None;
            }
            let p = self.heap.pop().expect("peeked");
            match self.rxq.get_mut(&p.to) {
                Some((q, held, last)) if !p.queued => {
                    if *held >= q.cap {
                        self.stats.overflowed += 1;
                        continue;
                    }
                    *held += 1;
                    let done = (*last).max(p.at) + q.service;
                    *last = done;
                    self.push(done, p.from, p.to, true, p.data);
                }
                Some((_, held, _)) => {
                    *held -= 1;
                    self.stats.delivered += 1;
                    return Some((p.from, p.to, p.data));
                }
                None => {
                    self.stats.delivered += 1;
                    return Some((p.from, p.to, p.data));
                }
            }
        }
    }
}

/// Message sizes and contents, reproducible from (seed, from, to, index).
#[derive(Clone, Debug)]
pub struct MsgGen {
    pub seed: u64,
    /// Largest message.
    pub max_len: usize,
    /// Share of messages that are tiny (0..=64 bytes) and small (up to `small_len`).
    pub tiny: f64,
    pub small: f64,
    pub small_len: usize,
}

impl MsgGen {
    fn rng(&self, from: usize, to: usize, i: u64) -> Rng {
        Rng::new(mix(mix(self.seed, (from as u64) << 32 | to as u64), i))
    }

    pub fn len(&self, from: usize, to: usize, i: u64) -> usize {
        let mut r = self.rng(from, to, i);
        let p = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let max = if p < self.tiny {
            64
        } else if p < self.tiny + self.small {
            self.small_len
        } else {
            self.max_len
        };
        r.below(max.min(self.max_len) as u64 + 1) as usize
    }

    pub fn make(&self, from: usize, to: usize, i: u64) -> Vec<u8> {
        let len = self.len(from, to, i);
        let mut r = self.rng(from, to, i ^ 0xabcd);
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&r.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// One direction of traffic as the receiving application sees it.
#[derive(Debug)]
pub struct Inbox {
    pub from: usize,
    pub to: usize,
    pub isn: u32,
    pub delivered: u64,
    pub placements: u64,
    partial: HashMap<u32, (Vec<u8>, usize)>,
}

struct CheckSink<'a> {
    inbox: &'a mut Inbox,
    gen: &'a MsgGen,
    seed: u64,
}

impl Sink for CheckSink<'_> {
    fn place(&mut self, p: Placement<'_>) {
        let ib = &mut *self.inbox;
        let index = u64::from(p.msg.0.wrapping_sub(ib.isn));
        assert!(
            index >= ib.delivered,
            "seed {}: placement for delivered message {index}",
            self.seed
        );
        let (buf, placed) = ib
            .partial
            .entry(p.msg.0)
            .or_insert_with(|| (vec![0; p.total_len as usize], 0));
        assert_eq!(buf.len(), p.total_len as usize, "seed {}", self.seed);
        let o = p.offset as usize;
        buf[o..o + p.bytes.len()].copy_from_slice(p.bytes);
        *placed += p.bytes.len();
        assert!(
            *placed <= buf.len(),
            "seed {}: bytes placed twice",
            self.seed
        );
        ib.placements += 1;
    }

    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        let ib = &mut *self.inbox;
        let index = u64::from(msg.0.wrapping_sub(ib.isn));
        assert_eq!(
            index, ib.delivered,
            "seed {}: {}->{} delivered {msg:?} out of order or twice",
            self.seed, ib.from, ib.to
        );
        let want = self.gen.make(ib.from, ib.to, index);
        match d {
            Delivery::Inline(bytes) => {
                assert!(
                    bytes == want,
                    "seed {}: message {index} corrupted",
                    self.seed
                )
            }
            Delivery::Placed { len } => {
                let (buf, placed) = ib
                    .partial
                    .remove(&msg.0)
                    .unwrap_or_else(|| panic!("seed {}: placed message never placed", self.seed));
                assert_eq!(len as usize, want.len(), "seed {}", self.seed);
                assert_eq!(placed, want.len(), "seed {}: bytes missing", self.seed);
                assert!(
                    buf == want,
                    "seed {}: placed message {index} corrupted",
                    self.seed
                );
            }
        }
        ib.delivered += 1;
    }
}

/// One direction of traffic as the sending application sees it.
#[derive(Debug)]
pub struct Outbox {
    pub local_id: u32,
    pub to: usize,
    pub count: u64,
    pub next: u64,
    pub acked: u64,
    pub would_block: u64,
    pub failed: Option<MsgRange>,
    /// After every `burst` messages the sender pauses this long (`Sim::pace`).
    pub pace: Option<(u64, Duration)>,
    pub paused_until: Option<Instant>,
}

pub struct SimNode {
    pub ep: Endpoint,
    pub alive: bool,
    pub epoch: u32,
    /// local session id -> peer node
    pub route: HashMap<u32, usize>,
    pub outboxes: Vec<Outbox>,
    pub inboxes: HashMap<u32, Inbox>,
    pub events: Vec<(u32, Event)>,
    pub max_memory: usize,
    /// Sessions the endpoint froze (with `dormant_after`), kept as the RD queue pair keeps
    /// them and resumed before a datagram for them is handed over or a message sent.
    pub dormant: HashMap<u32, Slept>,
    pub slept: u64,
}

impl SimNode {
    fn wake(&mut self, id: u32, now: Instant) {
        if let Some(s) = self.dormant.remove(&id) {
            self.ep.resume(s.ids, s.dormant, now);
        }
    }
}

/// The id node `a` chose for its session with node `b` (receiver-chosen: `b` stamps it).
pub fn session_id(a: usize, b: usize) -> u32 {
    ((a as u32) << 16 | b as u32) + 1
}

pub struct Sim {
    pub seed: u64,
    pub net: Net,
    pub nodes: Vec<SimNode>,
    pub gen: MsgGen,
    pub steps: u64,
    /// Runs of two or more datagrams handed over with `handle_run`.
    pub runs_taken: u64,
    buf: Vec<u8>,
}

impl Sim {
    pub fn new(
        seed: u64,
        faults: Faults,
        gen: MsgGen,
        configs: impl IntoIterator<Item = Config>,
    ) -> Sim {
        let mut rng = Rng::new(seed ^ 0xe90c);
        let nodes = configs
            .into_iter()
            .map(|c| SimNode {
                ep: Endpoint::new(c).expect("valid config"),
                alive: true,
                epoch: rng.next_u64() as u32,
                route: HashMap::new(),
                outboxes: Vec::new(),
                inboxes: HashMap::new(),
                events: Vec::new(),
                max_memory: 0,
                dormant: HashMap::new(),
                slept: 0,
            })
            .collect();
        Sim {
            seed,
            net: Net::new(seed, faults),
            nodes,
            gen,
            steps: 0,
            runs_taken: 0,
            buf: Vec::new(),
        }
    }

    pub fn ids(&self, a: usize, b: usize) -> SessionIds {
        SessionIds {
            local_id: session_id(a, b),
            local_epoch: self.nodes[a].epoch,
            remote_id: session_id(b, a),
            remote_epoch: self.nodes[b].epoch,
        }
    }

    /// Opens the sessions between `a` and `b` on both sides.
    pub fn connect(&mut self, a: usize, b: usize) {
        let now = self.net.now;
        for (x, y) in [(a, b), (b, a)] {
            let ids = self.ids(x, y);
            let isn = self.nodes[x].ep.open(ids, now).config().initial_seq;
            let node = &mut self.nodes[x];
            node.route.insert(ids.local_id, y);
            node.inboxes.insert(
                ids.local_id,
                Inbox {
                    from: y,
                    to: x,
                    isn,
                    delivered: 0,
                    placements: 0,
                    partial: HashMap::new(),
                },
            );
        }
    }

    /// `count` messages from `a` to `b` (connect first).
    pub fn flow(&mut self, a: usize, b: usize, count: u64) {
        self.nodes[a].outboxes.push(Outbox {
            local_id: session_id(a, b),
            to: b,
            count,
            next: 0,
            acked: 0,
            would_block: 0,
            failed: None,
            pace: None,
            paused_until: None,
        });
    }

    /// Makes the last flow added pause for `pause` after every `burst` messages.
    pub fn pace(&mut self, a: usize, burst: u64, pause: Duration) {
        let ob = self.nodes[a].outboxes.last_mut().expect("a flow");
        ob.pace = Some((burst.max(1), pause));
    }

    fn pump(&mut self) {
        let now = self.net.now;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if !node.alive {
                continue;
            }
            for ob in node.outboxes.iter_mut() {
                if ob.paused_until.is_some_and(|t| now < t) {
                    continue;
                }
                ob.paused_until = None;
                if ob.next < ob.count {
                    if let Some(s) = node.dormant.remove(&ob.local_id) {
                        node.ep.resume(s.ids, s.dormant, now);
                    }
                }
                while ob.next < ob.count && ob.failed.is_none() && ob.paused_until.is_none() {
                    let msg = self.gen.make(i, ob.to, ob.next);
                    match node.ep.send(ob.local_id, now, msg) {
                        Ok(_) => {
                            ob.next += 1;
                            if let Some((burst, pause)) = ob.pace {
                                if ob.next % burst == 0 {
                                    ob.paused_until = Some(now + pause);
                                }
                            }
                        }
                        Err(SendError::WouldBlock) => {
                            ob.would_block += 1;
                            break;
                        }
                        Err(e) => panic!("seed {}: send failed: {e}", self.seed),
                    }
                }
            }
            if self.seed % 2 == 1 {
                while let Some((sid, t)) = node.ep.poll_transmit(now, &mut self.buf) {
                    assert_eq!(t.size, self.buf.len());
                    let to = node.route[&sid];
                    self.net.submit(i, to, &self.buf);
                }
            } else {
                // Even seeds drain by runs (the RD queue pair's way), of a seeded bound.
                let run_max = 1 + (self.seed / 2 % 8) as usize;
                let mut header = [0u8; MAX_HEADER_LEN];
                let (buf, net, route) = (&mut self.buf, &mut self.net, &node.route);
                loop {
                    let mut n = 0;
                    let run = node.ep.poll_transmit_run(now, &mut header, |sid, h, t| {
                        buf.clear();
                        buf.extend_from_slice(&h[..t.header_len]);
                        buf.extend_from_slice(&t.payload);
                        buf.extend_from_slice(&t.payload_tail);
                        buf.extend_from_slice(t.trailer.as_ref().map_or(&[][..], |c| &c[..]));
                        assert_eq!(t.size(), buf.len());
                        net.submit(i, route[&sid], buf);
                        n += 1;
                        n < run_max
                    });
                    if run.is_none() {
                        break;
                    }
                }
            }
            while let Some((sid, ev)) = node.ep.poll_event() {
                node.events.push((sid, ev));
                let Some(ob) = node.outboxes.iter_mut().find(|o| o.local_id == sid) else {
                    continue;
                };
                match ev {
                    Event::SendAcked(m) => {
                        let isn = node.ep.session(sid).unwrap().config().initial_seq;
                        assert_eq!(
                            u64::from(m.0.wrapping_sub(isn)),
                            ob.acked,
                            "seed {}: SendAcked out of order",
                            self.seed
                        );
                        ob.acked += 1;
                    }
                    Event::PeerFailed { unacked } => ob.failed = Some(unacked),
                    Event::Writable | Event::Stalled => {}
                }
            }
            while let Some(s) = node.ep.poll_dormant() {
                node.slept += 1;
                node.dormant.insert(s.ids.local_id, s);
            }
            node.max_memory = node.max_memory.max(node.ep.memory().total());
        }
    }

    /// Whether every flow was sent, acknowledged and delivered.
    pub fn done(&self) -> bool {
        self.nodes.iter().enumerate().all(|(i, n)| {
            n.outboxes.iter().all(|ob| {
                ob.acked == ob.count
                    && self.nodes[ob.to]
                        .inboxes
                        .get(&session_id(ob.to, i))
                        .is_some_and(|ib| ib.delivered == ob.count)
            })
        })
    }

    /// Advances to the next event (datagram arrival or timer) and processes it.
    /// Returns false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.steps += 1;
        self.pump();
        let timers = self
            .nodes
            .iter()
            .filter(|n| n.alive)
            .filter_map(|n| n.ep.poll_timeout());
        let pauses = self
            .nodes
            .iter()
            .flat_map(|n| n.outboxes.iter().filter_map(|o| o.paused_until));
        let Some(next) = timers.chain(pauses).chain(self.net.next_time()).min() else {
            return false;
        };
        if next > self.net.now {
            self.net.now = next;
        }
        let now = self.net.now;
        let mut due = Vec::new();
        while let Some(d) = self.net.pop_due() {
            due.push(d);
        }
        // Seeds with bit 1 set take what arrives together from one peer for one session in
        // runs (`handle_run`, as a receive offload hands them over), the others one by one.
        let runs = self.seed & 2 != 0;
        let mut i = 0;
        while i < due.len() {
            let (from, to, ref data) = due[i];
            let seed = self.seed;
            let node = &mut self.nodes[to];
            let sid = Endpoint::peek_session_id(data);
            let end = if runs && sid.is_some() {
                (i + 1..due.len())
                    .find(|&j| {
                        let (f, t, ref d) = due[j];
                        f != from || t != to || Endpoint::peek_session_id(d) != sid
                    })
                    .unwrap_or(due.len())
            } else {
                i + 1
            };
            let batch = &due[i..end];
            i = end;
            let (true, Some(sid)) = (node.alive, sid) else {
                continue;
            };
            node.wake(sid, now);
            let ids_accept = |_, _| None;
            let mut none = ();
            let sink: &mut dyn Sink = match node.inboxes.get_mut(&sid) {
                Some(inbox) => {
                    assert_eq!(inbox.from, from, "seed {seed}: misrouted");
                    &mut CheckSink {
                        inbox,
                        gen: &self.gen,
                        seed,
                    }
                }
                None => &mut none,
            };
            if runs {
                let taken = node
                    .ep
                    .handle_run(now, sid, batch.iter().map(|d| &d.2[..]), sink);
                assert!(taken <= batch.len(), "seed {seed}: took more than given");
                self.runs_taken += u64::from(batch.len() > 1);
            } else {
                let _ = node.ep.handle_datagram(now, data, sink, ids_accept);
            }
        }
        for node in self.nodes.iter_mut().filter(|n| n.alive) {
            // Everything due is read, as a socket read to the end.
            node.ep.input_drained(now);
            if node.ep.poll_timeout().is_some_and(|t| t <= now) {
                node.ep.handle_timeout(now);
            }
        }
        true
    }

    /// Runs until every flow is done, or fails after `limit` of simulated time.
    pub fn run(&mut self, limit: Duration) {
        while !self.done() {
            assert!(
                self.net.elapsed() < limit,
                "seed {}: not done after {:?} (steps {}): {}",
                self.seed,
                limit,
                self.steps,
                self.progress()
            );
            assert!(
                self.step(),
                "seed {}: stuck: {}",
                self.seed,
                self.progress()
            );
        }
        self.pump();
    }

    pub fn progress(&self) -> String {
        let mut s = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for ob in &n.outboxes {
                let got = self.nodes[ob.to]
                    .inboxes
                    .get(&session_id(ob.to, i))
                    .map_or(0, |ib| ib.delivered);
                s += &format!(
                    "[{i}->{}: sent {}/{} acked {} delivered {}] ",
                    ob.to, ob.next, ob.count, ob.acked, got
                );
            }
        }
        s
    }

    /// Sum of a per-session counter over every session of every node.
    pub fn total(&self, f: impl Fn(&reliability::Stats) -> u64) -> u64 {
        self.nodes
            .iter()
            .flat_map(|n| n.ep.sessions().map(|(_, s)| f(s.stats())))
            .sum()
    }
}

/// A small-datagram config so tests segment a lot without moving megabytes.
pub fn small_config(max_datagram: usize) -> Config {
    Config {
        max_datagram_size: max_datagram,
        inline_limit: max_datagram / 3,
        ..Config::default()
    }
}

/// Checks that the generated messages contain no queue of stale state: sessions go idle.
pub fn assert_idle(sim: &Sim) {
    for n in &sim.nodes {
        for (_, s) in n.ep.sessions() {
            assert!(s.is_idle(), "seed {}: session not idle", sim.seed);
            let m = s.memory();
            assert_eq!(
                m.send_queue + m.retransmit + m.reorder,
                0,
                "seed {}",
                sim.seed
            );
        }
    }
}

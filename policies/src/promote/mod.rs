//! Which peers get an RC connection, as a sans-IO engine: the caller reports traffic and what
//! became of connections, with the time; the engine answers with decisions to promote or
//! demote peers, and the next time it must be woken (as the reliability engine does).
//!
//! - **Promotion.** A peer is hot when its recent traffic (message and byte counts that halve
//!   every half-life, a rendezvous message weighing `rendezvous_weight` messages) reaches a
//!   threshold. A hot peer on the datagram path is promoted if fewer than the cap connections
//!   exist or are being set up. Otherwise the least recently used RC peer that is colder and
//!   has been connected and idle at least the hysteresis time is demoted, and the hot peer
//!   takes its slot once it is closed.
//! - **Demotion.** An RC peer idle past the idle limit is demoted.
//! - **The cap holds on both sides.** A peer's request is refused with a reason when the cap is
//!   reached; connections being set up count. After a refusal or a failed connect the peer is
//!   not asked again for a back-off time that doubles with each refusal in a row, so a
//!   requester stays on the datagram path without retrying in a loop.
//! - **Simultaneous connects** count once: a request from a peer we are connecting to is
//!   accepted without a second slot (the connection layer keeps one of the two connections).
//! - **State.** A peer on the datagram path that holds no slot, waits for none and backs off
//!   from nothing is only its score, in a table indexed by id (`table.rs`); the others, at most
//!   the cap, the waiting peers and those backing off, have full entries. The timers and the
//!   LRU victim are found among the RC peers alone, so no call's cost grows with the peers.

mod config;
#[cfg(test)]
mod scale_tests;
mod score;
mod table;
#[cfg(test)]
mod tests;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

pub use config::{Config, Mode};
use score::Score;
pub use table::PeerId;
use table::Table;

/// Why a connection does not come up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The peer has its cap of connections.
    Cap,
    /// The peer runs in `ud` mode.
    Mode,
    /// The connection failed (refused by the network, timed out, broke while set up).
    Failed,
}

/// The answer to a peer's request for a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Accept,
    Refuse(Refusal),
}

/// Why an RC peer is demoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Idle past the idle limit.
    Idle,
    /// Its slot goes to this hotter peer.
    Hotter(PeerId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start connecting to the peer (its messages keep going over datagrams meanwhile).
    Promote(PeerId),
    /// Close the peer's connection once what is in flight on it is acknowledged.
    Demote(PeerId, Why),
}

/// Where a peer's messages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Ud,
    /// A connection is being set up (by either side): it holds a slot.
    Connecting,
    Rc,
    /// Demoted: the connection drains and closes; it holds its slot until closed.
    Closing,
}

/// What the engine decided and was told, since its creation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub promotions: u64,
    pub connected: u64,
    pub demoted_idle: u64,
    pub demoted_for_hotter: u64,
    /// Connections that closed without being demoted here (the peer demoted us, or it broke).
    pub closed_by_peer: u64,
    /// Requests we refused, and refusals or failures of our own requests.
    pub refused_requests: u64,
    pub refused_by_peer: u64,
    pub failed: u64,
}

/// A peer that holds or wants a slot, or backs off; every other peer is only its score in the
/// table.
struct Peer {
    path: Path,
    score: Score,
    last_used: Instant,
    /// When the peer entered its path.
    since: Instant,
    /// Refusals in a row, which set the back-off (`backoff`), and until when it is in force.
    refusals: u8,
    retry_at: Option<Instant>,
    /// Closing to free a slot for a hotter peer (counted in `Policy::freeing`).
    freeing: bool,
}

pub struct Policy {
    config: Config,
    /// The peers on the datagram path that want nothing but a score: nearly all of them.
    table: Table,
    /// The others in full: connecting, connected or closing (at most the cap), waiting for a
    /// slot, or backing off after a refusal (until the back-off lapses).
    peers: BTreeMap<PeerId, Peer>,
    /// The RC peers by last use (keyed by `Peer::last_used`): the idle limit, the LRU victim
    /// and the next recheck are found among these, never among all peers.
    lru: BTreeSet<(Instant, PeerId)>,
    /// Back-offs in force, by when they lapse: a peer whose back-off lapses returns to the
    /// table even if it sends nothing more.
    retries: BTreeSet<(Instant, PeerId)>,
    /// Peers holding a slot: connecting, connected or closing.
    used: usize,
    /// Hot peers waiting for a slot, and how many slots demotions for them will free.
    waiting: BTreeSet<PeerId>,
    freeing: usize,
    /// While peers wait: when the next RC peer passes its hysteresis (and may make room).
    recheck: Option<Instant>,
    out: VecDeque<Decision>,
    stats: Stats,
    /// Entries the scans looked at: the tests check that it does not grow with the peers.
    #[cfg(test)]
    visited: std::cell::Cell<u64>,
}

impl Policy {
    pub fn new(config: Config) -> Policy {
        Policy {
            config,
            table: Table::new(),
            peers: BTreeMap::new(),
            lru: BTreeSet::new(),
            retries: BTreeSet::new(),
            used: 0,
            waiting: BTreeSet::new(),
            freeing: 0,
            recheck: None,
            out: VecDeque::new(),
            stats: Stats::default(),
            #[cfg(test)]
            visited: Default::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `id`'s full entry, made from its table entry if it has none.
    fn peer(&mut self, now: Instant, id: PeerId) -> &mut Peer {
        match self.peers.entry(id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(v) => {
                let (score, refusals) = self.table.take(now, id);
                v.insert(Peer {
                    path: Path::Ud,
                    score,
                    last_used: now,
                    since: now,
                    refusals,
                    retry_at: None,
                    freeing: false,
                })
            }
        }
    }

    /// Returns `id` to the table if it wants nothing more: on UD, not waiting, no back-off in
    /// force. What it loses (last use, time on its path) is set afresh before it is read again.
    fn settle(&mut self, now: Instant, id: PeerId) {
        let Some(p) = self.peers.get(&id) else { return };
        if p.path != Path::Ud || self.waiting.contains(&id) || p.retry_at.is_some_and(|t| now < t) {
            return;
        }
        let p = self.peers.remove(&id).expect("looked up above");
        if let Some(t) = p.retry_at {
            self.retries.remove(&(t, id));
        }
        self.table.put(id, &p.score, p.refusals);
    }

    /// Returns to the table the peers whose back-off lapsed by `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(&(t, id)) = self.retries.first() {
            if t > now {
                break;
            }
            self.retries.pop_first();
            self.settle(now, id);
        }
    }

    /// `id` was used at `now`: an RC peer moves along the LRU order.
    fn touch(&mut self, now: Instant, id: PeerId) {
        let Some(p) = self.peers.get_mut(&id) else {
            return;
        };
        if now <= p.last_used {
            return;
        }
        if p.path == Path::Rc {
            self.lru.remove(&(p.last_used, id));
            self.lru.insert((now, id));
        }
        p.last_used = now;
    }

    /// One message of `bytes` sent to or received from `peer` (on any path).
    pub fn traffic(&mut self, now: Instant, peer: PeerId, bytes: usize, rendezvous: bool) {
        let c = self.config;
        // Nothing is promoted in `ud` mode: no score to keep.
        if c.mode == Mode::Ud {
            return;
        }
        self.expire(now);
        let weight = if rendezvous { c.rendezvous_weight } else { 1.0 };
        if let Some(p) = self.peers.get_mut(&peer) {
            p.score.add(now, c.half_life, weight, bytes as f64);
            self.touch(now, peer);
            self.consider(now, peer);
            self.settle(now, peer);
            return;
        }
        let (mut score, refusals) = self.table.take(now, peer);
        score.add(now, c.half_life, weight, bytes as f64);
        let wants = match c.mode {
            Mode::Ud => false,
            Mode::Rc => true,
            Mode::Hybrid => c.initiate && score.heat(now, &c) >= 1.0,
        };
        if !wants {
            self.table.put(peer, &score, refusals);
            return;
        }
        self.peers.insert(
            peer,
            Peer {
                path: Path::Ud,
                score,
                last_used: now,
                since: now,
                refusals,
                retry_at: None,
                freeing: false,
            },
        );
        self.consider(now, peer);
        self.settle(now, peer);
    }

    fn set_path(&mut self, now: Instant, id: PeerId, path: Path) {
        let p = self.peer(now, id);
        let held = |p: Path| p != Path::Ud;
        let (was, last) = (p.path, p.last_used);
        p.path = path;
        p.since = now;
        // A victim leaving Closing, however it leaves, no longer frees a slot to come.
        if was == Path::Closing && path != Path::Closing && std::mem::take(&mut p.freeing) {
            self.freeing -= 1;
        }
        if was == Path::Rc {
            self.lru.remove(&(last, id));
        }
        if path == Path::Rc {
            self.lru.insert((last, id));
        }
        match (held(was), held(path)) {
            (false, true) => self.used += 1,
            (true, false) => self.used -= 1,
            _ => {}
        }
    }

    /// Promotes `id` if it is hot and a slot is free, or makes room for it.
    fn consider(&mut self, now: Instant, id: PeerId) {
        let c = self.config;
        let Some(p) = self.peers.get(&id) else { return };
        if p.path != Path::Ud || p.retry_at.is_some_and(|t| now < t) {
            return;
        }
        let heat = p.score.heat(now, &c);
        match c.mode {
            Mode::Ud => return,
            Mode::Rc => {}
            Mode::Hybrid if heat < 1.0 || !c.initiate => return,
            Mode::Hybrid => {}
        }
        if self.used < c.effective_cap() {
            self.waiting.remove(&id);
            self.set_path(now, id, Path::Connecting);
            self.stats.promotions += 1;
            self.out.push_back(Decision::Promote(id));
            return;
        }
        self.waiting.insert(id);
        if self.freeing >= self.waiting.len() {
            return;
        }
        match self.victim(now, heat) {
            Some(victim) => {
                self.set_path(now, victim, Path::Closing);
                self.peer(now, victim).freeing = true;
                self.freeing += 1;
                self.stats.demoted_for_hotter += 1;
                self.out
                    .push_back(Decision::Demote(victim, Why::Hotter(id)));
            }
            None => self.plan_recheck(now),
        }
    }

    /// The next time after `now` an RC peer passes its hysteresis.
    fn plan_recheck(&mut self, now: Instant) {
        let h = self.config.hysteresis;
        self.visit(self.lru.len());
        self.recheck = self
            .lru
            .iter()
            .map(|&(last, id)| last.max(self.peers[&id].since) + h)
            .filter(|&t| t > now)
            .min();
    }

    /// The least recently used RC peer colder than `heat` that has been connected and idle
    /// for the hysteresis time.
    fn victim(&self, now: Instant, heat: f64) -> Option<PeerId> {
        let c = &self.config;
        for &(last, id) in &self.lru {
            self.visit(1);
            // In LRU order: once one was used within the hysteresis, so were the rest.
            if now.saturating_duration_since(last) < c.hysteresis {
                return None;
            }
            let p = &self.peers[&id];
            if now.saturating_duration_since(p.since) >= c.hysteresis && p.score.heat(now, c) < heat
            {
                return Some(id);
            }
        }
        None
    }

    /// The hottest waiting peer that is still hot gets the slot just freed.
    fn promote_waiting(&mut self, now: Instant) {
        let c = self.config;
        self.visit(2 * self.waiting.len());
        let peers = &self.peers;
        self.waiting
            .retain(|id| peers.get(id).is_some_and(|p| p.path == Path::Ud));
        let best = self
            .waiting
            .iter()
            .map(|&id| (self.peers[&id].score.heat(now, &c), id))
            .filter(|&(h, _)| h >= 1.0 || c.mode == Mode::Rc)
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        if let Some((_, id)) = best {
            self.consider(now, id);
        }
    }

    /// A peer asks for a connection.
    pub fn request(&mut self, now: Instant, peer: PeerId) -> Answer {
        let c = self.config;
        self.expire(now);
        self.touch(now, peer);
        if c.mode == Mode::Ud {
            self.stats.refused_requests += 1;
            return Answer::Refuse(Refusal::Mode);
        }
        match self.path(peer) {
            // Both sides asked at once: one slot, one connection.
            Path::Connecting | Path::Rc => Answer::Accept,
            Path::Ud if self.used < c.effective_cap() => {
                self.waiting.remove(&peer);
                self.set_path(now, peer, Path::Connecting);
                Answer::Accept
            }
            Path::Ud | Path::Closing => {
                self.stats.refused_requests += 1;
                Answer::Refuse(Refusal::Cap)
            }
        }
    }

    /// The connection with `peer` is up. Returns whether to keep it: a connection neither side
    /// of which this policy asked for or accepted (it lost a slot meanwhile) is to be closed,
    /// unless a slot is free.
    pub fn connected(&mut self, now: Instant, peer: PeerId) -> bool {
        self.expire(now);
        let path = self.path(peer);
        match path {
            Path::Connecting => {}
            // Already up (the other of two simultaneous connects) or closing: nothing changes.
            Path::Rc | Path::Closing => return path == Path::Rc,
            Path::Ud if self.config.mode != Mode::Ud && self.used < self.config.effective_cap() => {
            }
            Path::Ud => return false,
        }
        self.waiting.remove(&peer);
        let p = self.peer(now, peer);
        // Set before the path: the LRU order is keyed by it.
        p.last_used = now;
        p.refusals = 0;
        if let Some(t) = p.retry_at.take() {
            self.retries.remove(&(t, peer));
        }
        self.set_path(now, peer, Path::Rc);
        self.stats.connected += 1;
        true
    }

    /// Our request was refused, or the connection failed while it was set up: the peer stays
    /// on datagrams for the back-off time.
    pub fn connect_failed(&mut self, now: Instant, peer: PeerId, why: Refusal) {
        self.expire(now);
        // Only a connection being set up can fail to come up: a failure that arrives after
        // the peer's other connection came up (or after a demotion) changes nothing.
        if self.path(peer) != Path::Connecting {
            return;
        }
        match why {
            Refusal::Failed => self.stats.failed += 1,
            Refusal::Cap | Refusal::Mode => self.stats.refused_by_peer += 1,
        }
        self.back_off(now, peer);
        self.set_path(now, peer, Path::Ud);
        self.promote_waiting(now);
        self.settle(now, peer);
    }

    fn back_off(&mut self, now: Instant, peer: PeerId) {
        let c = self.config;
        let p = self.peer(now, peer);
        p.refusals = p.refusals.saturating_add(1);
        let until = now + backoff(&c, p.refusals);
        if let Some(t) = p.retry_at.replace(until) {
            self.retries.remove(&(t, peer));
        }
        self.retries.insert((until, peer));
    }

    /// The connection with `peer` closed: demoted here, or by the peer, or broken.
    pub fn closed(&mut self, now: Instant, peer: PeerId) {
        self.expire(now);
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        match p.path {
            Path::Ud => return,
            Path::Closing => {
                if std::mem::take(&mut p.freeing) {
                    self.freeing -= 1;
                }
            }
            // Not our decision: do not ask again at once.
            Path::Connecting | Path::Rc => {
                self.stats.closed_by_peer += 1;
                self.back_off(now, peer);
            }
        }
        self.set_path(now, peer, Path::Ud);
        self.promote_waiting(now);
        self.settle(now, peer);
    }

    /// The next decision, if any.
    pub fn poll(&mut self) -> Option<Decision> {
        self.out.pop_front()
    }

    /// When [`Policy::handle_timeout`] must run next: an RC peer reaching the idle limit, or,
    /// while hot peers wait, an RC peer passing the hysteresis.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let c = &self.config;
        // Asked on every progress pass: without a slot in use nothing idles, and without a
        // waiting peer nothing is rechecked.
        if c.mode != Mode::Hybrid || (self.used == 0 && self.waiting.is_empty()) {
            return None;
        }
        let idle = self.lru.first().map(|&(last, _)| {
            self.visit(1);
            last + c.idle_limit()
        });
        let recheck = self.recheck.filter(|_| !self.waiting.is_empty());
        idle.into_iter().chain(recheck).min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let c = self.config;
        if c.mode != Mode::Hybrid {
            return;
        }
        self.expire(now);
        // The RC peers idle past the limit lead the LRU order; demoted in order of id.
        let mut idle: Vec<PeerId> = self
            .lru
            .iter()
            .take_while(|&&(last, _)| {
                self.visit(1);
                now.saturating_duration_since(last) >= c.idle_limit()
            })
            .map(|&(_, id)| id)
            .collect();
        idle.sort_unstable();
        for id in idle {
            self.set_path(now, id, Path::Closing);
            self.stats.demoted_idle += 1;
            self.out.push_back(Decision::Demote(id, Why::Idle));
        }
        self.recheck = None;
        let waiting: Vec<PeerId> = self.waiting.iter().copied().collect();
        self.visit(waiting.len());
        for id in waiting {
            self.consider(now, id);
        }
    }

    pub fn path(&self, peer: PeerId) -> Path {
        self.peers.get(&peer).map_or(Path::Ud, |p| p.path)
    }

    /// Connections connecting, connected or closing.
    pub fn slots_used(&self) -> usize {
        self.used
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Heap bytes: the table, and the full entries and the indexes of them, counted as B-tree
    /// nodes half full (an upper bound), and the decisions not yet polled.
    pub fn memory(&self) -> usize {
        self.table.memory()
            + btree_bytes::<PeerId, Peer>(self.peers.len())
            + btree_bytes::<(Instant, PeerId), ()>(self.lru.len())
            + btree_bytes::<(Instant, PeerId), ()>(self.retries.len())
            + btree_bytes::<PeerId, ()>(self.waiting.len())
            + self.out.capacity() * size_of::<Decision>()
    }

    /// Counts `n` entries looked at by a scan (tests only).
    #[inline]
    fn visit(&self, n: usize) {
        #[cfg(test)]
        self.visited.set(self.visited.get() + n as u64);
        #[cfg(not(test))]
        let _ = n;
    }
}

/// The back-off after `refusals` in a row: `backoff`, doubling with each, up to `backoff_max`.
fn backoff(c: &Config, refusals: u8) -> Duration {
    let max = c.backoff_max.max(c.backoff);
    let mut d = Duration::ZERO;
    for _ in 0..refusals {
        d = d.saturating_mul(2).clamp(c.backoff, max);
        if d == max {
            break;
        }
    }
    d
}

/// The heap bytes of a B-tree of `len` entries. The standard library's keeps every node but
/// the root at least half full (5 of 11 entries): counting nodes as half full bounds it above.
fn btree_bytes<K, V>(len: usize) -> usize {
    const CAPACITY: usize = 11;
    if len == 0 {
        return 0;
    }
    // Parent pointer, index in the parent and length, then the keys and values.
    let node = 16 + CAPACITY * (size_of::<K>() + size_of::<V>());
    let nodes = len.div_ceil(CAPACITY / 2);
    // Internal nodes (at least 6 children each) also hold 12 edges.
    let internal = nodes.div_ceil(CAPACITY / 2 + 1);
    nodes * node + internal * (CAPACITY + 1) * size_of::<usize>()
}

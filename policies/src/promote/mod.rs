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

mod config;
mod score;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

pub use config::{Config, Mode};
use score::Score;

/// A peer: its index in the address vector.
pub type PeerId = u32;

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

struct Peer {
    path: Path,
    score: Score,
    last_used: Instant,
    /// When the peer entered its path.
    since: Instant,
    /// The back-off in force after a refusal, and until when.
    backoff: Duration,
    retry_at: Option<Instant>,
    /// Closing to free a slot for a hotter peer (counted in `Policy::freeing`).
    freeing: bool,
}

pub struct Policy {
    config: Config,
    peers: BTreeMap<PeerId, Peer>,
    /// Peers holding a slot: connecting, connected or closing.
    used: usize,
    /// Hot peers waiting for a slot, and how many slots demotions for them will free.
    waiting: BTreeSet<PeerId>,
    freeing: usize,
    /// While peers wait: when the next RC peer passes its hysteresis (and may make room).
    recheck: Option<Instant>,
    out: VecDeque<Decision>,
    stats: Stats,
}

impl Policy {
    pub fn new(config: Config) -> Policy {
        Policy {
            config,
            peers: BTreeMap::new(),
            used: 0,
            waiting: BTreeSet::new(),
            freeing: 0,
            recheck: None,
            out: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn peer(&mut self, now: Instant, id: PeerId) -> &mut Peer {
        self.peers.entry(id).or_insert_with(|| Peer {
            path: Path::Ud,
            score: Score::new(now),
            last_used: now,
            since: now,
            backoff: Duration::ZERO,
            retry_at: None,
            freeing: false,
        })
    }

    /// One message of `bytes` sent to or received from `peer` (on any path).
    pub fn traffic(&mut self, now: Instant, peer: PeerId, bytes: usize, rendezvous: bool) {
        let c = self.config;
        let weight = if rendezvous { c.rendezvous_weight } else { 1.0 };
        let p = self.peer(now, peer);
        p.score.add(now, c.half_life, weight, bytes as f64);
        p.last_used = p.last_used.max(now);
        self.consider(now, peer);
    }

    fn set_path(&mut self, now: Instant, id: PeerId, path: Path) {
        let p = self.peer(now, id);
        let held = |p: Path| p != Path::Ud;
        let was = p.path;
        p.path = path;
        p.since = now;
        // A victim leaving Closing, however it leaves, no longer frees a slot to come.
        if was == Path::Closing && path != Path::Closing && std::mem::take(&mut p.freeing) {
            self.freeing -= 1;
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
        self.recheck = self
            .peers
            .values()
            .filter(|p| p.path == Path::Rc)
            .map(|p| p.last_used.max(p.since) + h)
            .filter(|&t| t > now)
            .min();
    }

    /// The least recently used RC peer colder than `heat` that has been connected and idle
    /// for the hysteresis time.
    fn victim(&self, now: Instant, heat: f64) -> Option<PeerId> {
        let c = &self.config;
        self.peers
            .iter()
            .filter(|(_, p)| {
                p.path == Path::Rc
                    && now.saturating_duration_since(p.since) >= c.hysteresis
                    && now.saturating_duration_since(p.last_used) >= c.hysteresis
                    && p.score.heat(now, c) < heat
            })
            .min_by_key(|(&id, p)| (p.last_used, id))
            .map(|(&id, _)| id)
    }

    /// The hottest waiting peer that is still hot gets the slot just freed.
    fn promote_waiting(&mut self, now: Instant) {
        let c = self.config;
        self.waiting
            .retain(|id| self.peers.get(id).is_some_and(|p| p.path == Path::Ud));
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
        let p = self.peer(now, peer);
        p.last_used = p.last_used.max(now);
        let path = p.path;
        if c.mode == Mode::Ud {
            self.stats.refused_requests += 1;
            return Answer::Refuse(Refusal::Mode);
        }
        match path {
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
        self.set_path(now, peer, Path::Rc);
        let p = self.peer(now, peer);
        p.last_used = now;
        p.backoff = Duration::ZERO;
        p.retry_at = None;
        self.stats.connected += 1;
        true
    }

    /// Our request was refused, or the connection failed while it was set up: the peer stays
    /// on datagrams for the back-off time.
    pub fn connect_failed(&mut self, now: Instant, peer: PeerId, why: Refusal) {
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
    }

    fn back_off(&mut self, now: Instant, peer: PeerId) {
        let c = self.config;
        let p = self.peer(now, peer);
        p.backoff = (p.backoff * 2).clamp(c.backoff, c.backoff_max.max(c.backoff));
        p.retry_at = Some(now + p.backoff);
    }

    /// The connection with `peer` closed: demoted here, or by the peer, or broken.
    pub fn closed(&mut self, now: Instant, peer: PeerId) {
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
        let idle = self
            .peers
            .values()
            .filter(|p| p.path == Path::Rc)
            .map(|p| p.last_used + c.idle_limit())
            .min();
        let recheck = self.recheck.filter(|_| !self.waiting.is_empty());
        idle.into_iter().chain(recheck).min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let c = self.config;
        if c.mode != Mode::Hybrid {
            return;
        }
        let idle: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                p.path == Path::Rc && now.saturating_duration_since(p.last_used) >= c.idle_limit()
            })
            .map(|(&id, _)| id)
            .collect();
        for id in idle {
            self.set_path(now, id, Path::Closing);
            self.stats.demoted_idle += 1;
            self.out.push_back(Decision::Demote(id, Why::Idle));
        }
        self.recheck = None;
        let waiting: Vec<PeerId> = self.waiting.iter().copied().collect();
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
}

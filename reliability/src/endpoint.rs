//! Many sessions behind one socket: finds a datagram's session by the receiver-chosen id in its
//! header, creates sessions on first contact, shares a receive budget among them as credit, and
//! keeps ready lists and a timer heap so that polling costs nothing for idle peers. Sessions idle
//! for [`Config::dormant_after`] leave it as [`Dormant`] values for the caller to keep, so that
//! what it holds grows with the peers in use, not with every peer ever talked to.

use core::hash::{BuildHasherDefault, Hasher};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hashbrown::HashMap;

use crate::config::{Config, ConfigError};
use crate::deadline::earliest;
use crate::dormant::Dormant;
use crate::header::{Packet, MAX_HEADER_LEN};
use crate::reassembly::Sink;
use crate::seq::MsgId;
use crate::session::{
    DropReason, Event, GatherTransmit, Refused, SendError, Session, SessionIds, Transmit,
};
use crate::stats::{EndpointMemory, Memory, Stats};

/// Session ids are chosen by this side, so they need no defence against crafted collisions; a
/// multiplicative hash spreads them well enough and keeps iteration order deterministic.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.0 = (u64::from(v) ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// Gives back a table's room once under a quarter of it is in use: a peak of sessions must
/// not stay allocated once they close or sleep. Halving amortises to O(1) per element taken
/// out, and the factor of four between shrinking and growing keeps a length that wavers from
/// doing either again and again; a table of `$floor` elements or fewer (by default 1024,
/// a few KiB of ids or deadlines) is left as it is.
macro_rules! trim {
    ($t:expr) => {
        trim!($t, 1024)
    };
    ($t:expr, $floor:expr) => {
        if $t.capacity() > $floor && $t.len() < $t.capacity() / 4 {
            $t.shrink_to(2 * $t.len());
        }
    };
}

#[derive(Debug)]
struct Entry {
    session: Session,
    tx_queued: bool,
    ev_queued: bool,
    /// The earliest deadline of this session in the timer heap that has not been popped yet:
    /// a later deadline needs no entry of its own (when this one pops, the session's real
    /// deadline is pushed), so busy sessions do not flood the heap.
    armed: Option<Instant>,
    /// Listed in `Endpoint::owing`.
    owing: bool,
    /// Listed in `Endpoint::due` (by `handle_timeout`, while it collects).
    due: bool,
}

impl Entry {
    fn new(session: Session) -> Entry {
        Entry {
            session,
            tx_queued: false,
            ev_queued: false,
            armed: None,
            owing: false,
            due: false,
        }
    }

    /// The session's own deadline, or when it goes dormant if that is sooner.
    fn deadline(&self) -> Option<Instant> {
        earliest(self.session.poll_timeout(), self.session.dormant_at())
    }

    /// Makes sure the heap holds an entry at or before the session's deadline.
    fn arm(&mut self, timers: &mut BinaryHeap<Reverse<(Instant, u32)>>, id: u32) {
        if let Some(t) = self.deadline() {
            if self.armed.is_none_or(|a| t < a) {
                timers.push(Reverse((t, id)));
                self.armed = Some(t);
            }
        }
    }
}

/// Endpoint-wide counters (per-session ones are in each [`Session::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams too short to name a session.
    pub dropped_malformed: u64,
    /// Datagrams for an id with no session that the caller declined to open.
    pub dropped_unknown_session: u64,
    /// Sessions created.
    pub sessions_opened: u64,
    /// Sessions frozen for [`Endpoint::poll_dormant`].
    pub sessions_frozen: u64,
    /// Sessions resumed by [`Endpoint::resume`].
    pub sessions_resumed: u64,
}

/// A session the endpoint froze and removed (see [`Config::dormant_after`]), as
/// [`Endpoint::poll_dormant`] hands it out: resume it with [`Endpoint::resume`]`(ids, dormant,
/// ..)` before giving the endpoint a datagram for it or sending on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slept {
    /// The session's ids, to resume it with.
    pub ids: SessionIds,
    /// Where it stood.
    pub dormant: Dormant,
    /// The session's counters up to its freezing (the resumed one counts from zero), for a
    /// caller that totals them, as after [`Endpoint::remove`].
    pub stats: Stats,
}

/// A set of sessions keyed by their local (receiver-chosen) id.
#[derive(Debug)]
pub struct Endpoint {
    config: Arc<Config>,
    sessions: IdMap<Entry>,
    tx_ready: VecDeque<u32>,
    ev_ready: VecDeque<u32>,
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Scratch list of `handle_timeout`, kept to avoid an allocation per call.
    due: Vec<u32>,
    /// Sessions that may owe their peer an ACK, for [`Endpoint::flush_acks`].
    owing: Vec<u32>,
    /// Frozen sessions not yet taken by `poll_dormant`.
    slept: VecDeque<Slept>,
    recv_budget: Option<u32>,
    /// The receive budget's share per session, taken up lazily (see `set_recv_budget`).
    share: Option<u16>,
    /// When the caller last found its input empty ([`Endpoint::input_drained`]).
    drained_at: Option<Instant>,
    stats: EndpointStats,
}

impl Endpoint {
    /// An endpoint whose sessions all use `config`.
    pub fn new(config: Config) -> Result<Endpoint, ConfigError> {
        config.validate()?;
        Ok(Endpoint {
            config: Arc::new(config),
            sessions: IdMap::default(),
            tx_ready: VecDeque::new(),
            ev_ready: VecDeque::new(),
            timers: BinaryHeap::new(),
            due: Vec::new(),
            owing: Vec::new(),
            slept: VecDeque::new(),
            recv_budget: None,
            share: None,
            drained_at: None,
            stats: EndpointStats::default(),
        })
    }

    /// Shares `datagrams` of receive credit among the open sessions: each advertises
    /// `budget / sessions`, at least 1 and at most `recv_window`. Dormant sessions have no
    /// share (they hold no credit in use).
    ///
    /// What it guarantees: while the open sessions do not outnumber the budget, the credits
    /// sum to at most the budget, so all peers together cannot have more datagrams in flight to
    /// this endpoint than its socket buffer holds (once the share has reached them, below).
    /// Beyond that the floor of 1 wins: a credit of 0 would leave a sender with data needing a
    /// grant it might never hear of, so each session still advertises one datagram and the
    /// credits sum to the number of open sessions, not the budget. A caller expecting more
    /// peers than its buffer holds datagrams sizes the buffer for one datagram per peer, or
    /// lets peers go dormant (their share returns to the others).
    ///
    /// This call gives every session the share at once. When sessions open, close, go
    /// dormant or resume, the share changes without visiting the others (which would make
    /// opening N sessions cost N²): each takes up the share in force when the endpoint next
    /// gives it input or polls it for datagrams, so every ACK carries the current share. A
    /// peer learns of a smaller share with the next ACK it gets, which it gets within the ACK
    /// delay of its next datagram, and may use its old credit until then (as when shares were
    /// pushed, since credit only travels on ACKs): the budget holds once every peer with data
    /// in flight has been acknowledged since the change. A larger share is announced at once
    /// when the session is next visited.
    pub fn set_recv_budget(&mut self, datagrams: u32) {
        self.recv_budget = Some(datagrams);
        self.reshare();
        let Some(share) = self.share else {
            return;
        };
        let ids: Vec<u32> = self.sessions.keys().copied().collect();
        for id in ids {
            let e = self.sessions.get_mut(&id).expect("listed");
            e.session.set_credit(share);
            Self::touch(
                &mut self.tx_ready,
                &mut self.ev_ready,
                &mut self.timers,
                id,
                e,
            );
        }
    }

    /// Recomputes the share after the open sessions changed; O(1), see `set_recv_budget`.
    fn reshare(&mut self) {
        let n = self.sessions.len().max(1) as u32;
        self.share = self
            .recv_budget
            .map(|budget| (budget / n).clamp(1, u32::from(u16::MAX)) as u16);
    }

    fn touch(
        tx_ready: &mut VecDeque<u32>,
        ev_ready: &mut VecDeque<u32>,
        timers: &mut BinaryHeap<Reverse<(Instant, u32)>>,
        id: u32,
        e: &mut Entry,
    ) {
        if !e.tx_queued {
            e.tx_queued = true;
            tx_ready.push_back(id);
        }
        if !e.ev_queued {
            e.ev_queued = true;
            ev_ready.push_back(id);
        }
        e.arm(timers, id);
    }

    /// The session with this local id, creating it with `ids` on first contact.
    pub fn open(&mut self, ids: SessionIds, now: Instant) -> &mut Session {
        let checksum = self.config.checksum;
        self.open_with(ids, now, checksum)
    }

    /// [`Endpoint::open`], with `checksum` in place of the configuration's for a new session:
    /// both ends of a session must agree on it, so a handshake that learns the peer's choice
    /// settles it here.
    pub fn open_with(&mut self, ids: SessionIds, now: Instant, checksum: bool) -> &mut Session {
        let id = ids.local_id;
        if !self.sessions.contains_key(&id) {
            let config = self.config_with(checksum);
            let session = Session::new(config, ids, now).expect("config validated");
            self.stats.sessions_opened += 1;
            self.insert(id, session);
        }
        &mut self.sessions.get_mut(&id).expect("just inserted").session
    }

    /// The endpoint's configuration, or a copy with `checksum` if it differs.
    fn config_with(&self, checksum: bool) -> Arc<Config> {
        if checksum == self.config.checksum {
            self.config.clone()
        } else {
            Arc::new(Config {
                checksum,
                ..(*self.config).clone()
            })
        }
    }

    /// Adds a session, with the share it now has; only its own timer is armed.
    fn insert(&mut self, id: u32, session: Session) {
        self.sessions.insert(id, Entry::new(session));
        self.reshare();
        let e = self.sessions.get_mut(&id).expect("just inserted");
        if let Some(share) = self.share {
            e.session.set_credit(share);
        }
        e.arm(&mut self.timers, id);
    }

    /// Resumes a session frozen into `dormant` (handed out by [`Endpoint::poll_dormant`], or
    /// frozen by the caller with [`Session::freeze`]) at `now`, with its share of the receive
    /// budget. A caller that keeps dormant sessions looks a datagram's id up itself and
    /// resumes before [`Endpoint::handle_datagram`] (whose `accept` is for first contact
    /// only) or [`Endpoint::handle_run`], and before sending on it: to the endpoint the id
    /// is unknown (`send` answers `PeerFailed`), and opening it afresh instead would restart
    /// its numbering, which the peer would drop as duplicates. If a session with this local id
    /// is open already, that one is returned unchanged.
    pub fn resume(&mut self, ids: SessionIds, dormant: Dormant, now: Instant) -> &mut Session {
        let id = ids.local_id;
        if !self.sessions.contains_key(&id) {
            let config = self.config_with(dormant.checksum());
            let session = Session::resume(config, ids, dormant, now).expect("config validated");
            self.stats.sessions_resumed += 1;
            self.insert(id, session);
        }
        &mut self.sessions.get_mut(&id).expect("just inserted").session
    }

    /// Next session frozen by the endpoint: it is no longer among [`Endpoint::sessions`], and
    /// its local id is unknown to the endpoint until [`Endpoint::resume`]. Frozen sessions
    /// queue up until taken.
    pub fn poll_dormant(&mut self) -> Option<Slept> {
        let s = self.slept.pop_front();
        trim!(self.slept, 16);
        s
    }

    /// The session with this local id.
    pub fn session(&self, local_id: u32) -> Option<&Session> {
        self.sessions.get(&local_id).map(|e| &e.session)
    }

    /// Removes a session (after it failed, or when the peer is gone).
    pub fn remove(&mut self, local_id: u32) -> Option<Session> {
        let s = self.sessions.remove(&local_id).map(|e| e.session);
        if s.is_some() {
            self.reshare();
            self.give_back_room();
        }
        s
    }

    /// After a session closed or went dormant: the tables that grew with the open sessions
    /// give their room back (each slot of the map holds a whole session).
    fn give_back_room(&mut self) {
        // Its slots hold whole sessions: even a few dozen empty ones are worth giving back.
        trim!(self.sessions, 64);
        trim!(self.tx_ready);
        trim!(self.ev_ready);
        trim!(self.owing);
    }

    /// Number of open sessions (dormant ones are the caller's and not counted).
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are no sessions.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Queues a message on an open session; its sender waits for the acknowledgement.
    pub fn send(
        &mut self,
        local_id: u32,
        now: Instant,
        data: impl Into<Bytes>,
    ) -> Result<MsgId, SendError> {
        self.send_parts(local_id, now, Bytes::new(), data.into(), true)
            .map_err(|r| r.error)
    }

    /// Queues the message `head` then `body` on an open session, without joining them (see
    /// [`Session::send_parts`], also for `awaited`); a refused message comes back with the
    /// reason.
    pub fn send_parts(
        &mut self,
        local_id: u32,
        now: Instant,
        head: Bytes,
        body: Bytes,
        awaited: bool,
    ) -> Result<MsgId, Refused> {
        let Some(e) = self.sessions.get_mut(&local_id) else {
            return Err(Refused {
                error: SendError::PeerFailed,
                head,
                body,
            });
        };
        let r = e.session.send_parts(now, head, body, awaited);
        Self::touch(
            &mut self.tx_ready,
            &mut self.ev_ready,
            &mut self.timers,
            local_id,
            e,
        );
        self.compact_timers();
        r
    }

    /// The caller read its input (the socket every session shares) to the end at `now`. See
    /// [`Session::input_drained`]: without it no duplicate is taken for the sign of a lost ACK.
    pub fn input_drained(&mut self, now: Instant) {
        self.drained_at = Some(now);
    }

    /// The session id a datagram is addressed to, if it is long enough to carry one.
    pub fn peek_session_id(datagram: &[u8]) -> Option<u32> {
        Packet::new_checked(datagram).ok().map(|p| p.session())
    }

    /// Routes a datagram to its session. For an id without a session, `accept(id, epoch)` may
    /// return the ids to open one with (first contact); `None` drops the datagram. Returns the
    /// local id of the session that took it. A caller that keeps dormant sessions resumes the
    /// id's session ([`Endpoint::resume`]) before this call, here and for `handle_run`.
    pub fn handle_datagram<S, F>(
        &mut self,
        now: Instant,
        datagram: &[u8],
        sink: &mut S,
        accept: F,
    ) -> Result<u32, DropReason>
    where
        S: Sink + ?Sized,
        F: FnOnce(u32, u32) -> Option<SessionIds>,
    {
        let p = match Packet::new_checked(datagram) {
            Ok(p) => p,
            Err(e) => {
                self.stats.dropped_malformed += 1;
                return Err(DropReason::Malformed(e));
            }
        };
        let id = p.session();
        if !self.sessions.contains_key(&id) {
            match accept(id, p.epoch()) {
                Some(ids) if ids.local_id == id => {
                    self.open(ids, now);
                }
                _ => {
                    self.stats.dropped_unknown_session += 1;
                    return Err(DropReason::UnknownSession(id));
                }
            }
        }
        self.input(id, |s| s.handle_datagram(now, datagram, sink))
            .expect("present or opened")
            .map(|()| id)
    }

    /// [`Endpoint::handle_datagram`] for datagrams that all name session `id` (consecutive
    /// datagrams of one peer, as a receive offload hands them over): the session is found, and
    /// its timers and ready lists updated, once for all of them, and the ACK fields a stream
    /// repeats on every datagram are taken in only when they change. Only for an open session (no
    /// first contact); without one, every datagram is dropped and counted. Returns how many
    /// datagrams the session took.
    pub fn handle_run<'d, S>(
        &mut self,
        now: Instant,
        id: u32,
        run: impl IntoIterator<Item = &'d [u8]>,
        sink: &mut S,
    ) -> usize
    where
        S: Sink + ?Sized,
    {
        let mut run = run.into_iter();
        let mut malformed = 0;
        let taken = self.input(id, |s| {
            let named = run.by_ref().filter(|d| {
                let ours = Packet::new_checked(d).map(|p| p.session()) == Ok(id);
                malformed += u64::from(!ours);
                ours
            });
            s.handle_run(now, named, sink)
        });
        self.stats.dropped_malformed += malformed;
        taken.unwrap_or_else(|| {
            self.stats.dropped_unknown_session += run.count() as u64;
            0
        })
    }

    /// Gives session `id` input through `f`: stamps the latest drain first, then notes the
    /// ACK it may owe, queues it for transmission and events and arms its timer. `None` if
    /// there is no such session.
    fn input<R>(&mut self, id: u32, f: impl FnOnce(&mut Session) -> R) -> Option<R> {
        let e = self.sessions.get_mut(&id)?;
        if let Some(t) = self.drained_at {
            e.session.input_drained(t);
        }
        if let Some(share) = self.share {
            e.session.set_credit(share);
        }
        let r = f(&mut e.session);
        if !e.owing && e.session.owes_ack() {
            e.owing = true;
            self.owing.push(id);
        }
        Self::touch(
            &mut self.tx_ready,
            &mut self.ev_ready,
            &mut self.timers,
            id,
            e,
        );
        if self.owing.len() > 2 * self.sessions.len() + 64 {
            self.compact_owing();
        }
        self.compact_timers();
        Some(r)
    }

    /// Next datagram of any session, with the local id of the session that sent it.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<(u32, Transmit)> {
        self.next_one(|s| s.poll_transmit(now, buf))
    }

    /// Like [`Endpoint::poll_transmit`], leaving the datagram in pieces for gather I/O (see
    /// [`Session::poll_transmit_gather`]): the header in `header`, the payload shared.
    pub fn poll_transmit_gather(
        &mut self,
        now: Instant,
        header: &mut [u8; MAX_HEADER_LEN],
    ) -> Option<(u32, GatherTransmit)> {
        self.next_one(|s| s.poll_transmit_gather(now, header))
    }

    /// A run of datagrams from one session, for a caller that sends runs to one peer in one
    /// system call (UDP GSO): the ready sessions are polled in turn until one has a datagram,
    /// then that session is polled again as long as `each` (given the session's local id, the
    /// header as [`Endpoint::poll_transmit_gather`] leaves it, and the rest) returns true.
    /// Returns the session's local id, or `None` when no session had anything to send.
    ///
    /// The session is found, and its timers armed, once per run instead of once per datagram.
    /// Sessions take turns by runs, which `each` bounds.
    pub fn poll_transmit_run(
        &mut self,
        now: Instant,
        header: &mut [u8; MAX_HEADER_LEN],
        mut each: impl FnMut(u32, &[u8; MAX_HEADER_LEN], GatherTransmit) -> bool,
    ) -> Option<u32> {
        self.next_run(|id, s| {
            let t = s.poll_transmit_gather(now, header)?;
            Some(each(id, header, t))
        })
    }

    /// One datagram of the next ready session that has one, by `poll`.
    fn next_one<T>(&mut self, mut poll: impl FnMut(&mut Session) -> Option<T>) -> Option<(u32, T)> {
        let mut out = None;
        self.next_run(|id, s| {
            out = Some((id, poll(s)?));
            Some(false)
        });
        out
    }

    /// Polls the ready sessions in turn with `take` until one yields something, then polls
    /// that one again while `take` says to go on (`Some(true)`); `None` means the session had
    /// nothing. Returns the id of the session that yielded.
    fn next_run(&mut self, mut take: impl FnMut(u32, &mut Session) -> Option<bool>) -> Option<u32> {
        while let Some(&id) = self.tx_ready.front() {
            let Some(e) = self.sessions.get_mut(&id) else {
                self.tx_ready.pop_front();
                continue;
            };
            if let Some(t) = self.drained_at {
                // Its ACKs are stamped against the latest drain (see `Session::input_drained`).
                e.session.input_drained(t);
            }
            if let Some(share) = self.share {
                // What it sends carries the share in force (see `set_recv_budget`).
                e.session.set_credit(share);
            }
            let mut took = false;
            let emptied = loop {
                match take(id, &mut e.session) {
                    None => break true,
                    Some(more) => {
                        took = true;
                        if !more {
                            break false;
                        }
                    }
                }
            };
            // Taken off the ready list only now: were `take` to panic, the session would stay
            // where `touch` cannot requeue it.
            self.tx_ready.pop_front();
            if emptied {
                e.tx_queued = false;
            } else {
                // Round robin: a busy session yields to the next one after each run.
                self.tx_ready.push_back(id);
            }
            if took {
                e.arm(&mut self.timers, id);
                return Some(id);
            }
        }
        None
    }

    /// Whether some session may have a datagram or an event to poll (the ready lists are not
    /// empty): when false, `poll_transmit*` and `poll_event` would return `None` at once.
    pub fn has_pending(&self) -> bool {
        !self.tx_ready.is_empty() || !self.ev_ready.is_empty()
    }

    /// Next event of any session, with its local id.
    pub fn poll_event(&mut self) -> Option<(u32, Event)> {
        while let Some(&id) = self.ev_ready.front() {
            let Some(e) = self.sessions.get_mut(&id) else {
                self.ev_ready.pop_front();
                continue;
            };
            if let Some(ev) = e.session.poll_event() {
                return Some((id, ev));
            }
            e.ev_queued = false;
            self.ev_ready.pop_front();
            // Events pending kept it from going dormant; now its dormancy can be armed.
            e.arm(&mut self.timers, id);
        }
        None
    }

    /// Makes every ACK owed leave with the next transmissions instead of waiting for its
    /// batch to fill or its delay to pass. For a caller about to stop polling (a progress
    /// thread going back to sleep while the application computes): waiting would only mean
    /// waking again to send the ACK, and no reply will come to carry it.
    pub fn flush_acks(&mut self) {
        let mut owing = std::mem::take(&mut self.owing);
        for id in owing.drain(..) {
            let Some(e) = self.sessions.get_mut(&id) else {
                continue;
            };
            e.owing = false;
            if e.session.owes_ack() {
                e.session.request_ack();
                Self::touch(
                    &mut self.tx_ready,
                    &mut self.ev_ready,
                    &mut self.timers,
                    id,
                    e,
                );
            }
        }
        self.owing = owing;
    }

    /// The earliest deadline of any session (possibly a little early: stale timer entries are
    /// dropped lazily by `handle_timeout`).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Runs every session timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        // Collect first: a handled session may report a deadline that is still due (an ACK
        // waiting for `poll_transmit`), and looping on the heap would spin on it.
        let mut due = std::mem::take(&mut self.due);
        while let Some(&Reverse((t, id))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            // A stale entry: the session was removed or went dormant (a resumed one finds
            // its deadline not due and is armed again below).
            let Some(e) = self.sessions.get_mut(&id) else {
                continue;
            };
            if e.armed == Some(t) {
                e.armed = None;
            }
            if !e.due {
                e.due = true;
                due.push(id);
            }
        }
        for id in due.drain(..) {
            let Some(e) = self.sessions.get_mut(&id) else {
                continue;
            };
            e.due = false;
            let handled = e.session.poll_timeout().is_some_and(|t| t <= now);
            if handled {
                e.session.handle_timeout(now);
            }
            if e.session.dormant_at().is_some_and(|t| t <= now) {
                self.put_to_sleep(id);
            } else if handled {
                Self::touch(
                    &mut self.tx_ready,
                    &mut self.ev_ready,
                    &mut self.timers,
                    id,
                    e,
                );
            } else {
                e.arm(&mut self.timers, id);
            }
        }
        self.due = due;
        trim!(self.due);
        self.compact_timers();
        trim!(self.timers);
    }

    /// Freezes session `id`, due to go dormant, and takes it out. Its entries in the ready
    /// lists, the timer heap and `owing` are left to be dropped when reached, as a removed
    /// session's are.
    fn put_to_sleep(&mut self, id: u32) {
        let Some(e) = self.sessions.remove(&id) else {
            return;
        };
        let dormant = e
            .session
            .freeze()
            .expect("dormant_at is only set when idle");
        self.slept.push_back(Slept {
            ids: e.session.ids(),
            dormant,
            stats: *e.session.stats(),
        });
        self.stats.sessions_frozen += 1;
        self.reshare();
        self.give_back_room();
    }

    /// A session that goes dormant leaves its id in `owing` until `flush_acks`, which a caller
    /// need not call; resumed, it may be listed again. Rebuilt once the stale ids outnumber
    /// the sessions, which amortises to O(1) per push, as for the timer heap.
    fn compact_owing(&mut self) {
        self.owing.clear();
        let owing = self.sessions.iter().filter(|(_, e)| e.owing);
        self.owing.extend(owing.map(|(&id, _)| id));
    }

    /// Every touch pushes a deadline and stale ones are only dropped when due; rebuild the heap
    /// once it holds several entries per session, which amortises to O(1) per push.
    fn compact_timers(&mut self) {
        if self.timers.len() > 4 * self.sessions.len() + 64 {
            self.rebuild_timers();
        }
    }

    fn rebuild_timers(&mut self) {
        self.timers.clear();
        for (&id, e) in self.sessions.iter_mut() {
            e.armed = None;
            e.arm(&mut self.timers, id);
        }
    }

    /// Endpoint counters.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Sessions, by local id.
    pub fn sessions(&self) -> impl Iterator<Item = (u32, &Session)> {
        self.sessions.iter().map(|(&id, e)| (id, &e.session))
    }

    /// Bytes a session's slot in the session map takes (the session is stored in it).
    pub const SESSION_SLOT: usize = core::mem::size_of::<(u32, Entry)>() + 1;

    /// Bytes held by all sessions and the endpoint's own tables.
    pub fn memory(&self) -> EndpointMemory {
        let mut sessions = Memory::default();
        for e in self.sessions.values() {
            let m = e.session.memory();
            sessions.send_queue += m.send_queue;
            sessions.retransmit += m.retransmit;
            sessions.reorder += m.reorder;
            sessions.bookkeeping += m.bookkeeping;
        }
        EndpointMemory {
            count: self.sessions.len(),
            // A session lives inside its map slot (hashbrown: the slot and a control byte).
            slots: self.sessions.capacity() * Self::SESSION_SLOT,
            tables: (self.tx_ready.capacity() + self.ev_ready.capacity()) * 4
                + self.timers.capacity() * core::mem::size_of::<Reverse<(Instant, u32)>>()
                + (self.due.capacity() + self.owing.capacity()) * 4
                + self.slept.capacity() * core::mem::size_of::<Slept>(),
            sessions,
        }
    }
}

//! The path-neutral per-peer layer: what the endpoint keeps for each peer whichever path
//! carries its messages — the message sequence both ways, and the peer's epoch.
//!
//! Every message to a peer gets the next number of one sequence when a path takes it
//! (`stamp`), and the receiver hands messages to the data path strictly in that order
//! (`order`), so the matcher sees MPI's send order whatever paths the messages took.
//!
//! [`PeerTable`] holds one slot per peer, numbered in order of first contact ([`SlotId`]): its
//! datagram address, its full name once the address vector gives it, its sequences and its
//! paths. A datagram address is looked up once, at ingress (`slot`, `find`); a send finds its
//! slot by the address vector's handle (`of_handle`), as libfabric's tcp provider finds its
//! connections by AV index; the promotion policy knows peers by their slot number. A peer
//! that sends before our address vector holds it (a stand-in) gets a slot like any other.
//!
//! Slots are per peer, not per handle: an address vector may give one peer several handles
//! (a restarted peer's new name on the same address) and never reuses one, so the table
//! keeps an index from handle to slot beside the slots, forgotten whenever the address
//! vector says handles were remapped (`forget_handles`).
//!
//! An epoch is an endpoint's nonce (`header::epoch`). A peer's epoch comes from the address
//! vector when we send to it, and from its messages; a new one is a new incarnation of the
//! peer, whose sequences start afresh both ways.

pub mod header;
pub mod order;

use std::net::SocketAddr;
use std::time::Instant;

use crate::addr::{EpName, MoreRails};
use crate::hash::{map_bytes, Index, Map};
use crate::matching::PeerId;
use crate::path::set::{PathSet, Rail, RailSet};
pub use header::{Repr as PeerHeader, LEN as HEADER};
use iwarp::verbs::AddressHandle;
use order::{Reorder, Turn, FIRST};

/// What became of an arriving message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its turn: hand it over, then call [`PeerTable::handed`].
    Now,
    /// Ahead of its turn: take it now if its handling does not depend on order
    /// ([`PeerTable::taken_ahead`]), else [`PeerTable::hold`] it.
    Ahead,
    /// Nothing to hand over: an acknowledgement alone, or dropped and counted (shorter than
    /// the header, meant for another incarnation of this endpoint, or a duplicate).
    Dropped,
}

/// Counters for the report.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PeerStats {
    /// Messages shorter than the per-peer header, or with bits set this build does not know.
    pub short: u64,
    /// Messages for an earlier incarnation of this endpoint.
    pub stale: u64,
    /// Messages handed over already.
    pub duplicates: u64,
    /// Messages held until the ones before them came.
    pub held: u64,
    /// Peers seen with a new epoch (restarted).
    pub restarts: u64,
    /// Acknowledgements sent and received alone.
    pub acks_sent: u64,
    pub acks_received: u64,
}

/// A peer's place in the table: dense, in order of first contact, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotId(pub u32);

/// One peer, laid out in words: a table of a million of them is the transport's main cost
/// per peer (see `PeerTable::memory`).
struct Slot {
    addr: SocketAddr,
    /// Its name's nonce, queue pair and TCP port (what connecting needs), when the address
    /// vector gave it (`NAMED`); the rest of the name is `addr`.
    nonce: u64,
    name_qpn: u32,
    tcp_port: u16,
    /// `NAMED`, and the sequence's flags.
    flags: u8,
    /// The matcher's id for it while the address vector does not hold it, else [`NO_HANDLE`].
    stand_in: u32,
    /// When it was last heard from while a rendezvous receive waited ([`Ticks`]).
    heard: u32,
    /// The handle whose name `name` is, and the address vector's handle for `addr` (what
    /// the matcher knows its messages by), each [`NO_HANDLE`] until looked up.
    handle: u32,
    label: u32,
    seq: Peer,
    paths: PathSet,
}

/// `Slot::flags`: the name is known.
const NAMED: u8 = 1;
/// `Slot::flags`: the peer's epoch is known.
const EPOCH: u8 = 2;
/// `Slot::flags`: it asked for an acknowledgement that no message has carried yet.
const OWED: u8 = 4;
/// `Slot::flags`: it is in the list of peers owed one (`PeerTable::owing`).
const LISTED: u8 = 8;
/// `Slot::flags`: it said it knows our name (every rail of ours is known to it), so our
/// datagrams may reach it over any rail we share.
const KNOWS_US: u8 = 16;
/// `Slot::flags`: its name has rails we keep beside the slots (`PeerTable::more`).
const MULTI: u8 = 32;

/// A slot's handle not looked up (or too large to keep).
const NO_HANDLE: u32 = u32::MAX;

/// A peer's sequences and epoch.
struct Peer {
    /// The peer's epoch, once known (`EPOCH`).
    epoch: u32,
    /// The number the next message to it gets.
    tx_next: u32,
    /// The last of our messages it acknowledged.
    acked: u32,
    rx: Reorder,
}

impl Peer {
    fn new() -> Peer {
        Peer {
            epoch: 0,
            tx_next: FIRST,
            acked: FIRST.wrapping_sub(1),
            rx: Reorder::default(),
        }
    }
}

/// Times in whole milliseconds since the table began, rounded up, 0 for never: a peer heard
/// at `t` reads as heard at most a millisecond after `t`, never before, so a liveness check
/// cannot fail a peer early; four bytes where an `Option<Instant>` takes twenty-four.
#[derive(Clone, Copy, Debug)]
struct Ticks(Instant);

impl Ticks {
    fn of(&self, at: Instant) -> u32 {
        let d = at.saturating_duration_since(self.0);
        let ms = d.as_nanos().div_ceil(1_000_000);
        u32::try_from(ms + 1).unwrap_or(u32::MAX)
    }

    fn at(&self, t: u32) -> Option<Instant> {
        let ms = t.checked_sub(1)?;
        Some(self.0 + std::time::Duration::from_millis(u64::from(ms)))
    }
}

pub struct PeerTable {
    epoch: u32,
    slots: Vec<Slot>,
    /// The one lookup by datagram address, at ingress: slot numbers, found through the slots.
    by_addr: Index,
    /// Heap bytes of every peer's reorder stage, kept as they change rather than summed over
    /// a million slots at each report.
    reorder_bytes: usize,
    clock: Ticks,
    /// From the address vector's handles (dense from 0) to slots, [`NO_HANDLE`] where unknown.
    by_handle: Vec<u32>,
    /// Peers owed an acknowledgement.
    owing: Vec<SlotId>,
    /// Slots with a stand-in id.
    stand_ins: usize,
    /// Our endpoint's rails.
    rails: u8,
    /// The rails after the first of the named peers that have several (while we have several
    /// too), and the ingress lookup for their addresses: a one-rail job keeps both empty.
    more: Map<u32, MoreRails>,
    by_rail: Map<SocketAddr, u32>,
    /// The rails taken as down for a peer (silent there with messages outstanding), by slot:
    /// empty while every rail answers.
    down: Map<u32, RailSet>,
    pub stats: PeerStats,
}

/// Whether `seq` is at or before `last` in a wrapping sequence.
pub fn covers(last: u32, seq: u32) -> bool {
    last.wrapping_sub(seq) < order::WINDOW
}

impl PeerTable {
    /// The table of an endpoint whose nonce is `nonce`.
    pub fn new(nonce: u64) -> PeerTable {
        PeerTable {
            epoch: header::epoch(nonce),
            slots: Vec::new(),
            by_addr: Index::default(),
            reorder_bytes: 0,
            clock: Ticks(Instant::now()),
            by_handle: Vec::new(),
            owing: Vec::new(),
            stand_ins: 0,
            rails: 1,
            more: Map::default(),
            by_rail: Map::default(),
            down: Map::default(),
            stats: PeerStats::default(),
        }
    }

    /// Our endpoint has `n` rails (1 by default).
    pub fn set_rails(&mut self, n: usize) {
        self.rails = u8::try_from(n.max(1)).expect("a few rails");
    }

    /// Our endpoint's rails.
    pub fn rails(&self) -> usize {
        usize::from(self.rails)
    }

    /// The slot of the peer at `addr`, a new one at first contact.
    pub fn slot(&mut self, addr: SocketAddr) -> SlotId {
        if let Some(id) = self.find(addr) {
            return id;
        }
        let at = u32::try_from(self.slots.len()).expect("fewer than 2^32 peers");
        self.slots.push(Slot {
            addr,
            nonce: 0,
            name_qpn: 0,
            tcp_port: 0,
            flags: 0,
            stand_in: NO_HANDLE,
            heard: 0,
            handle: NO_HANDLE,
            label: NO_HANDLE,
            seq: Peer::new(),
            paths: PathSet::new(),
        });
        let slots = &self.slots;
        self.by_addr.insert(&addr, at, |i| slots[i as usize].addr);
        SlotId(at)
    }

    /// The slot of the peer at `addr` (on any rail), if it has one.
    pub fn find(&self, addr: SocketAddr) -> Option<SlotId> {
        let slots = &self.slots;
        self.by_addr
            .find(&addr, |i| slots[i as usize].addr)
            .or_else(|| self.by_rail.get(&addr).copied())
            .map(SlotId)
    }

    fn at(&self, id: SlotId) -> &Slot {
        &self.slots[id.0 as usize]
    }

    fn at_mut(&mut self, id: SlotId) -> &mut Slot {
        &mut self.slots[id.0 as usize]
    }

    /// The datagram address of slot `id`.
    pub fn addr(&self, id: SlotId) -> SocketAddr {
        self.at(id).addr
    }

    /// The full name of slot `id`'s peer, if the address vector gave it.
    pub fn name(&self, id: SlotId) -> Option<EpName> {
        let s = self.at(id);
        (s.flags & NAMED != 0).then(|| EpName {
            ip: s.addr.ip(),
            udp_port: s.addr.port(),
            qpn: s.name_qpn,
            tcp_port: s.tcp_port,
            nonce: s.nonce,
            more: self.more_rails(id),
        })
    }

    fn more_rails(&self, id: SlotId) -> MoreRails {
        if self.at(id).flags & MULTI == 0 {
            return MoreRails::NONE;
        }
        self.more.get(&id.0).copied().unwrap_or(MoreRails::NONE)
    }

    /// A peer's full name, from the address vector: what connecting to it needs.
    pub fn learn(&mut self, name: &EpName) -> SlotId {
        let id = self.slot(name.udp_addr());
        let s = self.at_mut(id);
        (s.nonce, s.name_qpn, s.tcp_port) = (name.nonce, name.qpn, name.tcp_port);
        s.flags |= NAMED;
        s.paths.set_qpn(name.qpn);
        // Rails only one side has are never used: a one-rail endpoint keeps none of a peer's.
        let more = if self.rails > 1 {
            name.more
        } else {
            MoreRails::NONE
        };
        if more != self.more_rails(id) {
            self.set_more(id, more);
        }
        id
    }

    /// Slot `id`'s peer has rails `more` after its first: the ingress lookup follows.
    fn set_more(&mut self, id: SlotId, more: MoreRails) {
        for r in self.more_rails(id).iter() {
            if self.by_rail.get(&r.udp_addr()) == Some(&id.0) {
                self.by_rail.remove(&r.udp_addr());
            }
        }
        let s = &mut self.slots[id.0 as usize];
        if more.is_empty() {
            s.flags &= !MULTI;
            self.more.remove(&id.0);
            return;
        }
        s.flags |= MULTI;
        for r in more.iter() {
            self.by_rail.insert(r.udp_addr(), id.0);
        }
        self.more.insert(id.0, more);
    }

    /// The rails our datagrams to slot `id`'s peer may take: the first, and those we both
    /// have once it said it knows our name (before, it could not tell whose they are).
    pub fn rails_to(&self, id: SlotId) -> usize {
        let s = self.at(id);
        if self.rails == 1 || s.flags & (MULTI | KNOWS_US) != MULTI | KNOWS_US {
            return 1;
        }
        let theirs = 1 + self.more_rails(id).iter().count();
        theirs.min(self.rails())
    }

    /// The rails our datagrams to slot `id`'s peer may take now: those of [`rails_to`] not
    /// taken as down. Never empty: the last rail up is not taken down (a peer silent on
    /// every rail fails by the peer timeout instead).
    ///
    /// [`rails_to`]: PeerTable::rails_to
    pub fn rails_up(&self, id: SlotId) -> RailSet {
        let shared = RailSet::first(self.rails_to(id));
        match self.down.get(&id.0) {
            Some(d) => RailSet(shared.0 & !d.0),
            None => shared,
        }
    }

    /// Takes `rail` as down for slot `id`'s peer, unless it is the last one up; whether it
    /// was taken down.
    pub fn set_rail_down(&mut self, id: SlotId, rail: Rail) -> bool {
        let up = self.rails_up(id);
        if !up.contains(rail) || up.without(rail).is_empty() {
            return false;
        }
        let d = self.down.entry(id.0).or_default();
        *d = d.with(rail);
        true
    }

    /// `rail` answers slot `id`'s peer again.
    pub fn set_rail_up(&mut self, id: SlotId, rail: Rail) {
        if let Some(d) = self.down.get_mut(&id.0) {
            *d = d.without(rail);
            if d.is_empty() {
                self.down.remove(&id.0);
            }
        }
    }

    /// The peers with rails down, and which.
    pub fn rails_down(&self) -> Vec<(SlotId, RailSet)> {
        self.down.iter().map(|(&s, &d)| (SlotId(s), d)).collect()
    }

    /// The rail for slot `id`'s messages (all but rendezvous data, which is striped): the same
    /// at both ends of a pair, and spread over the rails across pairs, so that each rail
    /// carries a share of a rank's peers. While that rail is down, the lowest one up.
    pub fn home_rail(&self, id: SlotId) -> Rail {
        let n = self.rails_to(id);
        if n == 1 {
            return Rail(0);
        }
        let s = self.at(id);
        let pair = (self.epoch ^ s.seq.epoch).wrapping_mul(0x9e37_79b1) >> 16;
        let home = Rail((pair % n as u32) as u8);
        let up = self.rails_up(id);
        match up.contains(home) {
            true => home,
            false => up.iter().next().unwrap_or(home),
        }
    }

    /// The slot of the address vector's handle `h`, if it was bound ([`PeerTable::bind`])
    /// since the handles were last forgotten.
    pub fn of_handle(&self, h: u64) -> Option<SlotId> {
        let s = *self.by_handle.get(usize::try_from(h).ok()?)?;
        (s != NO_HANDLE && u64::from(self.slots[s as usize].handle) == h).then_some(SlotId(s))
    }

    /// The RD route to slot `id`'s peer on `rail`: its address there and its queue pair.
    pub fn rd_route(&self, id: SlotId, rail: Rail) -> Option<AddressHandle> {
        let s = self.at(id);
        let qpn = s.paths.qpn()?;
        let addr = match rail.0 {
            0 => s.addr,
            r => self
                .more_rails(id)
                .0
                .get(usize::from(r) - 1)
                .copied()??
                .udp_addr(),
        };
        Some(AddressHandle::new(addr, qpn))
    }

    /// Slot `id`'s peer sent from queue pair `qpn`.
    pub fn heard_qpn(&mut self, id: SlotId, qpn: u32) {
        self.at_mut(id).paths.set_qpn(qpn);
    }

    /// Handle `h` of the address vector names `name`: its peer's slot learns it, and the
    /// handle finds the slot from now on.
    pub fn bind(&mut self, h: u64, name: &EpName) -> SlotId {
        let id = self.learn(name);
        let Some(h) = u32::try_from(h).ok().filter(|&h| h != NO_HANDLE) else {
            return id;
        };
        let i = h as usize;
        if self.by_handle.len() <= i {
            self.by_handle.resize(i + 1, NO_HANDLE);
        }
        self.by_handle[i] = id.0;
        self.at_mut(id).handle = h;
        id
    }

    /// The address vector's handle for slot `id`'s address, if looked up since the handles
    /// were last forgotten.
    pub fn label(&self, id: SlotId) -> Option<u32> {
        Some(self.at(id).label).filter(|&l| l != NO_HANDLE)
    }

    pub fn set_label(&mut self, id: SlotId, h: u32) {
        self.at_mut(id).label = h;
    }

    /// The address vector remapped handles: every handle is looked up again.
    pub fn forget_handles(&mut self) {
        self.by_handle.clear();
        for s in &mut self.slots {
            s.handle = NO_HANDLE;
            s.label = NO_HANDLE;
        }
    }

    /// The paths to slot `id`'s peer.
    pub fn paths(&self, id: SlotId) -> &PathSet {
        &self.at(id).paths
    }

    pub fn paths_mut(&mut self, id: SlotId) -> &mut PathSet {
        &mut self.at_mut(id).paths
    }

    /// Slot `id`'s stand-in id, if it has one.
    pub fn stand_in(&self, id: SlotId) -> Option<PeerId> {
        Some(self.at(id).stand_in)
            .filter(|&s| s != NO_HANDLE)
            .map(PeerId)
    }

    /// Gives slot `id` stand-in id `s`, or takes its stand-in away (`None`).
    pub fn set_stand_in(&mut self, id: SlotId, s: Option<PeerId>) {
        let slot = &mut self.slots[id.0 as usize];
        match (slot.stand_in != NO_HANDLE, s.is_some()) {
            (false, true) => self.stand_ins += 1,
            (true, false) => self.stand_ins -= 1,
            _ => {}
        }
        debug_assert_ne!(
            s,
            Some(PeerId(NO_HANDLE)),
            "stand-ins are numbered below ANY"
        );
        slot.stand_in = s.map_or(NO_HANDLE, |p| p.0);
    }

    /// Slot `id`'s peer was heard from by `at`.
    pub fn hear(&mut self, id: SlotId, at: Instant) {
        let t = self.clock.of(at);
        self.at_mut(id).heard = t;
    }

    /// When slot `id`'s peer was last heard from (while a rendezvous receive waited), to
    /// the millisecond above.
    pub fn heard(&self, id: SlotId) -> Option<Instant> {
        self.clock.at(self.at(id).heard)
    }

    /// Whether any peer has a stand-in id.
    pub fn has_stand_ins(&self) -> bool {
        self.stand_ins > 0
    }

    /// Every peer with a stand-in id, and that id.
    pub fn stand_ins(&self) -> Vec<(SlotId, PeerId)> {
        if self.stand_ins == 0 {
            return Vec::new();
        }
        let with = |(i, s): (usize, &Slot)| {
            (s.stand_in != NO_HANDLE).then_some((SlotId(i as u32), PeerId(s.stand_in)))
        };
        self.slots.iter().enumerate().filter_map(with).collect()
    }

    /// Slot `id`'s peer has epoch `epoch` (its nonce).
    fn meet(&mut self, id: SlotId, epoch: u32) -> &mut Slot {
        let s = &mut self.slots[id.0 as usize];
        if s.flags & EPOCH == 0 || s.seq.epoch != epoch {
            if s.flags & EPOCH != 0 {
                self.stats.restarts += 1;
            }
            self.reorder_bytes -= s.seq.rx.memory();
            s.seq = Peer::new();
            s.seq.epoch = epoch;
            // A new incarnation has yet to learn our name.
            s.flags = (s.flags & !(OWED | LISTED | KNOWS_US)) | EPOCH;
        }
        s
    }

    /// We are about to send to slot `id`'s peer, whose nonce the address vector says is
    /// `nonce`.
    pub fn know(&mut self, id: SlotId, nonce: u64) {
        self.meet(id, header::epoch(nonce));
    }

    /// The header of the next message to slot `id`, numbering it; `ack_now` asks the peer to
    /// acknowledge it promptly. A peer never sent to nor heard from gets epoch 0, which it
    /// drops as stale.
    pub fn stamp(&mut self, id: SlotId, ack_now: bool) -> PeerHeader {
        let epoch = self.epoch;
        let s = self.at_mut(id);
        let seq = s.seq.tx_next;
        s.seq.tx_next = seq.wrapping_add(1);
        s.flags &= !OWED;
        PeerHeader {
            flags: if ack_now { header::ACK_NOW } else { 0 } | s.named_flag(),
            seq,
            ack: s.seq.rx.last(),
            src_epoch: epoch,
            dst_epoch: s.dst_epoch(),
        }
    }

    /// The message last stamped for slot `id` was not sent after all.
    pub fn unstamp(&mut self, id: SlotId) {
        let peer = &mut self.at_mut(id).seq;
        peer.tx_next = peer.tx_next.wrapping_sub(1);
    }

    /// An acknowledgement alone for slot `id` (asking for one back if `ack_now`).
    pub fn ack_only(&mut self, id: SlotId, ack_now: bool) -> PeerHeader {
        let epoch = self.epoch;
        let s = &mut self.slots[id.0 as usize];
        s.flags &= !OWED;
        self.stats.acks_sent += 1;
        PeerHeader {
            flags: header::ACK_ONLY | if ack_now { header::ACK_NOW } else { 0 } | s.named_flag(),
            seq: 0,
            ack: s.seq.rx.last(),
            src_epoch: epoch,
            dst_epoch: s.dst_epoch(),
        }
    }

    /// Peers that asked for an acknowledgement no message carried since; the list is
    /// emptied.
    pub fn take_owing(&mut self) -> Vec<SlotId> {
        let mut owing = std::mem::take(&mut self.owing);
        owing.retain(|&id| {
            let s = &mut self.slots[id.0 as usize];
            s.flags &= !LISTED;
            s.flags & OWED != 0
        });
        owing
    }

    /// Whether slot `id`'s peer still waits for an acknowledgement it asked for.
    pub fn owes(&self, id: SlotId) -> bool {
        self.at(id).flags & OWED != 0
    }

    /// Whether any peer waits for an acknowledgement it asked for.
    pub fn owing(&self) -> bool {
        !self.owing.is_empty()
    }

    /// The last of our messages slot `id`'s peer acknowledged.
    pub fn acked(&self, id: SlotId) -> u32 {
        self.at(id).seq.acked
    }

    /// Judges a message from slot `id`'s peer: its verdict, number, and the message behind
    /// the header.
    pub fn arrive<'a>(&mut self, id: SlotId, bytes: &'a [u8]) -> (Verdict, u32, &'a [u8]) {
        let Ok((h, body)) = header::split(bytes) else {
            self.stats.short += 1;
            return (Verdict::Dropped, 0, bytes);
        };
        if h.dst_epoch != self.epoch {
            self.stats.stale += 1;
            return (Verdict::Dropped, h.seq, body);
        }
        let s = self.meet(id, h.src_epoch);
        if h.flags & header::NAMED != 0 {
            s.flags |= KNOWS_US;
        }
        let peer = &mut s.seq;
        if covers(h.ack, peer.acked) && covers(peer.tx_next.wrapping_sub(1), h.ack) {
            peer.acked = h.ack;
        }
        let turn = peer.rx.turn(h.seq);
        // Listed again whenever it asks: an acknowledgement owed while no path could carry
        // it (its connection had just gone) is owed still, and a later ask must reach the list.
        if h.flags & header::ACK_NOW != 0 {
            self.owe(id);
        }
        if h.flags & header::ACK_ONLY != 0 {
            self.stats.acks_received += 1;
            return (Verdict::Dropped, 0, &[]);
        }
        let verdict = match turn {
            Turn::Now => Verdict::Now,
            Turn::Ahead => Verdict::Ahead,
            Turn::Past => {
                self.stats.duplicates += 1;
                Verdict::Dropped
            }
        };
        (verdict, h.seq, body)
    }

    /// Whether a message starting with `bytes` (its header at least) would be handed over,
    /// in its turn or ahead of it, if it arrived whole now. Changes nothing: the check before
    /// a message is read in place, whose [`PeerTable::arrive`] comes once it is whole.
    pub fn would_take(&self, id: SlotId, bytes: &[u8]) -> bool {
        let Ok((h, _)) = header::split(bytes) else {
            return false;
        };
        let s = self.at(id);
        h.dst_epoch == self.epoch
            && h.flags & header::ACK_ONLY == 0
            && s.flags & EPOCH != 0
            && s.seq.epoch == h.src_epoch
            && s.seq.rx.turn(h.seq) != Turn::Past
    }

    /// The message whose turn it was (from slot `id`) was handed over.
    pub fn handed(&mut self, id: SlotId) {
        self.at_mut(id).seq.rx.advance();
    }

    /// Runs `f` on slot `id`'s reorder stage, keeping the count of what the stages hold.
    fn reorder<R>(&mut self, id: SlotId, f: impl FnOnce(&mut Reorder) -> R) -> R {
        let rx = &mut self.slots[id.0 as usize].seq.rx;
        let before = rx.memory();
        let r = f(rx);
        self.reorder_bytes = self.reorder_bytes - before + rx.memory();
        r
    }

    /// Message `seq` from slot `id` was handled ahead of its turn.
    pub fn taken_ahead(&mut self, id: SlotId, seq: u32) {
        self.reorder(id, |rx| rx.done_ahead(seq));
    }

    /// Message `seq` from slot `id` (`body`, behind the header) waits for its turn.
    pub fn hold(&mut self, id: SlotId, seq: u32, body: &[u8]) {
        self.stats.held += 1;
        self.reorder(id, |rx| rx.hold(seq, body));
    }

    /// The next held message of slot `id` whose turn has come.
    ///
    /// An ask for an acknowledgement that came with a message ahead of its turn was answered
    /// (if at all) before the message was handed over, so the answer did not cover it; its
    /// sender, waiting on its connection, would wait for a probe. Once the sequence passes
    /// such messages, the peer is owed one again.
    pub fn ready(&mut self, id: SlotId) -> Option<Box<[u8]>> {
        let before = self.at(id).seq.rx.last();
        let got = self.reorder(id, Reorder::ready);
        if self.at(id).seq.rx.last() != before {
            self.owe(id);
        }
        got
    }

    /// Slot `id`'s peer is owed an acknowledgement.
    fn owe(&mut self, id: SlotId) {
        let s = &mut self.slots[id.0 as usize];
        s.flags |= OWED;
        if s.flags & LISTED == 0 {
            s.flags |= LISTED;
            self.owing.push(id);
        }
    }

    /// Heap bytes: the slots, the lookup, the owed list, and what each peer holds.
    pub fn memory(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.by_addr.bytes()
            + self.by_handle.capacity() * std::mem::size_of::<u32>()
            + self.owing.capacity() * std::mem::size_of::<SlotId>()
            + self.reorder_bytes
            + map_bytes(&self.more)
            + map_bytes(&self.by_rail)
            + map_bytes(&self.down)
    }
}

impl Slot {
    /// [`header::NAMED`] if we know its name: it may then send to us over any rail.
    fn named_flag(&self) -> u8 {
        if self.flags & NAMED != 0 {
            header::NAMED
        } else {
            0
        }
    }

    /// The epoch our messages to it carry: 0 while unknown, which it drops as stale.
    fn dst_epoch(&self) -> u32 {
        if self.flags & EPOCH != 0 {
            self.seq.epoch
        } else {
            0
        }
    }
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

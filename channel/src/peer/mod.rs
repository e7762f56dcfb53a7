//! The path-neutral per-peer layer: what the endpoint keeps for each peer whichever path
//! carries its messages — the message sequence both ways, and the peer's epoch.
//!
//! Every message to a peer gets the next number of one sequence when a path takes it
//! (`stamp`), and the receiver hands messages to the data path strictly in that order
//! (`order`), so the matcher sees MPI's send order whatever paths the messages took.
//!
//! [`PeerTable`] holds one slot per peer, numbered in order of first contact ([`SlotId`]): its
//! datagram address, its full name once the address vector gives it, and its sequences. A
//! datagram address is looked up once (`slot`, `find`); the promotion policy knows peers by
//! their slot number. A peer that sends before our address vector holds it (a stand-in) gets
//! a slot like any other.
//!
//! An epoch is an endpoint's nonce (`header::epoch`). A peer's epoch comes from the address
//! vector when we send to it, and from its messages; a new one is a new incarnation of the
//! peer, whose sequences start afresh both ways.

pub mod header;
pub mod order;

use std::net::SocketAddr;
use std::time::Instant;

use crate::addr::EpName;
use crate::hash::Map;
use crate::matching::PeerId;
pub use header::{Repr as PeerHeader, LEN as HEADER};
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

/// One peer.
struct Slot {
    addr: SocketAddr,
    /// Its full name (the TCP port a connection needs), from the address vector.
    name: Option<EpName>,
    /// The matcher's id for it while the address vector does not hold it.
    stand_in: Option<PeerId>,
    /// When it was last heard from while a rendezvous receive waited.
    heard: Option<Instant>,
    seq: Peer,
}

/// A peer's sequences and epoch.
struct Peer {
    /// The peer's epoch, once known.
    epoch: Option<u32>,
    /// The number the next message to it gets.
    tx_next: u32,
    /// The last of our messages it acknowledged.
    acked: u32,
    /// It asked for an acknowledgement that no message has carried yet.
    owed: bool,
    /// It is in the list of peers owed one (`PeerTable::owing`).
    listed: bool,
    rx: Reorder,
}

impl Peer {
    fn new() -> Peer {
        Peer {
            epoch: None,
            tx_next: FIRST,
            acked: FIRST.wrapping_sub(1),
            owed: false,
            listed: false,
            rx: Reorder::default(),
        }
    }
}

pub struct PeerTable {
    epoch: u32,
    slots: Vec<Slot>,
    /// The one lookup by datagram address, at ingress.
    by_addr: Map<SocketAddr, SlotId>,
    /// Peers owed an acknowledgement.
    owing: Vec<SlotId>,
    /// Slots with a stand-in id.
    stand_ins: usize,
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
            by_addr: Map::default(),
            owing: Vec::new(),
            stand_ins: 0,
            stats: PeerStats::default(),
        }
    }

    /// The slot of the peer at `addr`, a new one at first contact.
    pub fn slot(&mut self, addr: SocketAddr) -> SlotId {
        if let Some(&id) = self.by_addr.get(&addr) {
            return id;
        }
        let id = SlotId(u32::try_from(self.slots.len()).expect("fewer than 2^32 peers"));
        self.slots.push(Slot {
            addr,
            name: None,
            stand_in: None,
            heard: None,
            seq: Peer::new(),
        });
        self.by_addr.insert(addr, id);
        id
    }

    /// The slot of the peer at `addr`, if it has one.
    pub fn find(&self, addr: SocketAddr) -> Option<SlotId> {
        self.by_addr.get(&addr).copied()
    }

    /// The datagram address of slot `id`.
    pub fn addr(&self, id: SlotId) -> SocketAddr {
        self.slots[id.0 as usize].addr
    }

    /// The full name of slot `id`'s peer, if the address vector gave it.
    pub fn name(&self, id: SlotId) -> Option<EpName> {
        self.slots[id.0 as usize].name
    }

    /// A peer's full name, from the address vector: what connecting to it needs.
    pub fn learn(&mut self, name: &EpName) {
        let id = self.slot(name.udp_addr());
        self.slots[id.0 as usize].name = Some(*name);
    }

    /// The stand-in id of the peer at `addr`, if it has one.
    pub fn stand_in(&self, addr: SocketAddr) -> Option<PeerId> {
        self.slots[self.find(addr)?.0 as usize].stand_in
    }

    /// Gives the peer at `addr` stand-in id `id`, or takes its stand-in away (`None`).
    pub fn set_stand_in(&mut self, addr: SocketAddr, id: Option<PeerId>) {
        let i = self.index(addr);
        let slot = &mut self.slots[i];
        match (slot.stand_in.is_some(), id.is_some()) {
            (false, true) => self.stand_ins += 1,
            (true, false) => self.stand_ins -= 1,
            _ => {}
        }
        slot.stand_in = id;
    }

    /// The peer at `addr` was heard from by `at`.
    pub fn hear(&mut self, addr: SocketAddr, at: Instant) {
        if let Some(id) = self.find(addr) {
            self.slots[id.0 as usize].heard = Some(at);
        }
    }

    /// When the peer at `addr` was last heard from (while a rendezvous receive waited).
    pub fn heard(&self, addr: SocketAddr) -> Option<Instant> {
        self.slots[self.find(addr)?.0 as usize].heard
    }

    /// Whether any peer has a stand-in id.
    pub fn has_stand_ins(&self) -> bool {
        self.stand_ins > 0
    }

    /// Every peer with a stand-in id, and that id.
    pub fn stand_ins(&self) -> Vec<(SocketAddr, PeerId)> {
        if self.stand_ins == 0 {
            return Vec::new();
        }
        let with = |s: &Slot| Some((s.addr, s.stand_in?));
        self.slots.iter().filter_map(with).collect()
    }

    fn get(&self, addr: SocketAddr) -> Option<&Peer> {
        let id = self.by_addr.get(&addr)?;
        Some(&self.slots[id.0 as usize].seq)
    }

    fn get_mut(&mut self, addr: SocketAddr) -> Option<&mut Peer> {
        let id = self.by_addr.get(&addr)?;
        Some(&mut self.slots[id.0 as usize].seq)
    }

    /// The index of `addr`'s slot, a new one at first contact (an index, not a borrow, so
    /// that the stats can be counted beside it).
    fn index(&mut self, addr: SocketAddr) -> usize {
        self.slot(addr).0 as usize
    }

    /// The peer at `addr` has epoch `epoch` (its nonce).
    fn meet(&mut self, addr: SocketAddr, epoch: u32) -> &mut Peer {
        let i = self.index(addr);
        let peer = &mut self.slots[i].seq;
        if peer.epoch != Some(epoch) {
            if peer.epoch.is_some() {
                self.stats.restarts += 1;
            }
            *peer = Peer::new();
            peer.epoch = Some(epoch);
        }
        peer
    }

    /// We are about to send to the address vector's entry `addr` with nonce `nonce`.
    pub fn know(&mut self, addr: SocketAddr, nonce: u64) {
        self.meet(addr, header::epoch(nonce));
    }

    /// The header of the next message to `addr`, numbering it; `ack_now` asks the peer to
    /// acknowledge it promptly. A peer never sent to nor heard from gets epoch 0, which it
    /// drops as stale.
    pub fn stamp(&mut self, addr: SocketAddr, ack_now: bool) -> PeerHeader {
        let epoch = self.epoch;
        let i = self.index(addr);
        let peer = &mut self.slots[i].seq;
        let seq = peer.tx_next;
        peer.tx_next = seq.wrapping_add(1);
        peer.owed = false;
        PeerHeader {
            flags: if ack_now { header::ACK_NOW } else { 0 },
            seq,
            ack: peer.rx.last(),
            src_epoch: epoch,
            dst_epoch: peer.epoch.unwrap_or(0),
        }
    }

    /// The message last stamped for `addr` was not sent after all.
    pub fn unstamp(&mut self, addr: SocketAddr) {
        if let Some(peer) = self.get_mut(addr) {
            peer.tx_next = peer.tx_next.wrapping_sub(1);
        }
    }

    /// An acknowledgement alone for `addr` (asking for one back if `ack_now`).
    pub fn ack_only(&mut self, addr: SocketAddr, ack_now: bool) -> PeerHeader {
        let epoch = self.epoch;
        let i = self.index(addr);
        let peer = &mut self.slots[i].seq;
        peer.owed = false;
        self.stats.acks_sent += 1;
        PeerHeader {
            flags: header::ACK_ONLY | if ack_now { header::ACK_NOW } else { 0 },
            seq: 0,
            ack: peer.rx.last(),
            src_epoch: epoch,
            dst_epoch: peer.epoch.unwrap_or(0),
        }
    }

    /// Peers that asked for an acknowledgement no message carried since; the list is
    /// emptied.
    pub fn take_owing(&mut self) -> Vec<SocketAddr> {
        let owing = std::mem::take(&mut self.owing);
        owing
            .into_iter()
            .filter_map(|id| {
                let slot = &mut self.slots[id.0 as usize];
                slot.seq.listed = false;
                slot.seq.owed.then_some(slot.addr)
            })
            .collect()
    }

    /// Whether `addr` still waits for an acknowledgement it asked for.
    pub fn owes(&self, addr: SocketAddr) -> bool {
        self.get(addr).is_some_and(|p| p.owed)
    }

    /// Whether any peer waits for an acknowledgement it asked for.
    pub fn owing(&self) -> bool {
        !self.owing.is_empty()
    }

    /// The last of our messages `addr` acknowledged.
    pub fn acked(&self, addr: SocketAddr) -> Option<u32> {
        self.get(addr).map(|p| p.acked)
    }

    /// Judges a message from `src`: its verdict, number, and the message behind the header.
    pub fn arrive<'a>(&mut self, src: SocketAddr, bytes: &'a [u8]) -> (Verdict, u32, &'a [u8]) {
        let Ok((h, body)) = header::split(bytes) else {
            self.stats.short += 1;
            return (Verdict::Dropped, 0, bytes);
        };
        if h.dst_epoch != self.epoch {
            self.stats.stale += 1;
            return (Verdict::Dropped, h.seq, body);
        }
        let peer = self.meet(src, h.src_epoch);
        if covers(h.ack, peer.acked) && covers(peer.tx_next.wrapping_sub(1), h.ack) {
            peer.acked = h.ack;
        }
        // Listed again whenever it asks: an acknowledgement owed while no path could carry
        // it (its connection had just gone) is owed still, and a later ask must reach the list.
        let ask = h.flags & header::ACK_NOW != 0;
        peer.owed |= ask;
        let list = ask && !peer.listed;
        peer.listed |= list;
        let turn = peer.rx.turn(h.seq);
        if list {
            let id = self.by_addr[&src];
            self.owing.push(id);
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
    pub fn would_take(&self, src: SocketAddr, bytes: &[u8]) -> bool {
        let Ok((h, _)) = header::split(bytes) else {
            return false;
        };
        h.dst_epoch == self.epoch
            && h.flags & header::ACK_ONLY == 0
            && self
                .get(src)
                .is_some_and(|p| p.epoch == Some(h.src_epoch) && p.rx.turn(h.seq) != Turn::Past)
    }

    /// The message whose turn it was (from `src`) was handed over.
    pub fn handed(&mut self, src: SocketAddr) {
        if let Some(p) = self.get_mut(src) {
            p.rx.advance();
        }
    }

    /// Message `seq` from `src` was handled ahead of its turn.
    pub fn taken_ahead(&mut self, src: SocketAddr, seq: u32) {
        if let Some(p) = self.get_mut(src) {
            p.rx.done_ahead(seq);
        }
    }

    /// Message `seq` from `src` (`body`, behind the header) waits for its turn.
    pub fn hold(&mut self, src: SocketAddr, seq: u32, body: &[u8]) {
        if let Some(&id) = self.by_addr.get(&src) {
            self.stats.held += 1;
            self.slots[id.0 as usize].seq.rx.hold(seq, body);
        }
    }

    /// The next held message of `src` whose turn has come.
    pub fn ready(&mut self, src: SocketAddr) -> Option<Box<[u8]>> {
        self.get_mut(src)?.rx.ready()
    }

    /// Heap bytes: the slots, the lookup, the owed list, and what each peer holds.
    pub fn memory(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + crate::hash::map_bytes(&self.by_addr)
            + self.owing.capacity() * std::mem::size_of::<SlotId>()
            + self.slots.iter().map(|s| s.seq.rx.memory()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Messages stamped by `a` for `b` pass `b`'s judgement in order; a restarted `a` starts
    /// afresh; one meant for an earlier `b` is dropped.
    #[test]
    fn sequences_follow_incarnations() {
        let (a_addr, b_addr) = (addr(1), addr(2));
        let mut a = PeerTable::new(10);
        let mut b = PeerTable::new(20);
        a.know(b_addr, 20);
        let m1 = a.stamp(b_addr, false).encode();
        let m2 = a.stamp(b_addr, false).encode();
        assert_eq!(b.arrive(a_addr, &m2).0, Verdict::Ahead);
        b.hold(a_addr, header::split(&m2).unwrap().0.seq, b"two");
        assert_eq!(b.arrive(a_addr, &m1).0, Verdict::Now);
        b.handed(a_addr);
        assert_eq!(b.ready(a_addr).as_deref(), Some(&b"two"[..]));
        assert_eq!(b.ready(a_addr), None);
        assert_eq!(b.arrive(a_addr, &m1).0, Verdict::Dropped);
        assert_eq!(b.stats.duplicates, 1);
        // The acknowledgement carries what was handed over.
        assert_eq!(b.stamp(a_addr, false).ack, 2);

        // `a` restarts: its first message is in turn again.
        let mut a2 = PeerTable::new(11);
        a2.know(b_addr, 20);
        assert_eq!(
            b.arrive(a_addr, &a2.stamp(b_addr, false).encode()).0,
            Verdict::Now
        );
        assert_eq!(b.stats.restarts, 1);

        // A message for an incarnation of `b` that is gone.
        a.know(b_addr, 21);
        assert_eq!(
            b.arrive(a_addr, &a.stamp(b_addr, false).encode()).0,
            Verdict::Dropped
        );
        assert_eq!(b.stats.stale, 1);
        assert_eq!(b.arrive(a_addr, &[0; 3]).0, Verdict::Dropped);
        assert_eq!(b.stats.short, 1);
    }

    #[test]
    fn an_unsent_stamp_is_given_back() {
        let mut a = PeerTable::new(1);
        a.know(addr(2), 2);
        let first = a.stamp(addr(2), false).seq;
        a.unstamp(addr(2));
        assert_eq!(a.stamp(addr(2), false).seq, first);
    }

    /// Acknowledgements: asked for with ACK_NOW, owed until a message carries one, taken
    /// only within what was sent, and alone they hand nothing over.
    #[test]
    fn acknowledgements_are_owed_carried_and_bounded() {
        let (a_addr, b_addr) = (addr(1), addr(2));
        let (mut a, mut b) = (PeerTable::new(10), PeerTable::new(20));
        a.know(b_addr, 20);
        for ack_now in [false, true, false] {
            let m = a.stamp(b_addr, ack_now).encode();
            assert_eq!(b.arrive(a_addr, &m).0, Verdict::Now);
            b.handed(a_addr);
        }
        assert_eq!(b.take_owing(), vec![a_addr]);
        assert_eq!(b.take_owing(), vec![], "listed once");
        let ack = b.ack_only(a_addr, false);
        assert_eq!((ack.seq, ack.ack), (0, 3));
        assert_eq!(a.acked(b_addr), Some(0));
        assert_eq!(a.arrive(b_addr, &ack.encode()).0, Verdict::Dropped);
        assert_eq!(a.acked(b_addr), Some(3));
        assert_eq!((a.stats.acks_received, b.stats.acks_sent), (1, 1));
        // An acknowledgement of what was never sent is not taken; an older one changes nothing.
        for bogus in [7, 1] {
            let mut h = b.ack_only(a_addr, false);
            h.ack = bogus;
            a.arrive(b_addr, &h.encode());
            assert_eq!(a.acked(b_addr), Some(3), "ack {bogus}");
        }
        // Owed, taken off the list, and not paid (no path could carry it): a later ask lists
        // the peer again.
        let ask = a.ack_only(b_addr, true).encode();
        b.arrive(a_addr, &ask);
        assert_eq!(b.take_owing(), vec![a_addr]);
        assert!(b.owes(a_addr));
        b.arrive(a_addr, &ask);
        assert_eq!(b.take_owing(), vec![a_addr], "asked again: listed again");
        let _ = b.ack_only(a_addr, false);
        // A message asking for an ACK and answered by one of ours clears the debt.
        let m = a.stamp(b_addr, true).encode();
        b.arrive(a_addr, &m);
        b.handed(a_addr);
        let _ = b.stamp(a_addr, false);
        assert_eq!(b.take_owing(), vec![]);
    }
}

//! The endpoint's data path: MPI messages over one reliable-datagram queue pair.
//!
//! Every message to a peer is one RD message, so the queue pair's per-peer order is the
//! order the matcher sees (MPI's non-overtaking rule). Messages up to the eager size carry
//! their bytes; longer ones are a rendezvous: RTS, the receiver matches and answers CTS with
//! how many bytes it takes, and the data follows as chunks that name the receive and their
//! offset, placed into the application's buffer as they come; the first chunks go right behind
//! the RTS, before the CTS (`push`). The queue pair completes a send
//! when the peer has acknowledged it, which is when an eager send, or a rendezvous's last
//! chunk, completes to the application (FI_DELIVERY_COMPLETE as MPICH asks for it).
//!
//! No receive buffers are posted: the queue pair lends each arriving message where it lies
//! (its receiver mode, [`iwarp::verbs::RdReceiver`]), and the bytes are copied once, into the
//! application's buffer or into an unexpected-message copy charged to the matcher's account.
//! Chunks are placed even ahead of their turn; everything else is handled in per-peer order.
//! `State` handles arrivals and queues sends; `driver` owns the queue pair.

mod arrive;
mod atomic;
pub mod budget;
mod bufs;
mod complete;
mod driver;
mod multi;
mod ops;
mod push;
mod rails;
mod receiver;
mod recv;
mod rma;
mod send;
pub(crate) mod wire;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::RdReceiver;

use crate::addr::EpName;
use crate::av::{AddressVector, ADDR_NOTAVAIL};
use crate::cq::Completion;
use crate::diag;
use crate::error::{Errno, Result};
use crate::hash::Map;
use crate::info::INJECT_SIZE;
use crate::matching::{
    Arrival, Context, Delivery, Header, Kind, Matcher, Peek, PeerId, Post, Protocol, RecvSpec,
    Taken,
};
use crate::mr::SharedMrs;
use crate::peer::{self, PeerTable, SlotId, Verdict};
use crate::sys::*;
pub use atomic::AtomicArgs;
pub use budget::Budget;
use bufs::SendBufs;
use complete::kind_flag;
pub use complete::Outputs;
pub use driver::DataPath;
use multi::MultiInFlight;
pub use multi::DEFAULT_MIN_MULTI_RECV;
use ops::{Held, Op, Outgoing, PendingSend, Recv, RndvRecv, Role};
pub use ops::{RecvArgs, RmaArgs, SendArgs, INJECT_CALL, PROVIDER_BITS};
use push::{Parked, Parking, Pieces, PushKey};
pub use wire::CHUNK;
use wire::{Matching, Msg, MATCH_HEADER};

/// Sources not in the address vector: only receives from any peer match them.
const UNKNOWN_PEER: PeerId = PeerId(u32::MAX - 1);

/// Largest eager payload: an eager message, like a chunk, fits one datagram, so it can be
/// handled where it arrived.
pub const EAGER_MAX: usize = CHUNK;

/// Rendezvous chunks posted and not yet acknowledged, across all sends: bounds the copies
/// the queue pair holds for retransmission.
const CHUNK_WINDOW: usize = 16;

/// Sends waiting for queue-pair slots before a new send is refused with FI_EAGAIN.
const BACKLOG_MAX: usize = 4096;

/// Bytes of copied sends held for the peers (queued, or unacknowledged) before a new send is
/// refused with FI_EAGAIN, by default (`Budget::copies`). The counts above bound messages, not
/// bytes: an endpoint flooding a peer that does not keep up would otherwise hold up to 20480
/// copies of 32 KiB.
#[cfg(test)]
const COPIED_MAX: usize = budget::DEFAULT;

/// Queue-pair completions taken per poll.
const POLL_BATCH: usize = 64;

/// Matcher ids from here up are stand-ins for senders the AV does not hold (below are AV
/// handles, which are insertion indices).
const STAND_IN_BASE: u32 = 0xF000_0000;

/// Counters for the memory and diagnostics report.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Messages sent and received.
    pub sent: u64,
    pub received: u64,
    /// Messages whose diwarp header did not parse.
    pub malformed: u64,
    /// Messages for no operation of ours (a finished or unknown rendezvous, say).
    pub stray: u64,
    /// Sends failed (the peer went silent, or refused).
    pub failed_sends: u64,
    /// Rendezvous receives failed because their sender went silent.
    pub failed_recvs: u64,
    /// Pushed chunks nobody kept (`push`): the receive was full or discarded the message,
    /// or held chunks would have gone past the budget.
    pub push_dropped: u64,
    /// Pushed chunks held for unexpected messages.
    pub push_parked: u64,
    /// Pushed chunks that went straight into a posted receive.
    pub push_placed: u64,
    /// Rendezvous chunks read from their connection straight into the receive.
    pub chunks_in_place: u64,
    /// Peers' RMA WRITE messages (a write's chunks) and READs placed and served from our
    /// memory regions, and those refused (no such key, out of bounds, access not granted).
    pub rma_writes_in: u64,
    pub rma_reads_in: u64,
    pub rma_refused: u64,
    /// Peers' atomic operations applied to our memory regions.
    pub atomics_in: u64,
}

/// What the data path holds, by concern, for the memory ledger.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    pub queue_pair: iwarp::verbs::RdMemory,
    /// Unexpected messages: eager copies and rendezvous requests (the matcher's account).
    pub unexpected: usize,
    pub unexpected_peak: usize,
    /// Pushed chunks held for unexpected messages, with their table.
    pub held_pushes: usize,
    pub held_pushes_peak: usize,
    /// Operations in progress and their tables, copies queued for the queue pair.
    pub rendezvous: usize,
    /// Posted receives and the matching queues' structures.
    pub matching: usize,
    /// Buffers for copied sends: the spare ones, and the unused part of those the queue pair
    /// holds (it counts the bytes in use).
    pub send_buffers: usize,
    /// The queue pair's completion and receive queues, and its completions taken per poll.
    pub completions: usize,
    /// Of the queue pair's send and retransmission bytes, those that are the application's
    /// buffers (rendezvous chunks sent from them): not transport memory.
    pub lent: usize,
    /// The per-peer layer: sequences, messages held for their turn, and the promotion
    /// policy's traffic scores.
    pub peers: usize,
    /// RC connections (`path`), and how many are open.
    pub connections: usize,
    pub connections_open: usize,
}

/// Everything but the queue pair: what the arrivals, which the queue pair lends while it is
/// being polled, are handled with. Sends it makes meanwhile wait in `tx.backlog`.
struct State {
    /// The time of the driver's current receive call or poll batch, where a rendezvous
    /// receive may start: the state reads no clock (arrivals reach it through the queue
    /// pair's and the connections' callbacks, which carry none).
    now: Instant,
    cfg: Settings,
    /// Set by `enable`.
    av: Option<Arc<AddressVector>>,
    out: Outputs,
    tx: Sending,
    rx: Receiving,
    live: Liveness,
    strangers: StandIns,
    pub stats: Stats,
    /// The domain's memory regions, which peers' RMA names (set by `enable`).
    mrs: SharedMrs,
    /// Each peer's message sequences, across paths.
    peers: PeerTable,
    /// Messages sent to and handed over from each peer since the driver last looked, for the
    /// promotion policy (kept only when peers may be promoted): address, bytes, rendezvous.
    traffic: Vec<Traffic>,
    count_traffic: bool,
}

/// What the endpoint was configured with.
struct Settings {
    name: EpName,
    eager: usize,
    /// Bytes of a rendezvous send pushed before the answer.
    push: usize,
    /// FI_DIRECTED_RECV: a receive's source address restricts it.
    directed: bool,
    pub min_multi_recv: usize,
    /// How long a rendezvous receive may go without hearing from its sender.
    stall_limit: Duration,
    /// How far traffic may grow the pools.
    budget: Budget,
}

/// Operations of ours under way: their ids, the roles of the queue-pair sends they made, what
/// waits for room in the queue pair, and the copies it holds.
struct Sending {
    next_id: u64,
    roles: Map<u64, Role>,
    sends: Map<u64, PendingSend>,
    backlog: VecDeque<Outgoing>,
    chunks_inflight: usize,
    /// Bytes of the application's buffers the queue pair holds (chunks sent from them).
    lent: usize,
    /// Buffers for copied sends, reused.
    bufs: SendBufs,
}

/// Receives and the messages that meet them.
struct Receiving {
    matcher: Matcher<Recv, Held>,
    rndv: Map<u64, RndvRecv>,
    /// Multi-receive buffers whose rendezvous pieces are still arriving.
    multi: MultiInFlight,
    /// Rendezvous receives whose sender pushes chunks into them.
    pushing_into: Map<PushKey, u64>,
    /// Pushed chunks of unexpected messages.
    parked: Parked,
}

/// One message to or from a peer, for the promotion policy.
pub(crate) struct Traffic {
    pub slot: SlotId,
    pub len: usize,
    pub rendezvous: bool,
}

/// Whether the peers we wait on are alive.
struct Liveness {
    /// Senders heard since the driver last said the time (`heard_by`): arrivals carry no
    /// time, and the batch they came in may have been long.
    fresh: Vec<SlotId>,
    /// When the rendezvous timers (`timers`) next look at the receives and sends.
    next_check: Instant,
}

/// The matcher's ids for senders the AV does not hold. A peer can send as soon as it has
/// inserted our address: before we insert its (MPICH's init), or without our ever inserting
/// it (Open MPI inserts a peer only to send to it or receive from it by name). Its messages
/// match receives from any peer at once; once the AV holds it, those still queued pass to its
/// handle, so the receives directed at it find them, in order.
struct StandIns {
    /// The next stand-in id (each peer's is in its slot of the peer table).
    next: u32,
    /// The AV's insertion count when the stand-ins were last looked up in it.
    av_seen: usize,
    /// The AV's remap count when the peer table's handles were last good (`sync_av`).
    remaps_seen: usize,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("name", &self.cfg.name)
            .field("sends", &self.tx.sends.len())
            .field("backlog", &self.tx.backlog.len())
            .finish_non_exhaustive()
    }
}

impl State {
    fn new(
        name: EpName,
        eager: usize,
        push: usize,
        stall_limit: Duration,
        budget: Budget,
        now: Instant,
    ) -> State {
        State {
            now,
            cfg: Settings {
                name,
                eager,
                push,
                directed: true,
                min_multi_recv: DEFAULT_MIN_MULTI_RECV,
                stall_limit,
                budget,
            },
            av: None,
            out: Outputs::default(),
            tx: Sending {
                next_id: 1,
                roles: Map::default(),
                sends: Map::default(),
                backlog: VecDeque::new(),
                chunks_inflight: 0,
                lent: 0,
                bufs: SendBufs::new(budget.spare),
            },
            rx: Receiving {
                matcher: Matcher::default(),
                rndv: Map::default(),
                multi: MultiInFlight::default(),
                pushing_into: Map::default(),
                parked: Parked::new(budget.held_pushes),
            },
            live: Liveness {
                fresh: Vec::new(),
                next_check: now,
            },
            strangers: StandIns {
                next: STAND_IN_BASE,
                av_seen: 0,
                remaps_seen: 0,
            },
            stats: Stats::default(),
            mrs: SharedMrs::default(),
            peers: PeerTable::new(name.nonce),
            traffic: Vec::new(),
            count_traffic: false,
        }
    }

    /// Connects the data path to what the endpoint bound. `directed`: FI_DIRECTED_RECV is on,
    /// so a receive's source address restricts it.
    pub fn enable(&mut self, av: Arc<AddressVector>, out: Outputs, directed: bool, mrs: SharedMrs) {
        self.mrs = mrs;
        self.av = Some(av);
        self.out = out;
        self.cfg.directed = directed;
    }

    fn av(&self) -> Result<&Arc<AddressVector>> {
        self.av.as_ref().ok_or(Errno::OPBADSTATE)
    }

    /// The peer table forgets the handles it knew if the AV remapped any since.
    fn sync_av(&mut self) {
        let Some(av) = self.av.as_ref() else { return };
        let remaps = av.remaps();
        if remaps != self.strangers.remaps_seen {
            self.strangers.remaps_seen = remaps;
            self.peers.forget_handles();
        }
    }

    /// The slot and name of AV handle `dest`: from the peer table's index, else from the AV
    /// (under its lock) once.
    fn resolve(&mut self, dest: u64) -> Result<(SlotId, EpName)> {
        self.sync_av();
        if let Some(slot) = self.peers.of_handle(dest) {
            let name = self.peers.name(slot).expect("a bound slot holds its name");
            return Ok((slot, name));
        }
        let name = self.av()?.lookup(dest)?;
        Ok((self.peers.bind(dest, &name), name))
    }

    /// Notes a message for the promotion policy, when peers may be promoted.
    fn log_traffic(&mut self, slot: SlotId, len: usize, rendezvous: bool) {
        if self.count_traffic {
            self.traffic.push(Traffic {
                slot,
                len,
                rendezvous,
            });
        }
    }

    fn id(&mut self) -> u64 {
        self.tx.next_id += 1;
        self.tx.next_id
    }
}

/// Whether `len` bytes at `offset` lie within what delivery `d` places.
fn fits(d: &Delivery<Recv>, offset: u64, len: usize) -> bool {
    usize::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(len))
        .is_some_and(|end| end <= d.placed)
}

/// Pushed chunks a rendezvous receive starts with.
enum Pushes {
    /// None: the sender pushed nothing, or they were dropped.
    None,
    /// They follow the RTS, which a posted receive matched.
    Coming,
    /// Held while the message was unexpected, and maybe more follow.
    Parked(Pieces),
}

/// The part of pushed bytes at `offset` of the message that the receive has room for.
fn clip<'a>(d: &Delivery<Recv>, offset: u64, bytes: &'a [u8]) -> Option<&'a [u8]> {
    room(d, offset).map(|room| &bytes[..bytes.len().min(room)])
}

/// The bytes `d` takes from `offset` on, if any.
fn room(d: &Delivery<Recv>, offset: u64) -> Option<usize> {
    let room = d.placed.checked_sub(usize::try_from(offset).ok()?)?;
    (room > 0).then_some(room)
}

/// The (offset, length) of each chunk of `bytes`.
fn chunks(bytes: Range<usize>) -> impl Iterator<Item = (usize, usize)> {
    let end = bytes.end;
    bytes
        .step_by(CHUNK)
        .map(move |at| (at, CHUNK.min(end - at)))
}

/// The matcher's id for an AV handle, if it has one (handles up to the stand-ins' range).
fn matcher_id(handle: Option<u64>) -> Option<PeerId> {
    let h = u32::try_from(handle?).ok()?;
    (h < STAND_IN_BASE).then_some(PeerId(h))
}

/// An initiator's RMA completion: fi_cq(3) defines `len` for receives only.
fn rma_completion(dir: u64, context: usize) -> Completion {
    Completion {
        op_context: context,
        flags: FI_RMA | dir,
        ..Completion::default()
    }
}

/// An initiator's atomic completion: FI_WRITE for `fi_atomic`, FI_READ for the fetching calls.
fn atomic_completion(dir: u64, context: usize) -> Completion {
    Completion {
        op_context: context,
        flags: FI_ATOMIC | dir,
        ..Completion::default()
    }
}

fn send_completion(kind: Kind, context: usize, len: usize) -> Completion {
    Completion {
        op_context: context,
        flags: FI_SEND | kind_flag(kind),
        len,
        ..Completion::default()
    }
}

#[cfg(test)]
mod atomic_tests;
#[cfg(test)]
mod auth_key_tests;
#[cfg(test)]
mod av_tests;
#[cfg(test)]
mod copy_tests;
#[cfg(test)]
mod forged_tests;
#[cfg(test)]
mod ledger_tests;
#[cfg(test)]
mod multi_tests;
#[cfg(test)]
mod path_tests;
#[cfg(test)]
mod push_tests;
#[cfg(test)]
mod rail_failure_tests;
#[cfg(test)]
mod rails_tests;
#[cfg(test)]
mod rma_tests;
#[cfg(test)]
mod scale_bench;
#[cfg(test)]
mod scale_tests;
#[cfg(test)]
mod standin_tests;
#[cfg(test)]
mod tests;

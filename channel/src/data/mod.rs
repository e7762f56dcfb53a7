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

mod atomic;
pub mod budget;
mod bufs;
mod complete;
mod driver;
mod multi;
mod ops;
mod push;
mod rma;
mod wire;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{AddressHandle, RdReceiver};

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
use crate::peer::{self, Peers, Verdict};
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
    /// The per-peer layer: sequences, and messages held for their turn.
    pub peers: usize,
    /// RC connections (`path`), and how many are open.
    pub connections: usize,
    pub connections_open: usize,
}

/// Everything but the queue pair: what the arrivals, which the queue pair lends while it is
/// being polled, are handled with. Sends it makes meanwhile wait in `tx.backlog`.
struct State {
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
    peers: Peers,
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
    pub addr: SocketAddr,
    /// Its name, when we sent to it (the AV's).
    pub name: Option<EpName>,
    pub len: usize,
    pub rendezvous: bool,
}

/// Whether the peers we wait on are alive.
struct Liveness {
    /// When each sender was last heard from, while rendezvous receives wait.
    heard: Map<SocketAddr, Instant>,
    /// When the rendezvous timers (`timers`) next look at the receives and sends.
    next_check: Instant,
}

/// The matcher's ids for senders the AV does not hold. A peer can send as soon as it has
/// inserted our address: before we insert its (MPICH's init), or without our ever inserting
/// it (Open MPI inserts a peer only to send to it or receive from it by name). Its messages
/// match receives from any peer at once; once the AV holds it, those still queued pass to its
/// handle, so the receives directed at it find them, in order.
struct StandIns {
    ids: Map<SocketAddr, PeerId>,
    next: u32,
    /// The AV's insertion count when the stand-ins were last looked up in it.
    av_seen: usize,
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
    ) -> State {
        State {
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
                heard: Map::default(),
                next_check: Instant::now(),
            },
            strangers: StandIns {
                ids: Map::default(),
                next: STAND_IN_BASE,
                av_seen: 0,
            },
            stats: Stats::default(),
            mrs: SharedMrs::default(),
            peers: Peers::new(name.nonce),
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

    /// Notes a message for the promotion policy, when peers may be promoted.
    fn log_traffic(
        &mut self,
        addr: SocketAddr,
        name: Option<EpName>,
        len: usize,
        rendezvous: bool,
    ) {
        if self.count_traffic {
            self.traffic.push(Traffic {
                addr,
                name,
                len,
                rendezvous,
            });
        }
    }

    fn id(&mut self) -> u64 {
        self.tx.next_id += 1;
        self.tx.next_id
    }

    // ---- sends ------------------------------------------------------------------------

    pub fn send(&mut self, a: SendArgs) -> Result<()> {
        let name = self.av()?.lookup(a.dest)?;
        self.peers.know(name.udp_addr(), name.nonce);
        let len = a.mem.len();
        self.log_traffic(name.udp_addr(), Some(name), len, len > self.cfg.eager);
        let inject = a.flags & FI_INJECT != 0;
        if inject && len > INJECT_SIZE {
            return Err(Errno::INVAL);
        }
        let m = Matching {
            kind: a.kind,
            tag: a.tag,
            data: a.data,
            len: len as u64,
        };
        let to = AddressHandle::new(name.udp_addr(), name.qpn);
        self.stats.sent += 1;
        if self.is_self(&name) {
            // To itself: no queue pair involved, and no rendezvous needed.
            let mut bytes = Vec::with_capacity(MATCH_HEADER + len);
            wire::eager(&mut bytes, self.cfg.name.qpn, &m);
            a.mem.read_into(0, len, &mut bytes);
            self.handle_message(to.addr, &bytes);
            let c = send_completion(a.kind, a.context, len);
            self.out.tx_done(c, a.flags, FI_SEND);
            return Ok(());
        }
        let id = self.id();
        let pending = PendingSend::new(Op::Send, a.kind, a.context, a.flags, a.tag, len, to);
        // An inject is copied whatever the eager size: its buffer is the caller's again at once.
        if len <= self.cfg.eager || inject {
            let mut bytes = self.tx.bufs.take(MATCH_HEADER + len);
            wire::eager(&mut bytes, self.cfg.name.qpn, &m);
            a.mem.read_into(0, len, &mut bytes);
            // A copied send asked for no completion level that needs the peer (Open MPI asks
            // for none; MPICH for FI_DELIVERY_COMPLETE but in its non-contiguous
            // `fi_tsendmsg`) is done once its bytes are ours, as over TCP once they are in
            // the socket: the queue pair keeps them until they are acknowledged. Otherwise,
            // with more ranks than cores, each such send waits for its peer to get the CPU back
            // (NPB CG.A on 8 ranks: 0.90-0.93 s against 0.66-0.73 at a 64 KiB eager size).
            let buffered =
                a.flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE) == 0;
            let role = if inject || buffered {
                // The bytes are copied: the send is done as far as the caller goes.
                self.out
                    .tx_done(send_completion(a.kind, a.context, len), a.flags, FI_SEND);
                Role::Free
            } else {
                self.tx.sends.insert(id, pending);
                Role::Part { send: id }
            };
            self.submit(Outgoing::Message {
                to,
                bytes: self.tx.bufs.freeze(bytes),
                role,
            });
        } else {
            let pushed = len.min(self.cfg.push);
            let mut bytes = Vec::with_capacity(MATCH_HEADER);
            wire::rts(&mut bytes, self.cfg.name.qpn, &m, id, pushed > 0);
            self.submit(Outgoing::Message {
                to,
                bytes: bytes.into(),
                role: Role::Rts { send: id },
            });
            let outstanding = self.submit_chunks(id, None, 0..pushed);
            self.tx.sends.insert(
                id,
                PendingSend {
                    mem: Some(a.mem),
                    outstanding,
                    cleared: false,
                    pushed,
                    ..pending
                },
            );
        }
        Ok(())
    }

    /// Queues the chunks of send `send` covering `bytes`, for receive `recv_id` (`None`:
    /// pushed ahead of the answer); returns how many.
    fn submit_chunks(&mut self, send: u64, recv_id: Option<u64>, bytes: Range<usize>) -> u32 {
        let mut n = 0;
        for (offset, len) in chunks(bytes) {
            self.submit(Outgoing::Chunk {
                send,
                recv_id,
                offset,
                len,
            });
            n += 1;
        }
        n
    }

    /// Whether `name` is this endpoint's own.
    fn is_self(&self, name: &EpName) -> bool {
        name.udp_addr() == self.cfg.name.udp_addr() && name.qpn == self.cfg.name.qpn
    }

    /// Queues a send for the queue pair; the driver posts it as soon as there is room.
    fn submit(&mut self, o: Outgoing) {
        self.tx.backlog.push_back(o);
    }

    /// One queue-pair send of `role` completed (or failed).
    fn send_part_done(&mut self, role: Role, ok: bool) {
        let send = match role {
            Role::Free => return,
            Role::Rts { send } if ok => {
                let _ = send;
                return;
            }
            Role::Cts { recv } => {
                if !ok {
                    self.fail_rndv(recv, "the sender did not acknowledge the clear-to-send");
                }
                return;
            }
            Role::Ping { peer } => {
                if !ok {
                    self.fail_sends_to(peer);
                }
                return;
            }
            Role::Chunk { send, lent } => {
                self.tx.chunks_inflight -= 1;
                self.tx.lent -= lent as usize;
                send
            }
            Role::Served { id, peer } => {
                self.tx.chunks_inflight -= 1;
                if !ok {
                    self.tx.backlog.retain(|o| {
                        !matches!(o, Outgoing::Served { id: i, to, .. }
                            if *i == id && to.addr == peer)
                    });
                }
                return;
            }
            Role::Part { send } | Role::Rts { send } => send,
        };
        if !ok {
            if let Some(s) = self.tx.sends.remove(&send) {
                diag!(
                    Warn,
                    EpData,
                    "{} to {} failed: the peer did not acknowledge it",
                    s.op.name(),
                    s.to.addr
                );
                self.report(s, Some(Errno(FI_EIO as u32)));
            }
            return;
        }
        let Some(s) = self.tx.sends.get_mut(&send) else {
            return;
        };
        s.outstanding = s.outstanding.saturating_sub(1);
        if s.outstanding == 0 && s.cleared {
            self.complete_send(send);
        }
    }

    fn complete_send(&mut self, send: u64) {
        if let Some(s) = self.tx.sends.remove(&send) {
            let refused = matches!(s.op, Op::Write { refused: true, .. });
            if refused {
                diag!(
                    Warn,
                    EpData,
                    "RMA write to {} failed: the target refused it",
                    s.to.addr
                );
            }
            self.report(s, refused.then_some(Errno::ACCES));
        }
    }

    /// Reports a send, write or read that ended: done, or failed with `err`.
    fn report(&mut self, s: PendingSend, err: Option<Errno>) {
        let (c, event) = match s.op {
            Op::Send => (
                Completion {
                    tag: if err.is_none() { s.tag } else { 0 },
                    ..send_completion(s.kind, s.context, s.len)
                },
                FI_SEND,
            ),
            Op::Write { .. } => (rma_completion(FI_WRITE, s.context), FI_WRITE),
            Op::Read { .. } => (rma_completion(FI_READ, s.context), FI_READ),
            Op::Atomic { fetch: false } => (atomic_completion(FI_WRITE, s.context), FI_WRITE),
            Op::Atomic { fetch: true } => (atomic_completion(FI_READ, s.context), FI_READ),
        };
        match err {
            None => self.out.tx_done(c, s.flags, event),
            Some(e) => {
                self.stats.failed_sends += 1;
                self.out.tx_failed(c, e, event);
            }
        }
    }

    /// The receiver answered send `handle`: it takes `wanted` bytes, and keeps what was
    /// pushed if `taken`.
    fn on_cts(&mut self, src: SocketAddr, handle: u64, recv_id: u64, wanted: u64, taken: bool) {
        // Only from the send's receiver: handles are sequential, so another peer could name it.
        let Some(s) = self.tx.sends.get_mut(&handle).filter(|s| s.to.addr == src) else {
            self.stats.stray += 1;
            return;
        };
        if s.cleared || s.mem.is_none() || s.op != Op::Send {
            self.stats.stray += 1;
            return;
        }
        s.cleared = true;
        let n = usize::try_from(wanted).unwrap_or(usize::MAX).min(s.len);
        // The receiver keeps the pushed bytes below `kept`.
        let kept = if taken { s.pushed.min(n) } else { 0 };
        // Pushed chunks still queued from there on need not go.
        let mut unqueued = 0;
        if s.pushed > kept {
            let before = self.tx.backlog.len();
            self.tx.backlog.retain(|o| {
                !matches!(o, Outgoing::Chunk { send, recv_id: None, offset, .. }
                    if *send == handle && *offset >= kept)
            });
            unqueued = (before - self.tx.backlog.len()) as u32;
        }
        let added = self.submit_chunks(handle, Some(recv_id), kept..n);
        let s = self.tx.sends.get_mut(&handle).expect("looked up above");
        s.outstanding = s.outstanding - unqueued + added;
        if s.outstanding == 0 {
            self.complete_send(handle);
        }
    }

    fn send_cts(
        &mut self,
        to: AddressHandle,
        handle: u64,
        recv_id: u64,
        wanted: usize,
        taken: bool,
    ) {
        let mut bytes = Vec::with_capacity(wire::CTS_HEADER);
        wire::cts(
            &mut bytes,
            self.cfg.name.qpn,
            handle,
            recv_id,
            wanted as u64,
            taken,
        );
        let role = if wanted == 0 {
            Role::Free
        } else {
            Role::Cts { recv: recv_id }
        };
        self.submit(Outgoing::Message {
            to,
            bytes: bytes.into(),
            role,
        });
    }

    /// Fails every send to `peer` with FI_EIO: it did not acknowledge a probe.
    fn fail_sends_to(&mut self, peer: SocketAddr) {
        let ids: Vec<u64> = self
            .tx
            .sends
            .iter()
            .filter(|(_, s)| s.to.addr == peer)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(s) = self.tx.sends.remove(&id) {
                diag!(
                    Warn,
                    EpData,
                    "{} to {peer} failed: the peer is gone",
                    s.op.name()
                );
                self.report(s, Some(Errno(FI_EIO as u32)));
            }
        }
    }

    /// A rendezvous send waits for a clear-to-send or for its chunks, and the engine hears
    /// nothing of a peer it owes nothing: every so often each peer with such a send gets a
    /// PING, which its engine acknowledges. A peer that is gone fails the PING, and with it
    /// the sends (a receiver that merely has not posted its receive yet acknowledges it). The
    /// PING also tells the peer's receives from us that we are alive.
    fn ping_peers(&mut self) {
        let mut peers: Vec<AddressHandle> = self
            .tx
            .sends
            .values()
            .filter(|s| s.mem.is_some() || !s.cleared)
            .map(|s| s.to)
            .collect();
        peers.sort_unstable_by_key(|a| (a.addr, a.qpn));
        peers.dedup();
        for to in peers {
            let mut bytes = Vec::with_capacity(wire::PING_LEN);
            wire::ping(&mut bytes, self.cfg.name.qpn);
            self.submit(Outgoing::Message {
                to,
                bytes: bytes.into(),
                role: Role::Ping { peer: to.addr },
            });
        }
    }

    /// Fails rendezvous receive `recv_id` (its sender is gone) with FI_EIO and length 0 (the
    /// chunks that came need not be the buffer's first bytes). Chunks still arriving for it
    /// are counted as stray.
    fn fail_rndv(&mut self, recv_id: u64, why: &str) {
        let Some(r) = self.end_rndv(recv_id) else {
            return;
        };
        self.stats.failed_recvs += 1;
        diag!(Warn, EpData, "receive from {} failed: {why}", r.from);
        let d = &r.delivery;
        let mut c = self.recv_completion(
            r.kind,
            d.context,
            &d.header,
            0,
            d.recv.mem.addr_at(d.offset),
        );
        let cancelled = self.piece_done(d, true, &mut c);
        self.out.recv_failed(c, Errno(FI_EIO as u32), 0);
        self.report_cancelled(cancelled);
    }

    /// Removes rendezvous receive `recv_id`; chunks still pushed into it will be dropped.
    fn end_rndv(&mut self, recv_id: u64) -> Option<RndvRecv> {
        let r = self.rx.rndv.remove(&recv_id)?;
        // Only if the key is still this receive's: a sender restarted on the same address
        // reuses handles, and its new receive may hold the key now.
        if let Some(key) = r
            .push_key
            .filter(|k| self.rx.pushing_into.get(k) == Some(&recv_id))
        {
            self.rx.pushing_into.remove(&key);
            crate::hash::shrink(&mut self.rx.pushing_into);
        }
        Some(r)
    }

    /// Anything from `src` shows it alive: its rendezvous receives here may be waiting behind
    /// its other transfers to us, which it sends first. Kept only while receives wait.
    fn heard_from(&mut self, src: SocketAddr) {
        if !self.rx.rndv.is_empty() {
            self.live.heard.insert(src, Instant::now());
        }
    }

    /// The rendezvous timers, every quarter of the peer timeout (so a silent sender fails its
    /// receives after 1 to 1.25 peer timeouts): stalled receives expire, waiting sends probe
    /// their peers. Between checks a poll pays one comparison.
    fn timers(&mut self, now: Instant) {
        if now < self.live.next_check {
            return;
        }
        self.live.next_check = now + self.cfg.stall_limit / 4;
        self.expire_stalled(now);
        if !self.tx.sends.is_empty() {
            self.ping_peers();
        }
    }

    /// Fails the rendezvous receives that heard nothing from their sender for longer than
    /// the peer timeout.
    fn expire_stalled(&mut self, now: Instant) {
        if self.rx.rndv.is_empty() {
            self.live.heard.clear();
            return;
        }
        let limit = self.cfg.stall_limit;
        let heard = &self.live.heard;
        let stalled: Vec<u64> = self
            .rx
            .rndv
            .iter()
            .filter(|(_, r)| {
                let last = heard.get(&r.from).map_or(r.last, |&h| h.max(r.last));
                now.saturating_duration_since(last) > limit
            })
            .map(|(&id, _)| id)
            .collect();
        for id in stalled {
            self.fail_rndv(id, "the sender went silent (FI_DIWARP_PEER_TIMEOUT_MS)");
        }
    }

    // ---- receives -----------------------------------------------------------------------

    pub fn recv(&mut self, a: RecvArgs) -> Result<()> {
        let inserted = self.av()?.insertions();
        if inserted != self.strangers.av_seen {
            self.strangers.av_seen = inserted;
            self.name_stand_ins();
        }
        let peer = if self.cfg.directed && a.src != FI_ADDR_UNSPEC {
            PeerId(
                u32::try_from(a.src)
                    .ok()
                    .filter(|&p| p < STAND_IN_BASE)
                    .ok_or(Errno::INVAL)?,
            )
        } else {
            PeerId::ANY
        };
        let ctx = Context(a.context);
        let spec = match a.kind {
            Kind::Msg => RecvSpec::untagged(peer, a.mem.len(), ctx),
            Kind::Tagged => RecvSpec::tagged(peer, a.tag, a.ignore, a.mem.len(), ctx),
        };
        let recv = Recv {
            mem: a.mem,
            flags: a.flags,
            multi: (a.flags & FI_MULTI_RECV != 0).then(|| self.rx.multi.new_id()),
        };
        if a.flags & FI_PEEK != 0 {
            self.peek(a.kind, spec, a.flags);
            return Ok(());
        }
        if a.flags & FI_CLAIM != 0 {
            return self.claim(a.kind, spec, recv, a.flags);
        }
        if a.flags & FI_MULTI_RECV != 0 {
            if a.kind != Kind::Msg {
                return Err(Errno::INVAL);
            }
            let mut taken = Vec::new();
            self.rx
                .matcher
                .post_multi(spec, self.cfg.min_multi_recv, recv, &mut taken);
            for t in taken {
                self.take(Kind::Msg, t);
            }
            return Ok(());
        }
        if let Post::Matched(t) = self.rx.matcher.post(a.kind, spec, recv) {
            self.take(a.kind, t);
        }
        Ok(())
    }

    /// A receive took a buffered message.
    fn take(&mut self, kind: Kind, t: Taken<Recv, Held>) {
        match t.message.payload {
            Held::Eager(bytes) => {
                let d = t.delivery;
                d.recv.mem.write_at(d.offset, &bytes[..d.placed]);
                self.finish_recv(kind, &d, false);
            }
            Held::Rndv { handle, from } => {
                let pushes = self
                    .rx
                    .parked
                    .take((from.addr, handle))
                    .map_or(Pushes::None, Pushes::Parked);
                self.start_rndv(kind, t.delivery, handle, from, pushes);
            }
        }
    }

    fn peek(&mut self, kind: Kind, spec: RecvSpec, flags: u64) {
        let found = if flags & FI_CLAIM != 0 {
            self.rx
                .matcher
                .peek_claim(kind, &spec)
                .found()
                .map(|(h, _)| h)
        } else if flags & FI_DISCARD != 0 {
            self.rx.matcher.peek_discard(kind, &spec).found().map(|m| {
                self.release(m.payload);
                m.header
            })
        } else {
            match self.rx.matcher.peek(kind, &spec) {
                Peek::Found(h) => Some(h),
                Peek::NoMessage => None,
            }
        };
        match found {
            Some(h) => {
                let c = self.recv_completion(kind, spec.context, &h, h.len, 0);
                self.out.recv_done(c, flags | FI_COMPLETION);
            }
            None => {
                let c = Completion {
                    op_context: spec.context.0,
                    flags: FI_RECV | kind_flag(kind),
                    ..Completion::default()
                };
                self.out.recv_failed(c, Errno::NOMSG, 0);
            }
        }
    }

    fn claim(&mut self, kind: Kind, spec: RecvSpec, recv: Recv, flags: u64) -> Result<()> {
        if flags & FI_DISCARD != 0 {
            let m = self
                .rx
                .matcher
                .claim_discard(kind, spec.context)
                .ok_or(Errno::INVAL)?;
            let c = self.recv_completion(kind, spec.context, &m.header, 0, 0);
            self.release(m.payload);
            self.out.recv_done(c, flags);
            return Ok(());
        }
        let t = self
            .rx
            .matcher
            .claim(kind, spec, recv)
            .map_err(|_| Errno::INVAL)?;
        self.take(kind, t);
        Ok(())
    }

    /// A buffered message is dropped: a rendezvous sender is told to send nothing.
    fn release(&mut self, held: Held) {
        if let Held::Rndv { handle, from } = held {
            self.rx.parked.take((from.addr, handle));
            self.send_cts(from, handle, 0, 0, false);
        }
    }

    pub fn cancel(&mut self, context: usize) -> Result<()> {
        let c = self
            .rx
            .matcher
            .cancel(Context(context))
            .ok_or(Errno::NOENT)?;
        let mut flags = FI_RECV | kind_flag(c.kind);
        if c.multi_recv {
            flags |= FI_MULTI_RECV;
        }
        let comp = Completion {
            op_context: context,
            flags,
            ..Completion::default()
        };
        let now = match c.recv.multi {
            Some(id) => self.rx.multi.cancelled(id, comp),
            None => Some(comp),
        };
        self.report_cancelled(now);
        Ok(())
    }

    fn peer_of(&self, src: SocketAddr) -> PeerId {
        matcher_id(self.av.as_ref().and_then(|av| av.handle_of(src))).unwrap_or(UNKNOWN_PEER)
    }

    /// The matcher's id for the sender of an arriving message: its AV handle, else its
    /// stand-in (a new one the first time).
    fn label(&mut self, src: SocketAddr) -> PeerId {
        let peer = self.peer_of(src);
        if self.strangers.ids.is_empty() && (peer != UNKNOWN_PEER || self.av.is_none()) {
            return peer;
        }
        match self.strangers.ids.get(&src).copied() {
            Some(s) if peer != UNKNOWN_PEER => {
                // Its earlier messages take the handle first: they are older.
                self.rx.matcher.relabel(s, peer);
                self.strangers.ids.remove(&src);
                peer
            }
            Some(s) => s,
            None if peer != UNKNOWN_PEER || self.strangers.next == UNKNOWN_PEER.0 => peer,
            None => {
                let s = PeerId(self.strangers.next);
                self.strangers.next += 1;
                self.strangers.ids.insert(src, s);
                s
            }
        }
    }

    /// Passes the queued messages of every stand-in the AV now holds to its handle.
    fn name_stand_ins(&mut self) {
        let Some(av) = self.av.as_ref() else {
            return;
        };
        let handles = av.handles_of(self.strangers.ids.keys().copied());
        let named: Vec<(SocketAddr, PeerId, PeerId)> = self
            .strangers
            .ids
            .iter()
            .zip(handles)
            .filter_map(|((&src, &s), h)| Some((src, s, matcher_id(h)?)))
            .collect();
        for (src, s, peer) in named {
            self.rx.matcher.relabel(s, peer);
            self.strangers.ids.remove(&src);
        }
        crate::hash::shrink(&mut self.strangers.ids);
    }

    fn recv_completion(
        &self,
        kind: Kind,
        context: Context,
        h: &Header,
        len: usize,
        buf: usize,
    ) -> Completion {
        let mut flags = FI_RECV | kind_flag(kind);
        if h.data.is_some() {
            flags |= FI_REMOTE_CQ_DATA;
        }
        Completion {
            op_context: context.0,
            flags,
            len,
            buf,
            data: h.data.unwrap_or(0),
            tag: if kind == Kind::Tagged { h.tag } else { 0 },
            src: Some(if h.peer.0 >= STAND_IN_BASE {
                ADDR_NOTAVAIL
            } else {
                u64::from(h.peer.0)
            }),
        }
    }

    /// Completes a receive; `rndv`: one started by [`start_rndv`](Self::start_rndv).
    fn finish_recv(&mut self, kind: Kind, d: &Delivery<Recv>, rndv: bool) {
        let mut c = self.recv_completion(
            kind,
            d.context,
            &d.header,
            d.placed,
            d.recv.mem.addr_at(d.offset),
        );
        let cancelled = self.piece_done(d, rndv, &mut c);
        self.stats.received += 1;
        match d.truncated() {
            0 => self.out.recv_done(c, d.recv.flags),
            lost => self.out.recv_failed(c, Errno::TRUNC, lost),
        }
        self.report_cancelled(cancelled);
    }

    /// Flags `c` FI_MULTI_RECV if it hands a multi-receive buffer back: not before the last of
    /// its pieces in flight. Returns the buffer's cancellation, if that waited for this piece.
    fn piece_done(
        &mut self,
        d: &Delivery<Recv>,
        rndv: bool,
        c: &mut Completion,
    ) -> Option<Completion> {
        let id = d.recv.multi?;
        let done = self.rx.multi.finished(id, rndv, d.released);
        if done.releases {
            c.flags |= FI_MULTI_RECV;
        }
        done.cancelled
    }

    fn report_cancelled(&mut self, c: Option<Completion>) {
        if let Some(c) = c {
            self.out.recv_failed(c, Errno::CANCELED, 0);
        }
    }

    fn start_rndv(
        &mut self,
        kind: Kind,
        d: Delivery<Recv>,
        handle: u64,
        from: AddressHandle,
        pushes: Pushes,
    ) {
        if d.placed == 0 {
            self.send_cts(from, handle, 0, 0, false);
            self.finish_recv(kind, &d, false);
            return;
        }
        if let Some(id) = d.recv.multi {
            self.rx.multi.started(id);
        }
        let recv_id = self.id();
        let taken = !matches!(pushes, Pushes::None);
        self.send_cts(from, handle, recv_id, d.placed, taken);
        let key = (from.addr, handle);
        self.rx.rndv.insert(
            recv_id,
            RndvRecv {
                kind,
                delivery: d,
                from: from.addr,
                got: 0,
                last: Instant::now(),
                push_key: taken.then_some(key),
            },
        );
        if taken {
            self.rx.pushing_into.insert(key, recv_id);
        }
        // Held chunks go in as later ones will; the last byte completes the receive.
        if let Pushes::Parked(pieces) = pushes {
            for (offset, bytes) in pieces {
                self.push_into(from.addr, recv_id, offset, &bytes, false);
            }
        }
    }

    // ---- arrivals -----------------------------------------------------------------------

    fn handle_message(&mut self, src: SocketAddr, bytes: &[u8]) {
        self.heard_from(src);
        if !wire::is_matched(bytes) {
            return self.dispatch(src, UNKNOWN_PEER, bytes);
        }
        // One AV lookup per matched message: it takes the AV's lock.
        let peer = self.label(src);
        self.dispatch(src, peer, bytes);
    }

    /// Handles a message; `peer` is its sender's matcher id, an AV handle or a stand-in (used
    /// only by matched messages).
    fn dispatch(&mut self, src: SocketAddr, peer: PeerId, bytes: &[u8]) {
        let (qpn, msg) = match wire::parse(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed += 1;
                diag!(Debug, EpData, "message from {src} dropped: {e}");
                return;
            }
        };
        match msg {
            Msg::Eager { m, payload } => {
                let header = Header {
                    peer,
                    tag: m.tag,
                    data: m.data,
                    len: payload.len(),
                    protocol: Protocol::Eager,
                };
                let arrival = self
                    .rx
                    .matcher
                    .arrive(m.kind, header, |_| Held::Eager(payload.into()));
                if let Arrival::Matched(d) = arrival {
                    d.recv.mem.write_at(d.offset, &payload[..d.placed]);
                    self.finish_recv(m.kind, &d, false);
                }
            }
            Msg::Rts { m, handle, pushed } => {
                let Ok(len) = usize::try_from(m.len) else {
                    self.stats.malformed += 1;
                    return;
                };
                let from = AddressHandle::new(src, qpn);
                let header = Header {
                    peer,
                    tag: m.tag,
                    data: m.data,
                    len,
                    protocol: Protocol::Rendezvous { handle },
                };
                let arrival = self
                    .rx
                    .matcher
                    .arrive(m.kind, header, |_| Held::Rndv { handle, from });
                match arrival {
                    Arrival::Matched(d) => {
                        let pushes = if pushed { Pushes::Coming } else { Pushes::None };
                        self.start_rndv(m.kind, d, handle, from, pushes);
                    }
                    Arrival::Buffered(_) if pushed => self.rx.parked.open((src, handle)),
                    Arrival::Buffered(_) => {}
                }
            }
            Msg::Cts {
                handle,
                recv_id,
                wanted,
                taken,
            } => self.on_cts(src, handle, recv_id, wanted, taken),
            Msg::Push {
                handle,
                offset,
                payload,
            } => self.on_push(src, handle, offset, payload),
            Msg::Data {
                recv_id,
                offset,
                payload,
            } => self.on_data(src, recv_id, offset, payload),
            // Its work was done: the engine acknowledged it, `heard_from` noted the sender.
            Msg::Ping => {}
            Msg::Write {
                key,
                addr,
                id,
                last,
                payload,
            } => self.on_write(AddressHandle::new(src, qpn), key, addr, (id, last), payload),
            Msg::Read { id, key, addr, len } => {
                self.on_read(AddressHandle::new(src, qpn), id, key, addr, len)
            }
            Msg::ReadData {
                id,
                offset,
                payload,
            } => self.on_read_data(src, id, offset, payload),
            Msg::RmaAnswer { id, errno, last } => self.on_rma_answer(src, id, errno, last),
            Msg::Atomic(r) => self.on_atomic(AddressHandle::new(src, qpn), r),
            Msg::AtomicAnswer { id, errno, fetched } => {
                self.on_atomic_answer(src, id, errno, fetched)
            }
        }
    }

    fn on_data(&mut self, src: SocketAddr, recv_id: u64, offset: u64, payload: &[u8]) {
        self.data_arrived(src, recv_id, offset, payload, payload.len());
    }

    /// `len` bytes of rendezvous receive `recv_id` at `offset` arrived: the first of them
    /// (`write`) are copied there, the rest were read in place.
    fn data_arrived(
        &mut self,
        src: SocketAddr,
        recv_id: u64,
        offset: u64,
        write: &[u8],
        len: usize,
    ) {
        let Some(r) = self.rx.rndv.get_mut(&recv_id) else {
            self.stats.stray += 1;
            return;
        };
        let d = &r.delivery;
        if r.from != src || !fits(d, offset, len) {
            self.stats.malformed += 1;
            return;
        }
        d.recv.mem.write_at(d.offset + offset as usize, write);
        r.got += len;
        if r.got >= d.placed {
            let r = self.end_rndv(recv_id).expect("present");
            self.finish_recv(r.kind, &r.delivery, true);
        }
    }

    /// A pushed chunk, in its turn (its RTS was handled).
    fn on_push(&mut self, src: SocketAddr, handle: u64, offset: u64, payload: &[u8]) {
        let key = (src, handle);
        if let Some(&recv_id) = self.rx.pushing_into.get(&key) {
            self.push_into(src, recv_id, offset, payload, true);
            return;
        }
        match self.rx.parked.park(key, offset, payload) {
            Parking::Held => self.stats.push_parked += 1,
            Parking::Refused | Parking::Unknown => self.stats.push_dropped += 1,
        }
    }

    /// Places pushed bytes into rendezvous receive `recv_id`, less what a short receive has no
    /// room for. `first`: they start a chunk, which the counters count once.
    fn push_into(
        &mut self,
        src: SocketAddr,
        recv_id: u64,
        offset: u64,
        payload: &[u8],
        first: bool,
    ) {
        let fitting = self
            .rx
            .rndv
            .get(&recv_id)
            .and_then(|r| clip(&r.delivery, offset, payload));
        match fitting {
            Some(b) => {
                self.stats.push_placed += u64::from(first);
                self.on_data(src, recv_id, offset, b);
            }
            None => self.stats.push_dropped += u64::from(first),
        }
    }
}

/// Arrivals, lent by the queue pair, behind their per-peer header (`peer`). They are handed
/// over in the peer's sequence; a rendezvous chunk is placed at once, whatever its turn.
impl RdReceiver for State {
    fn early(&mut self, src: SocketAddr, payload: &[u8], in_order: bool) -> bool {
        let (verdict, seq, body) = self.peers.arrive(src, payload);
        // Counted once: an early offer it does not take comes again in its turn.
        let comes_again = verdict == Verdict::Ahead && !in_order && !wire::is_data(body);
        if verdict != Verdict::Dropped && !comes_again {
            self.log_traffic(src, None, body.len(), wire::is_rts(body));
        }
        match verdict {
            Verdict::Dropped => {}
            Verdict::Now => self.hand_over(src, body),
            Verdict::Ahead if wire::is_data(body) => {
                self.peers.taken_ahead(src, seq);
                self.handle_message(src, body);
            }
            // Another path carries the messages before it.
            Verdict::Ahead if in_order => self.peers.hold(src, seq, body),
            // It comes again in its turn on this path.
            Verdict::Ahead => return false,
        }
        true
    }

    fn message(&mut self, src: SocketAddr, payload: &[u8]) {
        self.early(src, payload, true);
    }

    /// An eager message or a chunk behind the longest header (EAGER's and RTS's).
    fn max_message(&self) -> usize {
        EAGER_MAX.max(CHUNK) + MATCH_HEADER + peer::HEADER
    }

    /// A chunk cut into several datagrams (an MTU below the chunk) goes into the receive
    /// segment by segment: no reassembly buffer, no second copy. Its number is settled with
    /// its first segment; a duplicate is reassembled and dropped whole.
    fn segment(&mut self, src: SocketAddr, head: &[u8], offset: usize, bytes: &[u8]) -> bool {
        let Some(head) = head.get(peer::HEADER..) else {
            return false;
        };
        if offset > 0 {
            // A taken message's first segment held the whole per-peer header.
            let offset = offset.saturating_sub(peer::HEADER);
            return self.take_segment(src, head, offset, bytes);
        }
        let (verdict, seq, body) = self.peers.arrive(src, bytes);
        let first = match verdict {
            Verdict::Now | Verdict::Ahead => body,
            Verdict::Dropped => return false,
        };
        if !self.take_segment(src, head, 0, first) {
            return false;
        }
        match verdict {
            Verdict::Now => self.hand_over_rest(src),
            _ => self.peers.taken_ahead(src, seq),
        }
        true
    }

    /// A rendezvous chunk over a connection, whose receive is posted and has room for it, is
    /// read from the socket straight into the receive.
    fn in_place(&mut self, src: SocketAddr, head: &[u8], len: usize) -> bool {
        let Some(chunk) = len.checked_sub(IN_PLACE_HEADERS) else {
            return false;
        };
        self.peers.would_take(src, head)
            && self
                .in_place_target(src, head)
                .is_some_and(|(d, at)| fits(d, at, chunk))
    }

    fn read_in_place(
        &mut self,
        src: SocketAddr,
        head: &[u8],
        offset: usize,
        max: usize,
        read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let placed = match (
            self.in_place_target(src, head),
            offset.checked_sub(IN_PLACE_HEADERS),
        ) {
            (Some((d, at)), Some(past)) => {
                d.recv
                    .mem
                    .read_at(d.offset + at as usize + past, max, read)?
            }
            _ => 0,
        };
        if placed > 0 {
            return Ok(placed);
        }
        // Its receive went (cancelled, the endpoint closing): the bytes are read and dropped.
        read(&mut vec![0; max.min(CHUNK)])
    }

    fn placed(&mut self, src: SocketAddr, head: &[u8], len: usize) {
        let (verdict, seq, body) = self.peers.arrive(src, head);
        if verdict == Verdict::Dropped {
            return;
        }
        self.log_traffic(src, None, len - peer::HEADER, false);
        if verdict == Verdict::Ahead {
            self.peers.taken_ahead(src, seq);
        }
        self.heard_from(src);
        match wire::parse(body) {
            Ok((
                _,
                Msg::Data {
                    recv_id,
                    offset,
                    payload,
                },
            )) => {
                self.stats.chunks_in_place += 1;
                self.data_arrived(src, recv_id, offset, payload, len - IN_PLACE_HEADERS)
            }
            _ => self.stats.malformed += 1,
        }
        if verdict == Verdict::Now {
            self.hand_over_rest(src);
        }
    }
}

/// The headers in front of a chunk's bytes: the per-peer header and DATA's.
const IN_PLACE_HEADERS: usize = peer::HEADER + wire::DATA_HEADER;

impl State {
    /// The delivery and the offset in it of the DATA chunk that starts with `head` (behind its
    /// per-peer header), if its receive is posted and from `src`.
    fn in_place_target(&self, src: SocketAddr, head: &[u8]) -> Option<(&Delivery<Recv>, u64)> {
        let Ok((
            _,
            Msg::Data {
                recv_id, offset, ..
            },
        )) = wire::parse(head.get(peer::HEADER..)?)
        else {
            return None;
        };
        let r = self.rx.rndv.get(&recv_id).filter(|r| r.from == src)?;
        Some((&r.delivery, offset))
    }
}

impl State {
    /// Hands over `body`, whose turn it is, and the held messages whose turn comes after it.
    fn hand_over(&mut self, src: SocketAddr, body: &[u8]) {
        self.handle_message(src, body);
        self.hand_over_rest(src);
    }

    /// The message whose turn it was is handled: hands over the held ones that follow.
    fn hand_over_rest(&mut self, src: SocketAddr) {
        self.peers.handed(src);
        while let Some(held) = self.peers.ready(src) {
            self.handle_message(src, &held);
        }
    }

    /// A segment of a chunk, into its receive (see [`RdReceiver::segment`]); `head` and
    /// `offset` are past the per-peer header.
    fn take_segment(&mut self, src: SocketAddr, head: &[u8], offset: usize, bytes: &[u8]) -> bool {
        let (recv_id, chunk_at, pushed) = match wire::parse(head) {
            Ok((
                _,
                Msg::Data {
                    recv_id, offset, ..
                },
            )) => (recv_id, offset, false),
            Ok((
                _,
                Msg::Push {
                    handle, offset: at, ..
                },
            )) => {
                match self.rx.pushing_into.get(&(src, handle)) {
                    Some(&recv_id) => (recv_id, at, true),
                    None if offset == 0 => return false,
                    // Taken, and its receive ended since (a short receive is full): counted
                    // with the chunk's first segment.
                    None => return true,
                }
            }
            _ => return false,
        };
        if offset == 0 {
            self.heard_from(src);
        }
        // The first segment starts with the header; later ones are payload only.
        let (skip, at) = match offset.checked_sub(wire::DATA_HEADER) {
            Some(at) => (0, at),
            None => (wire::DATA_HEADER - offset, 0),
        };
        match (bytes.get(skip..), chunk_at.checked_add(at as u64)) {
            (Some(payload), Some(at)) if pushed => {
                self.push_into(src, recv_id, at, payload, offset == 0)
            }
            (Some(payload), Some(at)) => self.on_data(src, recv_id, at, payload),
            _ => self.stats.malformed += 1,
        }
        true
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
    let room = d.placed.checked_sub(usize::try_from(offset).ok()?)?;
    (room > 0).then(|| &bytes[..bytes.len().min(room)])
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
mod forged_tests;
#[cfg(test)]
mod ledger_tests;
#[cfg(test)]
mod multi_tests;
#[cfg(test)]
mod path_tests;
#[cfg(test)]
mod rma_tests;
#[cfg(test)]
mod tests;

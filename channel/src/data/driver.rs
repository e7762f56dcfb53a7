//! The queue-pair side of the data path: posting what the state queued, polling, and the
//! endpoint-level operations that need both.

use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{
    QpConfig, QueuePair, SendOpcode, SendWrOwned, WcOpcode, WcStatus, WorkCompletion,
};

use super::ops::{Op, Outgoing, RmaArgs, Role};
use super::rails::RdRails;
use super::wire::{self, DATA_HEADER};
use super::{
    Budget, Outputs, RecvArgs, SendArgs, State, Stats, BACKLOG_MAX, CHUNK, CHUNK_WINDOW, EAGER_MAX,
    POLL_BATCH,
};
use crate::addr::EpName;
use crate::av::AddressVector;
use crate::diag;
use crate::error::{Errno, Result};
use crate::log::{misconfigured, Subsys};
use crate::params::Config;
use crate::path::stripe::Striping;
use crate::path::{self, Rail, RcPaths};
use crate::peer::{self, SlotId};
use crate::sys::FI_PEEK;

/// Longest an RC connection may take to come up (bounded by the peer timeout too).
const RC_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where peers connect to this endpoint, unless it keeps every peer on datagrams: a TCP
/// listener on its address, whose port goes into its name.
fn listen(config: &Config, name: &mut EpName) -> Result<Option<TcpListener>> {
    if config.promote.mode == policies::promote::Mode::Ud {
        return Ok(None);
    }
    let range = config.port_range.clone().unwrap_or(None);
    let l = crate::ports::listen_tcp(range, name.ip)
        .and_then(|l| {
            l.set_nonblocking(true)
                .map(|()| l)
                .map_err(crate::ports::BindError::Os)
        })
        .map_err(|e| {
            let why = format!("cannot listen for RC connections on {}: {e}", name.ip);
            if matches!(e, crate::ports::BindError::Exhausted { .. }) {
                misconfigured(
                    Subsys::EpCtrl,
                    module_path!(),
                    line!(),
                    format_args!("{why}"),
                );
                return Errno(e.raw_os_error().unwrap_or(0) as u32);
            }
            diag!(Warn, EpCtrl, "{why}");
            Errno::OTHER
        })?;
    name.tcp_port = l.local_addr().map_err(|_| Errno::OTHER)?.port();
    Ok(Some(l))
}

/// The promotion policy's settings for this endpoint: in hybrid mode it asks for connections
/// only while its datagrams are small enough for a connection to carry bulk data faster
/// (`FI_DIWARP_RC_DATAGRAM_MAX`; channel/BENCHMARKS.md, "NPB per mode"), and only on one
/// rail.
fn promotion(config: &Config, rails: &RdRails) -> policies::promote::Config {
    let mut p = config.promote;
    if p.mode == policies::promote::Mode::Hybrid {
        let size = rails.first().stats().max_datagram_size;
        p.initiate = size <= config.rc_datagram_max;
        if rails.len() > 1 {
            // A connection holds one rail; datagrams striped over every rail carry more
            // (channel/BENCHMARKS.md, "Rails").
            p.initiate = false;
            diag!(
                Info,
                EpCtrl,
                "hybrid: {} rails; this endpoint accepts RC connections but asks for none",
                rails.len()
            );
        } else if !p.initiate {
            diag!(
                Info,
                EpCtrl,
                "hybrid: datagrams of {size} bytes exceed FI_DIWARP_RC_DATAGRAM_MAX={}; this \
                 endpoint accepts RC connections but asks for none",
                config.rc_datagram_max
            );
        }
    }
    p
}

mod failover;
mod keycheck;
mod report;
#[cfg(test)]
mod test_hooks;

pub use failover::RailEvents;

pub struct DataPath {
    /// A queue pair per rail.
    rails: RdRails,
    /// Rendezvous data across them.
    stripe: Striping,
    st: State,
    /// RC connections to the peers the promotion policy picks.
    paths: RcPaths<Role>,
    /// Rails down for a peer, and what they handed back.
    failover: failover::Failover,
    /// Says so when a rank seems to have another job key.
    keycheck: keycheck::KeyCheck,
    wcs: Vec<WorkCompletion>,
    /// Stamps the messages tests forge (`feed`).
    #[cfg(test)]
    forger: crate::peer::PeerTable,
}

impl std::fmt::Debug for DataPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.st.fmt(f)
    }
}

impl DataPath {
    /// A queue pair on each socket (a rail each, the first first); `name` gets their QP
    /// number. Messages are taken where they arrive (the queue pair's receiver mode): no
    /// receive buffers are posted.
    pub fn new(sockets: Vec<UdpSocket>, config: &Config, name: &mut EpName) -> Result<DataPath> {
        let mut qc = QpConfig {
            max_send_wr: 4 * BACKLOG_MAX,
            max_recv_wr: 1,
            crc: config.crc,
            crc_same_host: config.crc_same_host,
            connected_peers: config.connected_peers,
            auth: config.job_key.clone(),
            ..QpConfig::default()
        };
        qc.rd.idle_timeout = config.peer_timeout;
        qc.rd.dormant_after = config.dormant_after;
        if sockets.len() > 1 {
            // Another rail can take what a silent one holds: keep it, and hear of the silence.
            qc.rd.stall_after = Some(config.rail_timeout);
        }
        if let Some(n) = config.datagram_size {
            qc.rd.max_datagram_size = n;
            qc.fit_mtu = false;
        }
        let rails = RdRails::open(sockets, qc)?;
        name.qpn = rails.qpn();
        let listener = listen(config, name)?;
        let eager = config.eager_size.min(EAGER_MAX);
        let rc = QpConfig {
            crc: config.crc,
            crc_same_host: config.crc_same_host,
            max_send_wr: 4 * path::conn::WINDOW,
            max_recv_wr: 1,
            connect_timeout: config.peer_timeout.min(RC_CONNECT_TIMEOUT),
            // Both ends prove the job's key at MPA start-up; the FPDUs keep the CRC.
            auth: config.job_key.clone(),
            ..QpConfig::default()
        };
        let paths = RcPaths::new(
            promotion(config, &rails),
            rc,
            *name,
            listener,
            config.peer_timeout,
        );
        let mut st = State::new(
            *name,
            eager,
            config.push_size,
            config.peer_timeout,
            Budget::new(config.mem_budget),
            Instant::now(),
        );
        st.count_traffic = paths.enabled();
        st.peers.set_rails(rails.len());
        Ok(DataPath {
            paths,
            failover: failover::Failover::new(rails.len(), config.rail_timeout),
            keycheck: keycheck::KeyCheck::new(config.job_key.is_some(), Instant::now()),
            stripe: Striping::new(rails.len()),
            rails,
            st,
            wcs: Vec::with_capacity(POLL_BATCH),
            #[cfg(test)]
            forger: crate::peer::PeerTable::new(0xf0f0),
        })
    }

    /// Connects the data path to what the endpoint bound. `directed`: FI_DIRECTED_RECV is on,
    /// so a receive's source address restricts it.
    pub fn enable(
        &mut self,
        av: Arc<AddressVector>,
        out: Outputs,
        directed: bool,
        mrs: crate::mr::SharedMrs,
    ) {
        self.st.enable(av, out, directed, mrs);
    }

    pub fn set_min_multi_recv(&mut self, n: usize) {
        self.st.cfg.min_multi_recv = n;
    }

    pub fn stats(&self) -> Stats {
        self.st.stats
    }

    /// The per-peer layer's counters.
    pub fn peer_stats(&self) -> crate::peer::PeerStats {
        self.st.peers.stats
    }

    /// The RC paths' counters, and the promotion policy's.
    pub fn path_stats(&self) -> (path::PathStats, policies::promote::Stats) {
        (self.paths.stats, self.paths.policy_stats())
    }

    /// The RC paths' counters, for the report.
    pub fn path_counters(&self) -> path::Counters {
        self.paths.counters()
    }

    /// RC connections open now.
    pub fn connections(&self) -> usize {
        self.paths.connections()
    }

    /// How far traffic may grow the pools.
    pub fn budget(&self) -> Budget {
        self.st.cfg.budget
    }

    /// FI_EAGAIN while too many sends wait for the queue pair or too many copies for the
    /// peers, after one progress pass to make room.
    fn room(&mut self) -> Result<()> {
        // Copies held for the peers: the endpoint's buffers, and the queue pair's own copies of
        // short messages (it copies those behind their header, and the endpoint's buffer is
        // freed at once).
        let full = |d: &DataPath| {
            d.st.tx.backlog.len() >= BACKLOG_MAX
                || d.st.tx.bufs.lent_bytes() + d.rails.copied_bytes() >= d.st.cfg.budget.copies
        };
        if full(self) {
            self.progress();
            if full(self) {
                return Err(Errno::AGAIN);
            }
        }
        Ok(())
    }

    pub fn send(&mut self, a: SendArgs) -> Result<()> {
        self.room()?;
        let r = self.st.send(a);
        self.flush_backlog();
        r
    }

    pub fn recv(&mut self, a: RecvArgs) -> Result<()> {
        self.st.now = Instant::now();
        if a.flags & FI_PEEK != 0 {
            // A peek must see what has arrived by now.
            self.progress();
        }
        let r = self.st.recv(a);
        self.flush_backlog();
        r
    }

    /// Starts an RMA write (`write`) or read (`rma.rs`).
    pub fn rma(&mut self, write: bool, a: RmaArgs) -> Result<()> {
        self.room()?;
        let r = self.st.rma(write, a);
        self.flush_backlog();
        r
    }

    pub fn atomic(&mut self, a: super::AtomicArgs) -> Result<()> {
        self.room()?;
        let r = self.st.atomic(a);
        self.flush_backlog();
        r
    }

    pub fn cancel(&mut self, context: usize) -> Result<()> {
        self.st.cancel(context)
    }

    /// The rail `o` leaves on if it can leave now: its peer's home rail, or for a chunk of
    /// rendezvous data the striping's pick among the rails with room.
    fn rail_for(&mut self, o: &Outgoing) -> Option<Rail> {
        let chunk = matches!(o, Outgoing::Chunk { .. } | Outgoing::Served { .. });
        if chunk && self.st.tx.chunks_inflight >= CHUNK_WINDOW {
            return None;
        }
        let to = match *o {
            Outgoing::Message { to, .. }
            | Outgoing::Served { to, .. }
            | Outgoing::Again { to, .. } => to,
            Outgoing::Chunk { send, recv_id, .. } => {
                // A send failed meanwhile: posting drops its chunk, on any rail.
                let Some(s) = self.st.tx.sends.get(&send) else {
                    return Some(Rail(0));
                };
                if self.striped(s.to, recv_id.is_some(), &s.op) {
                    let usable = self.st.peers.rails_up(s.to);
                    return self.stripe.pick(usable, |r| self.rails.has_room(r));
                }
                s.to
            }
        };
        let home = self.st.peers.home_rail(to);
        self.rails.has_room(home).then_some(home)
    }

    /// Whether a rendezvous chunk to `to` is striped over the rails. Data the receiver asked
    /// for (`asked`) is placed by offset on arrival, whatever rail carried it. A pushed chunk is
    /// handled in its turn, after its request: one that overtakes it waits in the peer's
    /// sequence, which costs a copy but keeps every rail busy from the first byte; over a
    /// connection, whose stream delivers the request late, the wait grows and pushes keep to
    /// it. An RMA write keeps to its rail (it is handled in its turn and large).
    fn striped(&self, to: SlotId, asked: bool, op: &Op) -> bool {
        !matches!(op, Op::Write { .. }) && (asked || !self.st.peers.paths(to).connected())
    }

    fn flush_backlog(&mut self) {
        let mut posted = false;
        while let Some(o) = self.st.tx.backlog.pop_front() {
            let Some(rail) = self.rail_for(&o) else {
                self.st.tx.backlog.push_front(o);
                break;
            };
            if !posted {
                // A rendezvous request and its pushed chunks leave together: one system call,
                // and one prompt ACK asked for the lot rather than one per chunk.
                self.rails.cork();
                posted = true;
            }
            self.post(o, rail);
        }
        if posted {
            self.rails.uncork();
        }
    }

    fn post(&mut self, o: Outgoing, rail: Rail) {
        // The rest of a served read, queued again once its chunk is posted.
        let mut rest = None;
        // Rendezvous data striped over the rails: a peer's connection is the first rail's lane,
        // and the other rails carry theirs over RD beside it.
        let mut striped = false;
        // `prefix` goes in front of `bytes` on the wire; non-empty only for a lent chunk.
        let (to, bytes, prefix, role) = match o {
            Outgoing::Again {
                to,
                head,
                data,
                role,
            } => {
                self.post_rd(to, data, &head, role, None, rail);
                return;
            }
            Outgoing::Message { to, bytes, role } => (to, bytes, Vec::new(), role),
            Outgoing::Chunk {
                send,
                recv_id,
                offset,
                len,
            } => {
                // A send failed meanwhile: its remaining chunks are dropped.
                let Some(s) = self.st.tx.sends.get(&send) else {
                    return;
                };
                let mem = s.mem.as_ref().expect("rendezvous sends keep their buffer");
                striped = self.striped(s.to, recv_id.is_some(), &s.op);
                let mut header = Vec::with_capacity(wire::WRITE_HEADER);
                match s.op {
                    Op::Write { key, addr, .. } => {
                        // `State::rma` refused an `addr + len` past u64::MAX.
                        let at = addr + offset as u64;
                        let last = offset + len == s.len;
                        wire::write(&mut header, self.st.cfg.name.qpn, key, at, send, last);
                    }
                    _ => wire::data(
                        &mut header,
                        self.st.cfg.name.qpn,
                        recv_id,
                        send,
                        offset as u64,
                    ),
                }
                self.st.tx.chunks_inflight += 1;
                // The chunk goes from the application's buffer itself when it is contiguous
                // (a NIC reading registered memory); the send completes only after the peer
                // acknowledged every chunk, so the buffer outlives the queue pair's use of it.
                match mem.lend(offset, len) {
                    Some(lent) => {
                        // A short message the queue pair copies behind its header anyway:
                        // then the copy is its own, and charged.
                        let by_reference = header.len() + len > iwarp::verbs::RD_OWNED_MIN;
                        let lent_bytes = if by_reference { len } else { 0 };
                        self.st.tx.lent += lent_bytes;
                        let role = Role::Chunk {
                            send,
                            lent: lent_bytes as u32,
                        };
                        (s.to, lent, header, role)
                    }
                    None => {
                        let role = Role::Chunk { send, lent: 0 };
                        let mut bytes = self.st.tx.bufs.take(header.len() + len);
                        bytes.extend_from_slice(&header);
                        mem.read_into(offset, len, &mut bytes);
                        (s.to, self.st.tx.bufs.freeze(bytes), Vec::new(), role)
                    }
                }
            }
            Outgoing::Served {
                to,
                id,
                key,
                addr,
                offset,
                len,
            } => {
                let n = len.min(CHUNK);
                // From the pool: a window of fresh chunk-sized buffers, freed together, gives
                // the heap's top back and costs page faults the next time (`bufs`).
                let mut bytes = self.st.tx.bufs.take(DATA_HEADER + n);
                wire::read_data(&mut bytes, self.st.cfg.name.qpn, id, offset as u64);
                // `on_read` checked `addr + len` against the region.
                let at = addr + offset as u64;
                if let Err(r) = self.st.mrs.read(key, at, n, &mut bytes) {
                    // The region went since the READ came: one refusal ends the answer.
                    return self.st.refuse(to, id, r, false);
                }
                if n < len {
                    rest = Some(Outgoing::Served {
                        to,
                        id,
                        key,
                        addr,
                        offset: offset + n,
                        len: len - n,
                    });
                }
                self.st.tx.chunks_inflight += 1;
                let role = Role::Served { id, peer: to };
                (to, self.st.tx.bufs.freeze(bytes), Vec::new(), role)
            }
        };
        let conn = match striped && rail != Rail(0) {
            true => None,
            false => self.paths.route(&self.st.peers, to),
        };
        if let Some(conn) = conn {
            let header = self
                .st
                .peers
                .stamp(to, role.waits_for_peer() || conn.wants_ack());
            match conn.post(header, &prefix, bytes, role) {
                Ok(()) => {
                    self.paths.stats.rc_messages += 1;
                    if matches!(role, Role::Chunk { .. }) {
                        self.stripe.sent(Rail(0), self.st.now);
                    }
                    return self.posted(role, rest);
                }
                // The connection broke: RD takes the message, with a number of its own.
                Err((bytes, role)) => {
                    self.st.peers.unstamp(to);
                    return self.post_stamped_rd(to, bytes, &prefix, role, rest, rail);
                }
            }
        }
        self.post_stamped_rd(to, bytes, &prefix, role, rest, rail)
    }

    /// Posts over RD behind the next per-peer header and `prefix`.
    fn post_stamped_rd(
        &mut self,
        slot: SlotId,
        bytes: bytes::Bytes,
        prefix: &[u8],
        role: Role,
        rest: Option<Outgoing>,
        rail: Rail,
    ) {
        // The per-peer header goes first, numbered now that the message leaves in this order.
        let mut head = [0u8; peer::HEADER + wire::WRITE_HEADER];
        head[..peer::HEADER].copy_from_slice(&self.st.peers.stamp(slot, false).encode());
        let head_len = peer::HEADER + prefix.len();
        head[peer::HEADER..head_len].copy_from_slice(prefix);
        if !self.post_rd(slot, bytes, &head[..head_len], role, rest, rail) {
            self.st.peers.unstamp(slot);
        }
    }

    /// Posts `head` and `bytes` over RD on `rail`; whether the queue pair took it.
    fn post_rd(
        &mut self,
        to: SlotId,
        bytes: bytes::Bytes,
        head: &[u8],
        role: Role,
        rest: Option<Outgoing>,
        rail: Rail,
    ) -> bool {
        // A copied send's completion was reported when it was copied: unsignaled, so the queue
        // pair does not hurry the peer's ACK for it, its role in the request id for the error
        // completion. So go an RTS and a CTS.
        let (wr_id, signaled) = match role.quiet_id() {
            Some(id) => (id, false),
            None => (self.st.id(), !matches!(role, Role::Free)),
        };
        let Some(ah) = self.st.peers.rd_route(to, rail) else {
            // Neither its name nor a message of its gave its queue pair (or the rail's
            // address).
            diag!(
                Warn,
                EpData,
                "send to {}: no RD route",
                self.st.peers.addr(to)
            );
            self.st.send_part_done(role, false);
            return false;
        };
        let wr = SendWrOwned {
            wr_id,
            opcode: SendOpcode::Send,
            data: bytes,
            ah: Some(ah),
            signaled,
        };
        match self.rails.qp(rail).post_send_prefixed(wr, head) {
            Ok(()) => {
                if signaled {
                    self.st.tx.roles.insert(wr_id, role);
                }
                if matches!(role, Role::Chunk { .. }) {
                    self.stripe.sent(rail, self.st.now);
                }
                self.posted(role, rest);
                true
            }
            Err(e) => {
                diag!(Warn, EpData, "send to {} refused: {e}", ah.addr);
                self.st.send_part_done(role, false);
                false
            }
        }
    }

    /// A message of `role` left (on either path); `rest` is what of a served read remains.
    fn posted(&mut self, role: Role, rest: Option<Outgoing>) {
        if let Role::Cts { recv } = role {
            // The CTS may have waited behind our own sends: the sender's clock starts now.
            if let Some(r) = self.st.rx.rndv.get_mut(&recv) {
                r.last = Instant::now();
            }
        }
        if let Some(rest) = rest {
            // Behind whatever queued meanwhile: one peer's large read does not hold up
            // everything else.
            self.st.submit(rest);
        }
    }

    /// Drains the queue pairs (which run their I/O and timers, and lend arrivals to the state)
    /// and posts what waited for room.
    pub fn progress(&mut self) {
        self.progress_part(None);
    }

    /// As [`Self::progress`], for one rail's progress thread (`Some(rail)`,
    /// FI_DIWARP_RAIL_THREADS) or for all: the connections, rail probes and the endpoint's own
    /// timers go with the first rail.
    pub fn progress_part(&mut self, part: Option<Rail>) {
        self.flush_backlog();
        let mut wcs = std::mem::take(&mut self.wcs);
        let rails = match part {
            None => 0..self.rails.len(),
            Some(Rail(r)) => usize::from(r)..usize::from(r) + 1,
        };
        for r in rails {
            let rail = Rail(r as u8);
            loop {
                wcs.clear();
                self.st.now = Instant::now();
                let n = match self
                    .rails
                    .qp(rail)
                    .poll_cq_with(&mut self.st, &mut wcs, POLL_BATCH)
                {
                    Ok(n) => n,
                    Err(e) => {
                        diag!(Warn, EpData, "queue pair of rail {r} failed: {e}");
                        0
                    }
                };
                self.note_heard();
                let failing = wcs.iter().any(|wc| wc.status != WcStatus::Success);
                self.keycheck.check(&self.rails, self.st.now, failing);
                for wc in wcs.drain(..) {
                    if wc.opcode == WcOpcode::Send {
                        let role = Role::from_quiet_id(wc.wr_id)
                            .or_else(|| self.st.tx.roles.remove(&wc.wr_id));
                        if let Some(role) = role {
                            if matches!(role, Role::Chunk { .. }) {
                                self.stripe.done(rail, self.st.now);
                            }
                            self.st.send_part_done(role, wc.status == WcStatus::Success);
                        }
                    }
                }
                self.rail_events(rail, self.st.now);
                self.flush_backlog();
                if n < POLL_BATCH {
                    break;
                }
            }
        }
        self.wcs = wcs;
        if part.is_some_and(|r| r != Rail(0)) {
            return;
        }
        self.probe_rails(self.st.now);
        self.keycheck.check(&self.rails, self.st.now, false);
        self.progress_paths();
        if !self.st.rx.rndv.is_empty() || !self.st.tx.sends.is_empty() {
            self.st.timers(Instant::now());
            self.flush_backlog();
        }
    }

    /// The progress thread's epoll set: the connections join it as they come up.
    pub fn set_waiter(&mut self, w: Arc<crate::waiter::Waiter>) {
        self.paths.set_waiter(w);
    }

    /// Whether the progress thread wakes for arrivals on the connections.
    pub fn watch_connections(&mut self, on: bool) {
        self.paths.set_watching(on);
    }

    /// The endpoint is closing: see [`path::RcPaths::closing`].
    pub fn closing(&mut self) {
        self.paths.closing(&mut self.st.peers);
    }

    /// Drives the RC connections: set-ups, arrivals, acknowledgements, the policy's
    /// decisions; what a connection that went had not had acknowledged goes again over RD,
    /// first.
    fn progress_paths(&mut self) {
        let now = Instant::now();
        self.st.now = now;
        self.note_traffic(now);
        if self.paths.connections() == 0 && !self.paths.enabled() {
            return;
        }
        let owed_before = self.st.peers.take_owing();
        let mut gone = path::Gone::default();
        self.paths.progress(now, &mut self.st, &mut gone);
        self.note_heard();
        // What connections carried is off the first rail's lane, acknowledged or not.
        let off_lane = |stripe: &mut Striping, role: &Role| {
            if matches!(role, Role::Chunk { .. }) {
                stripe.done(Rail(0), now);
            }
        };
        for role in gone.failed {
            off_lane(&mut self.stripe, &role);
            self.st.send_part_done(role, false);
        }
        for (to, list) in gone.resend.into_iter().rev() {
            for u in list.into_iter().rev() {
                off_lane(&mut self.stripe, &u.role);
                let head = u.head().to_vec();
                self.st.tx.backlog.push_front(Outgoing::Again {
                    to,
                    head,
                    data: u.data,
                    role: u.role,
                });
            }
        }
        let mut done = Vec::new();
        self.paths
            .acknowledge(now, &mut self.st.peers, owed_before, &mut done);
        for role in done {
            off_lane(&mut self.stripe, &role);
            self.st.send_part_done(role, true);
        }
        self.note_traffic(now);
        self.flush_backlog();
    }

    /// The senders heard since the last look were heard by now (a clock read only if any).
    fn note_heard(&mut self) {
        if !self.st.live.fresh.is_empty() {
            self.st.heard_by(Instant::now());
        }
    }

    /// Hands the traffic logged since to the promotion policy.
    fn note_traffic(&mut self, now: Instant) {
        for t in self.st.traffic.drain(..) {
            self.paths.traffic(now, t.slot, t.len, t.rendezvous);
        }
    }

    /// Nothing of ours is waiting for the peer: every send is acknowledged.
    pub fn idle(&self) -> bool {
        // The queue pair counts every send posted until its completion is polled, unsignaled
        // injects included; a send with a role in `roles` is one of them.
        self.st.tx.backlog.is_empty() && self.rails.sends_outstanding() == 0 && self.paths.settled()
    }

    /// Sends the ACKs owed now: the caller stops polling for a while.
    pub fn flush_acks(&mut self) {
        self.rails.flush_acks();
        self.paths.send_owed_acks(&mut self.st.peers);
    }

    /// Datagrams read off the socket so far.
    pub fn datagrams_read(&self) -> u64 {
        self.rails.datagrams_read()
    }

    /// Datagrams read off one rail's socket, or all.
    pub fn datagrams_read_of(&self, part: Option<Rail>) -> u64 {
        part.map_or_else(
            || self.rails.datagrams_read(),
            |r| self.rails.datagrams_read_of(r),
        )
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_deadline_of(None)
    }

    /// When [`Self::progress_part`] of `part` next has something to do.
    pub fn next_deadline_of(&self, part: Option<Rail>) -> Option<Instant> {
        let rails = match part {
            None => self.rails.next_deadline(),
            Some(rail) => self.rails.next_deadline_of(rail),
        };
        if part.is_some_and(|r| r != Rail(0)) {
            return rails;
        }
        // An acknowledgement owed is due now (the next pass sends it).
        let owed = self.st.peers.owing().then(Instant::now);
        let rc = self.paths.next_deadline().into_iter().chain(owed).min();
        let rails = rails.into_iter().chain(rc).min();
        rails.into_iter().chain(self.failover.next_deadline()).min()
    }
}

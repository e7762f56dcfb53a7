//! The RD queue pair's own state: its socket, engine and table of peers, and the loop that
//! hands the engine's datagrams to the kernel.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::IoSlice;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reliability::header::MAX_HEADER_LEN;
use reliability::{Config as RdConfig, Endpoint, SessionIds};
use socket2::SockRef;

use super::super::cq::WorkQueues;
use super::super::dgram::DatagramSocket;
use super::super::fault::FaultStats;
use super::super::link;
use super::super::rng::SplitMix64;
use super::super::{QpConfig, VerbsError, WcStatus};
use super::conn::PeerSocket;
use super::copies;
use super::hello;
use super::pool::BufPool;
use super::ring::RecvRing;
use super::rx::Stash;
use super::stats::RdStats;
use super::table::{PeerIx, PeerTable};
use super::tx::{TxItem, TxQueue};
use crate::auth::{Context, JobKey, TAG_LEN};

/// `SO_RCVBUF`/`SO_SNDBUF` an RD socket asks for unless the configuration says otherwise.
pub const RD_SOCKET_BUFFER: usize = 4 << 20;

/// Datagrams up to this size (an MTU of Ethernet jumbo frames and below) are read with UDP
/// receive offload: the kernel hands over runs of them in one buffer, as TCP hands over a
/// stream, instead of one system call's share and one socket-buffer entry per datagram.
const GRO_MAX_DATAGRAM: usize = 9 << 10;

/// How long a peer stays idle before its active part ([`PeerActive`]) is dropped: long enough
/// that a peer exchanging messages steadily keeps its queues (and their allocations) between
/// them, short enough that peers met once in an exchange soon cost only their entry.
///
/// [`PeerActive`]: super::peer::PeerActive
pub(super) const IDLE_GRACE: Duration = Duration::from_millis(100);

/// A datagram set aside until receives are posted.
pub(super) struct Parked {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
    pub(super) src: Option<SocketAddr>,
    pub(super) session: u32,
    pub(super) seq: u32,
}

pub(crate) struct RdPath {
    pub(super) sock: DatagramSocket,
    pub(super) local: SocketAddr,
    pub(super) qpn: u32,
    pub(super) config: RdConfig,
    pub(super) endpoint: Endpoint,
    /// This incarnation, in every session it opens by handshake.
    pub(super) epoch: u32,
    pub(super) rng: SplitMix64,
    /// Every peer known, by address and by local session id (handshaking ones too: their id
    /// is taken).
    pub(super) peers: PeerTable,
    /// HELLO retransmissions due, earliest first. Entries are not taken out when a handshake
    /// ends: one is acted on only if its peer's timer still says that moment.
    pub(super) hellos: BinaryHeap<Reverse<(Instant, PeerIx)>>,
    /// Peers with sends waiting that may go now.
    pub(super) retry: Vec<PeerIx>,
    /// Peers that fell idle, and when: their active part goes once [`IDLE_GRACE`] has passed
    /// and they are idle still. A FIFO, so that no progress call looks at every peer.
    pub(super) idle: VecDeque<(PeerIx, Instant)>,
    /// Taken out while its datagrams are handled (boxed: a move is a pointer).
    pub(super) ring: Option<Box<RecvRing>>,
    pub(super) parked: VecDeque<Parked>,
    pub(super) stash: Stash,
    pub(super) tx: TxQueue,
    pub(super) pool: BufPool,
    pub(super) copies: copies::Copies,
    pub(super) next_msn: u32,
    /// The last poll left the engine's events for this one.
    pub(super) events_deferred: bool,
    /// Posted sends wait for [`RdPath::uncork`] instead of leaving one by one.
    pub(super) corked: bool,
    /// The queue pair's own counters, plus those of closed sessions.
    pub(super) stats: RdStats,
    /// Peers that may still get a connected send socket ([`conn`]).
    pub(super) connect_left: usize,
    /// `SO_SNDBUF` of the shared socket, given to the connected ones.
    pub(super) send_buffer: usize,
    /// Ask peers on this host for a CRC32c too ([`QpConfig::crc_same_host`], or a fault
    /// layer, which stands for a wire).
    pub(super) crc_same_host: bool,
    /// Sends of sessions that end go back to the caller, and stalls are reported
    /// ([`RdConfig::stall_after`](reliability::Config::stall_after) set): `None` otherwise.
    pub(super) handback: Option<Box<super::returned::Handback>>,
    /// Authenticated mode's key ([`QpConfig::auth`]).
    pub(super) auth: Option<Arc<JobKey>>,
}

impl RdPath {
    pub(crate) fn new(
        socket: UdpSocket,
        config: &QpConfig,
        qpn: u32,
    ) -> Result<RdPath, VerbsError> {
        let local = socket.local_addr()?;
        let mut rd = config.rd.clone();
        // The tag detects what the CRC would, and more: a datagram carries one or the other.
        rd.checksum = config.crc && config.auth.is_none();
        if config.fit_mtu {
            if let Some(limit) = link::udp_payload_limit(local.ip()) {
                rd.max_datagram_size = rd.max_datagram_size.min(limit);
            }
        }
        if config.auth.is_some() {
            if local.ip().is_unspecified() {
                return Err(VerbsError::InvalidArgument(
                    "authenticated mode needs the socket bound to one address, the one peers \
                     send to (not a wildcard)"
                        .into(),
                ));
            }
            rd.max_datagram_size = rd.max_datagram_size.saturating_sub(TAG_LEN);
        }
        let mut endpoint = Endpoint::new(rd.clone())
            .map_err(|e| VerbsError::InvalidArgument(e.to_string().into()))?;
        // Linux reports twice the size asked for (its bookkeeping share included); a full
        // datagram can cost about its size again in that bookkeeping. The budget keeps all
        // peers together from sending more than the socket holds while we do not read.
        let granted = SockRef::from(&socket).recv_buffer_size()?;
        // A small datagram may cost a whole page in a NIC driver's receive buffer.
        let charge = (2 * rd.max_datagram_size).max(rd.max_datagram_size + 4096);
        let budget = (granted / charge).max(1);
        endpoint.set_recv_budget(u32::try_from(budget).unwrap_or(u32::MAX));
        let send_buffer = SockRef::from(&socket).send_buffer_size()?;
        let sock = DatagramSocket::new(socket, config.faults.as_ref())?;
        let crc_same_host = config.crc_same_host || sock.faulty();
        // The fault layer hooks the shared socket only.
        let connect_left = if sock.faulty() {
            0
        } else {
            config.connected_peers
        };
        let mut ring = Box::new(RecvRing::new());
        if rd.max_datagram_size <= GRO_MAX_DATAGRAM {
            ring.enable_gro(sock.socket());
        }
        let mut rng = SplitMix64::from_entropy(u64::from(qpn) ^ (u64::from(local.port()) << 32));
        let epoch = loop {
            let e = rng.next_u32();
            if e != 0 {
                break e;
            }
        };
        Ok(RdPath {
            sock,
            local,
            qpn,
            config: rd,
            endpoint,
            epoch,
            rng,
            peers: PeerTable::default(),
            hellos: BinaryHeap::new(),
            retry: Vec::new(),
            idle: VecDeque::new(),
            ring: Some(ring),
            parked: VecDeque::new(),
            stash: Stash::default(),
            tx: TxQueue::new(config.auth.clone()),
            pool: BufPool::default(),
            copies: copies::Copies::default(),
            next_msn: 1,
            events_deferred: false,
            corked: false,
            stats: RdStats::default(),
            connect_left,
            send_buffer,
            crc_same_host,
            handback: config.rd.stall_after.map(|_| Box::default()),
            auth: config.auth.clone(),
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sends what the kernel refused earlier, then everything the engine has ready, in
    /// batches, until it has nothing or the socket is full.
    pub(super) fn transmit(&mut self, now: Instant) {
        loop {
            if !self.tx.flush(&mut self.sock, &mut self.stats.send_errors) {
                return;
            }
            let mut drained = false;
            // A run of datagrams goes to one peer: look it up once per run. A run ends when
            // the session has no more or the batch is full.
            let mut route: Option<(u32, SocketAddr, Option<&Arc<PeerSocket>>)> = None;
            let mut header = [0u8; MAX_HEADER_LEN];
            let (tx, peers) = (&mut self.tx, &self.peers);
            while tx.wants_more() {
                let run = self
                    .endpoint
                    .poll_transmit_run(now, &mut header, |id, header, t| {
                        if route.is_none_or(|(r, ..)| r != id) {
                            route = peers
                                .find_id(id)
                                .and_then(|i| peers.get(i).map(|p| (id, p.ah.addr, peers.via(i))));
                        }
                        if let Some((_, dst, via)) = route {
                            tx.push(TxItem {
                                dst,
                                via: via.cloned(),
                                header: *header,
                                t,
                                tag: None,
                            });
                        }
                        tx.wants_more()
                    });
                if run.is_none() {
                    drained = true;
                    break;
                }
            }
            if self.tx.len() == 0 {
                return;
            }
            if drained {
                // The engine has nothing more: send this batch and stop asking.
                self.tx.flush(&mut self.sock, &mut self.stats.send_errors);
                return;
            }
        }
    }

    /// The queue pair failed: every outstanding request completes with `FlushError`.
    pub(crate) fn flush(&mut self, q: &mut WorkQueues) {
        self.connect_left += self.peers.vias().count();
        for mut p in self.peers.drain() {
            p.fail_sends(q, WcStatus::FlushError);
            if let Some(a) = &mut p.active {
                a.rx.flush(q);
            }
            if let Some(s) = self.endpoint.remove(p.local_id) {
                self.stats.add_session(s.stats());
            }
        }
        self.hellos = BinaryHeap::new();
        self.retry = Vec::new();
        self.idle = VecDeque::new();
        // What the kernel had not taken yet may lend from buffers just handed back.
        self.tx.clear();
        self.stash.clear();
        self.parked.clear();
    }

    /// The earliest moment `poll_cq` has timed work to do: an engine timer (ACK delay,
    /// retransmission, peer failure), a handshake retransmission, a held fault datagram, or
    /// idle peers' active parts to drop (so that memory goes back without traffic).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        // Possibly a handshake that ended since: the wake-up then finds nothing due.
        let hello = self.hellos.peek().map(|Reverse((t, _))| *t);
        let idle = self.idle.front().map(|&(_, since)| since + IDLE_GRACE);
        [
            self.endpoint.poll_timeout(),
            hello,
            idle,
            self.sock.next_fault_release(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Sends every ACK owed now (see [`Endpoint::flush_acks`]).
    pub(crate) fn flush_acks(&mut self) {
        self.endpoint.flush_acks();
        self.transmit(Instant::now());
    }

    /// Bytes of the queue pair's own copies of short messages still held.
    pub(crate) fn copied_bytes(&self) -> usize {
        self.copies.bytes()
    }

    /// Datagrams read off the socket so far, without summing the sessions' counters.
    pub(crate) fn datagrams_read(&self) -> u64 {
        self.stats.datagrams_read
    }

    pub(crate) fn stats(&self) -> RdStats {
        let mut s = self.stats;
        for (_, session) in self.endpoint.sessions() {
            s.add_session(session.stats());
            s.srtt = s.srtt.max(session.rtt().srtt);
            s.crc_peers += usize::from(session.config().checksum);
        }
        let e = self.endpoint.stats();
        s.dropped_malformed = e.dropped_malformed;
        s.dropped_unknown_session = e.dropped_unknown_session;
        s.sessions_frozen = e.sessions_frozen;
        s.sessions_resumed = e.sessions_resumed;
        s.sessions_open = self.endpoint.len();
        s.peers = self.peers.len();
        s.connected_peers = self.peers.vias().count();
        for p in self.peers.iter() {
            if let Some(d) = p.dormant() {
                s.dormant_peers += 1;
                s.crc_peers += usize::from(d.checksum());
            }
        }
        s.gso_sends = self.tx.gso_sends;
        s.connected_sends = self.tx.via_sends;
        s.gro_runs = self.ring.as_ref().map_or(0, |r| r.gro_runs);
        s.max_datagram_size = self.config.max_datagram_size;
        s
    }

    /// Engine counters and RTT of the session with the peer at `addr` (for a dormant one, zero
    /// counters and the smoothed RTT it kept).
    pub(crate) fn peer_stats(
        &self,
        addr: SocketAddr,
    ) -> Option<(reliability::Stats, reliability::RttStats)> {
        let p = self.peers.get(self.peers.find(addr)?)?;
        if let Some(d) = p.dormant() {
            // Its counters went into the queue pair's totals when it froze; resumed, it counts
            // from zero, with the smoothed RTT it kept.
            let rtt = reliability::RttStats {
                srtt: d.srtt(),
                rttvar: Duration::ZERO,
                rto: Duration::ZERO,
                reo_wnd: Duration::ZERO,
                ack_lag: Duration::ZERO,
            };
            return Some((reliability::Stats::default(), rtt));
        }
        let s = self.endpoint.session(p.local_id)?;
        Some((*s.stats(), s.rtt()))
    }

    /// The session ids in use with the peer at `addr`, once established.
    pub(crate) fn peer_ids(&self, addr: SocketAddr) -> Option<SessionIds> {
        self.peers.get(self.peers.find(addr)?)?.ids()
    }

    /// Datagrams go nowhere from now on: they are kept for [`RdPath::take_sent`] (after the
    /// fault layer, if one is on). No connected send socket is opened: they would bypass it.
    pub(crate) fn null_link(&mut self) {
        self.sock.null_link();
        self.connect_left = 0;
    }

    /// Undoes [`RdPath::null_link`]; peers keep sharing the socket.
    pub(crate) fn restore_link(&mut self) {
        self.sock.restore_link();
    }

    pub(crate) fn take_sent(&mut self) -> Vec<(SocketAddr, Vec<u8>)> {
        self.sock.take_sent()
    }

    pub(crate) fn fault_stats(&self) -> Option<FaultStats> {
        self.sock.fault_stats()
    }

    pub(super) fn send_control(&mut self, dst: SocketAddr, bytes: &[u8]) {
        self.stats.control_sent += 1;
        let tag = self.auth.as_ref().map(|k| {
            k.tag(
                &Context::Hello {
                    from: self.local,
                    to: dst,
                },
                bytes,
            )
        });
        // A control datagram the kernel refuses is lost like any other; the timer resends.
        let dst = nix::sys::socket::SockaddrStorage::from(dst);
        let tag = tag.as_ref().map_or(&[][..], |t| &t[..]);
        let _ = self
            .sock
            .send(&[IoSlice::new(bytes), IoSlice::new(tag)], &dst);
    }

    /// Authenticated mode: the length of what the job's tag at the end of `data`, a datagram
    /// from `src` just read, covers; `None` (counted) if it has none. Without a key, all of it.
    pub(super) fn authentic(&mut self, data: &[u8], src: Option<SocketAddr>) -> Option<usize> {
        let Some(key) = &self.auth else {
            return Some(data.len());
        };
        let to = self.local;
        let ctx = match (data.first().is_some_and(|&b| hello::is_control(b)), src) {
            (true, Some(from)) => Some(Context::Hello { from, to }),
            // A handshake names its sender by address, which must be known to check it.
            (true, None) => None,
            (false, _) => Some(Context::Datagram { to }),
        };
        let n = ctx.and_then(|ctx| key.open(&ctx, data));
        if n.is_none() {
            self.stats.dropped_unauthenticated += 1;
        }
        n
    }

    /// Notes that the peer at `i` may have fallen idle (after its work moved on): its active
    /// part goes at [`RdPath::retire_idle`] if it stays so. O(1): a peer already listed is
    /// not listed twice.
    pub(super) fn note_idle(&mut self, i: PeerIx, now: Instant) {
        let Some(a) = self.peers.get_mut(i).and_then(|p| p.active.as_mut()) else {
            return;
        };
        if !a.listed && a.idle() {
            a.listed = true;
            self.idle.push_back((i, now));
        }
    }

    /// Drops the active parts of peers idle for [`IDLE_GRACE`]; looks only at those listed
    /// that long.
    pub(super) fn retire_idle(&mut self, now: Instant) {
        while let Some(&(i, since)) = self.idle.front() {
            if now.saturating_duration_since(since) < IDLE_GRACE {
                return;
            }
            self.idle.pop_front();
            // A place reused since names another peer: retiring it early, if idle, loses
            // nothing, and its own entry comes later.
            if let Some(p) = self.peers.get_mut(i) {
                if let Some(a) = &mut p.active {
                    a.listed = false;
                }
                p.retire();
            }
        }
        // A burst of a million peers going idle must not leave its FIFO's room behind.
        if self.idle.is_empty() && self.idle.capacity() > 64 {
            self.idle = VecDeque::new();
        }
    }

    /// A fresh non-zero local session id not in use.
    pub(super) fn fresh_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u32();
            if id != 0 && self.peers.find_id(id).is_none() {
                return id;
            }
        }
    }

    /// Receives bound to messages still arriving.
    pub(crate) fn bound_receives(&self) -> usize {
        self.peers
            .iter()
            .filter_map(|p| p.active.as_ref())
            .map(|a| a.rx.bound_len())
            .sum()
    }
}

impl std::fmt::Debug for RdPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdPath")
            .field("local", &self.local)
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
}

//! RD queue pairs: reliable datagrams (seed 000 §III-B) over the UD socket, with the
//! `reliability` engine as the LLP beneath DDP.
//!
//! One UDP socket per queue pair and one engine session per peer. A send is one message of any
//! size: it gets an untagged DDP/RDMAP Send header, the engine segments it, and it completes
//! when the peer has acknowledged every byte. Segments are placed straight into the posted
//! receive bound to their message, in whatever order they arrive; messages complete in order
//! per peer. Peers agree on session ids with a small handshake ([`hello`]) unless the caller
//! pre-seeds them.
//!
//! Everything runs inside `post_send` and `poll_cq`: the clock is read once per call, engine
//! timers run when due, and [`RdPath::next_deadline`] tells a timer thread when to poll.

mod conn;
mod copies;
mod hello;
mod memory;
mod peers;
mod pool;
mod ring;
mod rx;
mod stats;
mod tx;

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::net::{SocketAddr, UdpSocket};
use std::time::Instant;

use bytes::Bytes;
use nix::errno::Errno;
use reliability::header::{Packet, MAX_HEADER_LEN};
use reliability::{Config as RdConfig, Endpoint, Event, SendError, SessionIds};
use socket2::SockRef;

use super::cq::WorkQueues;
use super::dgram::DatagramSocket;
use super::fault::FaultStats;
use super::link;
use super::rng::SplitMix64;
use super::{AddressHandle, QpConfig, SendOpcode, SendWr, SendWrOwned, VerbsError, WcStatus};
use crate::wire::datagram::{self, MAX_QPN};
use crate::wire::rdmap::{Opcode, SegmentRepr};
pub use memory::RdMemory;
pub use peers::same_host;
use peers::{OutMsg, Peer};
use pool::BufPool;
use ring::RecvRing;
use rx::{Gate, ReceiverSink, RxSink, Stash, DDP_HEADER};
pub use rx::{RdReceiver, SEGMENT_HEAD};
pub use stats::RdStats;
use tx::{TxItem, TxQueue};

/// Largest RD message: the engine carries up to `u32::MAX` bytes, header included.
pub const RD_MAX_MESSAGE: usize = u32::MAX as usize - DDP_HEADER;

/// `SO_RCVBUF`/`SO_SNDBUF` an RD socket asks for unless the configuration says otherwise.
pub const RD_SOCKET_BUFFER: usize = 4 << 20;

/// Datagrams set aside for lack of receives; more such datagrams are refused unacknowledged
/// (the sender keeps them and retransmits). The socket is never left unread: a datagram that
/// completes a message already bound must always get through, or the receives it holds would
/// never come free.
const PARK_MAX: usize = 32;

/// Owned sends up to this size are copied after all: a small message travels whole in one
/// datagram, and one buffer with the header in front is cheaper than keeping two pieces.
pub const RD_OWNED_MIN: usize = 8 << 10;

/// `recvmmsg` batches per poll, so one poll cannot starve the caller.
const RX_ROUNDS: usize = 4;
/// Datagrams up to this size (an MTU of Ethernet jumbo frames and below) are read with UDP
/// receive offload: the kernel hands over runs of them in one buffer, as TCP hands over a
/// stream, instead of one system call's share and one socket-buffer entry per datagram.
const GRO_MAX_DATAGRAM: usize = 9 << 10;

/// The peer tables are looked up several times per datagram. SipHash, std's default, costs
/// more than the rest of a lookup; foldhash is seeded per process (so keys an attacker picks,
/// peer addresses, still cannot be aimed at one bucket) and a fraction of the cost.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A shorter-lived handle on the receiver, for one call.
fn reborrow<'b>(r: &'b mut Option<&mut dyn RdReceiver>) -> Option<&'b mut dyn RdReceiver> {
    match r {
        Some(r) => Some(&mut **r),
        None => None,
    }
}

/// A datagram set aside until receives are posted.
struct Parked {
    buf: Vec<u8>,
    len: usize,
    src: Option<SocketAddr>,
    session: u32,
    seq: u32,
}

pub(crate) struct RdPath {
    sock: DatagramSocket,
    local: SocketAddr,
    qpn: u32,
    config: RdConfig,
    endpoint: Endpoint,
    /// This incarnation, in every session it opens by handshake.
    epoch: u32,
    rng: SplitMix64,
    peers: FastMap<SocketAddr, Peer>,
    /// Local session id → peer, for every peer (handshaking ones too: their id is taken).
    by_id: FastMap<u32, SocketAddr>,
    /// Peers waiting for a HELLO-ACK.
    handshaking: Vec<SocketAddr>,
    /// Peers with sends waiting that may go now.
    retry: Vec<SocketAddr>,
    /// Taken out while its datagrams are handled (boxed: a move is a pointer).
    ring: Option<Box<RecvRing>>,
    parked: VecDeque<Parked>,
    stash: Stash,
    tx: TxQueue,
    pool: BufPool,
    copies: copies::Copies,
    next_msn: u32,
    /// The last poll left the engine's events for this one.
    events_deferred: bool,
    /// Posted sends wait for [`RdPath::uncork`] instead of leaving one by one.
    corked: bool,
    /// The queue pair's own counters, plus those of closed sessions.
    stats: RdStats,
    /// Peers that may still get a connected send socket ([`conn`]).
    connect_left: usize,
    /// `SO_SNDBUF` of the shared socket, given to the connected ones.
    send_buffer: usize,
    /// Ask peers on this host for a CRC32c too ([`QpConfig::crc_same_host`], or a fault
    /// layer, which stands for a wire).
    crc_same_host: bool,
}

impl RdPath {
    pub(crate) fn new(
        socket: UdpSocket,
        config: &QpConfig,
        qpn: u32,
    ) -> Result<RdPath, VerbsError> {
        let local = socket.local_addr()?;
        let mut rd = config.rd.clone();
        rd.checksum = config.crc;
        if config.fit_mtu {
            if let Some(limit) = link::udp_payload_limit(local.ip()) {
                rd.max_datagram_size = rd.max_datagram_size.min(limit);
            }
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
            peers: FastMap::default(),
            by_id: FastMap::default(),
            handshaking: Vec::new(),
            retry: Vec::new(),
            ring: Some(ring),
            parked: VecDeque::new(),
            stash: Stash::default(),
            tx: TxQueue::default(),
            pool: BufPool::default(),
            copies: copies::Copies::default(),
            next_msn: 1,
            events_deferred: false,
            corked: false,
            stats: RdStats::default(),
            connect_left,
            send_buffer,
            crc_same_host,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Queues one message for `wr.ah`. It leaves at once as far as the window allows (unless
    /// corked, then at [`RdPath::uncork`]); the rest goes from `poll_cq`. The caller's data is only borrowed and must outlive the
    /// acknowledgement: it is copied once, header in front.
    pub(crate) fn post_send(
        &mut self,
        q: &mut WorkQueues,
        wr: &SendWr<'_>,
    ) -> Result<(), VerbsError> {
        self.post_copied(q, wr.wr_id, wr.opcode, wr.ah, wr.signaled, &[wr.data])
    }

    /// Posts the message `parts` joined, copied once behind its header.
    fn post_copied(
        &mut self,
        q: &mut WorkQueues,
        wr_id: u64,
        opcode: SendOpcode,
        ah: Option<AddressHandle>,
        signaled: bool,
        parts: &[&[u8]],
    ) -> Result<(), VerbsError> {
        let len = parts.iter().map(|p| p.len()).sum();
        let (ah, header) = self.prepare(q, opcode, ah, len)?;
        let mut msg = self.pool.take(DDP_HEADER + len);
        msg.extend_from_slice(&header);
        for p in parts {
            msg.extend_from_slice(p);
        }
        // Large copies go back to the pool once acknowledged; short ones are counted while
        // held, for the owner's bound on what it holds for its peers.
        let data = if pool::worth_pooling(msg.len()) {
            Bytes::from(msg)
        } else {
            self.copies.freeze(msg)
        };
        let out = OutMsg {
            wr_id,
            len,
            signaled,
            head: Bytes::new(),
            data,
            pooled: true,
        };
        self.enqueue(q, ah, out)
    }

    /// As [`RdPath::post_send`], keeping the caller's buffer instead of a copy: the header
    /// travels as a separate piece in front of it.
    pub(crate) fn post_send_owned(
        &mut self,
        q: &mut WorkQueues,
        wr: SendWrOwned,
    ) -> Result<(), VerbsError> {
        if wr.data.len() <= RD_OWNED_MIN {
            // Small: one buffer with the header in front costs less than two pieces.
            return self.post_copied(q, wr.wr_id, wr.opcode, wr.ah, wr.signaled, &[&wr.data]);
        }
        let (ah, header) = self.prepare(q, wr.opcode, wr.ah, wr.data.len())?;
        let out = OutMsg {
            wr_id: wr.wr_id,
            len: wr.data.len(),
            signaled: wr.signaled,
            head: Bytes::copy_from_slice(&header),
            data: wr.data,
            pooled: false,
        };
        self.enqueue(q, ah, out)
    }

    /// As [`post_send_owned`](Self::post_send_owned) for the message `prefix` ++ `wr.data`:
    /// the prefix (a small header of the caller's) joins the DDP header, the data is kept as
    /// it is.
    pub(crate) fn post_send_prefixed(
        &mut self,
        q: &mut WorkQueues,
        wr: SendWrOwned,
        prefix: &[u8],
    ) -> Result<(), VerbsError> {
        let len = prefix.len() + wr.data.len();
        if len <= RD_OWNED_MIN {
            let parts: [&[u8]; 2] = [prefix, &wr.data];
            return self.post_copied(q, wr.wr_id, wr.opcode, wr.ah, wr.signaled, &parts);
        }
        let (ah, header) = self.prepare(q, wr.opcode, wr.ah, len)?;
        let mut head = Vec::with_capacity(DDP_HEADER + prefix.len());
        head.extend_from_slice(&header);
        head.extend_from_slice(prefix);
        let out = OutMsg {
            wr_id: wr.wr_id,
            len,
            signaled: wr.signaled,
            head: head.into(),
            data: wr.data,
            pooled: false,
        };
        self.enqueue(q, ah, out)
    }

    /// Checks a send, takes a send slot and a message sequence number, and returns the
    /// destination and the message's DDP header.
    fn prepare(
        &mut self,
        q: &mut WorkQueues,
        opcode: SendOpcode,
        ah: Option<AddressHandle>,
        len: usize,
    ) -> Result<(AddressHandle, [u8; DDP_HEADER]), VerbsError> {
        let ah = ah.ok_or(VerbsError::MissingAddressHandle)?;
        if ah.qpn > MAX_QPN {
            return Err(VerbsError::InvalidArgument(
                "address handle QPN above 2^30 - 1".into(),
            ));
        }
        if len > RD_MAX_MESSAGE {
            return Err(VerbsError::MessageTooLarge {
                len,
                max: RD_MAX_MESSAGE,
            });
        }
        q.reserve_send()?;
        let opcode = match opcode {
            SendOpcode::Send => Opcode::Send,
            SendOpcode::SendSolicited => Opcode::SendSolicited,
        };
        let qn = datagram::qn_for(ah.qpn, opcode.queue());
        let seg = SegmentRepr::untagged(opcode, true, qn, self.next_msn, 0);
        let mut header = [0u8; DDP_HEADER];
        if let Err(e) = seg.emit(&mut header) {
            q.unreserve_send();
            return Err(e.into());
        }
        self.next_msn = self.next_msn.wrapping_add(1);
        Ok((ah, header))
    }

    /// Hands a prepared message to the peer's session, or queues it behind the handshake or a
    /// full send buffer, and sends what the window allows unless corked.
    fn enqueue(
        &mut self,
        q: &mut WorkQueues,
        ah: AddressHandle,
        out: OutMsg,
    ) -> Result<(), VerbsError> {
        let now = Instant::now();
        let addr = self.peer_for_send(q, ah, now);
        let p = self.peers.get_mut(&addr).expect("just ensured");
        match p.remote {
            Some(_) if p.waiting.is_empty() => {
                match out.offer(&mut self.endpoint, p.local_id, now) {
                    Ok(f) => p.inflight.push_back(f),
                    Err((SendError::WouldBlock | SendError::PeerFailed, out)) => {
                        p.waiting.push_back(out)
                    }
                    Err((SendError::TooLarge, out)) => {
                        q.unreserve_send();
                        return Err(VerbsError::MessageTooLarge {
                            len: out.len,
                            max: RD_MAX_MESSAGE,
                        });
                    }
                }
            }
            _ => p.waiting.push_back(out),
        }
        if !self.corked {
            self.transmit(now);
        }
        Ok(())
    }

    /// Holds posted sends back until [`RdPath::uncork`].
    pub(crate) fn cork(&mut self) {
        self.corked = true;
    }

    /// Sends what [`RdPath::cork`] held back.
    pub(crate) fn uncork(&mut self) {
        if std::mem::take(&mut self.corked) {
            self.transmit(Instant::now());
        }
    }

    /// One round of progress: release held fault datagrams, complete what waited for
    /// receives, read the socket in batches, run due timers, turn engine events into
    /// completions, and send.
    /// `recv`: receiver mode ([`RdReceiver`]); posted receives are then not used.
    pub(crate) fn progress(
        &mut self,
        q: &mut WorkQueues,
        mut recv: Option<&mut dyn RdReceiver>,
    ) -> Result<(), VerbsError> {
        let now = Instant::now();
        if self.sock.faulty() {
            self.sock.release_faults(now);
        }
        if !self.stash.is_empty() {
            self.stash.drain(q, self.qpn, &mut self.stats);
        }
        if !self.parked.is_empty() {
            self.retry_parked(q, now);
        }
        let lone = self.receive(q, now, reborrow(&mut recv))?;
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        self.handshake_timers(q, now);
        if lone {
            // One datagram, probably the message the caller is polling for: hand it over now
            // and turn the engine's news into completions on the next poll. What must leave at
            // once (ACKs, retransmissions) still does.
            self.events_deferred = true;
            self.transmit(now);
            return Ok(());
        }
        self.events_deferred = false;
        // An empty poll (the common case for a busy-polling caller) has nothing to serve.
        if !self.retry.is_empty() || self.tx.len() > 0 || self.endpoint.has_pending() {
            self.service(q, now);
        }
        Ok(())
    }

    /// Reads the socket in batches. Returns whether it got a lone datagram (and deferred the
    /// engine's events, which it does at most every other poll).
    fn receive(
        &mut self,
        q: &mut WorkQueues,
        now: Instant,
        mut recv: Option<&mut dyn RdReceiver>,
    ) -> Result<bool, VerbsError> {
        let mut rounds = 0;
        while rounds < RX_ROUNDS {
            let mut ring = self.ring.take().expect("ring is home between calls");
            let r = ring.recv(self.sock.socket());
            let n = match r {
                Ok(n) => {
                    self.stats.datagrams_read += n as u64;
                    n
                }
                Err(e) => {
                    self.ring = Some(ring);
                    match e {
                        Errno::EINTR => continue,
                        // ICMP errors concern earlier sends to somebody; the engine resends.
                        Errno::ECONNREFUSED | Errno::EHOSTUNREACH | Errno::ENETUNREACH => {
                            rounds += 1;
                            continue;
                        }
                        Errno::EAGAIN => {
                            self.drained(now);
                            return Ok(false);
                        }
                        e => return Err(e.into()),
                    }
                }
            };
            let mut i = 0;
            while i < n {
                let (data, src) = ring.get(i);
                // Receiver mode takes every message as it comes (nothing waits for receives):
                // a run of one peer's datagrams (a GRO run, say) goes to its session in one call.
                if let (Some(recv), Some(id)) = (recv.as_deref_mut(), Self::run_session(data)) {
                    let end = (i + 1..n)
                        .find(|&j| {
                            let (d, s) = ring.get(j);
                            s != src || Self::run_session(d) != Some(id)
                        })
                        .unwrap_or(n);
                    self.feed_run(now, id, (i..end).map(|j| ring.get(j).0), recv);
                    i = end;
                    continue;
                }
                if let Some((session, seq)) =
                    self.on_datagram(q, now, data, src, reborrow(&mut recv))
                {
                    let len = data.len();
                    self.park(&mut ring, i, len, src, session, seq);
                }
                i += 1;
            }
            let ring_drained = ring.drained();
            if ring.known_empty() {
                self.drained(now);
            }
            self.ring = Some(ring);
            if n == 1 && rounds == 0 && !self.events_deferred {
                return Ok(true);
            }
            // ACKs leave between batches, not only at the end of a long poll.
            self.service(q, now);
            if ring_drained {
                return Ok(false);
            }
            rounds += 1;
        }
        Ok(false)
    }

    /// The socket was read to the end (a read found it empty, or a batch read came up short):
    /// whatever is read next came later. The engine tells lost ACKs from late ones by it.
    fn drained(&mut self, now: Instant) {
        self.endpoint.input_drained(now);
    }

    /// Handles one datagram; returns (session, seq) when it must wait for receives.
    fn on_datagram(
        &mut self,
        q: &mut WorkQueues,
        now: Instant,
        data: &[u8],
        src: Option<SocketAddr>,
        recv: Option<&mut dyn RdReceiver>,
    ) -> Option<(u32, u32)> {
        let Some(&first) = data.first() else {
            self.stats.dropped_control += 1;
            return None;
        };
        if hello::is_control(first) {
            self.on_control(q, now, data, src);
            return None;
        }
        if recv.is_some() {
            // Receiver mode: runs go by `feed_run`, so this names no session; the engine
            // counts it.
            self.feed(q, now, data, None);
            return None;
        }
        let pkt = Packet::new_checked(data).ok();
        let addr = pkt
            .as_ref()
            .and_then(|p| self.by_id.get(&p.session()).copied());
        if let (Some(pkt), Some(p)) = (pkt, addr.and_then(|a| self.peers.get_mut(&a))) {
            if p.remote.is_some_and(|r| r.epoch == pkt.epoch())
                && rx::gate(&pkt, &mut p.rx, q, &self.stash) == Gate::Park
            {
                return Some((pkt.session(), pkt.seq().0));
            }
        }
        self.feed(q, now, data, addr);
        None
    }

    /// The session a reliability datagram names (`None` for a control datagram or one too
    /// short to name any).
    fn run_session(data: &[u8]) -> Option<u32> {
        if hello::is_control(*data.first()?) {
            return None;
        }
        Endpoint::peek_session_id(data)
    }

    /// Hands datagrams that all name session `id` to the engine at once (receiver mode).
    fn feed_run<'d>(
        &mut self,
        now: Instant,
        id: u32,
        run: impl Iterator<Item = &'d [u8]>,
        recv: &mut dyn RdReceiver,
    ) {
        let peer = self.by_id.get(&id).and_then(|a| self.peers.get_mut(a));
        // Drops are counted by the engine.
        match peer {
            Some(p) => {
                let mut sink = ReceiverSink {
                    rx: &mut p.rx,
                    recv,
                    src: p.ah.addr,
                    qpn: self.qpn,
                    stats: &mut self.stats,
                };
                self.endpoint.handle_run(now, id, run, &mut sink);
            }
            None => {
                self.endpoint.handle_run(now, id, run, &mut ());
            }
        }
    }

    /// Hands a datagram to the engine (posted-receive mode), with the sink of the peer at
    /// `addr` (the one its session id names, if any).
    fn feed(&mut self, q: &mut WorkQueues, now: Instant, data: &[u8], addr: Option<SocketAddr>) {
        let peer = addr.and_then(|a| self.peers.get_mut(&a));
        // Drops are counted by the engine.
        let _ = match peer {
            Some(p) => {
                let mut sink = RxSink {
                    rx: &mut p.rx,
                    q,
                    stash: &mut self.stash,
                    src: p.ah.addr,
                    qpn: self.qpn,
                    stats: &mut self.stats,
                };
                self.endpoint
                    .handle_datagram(now, data, &mut sink, |_, _| None)
            }
            None => self
                .endpoint
                .handle_datagram(now, data, &mut (), |_, _| None),
        };
    }

    fn park(
        &mut self,
        ring: &mut RecvRing,
        i: usize,
        len: usize,
        src: Option<SocketAddr>,
        session: u32,
        seq: u32,
    ) {
        // A retransmission of a datagram already set aside adds nothing.
        if self
            .parked
            .iter()
            .any(|p| p.session == session && p.seq == seq)
        {
            return;
        }
        if self.parked.len() >= PARK_MAX {
            self.stats.refused += 1;
            return;
        }
        self.stats.parked += 1;
        self.parked.push_back(Parked {
            buf: ring.take(i),
            len,
            src,
            session,
            seq,
        });
    }

    fn retry_parked(&mut self, q: &mut WorkQueues, now: Instant) {
        for _ in 0..self.parked.len() {
            let p = self.parked.pop_front().expect("counted");
            match self.on_datagram(q, now, &p.buf[..p.len], p.src, None) {
                Some(_) => self.parked.push_back(p),
                None => {
                    if let Some(ring) = &mut self.ring {
                        ring.give_back(p.buf, PARK_MAX);
                    }
                }
            }
        }
        if self.parked.is_empty() {
            self.parked = VecDeque::new();
        }
    }

    /// Engine events to completions, waiting sends to the engine, datagrams to the kernel.
    fn service(&mut self, q: &mut WorkQueues, now: Instant) {
        self.events(q);
        if !self.retry.is_empty() {
            self.retry_waiting(q, now);
        }
        self.transmit(now);
    }

    fn events(&mut self, q: &mut WorkQueues) {
        while let Some((id, ev)) = self.endpoint.poll_event() {
            let Some(&addr) = self.by_id.get(&id) else {
                continue;
            };
            match ev {
                Event::SendAcked(msg) => {
                    let Some(p) = self.peers.get_mut(&addr) else {
                        continue;
                    };
                    // Acknowledgements come in message order: this is the front.
                    if let Some(i) = p.inflight.iter().position(|f| f.msg == msg) {
                        let f = p.inflight.remove(i).expect("found");
                        q.send_done(f.wr_id, f.len, f.signaled);
                        if let Some(data) = f.pooled {
                            self.pool.give(data);
                        }
                    }
                    if !p.waiting.is_empty() {
                        self.retry.push(addr);
                    } else if p.inflight.is_empty() {
                        p.compact();
                    }
                }
                Event::Writable => self.retry.push(addr),
                Event::PeerFailed { .. } => {
                    self.stats.peer_failures += 1;
                    self.fail_peer(q, addr);
                }
            }
        }
    }

    fn retry_waiting(&mut self, q: &mut WorkQueues, now: Instant) {
        let mut list = std::mem::take(&mut self.retry);
        list.dedup();
        for addr in list.drain(..) {
            let Some(p) = self.peers.get_mut(&addr) else {
                continue;
            };
            if p.remote.is_none() {
                continue;
            }
            while let Some(m) = p.waiting.pop_front() {
                match m.offer(&mut self.endpoint, p.local_id, now) {
                    Ok(f) => p.inflight.push_back(f),
                    Err((SendError::WouldBlock | SendError::PeerFailed, m)) => {
                        p.waiting.push_front(m);
                        break;
                    }
                    Err((SendError::TooLarge, m)) => {
                        q.send_failed(m.wr_id, m.len, WcStatus::TransportError);
                    }
                }
            }
        }
        // Keep the allocation.
        if self.retry.is_empty() {
            self.retry = list;
        }
    }

    /// Sends what the kernel refused earlier, then everything the engine has ready, in
    /// batches, until it has nothing or the socket is full.
    fn transmit(&mut self, now: Instant) {
        loop {
            if !self.tx.flush(&mut self.sock, &mut self.stats.send_errors) {
                return;
            }
            let mut drained = false;
            // A run of datagrams goes to one peer: look it up once per run. A run ends when
            // the session has no more or the batch is full.
            let mut route: Option<(u32, &Peer)> = None;
            let mut header = [0u8; MAX_HEADER_LEN];
            let (tx, by_id, peers) = (&mut self.tx, &self.by_id, &self.peers);
            while tx.wants_more() {
                let run = self
                    .endpoint
                    .poll_transmit_run(now, &mut header, |id, header, t| {
                        if route.is_none_or(|(r, _)| r != id) {
                            route = by_id.get(&id).and_then(|a| peers.get(a)).map(|p| (id, p));
                        }
                        if let Some((_, p)) = route {
                            tx.push(TxItem {
                                dst: p.dst,
                                via: p.via.clone(),
                                header: *header,
                                t,
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
        for (_, mut p) in self.peers.drain() {
            if p.via.take().is_some() {
                self.connect_left += 1;
            }
            p.fail_sends(q, WcStatus::FlushError);
            p.rx.flush(q);
            if let Some(s) = self.endpoint.remove(p.local_id) {
                self.stats.add_session(s.stats());
            }
        }
        self.by_id.clear();
        self.handshaking.clear();
        self.retry.clear();
        // What the kernel had not taken yet may lend from buffers just handed back.
        self.tx.clear();
        self.stash.clear();
        self.parked.clear();
    }

    /// The earliest moment `poll_cq` has timed work to do: an engine timer (ACK delay,
    /// retransmission, peer failure), a handshake retransmission, or a held fault datagram.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let hello = self
            .handshaking
            .iter()
            .filter_map(|a| self.peers.get(a)?.hello.as_ref().map(|h| h.next))
            .min();
        [
            self.endpoint.poll_timeout(),
            hello,
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
        s.peers = self.peers.len();
        s.connected_peers = self.peers.values().filter(|p| p.via.is_some()).count();
        s.gso_sends = self.tx.gso_sends;
        s.connected_sends = self.tx.via_sends;
        s.gro_runs = self.ring.as_ref().map_or(0, |r| r.gro_runs);
        s.max_datagram_size = self.config.max_datagram_size;
        s
    }

    /// Engine counters and RTT of the session with the peer at `addr`.
    pub(crate) fn peer_stats(
        &self,
        addr: SocketAddr,
    ) -> Option<(reliability::Stats, reliability::RttStats)> {
        let p = self.peers.get(&addr)?;
        let s = self.endpoint.session(p.local_id)?;
        Some((*s.stats(), s.rtt()))
    }

    /// The session ids in use with the peer at `addr`, once established.
    pub(crate) fn peer_ids(&self, addr: SocketAddr) -> Option<SessionIds> {
        let p = self.peers.get(&addr)?;
        let r = p.remote?;
        Some(SessionIds {
            local_id: p.local_id,
            local_epoch: p.local_epoch,
            remote_id: r.id,
            remote_epoch: r.epoch,
        })
    }

    pub(crate) fn fault_stats(&self) -> Option<FaultStats> {
        self.sock.fault_stats()
    }

    fn send_control(&mut self, dst: &nix::sys::socket::SockaddrStorage, bytes: &[u8]) {
        self.stats.control_sent += 1;
        // A control datagram the kernel refuses is lost like any other; the timer resends.
        let _ = self.sock.send(&[IoSlice::new(bytes)], dst);
    }

    /// A fresh non-zero local session id not in use.
    fn fresh_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u32();
            if id != 0 && !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    /// Receives bound to messages still arriving.
    pub(crate) fn bound_receives(&self) -> usize {
        self.peers.values().map(|p| p.rx.bound_len()).sum()
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

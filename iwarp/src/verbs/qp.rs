//! The queue pair: state machine, work queue checks, and dispatch to the UD, RD or RC path.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::cq::WorkQueues;
use super::fault::{FaultConfig, FaultStats};
use super::rc::{RcPath, RcSettings};
use super::rc_setup::RcSetup;
use super::rd::{RdMemory, RdPath, RdReceiver, RdStats, RD_MAX_MESSAGE, RD_SOCKET_BUFFER};
use super::startup::{self, Established};
use super::ud::{ErrorEvent, UdPath};
use super::{
    AddressHandle, QpConfig, QpState, QpType, RdSessionStats, RecvWr, RttStats, SendWr,
    SendWrOwned, SessionIds, VerbsError, WcStatus, WorkCompletion, RC_MAX_SEGMENT_PAYLOAD,
    UD_MAX_PAYLOAD,
};
use crate::wire::datagram::MAX_QPN;

static NEXT_QPN: AtomicU32 = AtomicU32::new(1);

/// A process-unique QP number in 1..=MAX_QPN (wrapping after 2^30 - 1 queue pairs).
fn next_qpn() -> u32 {
    loop {
        let n = NEXT_QPN.fetch_add(1, Ordering::Relaxed) & MAX_QPN;
        if n != 0 {
            return n;
        }
    }
}

enum Path {
    Unbound,
    Ud(UdPath),
    Rd(Box<RdPath>),
    Rc(Box<RcPath>),
}

/// A queue pair with its own receive queue and completion queue.
///
/// Not thread-safe by design (`&mut self` everywhere): the caller's progress loop owns it, so
/// the data path takes no lock.
pub struct QueuePair {
    qpn: u32,
    qp_type: QpType,
    state: QpState,
    config: QpConfig,
    queues: WorkQueues,
    path: Path,
    last_error: Option<VerbsError>,
}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qpn", &self.qpn)
            .field("qp_type", &self.qp_type)
            .field("state", &self.state)
            .field("local_addr", &self.local_addr())
            .finish_non_exhaustive()
    }
}

/// Largest work queue depth: the completion queue is sized up front from both depths.
const MAX_WR: usize = 1 << 20;

impl QueuePair {
    /// Creates a queue pair in [`QpState::Init`] with a process-unique QP number.
    ///
    /// UD and RD: without `config.faults`, the fault layer is configured from
    /// [`FAULTS_ENV`](super::FAULTS_ENV) if it is set; a bad value is an `InvalidArgument`
    /// naming the key.
    pub fn create(qp_type: QpType, mut config: QpConfig) -> Result<QueuePair, VerbsError> {
        if !(1..=MAX_WR).contains(&config.max_send_wr)
            || !(1..=MAX_WR).contains(&config.max_recv_wr)
        {
            return Err(VerbsError::InvalidArgument(
                "max_send_wr and max_recv_wr must be in 1..=2^20".into(),
            ));
        }
        if config.max_ulpdu == 0 || config.max_ulpdu > RC_MAX_SEGMENT_PAYLOAD {
            return Err(VerbsError::InvalidArgument(
                "max_ulpdu must be in 1..=RC_MAX_SEGMENT_PAYLOAD".into(),
            ));
        }
        if !(1..=2).contains(&config.mpa_revision) {
            return Err(VerbsError::InvalidArgument(
                "mpa_revision must be 1 or 2".into(),
            ));
        }
        if qp_type != QpType::Rc {
            if config.faults.is_none() {
                config.faults = FaultConfig::from_env()?;
            }
            if let Some(f) = &config.faults {
                f.validate()?;
            }
        }
        if qp_type == QpType::Rd {
            config
                .rd
                .validate()
                .map_err(|e| VerbsError::InvalidArgument(e.to_string().into()))?;
        }
        Ok(QueuePair {
            qpn: next_qpn(),
            qp_type,
            state: QpState::Init,
            queues: WorkQueues::new(config.max_send_wr, config.max_recv_wr),
            config,
            path: Path::Unbound,
            last_error: None,
        })
    }

    /// The QP number; UD peers put it in their address handles.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// UD, RD or RC.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The attributes the queue pair was created with.
    pub fn config(&self) -> &QpConfig {
        &self.config
    }

    /// Why the queue pair went to the error state, if it did.
    pub fn last_error(&self) -> Option<&VerbsError> {
        self.last_error.as_ref()
    }

    fn require(&self, op: &'static str, qp_type: QpType, state: QpState) -> Result<(), VerbsError> {
        if self.qp_type != qp_type {
            return Err(VerbsError::WrongQpType {
                op,
                qp_type: self.qp_type,
            });
        }
        if self.state != state {
            return Err(VerbsError::InvalidState {
                op,
                state: self.state,
            });
        }
        Ok(())
    }

    fn require_datagram(&self, op: &'static str) -> Result<(), VerbsError> {
        match self.qp_type {
            QpType::Ud => self.require(op, QpType::Ud, QpState::Init),
            _ => self.require(op, QpType::Rd, QpState::Init),
        }
    }

    /// UD, RD: binds a new UDP socket to `addr` and moves to RTS. Returns the bound address.
    pub fn bind_udp(&mut self, addr: SocketAddr) -> Result<SocketAddr, VerbsError> {
        self.require_datagram("bind_udp")?;
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.bind(&addr.into())?;
        self.attach_udp(socket.into())
    }

    /// UD, RD: takes over an existing UDP socket (seed 000 §III-A: a pre-established datagram
    /// socket moves the QP to RTS). It is made non-blocking.
    pub fn attach_udp(&mut self, socket: UdpSocket) -> Result<SocketAddr, VerbsError> {
        self.require_datagram("attach_udp")?;
        self.size_buffers(SockRef::from(&socket))?;
        let (path, local) = if self.qp_type == QpType::Rd {
            let rd = RdPath::new(socket, &self.config, self.qpn)?;
            let local = rd.local_addr();
            (Path::Rd(Box::new(rd)), local)
        } else {
            let ud = UdPath::new(socket, self.config.crc, self.config.faults.as_ref())?;
            let local = ud.local_addr();
            (Path::Ud(ud), local)
        };
        self.path = path;
        self.state = QpState::Rts;
        Ok(local)
    }

    fn size_buffers(&self, socket: SockRef<'_>) -> Result<(), VerbsError> {
        let default = (self.qp_type == QpType::Rd).then_some(RD_SOCKET_BUFFER);
        if let Some(size) = self.config.socket_buffer.or(default) {
            socket.set_send_buffer_size(size)?;
            socket.set_recv_buffer_size(size)?;
        }
        Ok(())
    }

    /// RC, active side: connects to `addr`, sends the MPA Request with `private_data`, and
    /// moves to RTS on an accepting Reply. Returns the peer's private data. Bounded by
    /// `connect_timeout`; on failure the queue pair stays in Init.
    pub fn connect(
        &mut self,
        addr: SocketAddr,
        private_data: &[u8],
    ) -> Result<Vec<u8>, VerbsError> {
        self.require("connect", QpType::Rc, QpState::Init)?;
        let deadline = Instant::now() + self.config.connect_timeout;
        let stream = match TcpStream::connect_timeout(&addr, self.config.connect_timeout) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(VerbsError::Timeout),
            Err(e) => return Err(e.into()),
        };
        self.connect_on(stream, private_data, deadline)
    }

    /// RC, active side, over a TCP connection the caller made: as [`QueuePair::connect`].
    pub fn connect_stream(
        &mut self,
        stream: TcpStream,
        private_data: &[u8],
    ) -> Result<Vec<u8>, VerbsError> {
        self.require("connect_stream", QpType::Rc, QpState::Init)?;
        let deadline = Instant::now() + self.config.connect_timeout;
        self.connect_on(stream, private_data, deadline)
    }

    fn connect_on(
        &mut self,
        mut stream: TcpStream,
        private_data: &[u8],
        deadline: Instant,
    ) -> Result<Vec<u8>, VerbsError> {
        self.prepare_stream(&stream)?;
        let est = startup::initiate(&mut stream, &self.config, private_data, deadline)?;
        let pd = self.establish(stream, est)?;
        Ok(pd)
    }

    /// RC, passive side: accepts one connection on `listener` (waiting at most
    /// `connect_timeout`), reads the MPA Request, replies with this queue pair's marker and CRC
    /// wishes and no private data, and moves to RTS. Returns the peer's address and the
    /// Request's private data.
    pub fn accept(&mut self, listener: &TcpListener) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.accept_with_private_data(listener, &[])
    }

    /// As [`QueuePair::accept`], with `private_data` in the Reply.
    pub fn accept_with_private_data(
        &mut self,
        listener: &TcpListener,
        private_data: &[u8],
    ) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.require("accept", QpType::Rc, QpState::Init)?;
        let deadline = Instant::now() + self.config.connect_timeout;
        let stream = accept_by(listener, deadline)?;
        self.accept_on(stream, private_data, deadline)
    }

    /// RC, passive side, over a connection the caller accepted: as
    /// [`QueuePair::accept_with_private_data`].
    pub fn accept_stream(
        &mut self,
        stream: TcpStream,
        private_data: &[u8],
    ) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.require("accept_stream", QpType::Rc, QpState::Init)?;
        let deadline = Instant::now() + self.config.connect_timeout;
        self.accept_on(stream, private_data, deadline)
    }

    fn accept_on(
        &mut self,
        mut stream: TcpStream,
        private_data: &[u8],
        deadline: Instant,
    ) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.prepare_stream(&stream)?;
        let peer = stream.peer_addr()?;
        let est = startup::respond(&mut stream, &self.config, private_data, deadline)?;
        let pd = self.establish(stream, est)?;
        Ok((peer, pd))
    }

    /// RC: takes over a connection set up without blocking ([`RcSetup`]), moving to RTS.
    /// Returns the peer's private data.
    pub fn finish_rc(&mut self, setup: RcSetup, est: Established) -> Result<Vec<u8>, VerbsError> {
        self.require("finish_rc", QpType::Rc, QpState::Init)?;
        self.establish(setup.into_stream(), est)
    }

    fn prepare_stream(&self, stream: &TcpStream) -> Result<(), VerbsError> {
        // Blocking during the exchange (bounded by timeouts), non-blocking after it.
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        self.size_buffers(SockRef::from(stream))
    }

    fn establish(
        &mut self,
        stream: TcpStream,
        mut est: Established,
    ) -> Result<Vec<u8>, VerbsError> {
        let pd = std::mem::take(&mut est.peer_private_data);
        let path = RcPath::new(stream, est, self.config.max_ulpdu)?;
        self.path = Path::Rc(Box::new(path));
        self.state = QpState::Rts;
        Ok(pd)
    }

    /// The local socket address once bound or connected.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match &self.path {
            Path::Unbound => None,
            Path::Ud(ud) => Some(ud.local_addr()),
            Path::Rd(rd) => Some(rd.local_addr()),
            Path::Rc(rc) => Some(rc.local_addr()),
        }
    }

    /// RC: the peer's socket address once connected.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        match &self.path {
            Path::Rc(rc) => Some(rc.peer_addr()),
            _ => None,
        }
    }

    /// RC: the connection's socket, for reading back what the kernel holds for it.
    pub fn rc_socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match &self.path {
            Path::Rc(rc) => Some(rc.socket()),
            _ => None,
        }
    }

    /// RC: what the MPA exchange settled, once connected.
    pub fn rc_settings(&self) -> Option<RcSettings> {
        match &self.path {
            Path::Rc(rc) => Some(rc.settings()),
            _ => None,
        }
    }

    /// Largest UD message: `MAX_DATAGRAM` less the 18-byte header and the 4-byte CRC.
    pub fn ud_max_payload(&self) -> usize {
        UD_MAX_PAYLOAD
    }

    /// Largest message one send may carry: UD one datagram's payload, RD
    /// [`RD_MAX_MESSAGE`], RC just below 4 GiB.
    pub fn max_message(&self) -> usize {
        match self.qp_type {
            QpType::Ud => UD_MAX_PAYLOAD,
            QpType::Rd => RD_MAX_MESSAGE,
            QpType::Rc => u32::MAX as usize,
        }
    }

    /// Sends posted, signaled or not, that have not completed or whose completion is not yet
    /// polled: zero once every RD message is acknowledged.
    pub fn sends_outstanding(&self) -> usize {
        self.queues.sends_outstanding()
    }

    /// Send slots free (see [`QpConfig::max_send_wr`]).
    pub fn send_queue_space(&self) -> usize {
        self.queues.send_slots_free()
    }

    /// Posts a send. UD: one datagram, handed to the kernel now (copied only if the kernel
    /// would block); completes as soon as the kernel has it. RD: the message is copied, sent
    /// as far as the window allows (the rest from [`QueuePair::poll_cq`]; a session handshake
    /// first with a new peer), and completes when the peer has acknowledged all of it; a peer
    /// silent for `rd.idle_timeout` fails it with `TransportError`. RC: the message's FPDUs are
    /// handed to the kernel now as far as it takes them; the rest is copied and written from
    /// [`QueuePair::poll_cq`]; completes when the last byte is in the kernel.
    ///
    /// Refused (nothing posted) with `InvalidState` outside RTS, `QueueFull`,
    /// `MessageTooLarge`, `MissingAddressHandle` (UD, RD), or an I/O error the UD socket
    /// reported at once. A broken RC connection is reported through completions and the Error state.
    pub fn post_send(&mut self, wr: SendWr<'_>) -> Result<(), VerbsError> {
        if self.state != QpState::Rts {
            return Err(VerbsError::InvalidState {
                op: "post_send",
                state: self.state,
            });
        }
        match &mut self.path {
            Path::Ud(ud) => ud.post_send(&mut self.queues, &wr),
            Path::Rd(rd) => rd.post_send(&mut self.queues, &wr),
            Path::Rc(rc) => {
                let r = rc.post_send(&mut self.queues, &wr);
                self.check_rc();
                r
            }
            Path::Unbound => Err(VerbsError::InvalidState {
                op: "post_send",
                state: self.state,
            }),
        }
    }

    /// Posts a send that hands its data over ([`SendWrOwned`]): RD keeps the buffer itself
    /// until the peer acknowledges the message instead of copying it; UD and RC behave as
    /// [`QueuePair::post_send`]. Refused in the same cases.
    pub fn post_send_owned(&mut self, wr: SendWrOwned) -> Result<(), VerbsError> {
        match &mut self.path {
            Path::Rd(rd) if self.state == QpState::Rts => rd.post_send_owned(&mut self.queues, wr),
            _ => self.post_send(wr.borrowed()),
        }
    }

    /// Posts the message `prefix` followed by `wr.data`: RD joins the prefix to its own header
    /// and keeps the data without copying it (as [`QueuePair::post_send_owned`], which an empty
    /// prefix amounts to); RC frames the two together in place when they fit one segment; UD,
    /// and RC above a segment, send the two joined.
    pub fn post_send_prefixed(&mut self, wr: SendWrOwned, prefix: &[u8]) -> Result<(), VerbsError> {
        if prefix.is_empty() {
            return self.post_send_owned(wr);
        }
        match &mut self.path {
            Path::Rd(rd) if self.state == QpState::Rts => {
                rd.post_send_prefixed(&mut self.queues, wr, prefix)
            }
            Path::Rc(rc) if self.state == QpState::Rts => {
                let r = rc.post_send_prefixed(&mut self.queues, &wr.borrowed(), prefix);
                self.check_rc();
                r
            }
            _ => {
                let mut joined = Vec::with_capacity(prefix.len() + wr.data.len());
                joined.extend_from_slice(prefix);
                joined.extend_from_slice(&wr.data);
                let wr = SendWrOwned {
                    data: joined.into(),
                    ..wr
                };
                self.post_send(wr.borrowed())
            }
        }
    }

    /// RD: sends posted from now on wait for [`QueuePair::uncork`] instead of leaving one
    /// by one. A burst of posts (a message and its chunks) then leaves in batched system
    /// calls, and only its last datagram asks the peer for a prompt ACK: posted one by one,
    /// each would be the last queued when it left and ask for an ACK of its own. Other
    /// kinds send as before.
    pub fn cork(&mut self) {
        if let Path::Rd(rd) = &mut self.path {
            rd.cork();
        }
    }

    /// Sends what was posted since [`QueuePair::cork`].
    pub fn uncork(&mut self) {
        if let Path::Rd(rd) = &mut self.path {
            rd.uncork();
        }
    }

    /// Posts a receive buffer (allowed in Init, before the queue pair is connected). In the
    /// Error state it completes at once with `FlushError`, which hands the buffer back.
    /// `QueueFull` drops the buffer; [`QueuePair::try_post_recv`] returns it instead.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), VerbsError> {
        self.try_post_recv(wr).map_err(|(e, _)| e)
    }

    /// As [`QueuePair::post_recv`], giving the work request back when it is refused.
    pub fn try_post_recv(&mut self, wr: RecvWr) -> Result<(), (VerbsError, RecvWr)> {
        if !self.queues.recv_space() {
            return Err((VerbsError::QueueFull, wr));
        }
        if self.state == QpState::Error {
            self.queues
                .complete_recv(wr, WcStatus::FlushError, 0, None, false);
        } else {
            self.queues.rq.push_back(wr);
        }
        Ok(())
    }

    /// Makes progress without blocking (sends anything the kernel refused earlier, receives
    /// what the posted receives can take), then moves up to `max` completions into `out`.
    /// Returns how many it moved. `out` is only appended to; with enough capacity this does
    /// not allocate.
    ///
    /// The socket is not touched when `max` completions are already waiting; `max == 0` only
    /// makes progress.
    pub fn poll_cq(
        &mut self,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        self.poll(out, max, None)
    }

    /// As [`QueuePair::poll_cq`], with RD and RC messages handed to `recv` where they lie
    /// instead of into posted receives (receiver mode; UD ignores `recv`; RC hands over only
    /// whole messages, through [`RdReceiver::message`], naming the peer by its TCP address). A queue pair polled this
    /// way should always be: receives posted meanwhile are not used.
    pub fn poll_cq_with(
        &mut self,
        recv: &mut dyn RdReceiver,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        self.poll(out, max, Some(recv))
    }

    fn poll(
        &mut self,
        out: &mut Vec<WorkCompletion>,
        max: usize,
        recv: Option<&mut dyn RdReceiver>,
    ) -> Result<usize, VerbsError> {
        if self.state == QpState::Rts && (max == 0 || self.queues.cq_len() < max) {
            match &mut self.path {
                Path::Ud(ud) => {
                    if let Err(e) = ud.progress(&mut self.queues, self.qpn) {
                        ud.flush_sends(&mut self.queues);
                        self.enter_error(Some(e));
                    }
                }
                Path::Rd(rd) => {
                    if let Err(e) = rd.progress(&mut self.queues, recv) {
                        rd.flush(&mut self.queues);
                        self.enter_error(Some(e));
                    }
                }
                Path::Rc(rc) => {
                    rc.progress(&mut self.queues, recv);
                    self.check_rc();
                }
                Path::Unbound => {}
            }
        }
        Ok(self.queues.pop_into(out, max))
    }

    /// When [`QueuePair::poll_cq`] next has timed work to do (RD: an ACK, a retransmission,
    /// a handshake resend or a peer failure; UD and RD: a datagram the fault layer holds).
    /// A progress thread can sleep until then. `None`: nothing is timed.
    pub fn next_deadline(&self) -> Option<Instant> {
        match &self.path {
            Path::Rd(rd) if self.state == QpState::Rts => rd.next_deadline(),
            Path::Ud(ud) => ud.next_fault_release(),
            _ => None,
        }
    }

    /// UD, RD: what the fault layer did, if it is on.
    pub fn fault_stats(&self) -> Option<FaultStats> {
        match &self.path {
            Path::Ud(ud) => ud.fault_stats(),
            Path::Rd(rd) => rd.fault_stats(),
            _ => None,
        }
    }

    /// RD only: sends every ACK owed now, instead of after its batch or delay. For a caller
    /// that stops polling for a while (a progress thread going back to sleep): otherwise it
    /// would have to wake again just to send them. Other kinds have nothing to do.
    pub fn flush_acks(&mut self) {
        if let Path::Rd(rd) = &mut self.path {
            rd.flush_acks();
        }
    }

    /// RD only: datagrams read off the socket so far (cheap, unlike [`Self::rd_stats`]).
    pub fn rd_datagrams_read(&self) -> Option<u64> {
        match &self.path {
            Path::Rd(rd) => Some(rd.datagrams_read()),
            _ => None,
        }
    }

    /// RD: counters of the reliability engine (summed over all sessions) and of the queue
    /// pair.
    pub fn rd_stats(&self) -> Option<RdStats> {
        match &self.path {
            Path::Rd(rd) => Some(rd.stats()),
            _ => None,
        }
    }

    /// RD: what the queue pair holds, by concern.
    pub fn rd_memory(&self) -> Option<RdMemory> {
        match &self.path {
            Path::Rd(rd) => Some(rd.memory()),
            _ => None,
        }
    }

    /// RD: bytes of the queue pair's own copies of short messages (up to [`RD_OWNED_MIN`]
    /// bytes, which it copies behind their header) that are queued or unacknowledged.
    ///
    /// [`RD_OWNED_MIN`]: super::RD_OWNED_MIN
    pub fn rd_copied_bytes(&self) -> usize {
        match &self.path {
            Path::Rd(rd) => rd.copied_bytes(),
            _ => 0,
        }
    }

    /// Bytes of the queue pair's own receive and completion queues.
    pub fn work_queue_bytes(&self) -> usize {
        self.queues.memory_bytes()
    }

    /// RD: the sockets the queue pair holds (the shared one first), for reading back what
    /// the kernel holds for them.
    pub fn rd_sockets(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        match &self.path {
            Path::Rd(rd) => rd.sockets(),
            _ => Vec::new(),
        }
    }

    /// RD: the engine's counters and RTT estimate for the session with the peer at `addr`.
    pub fn rd_peer_stats(&self, addr: SocketAddr) -> Option<(RdSessionStats, RttStats)> {
        match &self.path {
            Path::Rd(rd) => rd.peer_stats(addr),
            _ => None,
        }
    }

    /// RD: the session ids in use with the peer at `addr`, once agreed.
    pub fn rd_peer_ids(&self, addr: SocketAddr) -> Option<SessionIds> {
        match &self.path {
            Path::Rd(rd) => rd.peer_ids(addr),
            _ => None,
        }
    }

    /// RD: uses `ids` with the queue pair at `ah` without a handshake, as when the ids came
    /// with an address exchange (the peer must be given [`SessionIds::mirrored`]). Replaces
    /// any session with that peer: its unacknowledged sends fail with `TransportError`.
    /// The session carries the CRC32c as [`QpConfig::crc`] says, peers on this host included
    /// ([`QpConfig::crc_same_host`] needs the handshake): both ends must be configured alike.
    pub fn rd_set_peer(&mut self, ah: AddressHandle, ids: SessionIds) -> Result<(), VerbsError> {
        if self.state != QpState::Rts {
            return Err(VerbsError::InvalidState {
                op: "rd_set_peer",
                state: self.state,
            });
        }
        match &mut self.path {
            Path::Rd(rd) => rd.set_peer(&mut self.queues, ah, ids),
            _ => Err(VerbsError::WrongQpType {
                op: "rd_set_peer",
                qp_type: self.qp_type,
            }),
        }
    }

    /// RD: receives bound to messages whose datagrams are still arriving.
    pub fn rd_bound_receives(&self) -> usize {
        match &self.path {
            Path::Rd(rd) => rd.bound_receives(),
            _ => 0,
        }
    }

    /// UD: the oldest entry of the error queue: a datagram that was dropped, and why.
    pub fn poll_error(&mut self) -> Option<ErrorEvent> {
        match &mut self.path {
            Path::Ud(ud) => ud.pop_error(),
            _ => None,
        }
    }

    /// UD: datagrams dropped since creation (including those the full error queue did not
    /// keep).
    pub fn ud_error_count(&self) -> u64 {
        match &self.path {
            Path::Ud(ud) => ud.error_count(),
            _ => 0,
        }
    }

    /// Bytes of buffer storage the queue pair holds for itself, for the memory ledger: UD's
    /// scatter tail and send backlog, RC's decoder and send backlog. Posted receive buffers
    /// (the caller's) and kernel socket buffers are not included.
    pub fn memory_bytes(&self) -> usize {
        match &self.path {
            Path::Unbound => 0,
            Path::Ud(ud) => ud.memory_bytes(),
            Path::Rd(rd) => rd.memory().total(),
            Path::Rc(rc) => rc.memory_bytes(),
        }
    }

    /// Moves the queue pair to the Error state: an RC connection is closed, and every
    /// outstanding work request completes with `FlushError`.
    pub fn set_error(&mut self) {
        if self.state == QpState::Error {
            return;
        }
        match &mut self.path {
            Path::Ud(ud) => ud.flush_sends(&mut self.queues),
            Path::Rd(rd) => rd.flush(&mut self.queues),
            Path::Rc(rc) => rc.fail(&mut self.queues, None),
            Path::Unbound => {}
        }
        self.enter_error(None);
    }

    fn check_rc(&mut self) {
        if let Path::Rc(rc) = &mut self.path {
            if let Some(e) = rc.take_failure() {
                self.enter_error(Some(e));
            }
        }
    }

    fn enter_error(&mut self, why: Option<VerbsError>) {
        self.queues.flush_recvs();
        self.state = QpState::Error;
        if self.last_error.is_none() {
            self.last_error = why;
        }
    }
}

/// Accepts one connection by `deadline`, whether the listener blocks or not.
fn accept_by(listener: &TcpListener, deadline: Instant) -> Result<TcpStream, VerbsError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(VerbsError::Timeout);
        }
        // Millisecond resolution; round up so a short remainder still waits.
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, timeout) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        match listener.accept() {
            Ok((stream, _)) => return Ok(stream),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

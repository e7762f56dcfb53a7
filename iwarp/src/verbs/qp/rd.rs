//! The RD queue pair: UD's socket and framing under the `reliability` engine (seed 000
//! §III-B).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::BorrowedFd;
use std::time::Instant;

use socket2::SockRef;

use super::super::fault::FaultStats;
use super::super::rd::{
    RdMemory, RdPath, RdReceiver, RdReturned, RdStats, RD_MAX_MESSAGE, RD_SOCKET_BUFFER,
};
use super::super::{
    AddressHandle, QpConfig, QpState, QpType, RdSessionStats, RttStats, SendWr, SendWrOwned,
    SessionIds, VerbsError,
};
use super::common::{self, QpCore};
use super::sealed::{post_joined, Service};
use super::Qp;

/// A reliable datagram queue pair: messages of any size to any number of peers, each
/// acknowledged, in order per peer.
///
/// Its counters and memory read as zero until the socket is bound: nothing has happened yet.
pub type RdQp = Qp<RdCore>;

/// What an RD queue pair keeps beside the state every queue pair does.
pub struct RdCore {
    /// Until the socket is bound or attached, receives can be posted but nothing moves.
    path: Option<Box<RdPath>>,
}

impl RdQp {
    /// Creates a queue pair in [`QpState::Init`] with a process-unique QP number.
    ///
    /// Without `config.faults`, the fault layer is configured from
    /// [`FAULTS_ENV`](super::super::FAULTS_ENV) if it is set; a bad value is an
    /// `InvalidArgument` naming the key. `config.rd` is checked here too.
    pub fn create(mut config: QpConfig) -> Result<RdQp, VerbsError> {
        QpCore::check(&config)?;
        QpCore::datagram_faults(&mut config)?;
        config
            .rd
            .validate()
            .map_err(|e| VerbsError::InvalidArgument(e.to_string().into()))?;
        Ok(Qp::new(config, RdCore { path: None }))
    }

    /// Binds a new UDP socket to `addr` and moves to RTS. Returns the bound address.
    pub fn bind_udp(&mut self, addr: SocketAddr) -> Result<SocketAddr, VerbsError> {
        self.core.require("bind_udp", QpState::Init)?;
        self.attach_udp(common::bind_udp(addr)?)
    }

    /// Takes over an existing UDP socket (seed 000 §III-A: a pre-established datagram socket
    /// moves the QP to RTS). It is made non-blocking; unless [`QpConfig::socket_buffer`] says
    /// otherwise its buffers are asked for [`RD_SOCKET_BUFFER`] bytes.
    pub fn attach_udp(&mut self, socket: UdpSocket) -> Result<SocketAddr, VerbsError> {
        self.core.require("attach_udp", QpState::Init)?;
        self.core
            .size_buffers(SockRef::from(&socket), Some(RD_SOCKET_BUFFER))?;
        let rd = RdPath::new(socket, &self.core.config, self.core.qpn)?;
        let local = rd.local_addr();
        self.service.path = Some(Box::new(rd));
        self.core.state = QpState::Rts;
        Ok(local)
    }

    /// Sends posted from now on wait for [`RdQp::uncork`] instead of leaving one by one. A
    /// burst of posts (a message and its chunks) then leaves in batched system calls, and only
    /// its last datagram asks the peer for a prompt ACK: posted one by one, each would be the
    /// last queued when it left and ask for an ACK of its own.
    pub fn cork(&mut self) {
        if let Some(rd) = &mut self.service.path {
            rd.cork();
        }
    }

    /// Sends what was posted since [`RdQp::cork`].
    pub fn uncork(&mut self) {
        if let Some(rd) = &mut self.service.path {
            rd.uncork();
        }
    }

    /// Sends every ACK owed now, instead of after its batch or delay. For a caller that stops
    /// polling for a while (a progress thread going back to sleep): otherwise it would have to
    /// wake again just to send them.
    pub fn flush_acks(&mut self) {
        if let Some(rd) = &mut self.service.path {
            rd.flush_acks();
        }
    }

    /// What the fault layer did, if it is on.
    pub fn fault_stats(&self) -> Option<FaultStats> {
        self.service.path.as_ref().and_then(|rd| rd.fault_stats())
    }

    /// Datagrams read off the socket so far (cheap, unlike [`RdQp::stats`]).
    pub fn datagrams_read(&self) -> u64 {
        self.service
            .path
            .as_ref()
            .map_or(0, |rd| rd.datagrams_read())
    }

    /// Counters of the reliability engine (summed over all sessions) and of the queue pair.
    pub fn stats(&self) -> RdStats {
        self.service
            .path
            .as_ref()
            .map(|rd| rd.stats())
            .unwrap_or_default()
    }

    /// What the queue pair holds, by concern.
    pub fn memory(&self) -> RdMemory {
        self.service
            .path
            .as_ref()
            .map(|rd| rd.memory())
            .unwrap_or_default()
    }

    /// Bytes of the queue pair's own copies of short messages (up to [`RD_OWNED_MIN`] bytes,
    /// which it copies behind their header) that are queued or unacknowledged.
    ///
    /// [`RD_OWNED_MIN`]: super::super::RD_OWNED_MIN
    pub fn copied_bytes(&self) -> usize {
        self.service.path.as_ref().map_or(0, |rd| rd.copied_bytes())
    }

    /// The sockets the queue pair holds (the shared one first), for reading back what the
    /// kernel holds for them.
    pub fn sockets(&self) -> Vec<BorrowedFd<'_>> {
        self.service
            .path
            .as_ref()
            .map(|rd| rd.sockets())
            .unwrap_or_default()
    }

    /// The engine's counters and RTT estimate for the session with the peer at `addr`.
    pub fn peer_stats(&self, addr: SocketAddr) -> Option<(RdSessionStats, RttStats)> {
        self.service
            .path
            .as_ref()
            .and_then(|rd| rd.peer_stats(addr))
    }

    /// The session ids in use with the peer at `addr`, once agreed.
    pub fn peer_ids(&self, addr: SocketAddr) -> Option<SessionIds> {
        self.service.path.as_ref().and_then(|rd| rd.peer_ids(addr))
    }

    /// Uses `ids` with the queue pair at `ah` without a handshake, as when the ids came with
    /// an address exchange (the peer must be given [`SessionIds::mirrored`]). Replaces any
    /// session with that peer: its unacknowledged sends fail with `TransportError`. The
    /// session carries the CRC32c as [`QpConfig::crc`] says, peers on this host included
    /// ([`QpConfig::crc_same_host`] needs the handshake): both ends must be configured alike.
    pub fn set_peer(&mut self, ah: AddressHandle, ids: SessionIds) -> Result<(), VerbsError> {
        self.core.require("set_peer", QpState::Rts)?;
        match &mut self.service.path {
            Some(rd) => rd.set_peer(&mut self.core.queues, ah, ids),
            None => Err(self.core.invalid_state("set_peer")),
        }
    }

    /// With [`stall_after`](reliability::Config::stall_after) set in `QpConfig::rd` (hand-back
    /// on): the sends of sessions that ended since the last call, handed back whole instead of
    /// failed, appended to `out` oldest first per peer. Poll it after `poll_cq`.
    pub fn take_returned(&mut self, out: &mut Vec<RdReturned>) {
        if let Some(rd) = &mut self.service.path {
            rd.take_returned(out);
        }
    }

    /// With hand-back on: the peers whose sessions were reported stalled since the last call
    /// (silent past `stall_after` with sends outstanding), appended to `out`.
    pub fn take_stalled(&mut self, out: &mut Vec<SocketAddr>) {
        if let Some(rd) = &mut self.service.path {
            rd.take_stalled(out);
        }
    }

    /// Ends the session with the peer at `addr`: its sends are handed back (hand-back on) or
    /// fail with `TransportError`. A later send, or [`RdQp::probe`], greets it afresh.
    /// Whether the peer was known.
    pub fn give_up(&mut self, addr: SocketAddr) -> bool {
        if self.core.state != QpState::Rts {
            return false;
        }
        match &mut self.service.path {
            Some(rd) => rd.give_up(&mut self.core.queues, addr),
            None => false,
        }
    }

    /// Greets the queue pair at `ah` unless a session or a handshake with it exists; it
    /// retries as a handshake does, until the peer timeout. [`RdQp::is_open`] tells when it
    /// answered.
    pub fn probe(&mut self, ah: AddressHandle) -> Result<(), VerbsError> {
        self.core.require("probe", QpState::Rts)?;
        match &mut self.service.path {
            Some(rd) => {
                rd.probe(&mut self.core.queues, ah);
                Ok(())
            }
            None => Err(self.core.invalid_state("probe")),
        }
    }

    /// Whether a session with the peer at `addr` is open (its handshake done).
    pub fn is_open(&self, addr: SocketAddr) -> bool {
        self.service
            .path
            .as_ref()
            .is_some_and(|rd| rd.is_open(addr))
    }

    /// Test support, for forging peers without a network: handles `data` as if it had just
    /// been read off the socket from `src` (HELLOs, the engine, completions, then the ACKs
    /// and sends a batch's end lets go). Posted-receive mode. Does nothing before the socket
    /// is bound or once the queue pair failed.
    #[doc(hidden)]
    pub fn inject_datagram(&mut self, data: &[u8], src: SocketAddr) {
        if self.core.state != QpState::Rts {
            return;
        }
        if let Some(rd) = &mut self.service.path {
            rd.inject(&mut self.core.queues, data, src, None);
        }
    }

    /// Test support: as [`RdQp::inject_datagram`] in receiver mode, as a datagram read by
    /// [`poll_cq_with`](crate::verbs::QueuePair::poll_cq_with) is: messages go to `recv`.
    #[doc(hidden)]
    pub fn inject_datagram_with(
        &mut self,
        recv: &mut dyn RdReceiver,
        data: &[u8],
        src: SocketAddr,
    ) {
        if self.core.state != QpState::Rts {
            return;
        }
        if let Some(rd) = &mut self.service.path {
            rd.inject(&mut self.core.queues, data, src, Some(recv));
        }
    }

    /// Test support: runs what is due now without reading the socket (engine timers and the
    /// sessions they freeze, handshake retransmissions, idle peers' retirement), then sends
    /// what that let go. `poll_cq` does the same after reading.
    #[doc(hidden)]
    pub fn run_timers(&mut self) {
        if self.core.state != QpState::Rts {
            return;
        }
        if let Some(rd) = &mut self.service.path {
            rd.timers_now(&mut self.core.queues);
        }
    }

    /// Test support: from now on the datagrams this queue pair sends go nowhere and are kept
    /// for [`RdQp::take_sent`] instead (after the fault layer, if one is on). Its socket stays
    /// bound and read, and no connected send socket is opened. Call it after binding.
    #[doc(hidden)]
    pub fn null_link(&mut self) {
        if let Some(rd) = &mut self.service.path {
            rd.null_link();
        }
    }

    /// Test support: undoes [`RdQp::null_link`]: datagrams go out again (those kept are
    /// dropped, as a link that was down lost them).
    #[doc(hidden)]
    pub fn restore_link(&mut self) {
        if let Some(rd) = &mut self.service.path {
            rd.restore_link();
        }
    }

    /// Test support: the datagrams kept since the last call ([`RdQp::null_link`]), each with
    /// its destination, oldest first.
    #[doc(hidden)]
    pub fn take_sent(&mut self) -> Vec<(SocketAddr, Vec<u8>)> {
        self.service
            .path
            .as_mut()
            .map(|rd| rd.take_sent())
            .unwrap_or_default()
    }

    /// Receives bound to messages whose datagrams are still arriving.
    pub fn bound_receives(&self) -> usize {
        self.service
            .path
            .as_ref()
            .map_or(0, |rd| rd.bound_receives())
    }
}

impl Service for RdCore {
    const TYPE: QpType = QpType::Rd;
    const NAME: &'static str = "RdQp";

    fn local_addr(&self) -> Option<SocketAddr> {
        self.path.as_ref().map(|rd| rd.local_addr())
    }

    fn max_message(&self) -> usize {
        RD_MAX_MESSAGE
    }

    fn post_send(&mut self, core: &mut QpCore, wr: SendWr<'_>) -> Result<(), VerbsError> {
        core.require("post_send", QpState::Rts)?;
        match &mut self.path {
            Some(rd) => rd.post_send(&mut core.queues, &wr),
            None => Err(core.invalid_state("post_send")),
        }
    }

    fn post_send_owned(&mut self, core: &mut QpCore, wr: SendWrOwned) -> Result<(), VerbsError> {
        match &mut self.path {
            Some(rd) if core.state == QpState::Rts => rd.post_send_owned(&mut core.queues, wr),
            _ => self.post_send(core, wr.borrowed()),
        }
    }

    fn post_send_prefixed(
        &mut self,
        core: &mut QpCore,
        wr: SendWrOwned,
        prefix: &[u8],
    ) -> Result<(), VerbsError> {
        match &mut self.path {
            Some(rd) if core.state == QpState::Rts => {
                rd.post_send_prefixed(&mut core.queues, wr, prefix)
            }
            _ => post_joined(self, core, wr, prefix),
        }
    }

    fn progress(&mut self, core: &mut QpCore, recv: Option<&mut dyn RdReceiver>) {
        if let Some(rd) = &mut self.path {
            if let Err(e) = rd.progress(&mut core.queues, recv) {
                rd.flush(&mut core.queues);
                core.enter_error(Some(e));
            }
        }
    }

    fn next_deadline(&self, core: &QpCore) -> Option<Instant> {
        match &self.path {
            Some(rd) if core.state == QpState::Rts => rd.next_deadline(),
            _ => None,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.path.as_ref().map_or(0, |rd| rd.memory().total())
    }

    fn fail(&mut self, core: &mut QpCore) {
        if let Some(rd) = &mut self.path {
            rd.flush(&mut core.queues);
        }
    }
}

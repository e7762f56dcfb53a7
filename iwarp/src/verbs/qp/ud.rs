//! The UD queue pair: datagram-iWARP over one UDP socket (seed 000 §III).

use std::net::{SocketAddr, UdpSocket};
use std::time::Instant;

use socket2::SockRef;

use super::super::fault::FaultStats;
use super::super::ud::{ErrorEvent, UdPath};
use super::super::{
    QpConfig, QpState, QpType, RdReceiver, SendWr, VerbsError, WorkCompletion, UD_MAX_PAYLOAD,
};
use super::common::{self, QpCore};
use super::QueuePair;

/// An unreliable datagram queue pair: each message is one datagram, lost or not.
pub struct UdQp {
    pub(super) core: QpCore,
    /// Until the socket is bound or attached, receives can be posted but nothing moves.
    path: Option<UdPath>,
}

impl std::fmt::Debug for UdQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdQp")
            .field("qpn", &self.core.qpn)
            .field("state", &self.core.state)
            .field("local_addr", &self.local_addr())
            .finish_non_exhaustive()
    }
}

impl UdQp {
    /// Creates a queue pair in [`QpState::Init`] with a process-unique QP number.
    ///
    /// Without `config.faults`, the fault layer is configured from
    /// [`FAULTS_ENV`](super::super::FAULTS_ENV) if it is set; a bad value is an
    /// `InvalidArgument` naming the key.
    pub fn create(mut config: QpConfig) -> Result<UdQp, VerbsError> {
        QpCore::check(&config)?;
        QpCore::datagram_faults(&mut config)?;
        Ok(UdQp {
            core: QpCore::new(config),
            path: None,
        })
    }

    /// Binds a new UDP socket to `addr` and moves to RTS. Returns the bound address.
    pub fn bind_udp(&mut self, addr: SocketAddr) -> Result<SocketAddr, VerbsError> {
        self.core.require("bind_udp", QpState::Init)?;
        self.attach_udp(common::bind_udp(addr)?)
    }

    /// Takes over an existing UDP socket (seed 000 §III-A: a pre-established datagram socket
    /// moves the QP to RTS). It is made non-blocking.
    pub fn attach_udp(&mut self, socket: UdpSocket) -> Result<SocketAddr, VerbsError> {
        self.core.require("attach_udp", QpState::Init)?;
        self.core.size_buffers(SockRef::from(&socket), None)?;
        let config = &self.core.config;
        let ud = UdPath::new(socket, config.crc, config.faults.as_ref())?;
        let local = ud.local_addr();
        self.path = Some(ud);
        self.core.state = QpState::Rts;
        Ok(local)
    }

    /// What the fault layer did, if it is on.
    pub fn fault_stats(&self) -> Option<FaultStats> {
        self.path.as_ref().and_then(UdPath::fault_stats)
    }

    /// The oldest entry of the error queue: a datagram that was dropped, and why.
    pub fn poll_error(&mut self) -> Option<ErrorEvent> {
        self.path.as_mut().and_then(UdPath::pop_error)
    }

    /// Datagrams dropped since creation (including those the full error queue did not keep).
    pub fn error_count(&self) -> u64 {
        self.path.as_ref().map_or(0, UdPath::error_count)
    }

    fn poll(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize, VerbsError> {
        if self.core.wants_progress(max) {
            if let Some(ud) = &mut self.path {
                if let Err(e) = ud.progress(&mut self.core.queues, self.core.qpn) {
                    ud.flush_sends(&mut self.core.queues);
                    self.core.enter_error(Some(e));
                }
            }
        }
        Ok(self.core.queues.pop_into(out, max))
    }
}

impl QueuePair for UdQp {
    fn qp_type(&self) -> QpType {
        QpType::Ud
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.path.as_ref().map(UdPath::local_addr)
    }

    fn max_message(&self) -> usize {
        UD_MAX_PAYLOAD
    }

    fn post_send(&mut self, wr: SendWr<'_>) -> Result<(), VerbsError> {
        self.core.require("post_send", QpState::Rts)?;
        match &mut self.path {
            Some(ud) => ud.post_send(&mut self.core.queues, &wr),
            None => Err(self.core.invalid_state("post_send")),
        }
    }

    fn poll_cq(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize, VerbsError> {
        self.poll(out, max)
    }

    /// UD has no receiver mode: `recv` is not used.
    fn poll_cq_with(
        &mut self,
        _recv: &mut dyn RdReceiver,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        self.poll(out, max)
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.path.as_ref().and_then(UdPath::next_fault_release)
    }

    fn memory_bytes(&self) -> usize {
        self.path.as_ref().map_or(0, UdPath::memory_bytes)
    }

    fn set_error(&mut self) {
        if self.core.state == QpState::Error {
            return;
        }
        if let Some(ud) = &mut self.path {
            ud.flush_sends(&mut self.core.queues);
        }
        self.core.enter_error(None);
    }
}

//! The UD queue pair: datagram-iWARP over one UDP socket (seed 000 §III).

use std::net::{SocketAddr, UdpSocket};
use std::time::Instant;

use socket2::SockRef;

use super::super::fault::FaultStats;
use super::super::ud::{ErrorEvent, UdPath};
use super::super::{QpConfig, QpState, QpType, RdReceiver, SendWr, VerbsError, UD_MAX_PAYLOAD};
use super::common::{self, QpCore};
use super::sealed::Service;
use super::Qp;

/// An unreliable datagram queue pair: each message is one datagram, lost or not.
pub type UdQp = Qp<UdCore>;

/// What a UD queue pair keeps beside the state every queue pair does.
pub struct UdCore {
    /// Until the socket is bound or attached, receives can be posted but nothing moves.
    path: Option<UdPath>,
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
        Ok(Qp::new(config, UdCore { path: None }))
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
        self.service.path = Some(ud);
        self.core.state = QpState::Rts;
        Ok(local)
    }

    /// What the fault layer did, if it is on.
    pub fn fault_stats(&self) -> Option<FaultStats> {
        self.service.path.as_ref().and_then(UdPath::fault_stats)
    }

    /// The oldest entry of the error queue: a datagram that was dropped, and why.
    pub fn poll_error(&mut self) -> Option<ErrorEvent> {
        self.service.path.as_mut().and_then(UdPath::pop_error)
    }

    /// Datagrams dropped since creation (including those the full error queue did not keep).
    pub fn error_count(&self) -> u64 {
        self.service.path.as_ref().map_or(0, UdPath::error_count)
    }
}

impl Service for UdCore {
    const TYPE: QpType = QpType::Ud;
    const NAME: &'static str = "UdQp";

    fn local_addr(&self) -> Option<SocketAddr> {
        self.path.as_ref().map(UdPath::local_addr)
    }

    fn max_message(&self) -> usize {
        UD_MAX_PAYLOAD
    }

    fn post_send(&mut self, core: &mut QpCore, wr: SendWr<'_>) -> Result<(), VerbsError> {
        core.require("post_send", QpState::Rts)?;
        match &mut self.path {
            Some(ud) => ud.post_send(&mut core.queues, &wr),
            None => Err(core.invalid_state("post_send")),
        }
    }

    /// UD has no receiver mode: `recv` is not used.
    fn progress(&mut self, core: &mut QpCore, _recv: Option<&mut dyn RdReceiver>) {
        if let Some(ud) = &mut self.path {
            if let Err(e) = ud.progress(&mut core.queues, core.qpn) {
                ud.flush_sends(&mut core.queues);
                core.enter_error(Some(e));
            }
        }
    }

    fn next_deadline(&self, _core: &QpCore) -> Option<Instant> {
        self.path.as_ref().and_then(UdPath::next_fault_release)
    }

    fn memory_bytes(&self) -> usize {
        self.path.as_ref().map_or(0, UdPath::memory_bytes)
    }

    fn fail(&mut self, core: &mut QpCore) {
        if let Some(ud) = &mut self.path {
            ud.flush_sends(&mut core.queues);
        }
    }
}

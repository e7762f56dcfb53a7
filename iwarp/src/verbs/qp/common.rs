//! What every queue pair keeps whatever its type: number, state, attributes, work queues and
//! the reason it failed.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::super::cq::WorkQueues;
use super::super::fault::FaultConfig;
use super::super::{QpConfig, QpState, RecvWr, VerbsError, WcStatus, RC_MAX_SEGMENT_PAYLOAD};
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

/// Largest work queue depth: the completion queue is sized up front from both depths.
const MAX_WR: usize = 1 << 20;

/// The part of a queue pair its transport does not change. The typed queue pairs own one
/// beside their path, so each path borrows the work queues while the core records the state.
pub struct QpCore {
    pub(super) qpn: u32,
    pub(super) state: QpState,
    pub(super) config: QpConfig,
    pub(super) queues: WorkQueues,
    pub(super) last_error: Option<VerbsError>,
}

impl QpCore {
    /// Checks the attributes every type uses. Run before the type's own checks, so a bad
    /// depth is reported first whatever the type.
    pub(super) fn check(config: &QpConfig) -> Result<(), VerbsError> {
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
        Ok(())
    }

    /// UD and RD: without `config.faults`, takes the fault layer from
    /// [`FAULTS_ENV`](super::super::FAULTS_ENV), so a test harness can turn it on for a
    /// program that never asks.
    pub(super) fn datagram_faults(config: &mut QpConfig) -> Result<(), VerbsError> {
        if config.faults.is_none() {
            config.faults = FaultConfig::from_env()?;
        }
        if let Some(f) = &config.faults {
            f.validate()?;
        }
        Ok(())
    }

    /// A core in Init; the QP number is only taken once the attributes are known good.
    pub(super) fn new(config: QpConfig) -> QpCore {
        QpCore {
            qpn: config.qpn.unwrap_or_else(next_qpn),
            state: QpState::Init,
            queues: WorkQueues::new(config.max_send_wr, config.max_recv_wr),
            config,
            last_error: None,
        }
    }

    pub(super) fn require(&self, op: &'static str, state: QpState) -> Result<(), VerbsError> {
        if self.state != state {
            return Err(self.invalid_state(op));
        }
        Ok(())
    }

    /// `op` cannot run in the current state.
    pub(super) fn invalid_state(&self, op: &'static str) -> VerbsError {
        VerbsError::InvalidState {
            op,
            state: self.state,
        }
    }

    /// Whether a poll should touch the socket: only in RTS (or Closing, which still
    /// receives), and not when `max` completions are already waiting (`max == 0` asks for
    /// progress alone).
    pub(super) fn wants_progress(&self, max: usize) -> bool {
        matches!(self.state, QpState::Rts | QpState::Closing)
            && (max == 0 || self.queues.cq_len() < max)
    }

    /// Applies [`QpConfig::socket_buffer`], or `default` when it is unset.
    pub(super) fn size_buffers(
        &self,
        socket: SockRef<'_>,
        default: Option<usize>,
    ) -> Result<(), VerbsError> {
        if let Some(size) = self.config.socket_buffer.or(default) {
            socket.set_send_buffer_size(size)?;
            socket.set_recv_buffer_size(size)?;
        }
        Ok(())
    }

    pub(super) fn try_post_recv(&mut self, wr: RecvWr) -> Result<(), (VerbsError, RecvWr)> {
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

    /// Flushes the receives and keeps the first reason given: later failures are consequences.
    pub(super) fn enter_error(&mut self, why: Option<VerbsError>) {
        self.queues.flush_recvs();
        self.state = QpState::Error;
        if self.last_error.is_none() {
            self.last_error = why;
        }
    }
}

/// UD and RD: a new UDP socket bound to `addr`.
pub(super) fn bind_udp(addr: SocketAddr) -> Result<UdpSocket, VerbsError> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

//! The RC queue pair: iWARP over MPA over TCP (RFC 5044/6581).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use socket2::SockRef;

use super::super::mr::{Access, Fault, MrTable, Region, Stag, Use};
use super::super::rc::{RcPath, RcSettings};
use super::super::rc_setup::RcSetup;
use super::super::startup::{self, Established};
use super::super::{
    QpConfig, QpState, QpType, RdReceiver, RdmaReadWr, RdmaWriteWr, SendWr, SendWrOwned, VerbsError,
};
use super::common::QpCore;
use super::sealed::{post_joined, Service};
use super::Qp;

/// A reliable connection queue pair: one peer, over one TCP connection.
///
/// It stays in Init until a connection is made, and a failed attempt leaves it there, so the
/// same queue pair (and the receives already posted on it) can try again.
pub type RcQp = Qp<RcCore>;

/// What an RC queue pair keeps beside the state every queue pair does.
pub struct RcCore {
    path: Option<Box<RcPath>>,
    /// Regions the peer's RDMA Writes and Reads, and this side's Read Responses, reach.
    mrs: MrTable,
}

impl RcQp {
    /// Creates a queue pair in [`QpState::Init`] with a process-unique QP number.
    pub fn create(config: QpConfig) -> Result<RcQp, VerbsError> {
        QpCore::check(&config)?;
        Ok(Qp::new(
            config,
            RcCore {
                path: None,
                mrs: MrTable::default(),
            },
        ))
    }

    /// Active side: connects to `addr`, sends the MPA Request with `private_data`, and moves
    /// to RTS on an accepting Reply. Returns the peer's private data. Bounded by
    /// `connect_timeout`; on failure the queue pair stays in Init.
    pub fn connect(
        &mut self,
        addr: SocketAddr,
        private_data: &[u8],
    ) -> Result<Vec<u8>, VerbsError> {
        self.core.require("connect", QpState::Init)?;
        let timeout = self.core.config.connect_timeout;
        let deadline = Instant::now() + timeout;
        let stream = match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(VerbsError::Timeout),
            Err(e) => return Err(e.into()),
        };
        self.connect_on(stream, private_data, deadline)
    }

    /// Active side, over a TCP connection the caller made: as [`RcQp::connect`].
    pub fn connect_stream(
        &mut self,
        stream: TcpStream,
        private_data: &[u8],
    ) -> Result<Vec<u8>, VerbsError> {
        self.core.require("connect_stream", QpState::Init)?;
        let deadline = Instant::now() + self.core.config.connect_timeout;
        self.connect_on(stream, private_data, deadline)
    }

    fn connect_on(
        &mut self,
        mut stream: TcpStream,
        private_data: &[u8],
        deadline: Instant,
    ) -> Result<Vec<u8>, VerbsError> {
        self.prepare_stream(&stream)?;
        let est = startup::initiate(&mut stream, &self.core.config, private_data, deadline)?;
        self.establish(stream, est)
    }

    /// Passive side: accepts one connection on `listener` (waiting at most `connect_timeout`),
    /// reads the MPA Request, replies with this queue pair's marker and CRC wishes and no
    /// private data, and moves to RTS. Returns the peer's address and the Request's private
    /// data.
    pub fn accept(&mut self, listener: &TcpListener) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.accept_with_private_data(listener, &[])
    }

    /// As [`RcQp::accept`], with `private_data` in the Reply.
    pub fn accept_with_private_data(
        &mut self,
        listener: &TcpListener,
        private_data: &[u8],
    ) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.core.require("accept", QpState::Init)?;
        let deadline = Instant::now() + self.core.config.connect_timeout;
        let stream = accept_by(listener, deadline)?;
        self.accept_on(stream, private_data, deadline)
    }

    /// Passive side, over a connection the caller accepted: as
    /// [`RcQp::accept_with_private_data`].
    pub fn accept_stream(
        &mut self,
        stream: TcpStream,
        private_data: &[u8],
    ) -> Result<(SocketAddr, Vec<u8>), VerbsError> {
        self.core.require("accept_stream", QpState::Init)?;
        let deadline = Instant::now() + self.core.config.connect_timeout;
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
        let est = startup::respond(&mut stream, &self.core.config, private_data, deadline)?;
        let pd = self.establish(stream, est)?;
        Ok((peer, pd))
    }

    /// Takes over a connection set up without blocking ([`RcSetup`]), moving to RTS. Returns
    /// the peer's private data.
    pub fn finish(&mut self, setup: RcSetup, est: Established) -> Result<Vec<u8>, VerbsError> {
        self.core.require("finish", QpState::Init)?;
        self.establish(setup.into_stream(), est)
    }

    fn prepare_stream(&self, stream: &TcpStream) -> Result<(), VerbsError> {
        // Blocking during the exchange (bounded by timeouts), non-blocking after it.
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        self.core.size_buffers(SockRef::from(stream), None)
    }

    fn establish(
        &mut self,
        stream: TcpStream,
        mut est: Established,
    ) -> Result<Vec<u8>, VerbsError> {
        let pd = std::mem::take(&mut est.peer_private_data);
        let path = RcPath::new(stream, est, self.core.config.max_ulpdu)?;
        self.service.path = Some(Box::new(path));
        self.core.state = QpState::Rts;
        Ok(pd)
    }

    /// The peer's socket address once connected.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.service.path.as_ref().map(|rc| rc.peer_addr())
    }

    /// The connection's socket once connected, for reading back what the kernel holds for it.
    pub fn socket(&self) -> Option<BorrowedFd<'_>> {
        self.service.path.as_ref().map(|rc| rc.socket())
    }

    /// What the MPA exchange settled, once connected.
    pub fn settings(&self) -> Option<RcSettings> {
        self.service.path.as_ref().map(|rc| rc.settings())
    }

    /// Closes the sending side in order: once everything posted is written, the peer reads
    /// an end of stream after our last message, and the queue pair moves to
    /// [`QpState::Closing`], where it still receives until the peer closes its own side.
    /// Returns whether it did: `false` while bytes still wait for the kernel (poll, and ask
    /// again). Half of a close both ends agree on: neither end's close then finds unread
    /// bytes, which would make its kernel reset the connection. `InvalidState` outside RTS,
    /// and when the connection broke meanwhile (the error state's reason is
    /// [`QueuePair::last_error`]).
    ///
    /// [`QueuePair::last_error`]: super::QueuePair::last_error
    pub fn close_send(&mut self) -> Result<bool, VerbsError> {
        if self.core.state == QpState::Closing {
            return Ok(true);
        }
        self.core.require("close_send", QpState::Rts)?;
        let Some(rc) = &mut self.service.path else {
            return Err(self.core.invalid_state("close_send"));
        };
        let closed = rc.close_send(&mut self.core.queues);
        self.service.check_failure(&mut self.core);
        self.core.require("close_send", QpState::Rts)?;
        if closed {
            self.core.state = QpState::Closing;
        }
        Ok(closed)
    }

    /// Registers `region` with this queue pair (in any state, so that its STag can travel in
    /// the MPA private data). The STag is this queue pair's only: the peer names the region
    /// with it in RDMA Writes and Reads, this side in its own RDMA Reads (`local_stag`).
    ///
    /// The queue pair keeps the region until it is deregistered or the queue pair dropped.
    /// While registered the peer may write it at any time this queue pair is polled.
    pub fn register(
        &mut self,
        region: Arc<dyn Region>,
        access: Access,
    ) -> Result<Stag, VerbsError> {
        self.service.mrs.register(region, access)
    }

    /// Forgets a registration: later segments naming `stag` break the connection, an RDMA
    /// Read still placing into it included. `InvalidArgument` if it is not registered.
    pub fn deregister(&mut self, stag: Stag) -> Result<(), VerbsError> {
        self.service.mrs.deregister(stag)
    }

    /// Posts an RDMA Write: `wr.data` goes to the peer's region as tagged DDP segments. It
    /// completes (`WcOpcode::RdmaWrite`) once its last byte is in the kernel, like a send;
    /// the peer gets no completion, and a Send posted after it is received after its data is
    /// in place. A peer that refuses it (unknown STag, no `remote_write`, out of bounds)
    /// breaks the connection.
    ///
    /// Refused (nothing posted) with `InvalidState` outside RTS, `QueueFull`, or
    /// `InvalidArgument` when `remote_offset` + the length wraps.
    pub fn post_rdma_write(&mut self, wr: RdmaWriteWr<'_>) -> Result<(), VerbsError> {
        self.core.require("post_rdma_write", QpState::Rts)?;
        let r = match &mut self.service.path {
            Some(rc) => rc.post_rdma_write(&mut self.core.queues, &wr),
            None => return Err(self.core.invalid_state("post_rdma_write")),
        };
        self.service.check_failure(&mut self.core);
        r
    }

    /// Posts an RDMA Read: a Read Request goes out, and the peer's Read Response is placed
    /// into the local region as it arrives (from [`QueuePair::poll_cq`] or
    /// [`QueuePair::poll_cq_with`]). Reads complete (`WcOpcode::RdmaRead`, always signaled)
    /// in the order posted, each once all its data is in place; sends posted after a read
    /// may complete before it. A peer that refuses it breaks the connection.
    ///
    /// [`QueuePair::poll_cq`]: super::QueuePair::poll_cq
    /// [`QueuePair::poll_cq_with`]: super::QueuePair::poll_cq_with
    ///
    /// Refused (nothing posted) with `InvalidState` outside RTS, `QueueFull`,
    /// `MessageTooLarge` (4 GiB or more), or `InvalidArgument` when the local region is not
    /// registered, lacks `local_write`, is too short, or an offset + `len` wraps.
    pub fn post_rdma_read(&mut self, wr: RdmaReadWr) -> Result<(), VerbsError> {
        self.core.require("post_rdma_read", QpState::Rts)?;
        self.service
            .mrs
            .lookup(
                wr.local_stag.raw(),
                wr.local_offset,
                wr.len,
                Use::LocalWrite,
            )
            .map_err(|f| {
                VerbsError::InvalidArgument(
                    match f {
                        Fault::UnknownStag => "local_stag is not registered",
                        Fault::Access => "the local region lacks local_write access",
                        Fault::Bounds => "local_offset + len is beyond the local region",
                    }
                    .into(),
                )
            })?;
        let r = match &mut self.service.path {
            Some(rc) => rc.post_rdma_read(&mut self.core.queues, &wr),
            None => return Err(self.core.invalid_state("post_rdma_read")),
        };
        self.service.check_failure(&mut self.core);
        r
    }
}

impl RcCore {
    /// The path fails a broken connection's work itself; the queue pair follows it to Error.
    fn check_failure(&mut self, core: &mut QpCore) {
        if let Some(rc) = &mut self.path {
            if let Some(e) = rc.take_failure() {
                core.enter_error(Some(e));
            }
        }
    }
}

impl Service for RcCore {
    const TYPE: QpType = QpType::Rc;
    const NAME: &'static str = "RcQp";

    fn local_addr(&self) -> Option<SocketAddr> {
        self.path.as_ref().map(|rc| rc.local_addr())
    }

    fn max_message(&self) -> usize {
        u32::MAX as usize
    }

    fn post_send(&mut self, core: &mut QpCore, wr: SendWr<'_>) -> Result<(), VerbsError> {
        core.require("post_send", QpState::Rts)?;
        let r = match &mut self.path {
            Some(rc) => rc.post_send(&mut core.queues, &wr),
            None => return Err(core.invalid_state("post_send")),
        };
        self.check_failure(core);
        r
    }

    fn post_send_prefixed(
        &mut self,
        core: &mut QpCore,
        wr: SendWrOwned,
        prefix: &[u8],
    ) -> Result<(), VerbsError> {
        match &mut self.path {
            Some(rc) if core.state == QpState::Rts => {
                let r = rc.post_send_prefixed(&mut core.queues, &wr.borrowed(), prefix);
                self.check_failure(core);
                r
            }
            _ => post_joined(self, core, wr, prefix),
        }
    }

    fn progress(&mut self, core: &mut QpCore, recv: Option<&mut dyn RdReceiver>) {
        if let Some(rc) = &mut self.path {
            rc.progress(&mut core.queues, recv, &self.mrs);
            self.check_failure(core);
        }
    }

    /// RC has no timers of its own: TCP keeps them.
    fn next_deadline(&self, _core: &QpCore) -> Option<Instant> {
        None
    }

    fn memory_bytes(&self) -> usize {
        self.path.as_ref().map_or(0, |rc| rc.memory_bytes())
    }

    fn fail(&mut self, core: &mut QpCore) {
        if let Some(rc) = &mut self.path {
            rc.fail(&mut core.queues, None);
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

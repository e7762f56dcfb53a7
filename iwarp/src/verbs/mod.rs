//! A small verbs API of queue pairs: datagram-iWARP UD queue pairs over one UDP socket (seed 000
//! §III), RD queue pairs that make those datagrams reliable with the `reliability` engine
//! (seed 000 §III-B), and standard iWARP RC queue pairs over TCP with the MPA start-up exchange
//! (RFC 5044/6581). UD and RD sockets can inject seeded faults ([`FaultConfig`]).
//!
//! Each service is its own type ([`UdQp`], [`RdQp`], [`RcQp`], aliases of one generic [`Qp`]);
//! the [`QueuePair`] trait holds what they share.
//!
//! Everything is driven by the caller: [`QueuePair::post_send`] hands data to the kernel at once,
//! [`QueuePair::poll_cq`] reads the socket without blocking and returns completions. No thread
//! ever sits between a packet and the caller: a thread's wake-up would cost more than the packet's
//! time on the wire.
//!
//! ```no_run
//! use iwarp::verbs::*;
//! let mut a = UdQp::create(QpConfig::default())?;
//! let mut b = UdQp::create(QpConfig::default())?;
//! a.bind_udp("127.0.0.1:0".parse().unwrap())?;
//! let b_addr = b.bind_udp("127.0.0.1:0".parse().unwrap())?;
//! b.post_recv(RecvWr { wr_id: 7, buf: vec![0; 4096] })?;
//! let ah = AddressHandle { addr: b_addr, qpn: b.qpn() };
//! a.post_send(SendWr { wr_id: 1, opcode: SendOpcode::Send, data: b"hi", ah: Some(ah), signaled: true })?;
//! let mut wcs = Vec::with_capacity(16);
//! while b.poll_cq(&mut wcs, 16)? == 0 {}
//! assert_eq!(&wcs[0].buf.as_ref().unwrap()[..wcs[0].byte_len], b"hi");
//! # Ok::<(), VerbsError>(())
//! ```

mod ah;
mod cq;
mod dgram;
mod error;
pub mod fault;
mod io;
mod link;
mod mr;
mod qp;
mod rc;
mod rc_setup;
mod rd;
mod rng;
mod startup;
mod ud;

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

pub use ah::AddressHandle;
pub use bytes::Bytes;
pub use error::VerbsError;
pub use fault::{FaultConfig, FaultStats, FAULTS_ENV};
pub use mr::{Access, Region, Stag, VecRegion, MAX_REGIONS};
pub use qp::{Qp, QueuePair, RcCore, RcQp, RdCore, RdQp, UdCore, UdQp};
pub use rc::RcSettings;
pub use rc_setup::RcSetup;
pub use rd::{
    same_host, RdMemory, RdReceiver, RdReturned, RdStats, RD_MAX_MESSAGE, RD_OWNED_MIN,
    RD_SOCKET_BUFFER, SEGMENT_HEAD,
};
#[doc(hidden)]
pub use rd::{RdHello, RdHelloKind, RD_HELLO_LEN};
pub use reliability::{Config as RdConfig, RttStats, SessionIds, Stats as RdSessionStats};
pub use startup::{
    proof_frame, Established, Outcome as StartupOutcome, Role as StartupRole, Startup,
};
pub use ud::{ErrorEvent, UdErrorKind, UD_MAX_PAYLOAD};

/// The service a queue pair provides ([`QueuePair::qp_type`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Unreliable datagram: one DDP segment per UDP datagram, no MPA (seed 000 §III-B).
    Ud,
    /// Reliable connection: iWARP over MPA over TCP.
    Rc,
    /// Reliable datagram: UD's socket and framing under the `reliability` engine; messages of
    /// any size, acknowledged, in order per peer (seed 000 §III-B).
    Rd,
}

/// Queue pair states (a subset of the verbs state machine: Reset/RTR/SQD are not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Created; receives may be posted, nothing can be sent.
    Init,
    /// Ready to send and receive.
    Rts,
    /// RC only: our sending side is closed ([`RcQp::close_send`]) after everything posted
    /// went; receives go on until the peer's end of stream, which moves the queue pair to
    /// Error ([`VerbsError::PeerClosed`]). Nothing can be sent.
    Closing,
    /// Broken: every posted work request has completed (or will complete) in error.
    Error,
}

/// Queue pair attributes fixed at creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpConfig {
    /// Carry a real CRC32c (UD trailer, MPA FPDU CRC). On RC and RD either side asking for it
    /// turns it on for both directions.
    pub crc: bool,
    /// RD only: with `crc`, ask peers on this host for the CRC too (a loopback address, or
    /// the one the socket is bound to). Their datagrams go from memory to memory through the
    /// kernel, which itself checksums neither UDP nor TCP on loopback; off saves a pass over
    /// every byte at each end. A queue pair with faults on always asks.
    pub crc_same_host: bool,
    /// RC only: ask the peer for MPA markers toward us (and add them when the peer asks).
    pub markers: bool,
    /// RC only: MPA revision to request, 1 (RFC 5044) or 2 (RFC 6581, enhanced IRD/ORD).
    pub mpa_revision: u8,
    /// Send work requests that may be outstanding: not yet handed to the kernel, or completed
    /// but not yet polled.
    pub max_send_wr: usize,
    /// Receive work requests that may be outstanding: posted, or completed but not yet polled.
    pub max_recv_wr: usize,
    /// RC only: payload bytes per DDP segment (each segment is one FPDU).
    pub max_ulpdu: usize,
    /// RC only: bound on `connect`/`accept`, TCP connection and MPA exchange together.
    pub connect_timeout: Duration,
    /// `SO_SNDBUF`/`SO_RCVBUF` to request for the socket; `None` keeps the kernel's default
    /// (RD: asks for [`RD_SOCKET_BUFFER`]).
    pub socket_buffer: Option<usize>,
    /// UD and RD: faults to inject into outgoing datagrams. `None` reads [`FAULTS_ENV`] at
    /// creation; the queue pair's [`QueuePair::config`] shows what is in force.
    pub faults: Option<FaultConfig>,
    /// RD only: the reliability engine's parameters (window, timers, `idle_timeout`: how long
    /// a silent peer may keep sends pending, handshake included). Its `checksum` is taken from
    /// [`QpConfig::crc`]. `dormant_after` is on (1 s): a session idle that long is frozen into
    /// a few words kept in its peer's entry, and resumed when a send or a datagram needs it;
    /// `None` keeps every session in the engine.
    pub rd: RdConfig,
    /// RD only: cut datagrams no larger than the link the socket is bound to carries
    /// unfragmented (its MTU less the IP and UDP headers), whatever `rd.max_datagram_size`
    /// allows. Off: `rd.max_datagram_size` as given, IP fragments if the link needs them.
    pub fit_mtu: bool,
    /// RD only: how many peers get a socket of their own, connected to them, for what the
    /// queue pair sends them (the kernel then keeps their route instead of looking it up per
    /// datagram); later peers share the queue pair's socket. 0: every peer shares it. Not
    /// used with faults on, which hook the shared socket.
    pub connected_peers: usize,
    /// The queue pair number to take: queue pairs each on a socket of its own (an endpoint's
    /// rails) may share one, since datagrams are told apart by socket first. `None`: a
    /// process-unique one.
    pub qpn: Option<u32>,
    /// RD only: authenticated mode. Every datagram sent carries a tag from this key
    /// ([`crate::auth`]), in place of the CRC32c (`crc` is then not used), and every datagram
    /// received without the job's tag is dropped and counted (`dropped_unauthenticated`)
    /// before anything else reads it. The socket must be bound to one address, the one peers
    /// send to.
    pub auth: Option<std::sync::Arc<crate::auth::JobKey>>,
}

/// The largest [`QpConfig::max_ulpdu`]: an MPA ULPDU is at most 65535 bytes, 18 of which are the
/// untagged DDP/RDMAP header.
pub const RC_MAX_SEGMENT_PAYLOAD: usize =
    crate::wire::mpa::MAX_ULPDU - crate::wire::ddp::UNTAGGED_HEADER_LEN;

impl Default for QpConfig {
    fn default() -> Self {
        QpConfig {
            crc: true,
            crc_same_host: true,
            markers: false,
            mpa_revision: 2,
            max_send_wr: 256,
            max_recv_wr: 256,
            max_ulpdu: RC_MAX_SEGMENT_PAYLOAD,
            connect_timeout: Duration::from_secs(10),
            socket_buffer: None,
            faults: None,
            // A peer not talked to for a second costs the engine nothing; waking it costs a
            // resume and nothing on the wire.
            rd: RdConfig {
                dormant_after: Some(Duration::from_secs(1)),
                ..RdConfig::default()
            },
            fit_mtu: true,
            connected_peers: 64,
            qpn: None,
            auth: None,
        }
    }
}

/// Send flavours. RDMA Write and Read have their own work requests ([`RdmaWriteWr`],
/// [`RdmaReadWr`], RC only); Send with Invalidate is not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendOpcode {
    /// RDMAP Send.
    Send,
    /// RDMAP Send with Solicited Event: the receive completion has `solicited` set.
    SendSolicited,
}

/// A send work request. The data is only borrowed: it is handed to the kernel (or, if the kernel
/// would block, copied) before `post_send` returns; RD copies it to keep it until acknowledged.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    pub opcode: SendOpcode,
    /// The message; UD: at most [`UD_MAX_PAYLOAD`] bytes, RD: at most
    /// [`RD_MAX_MESSAGE`], RC: below 4 GiB.
    pub data: &'a [u8],
    /// Destination; required for UD and RD, ignored for RC.
    pub ah: Option<AddressHandle>,
    /// Produce a completion on success (errors always complete).
    pub signaled: bool,
}

/// A send work request that hands its data over instead of lending it: an RD queue pair keeps
/// the buffer (shared, never copied) until the peer has acknowledged the message, as a NIC
/// reads a registered buffer, so a large send costs no copy in user space. Keep a clone of the
/// `Bytes` to reuse the buffer; it is not modified either way. UD and RC send it as a
/// [`SendWr`] would.
#[derive(Debug, Clone)]
pub struct SendWrOwned {
    /// Returned in the completion.
    pub wr_id: u64,
    pub opcode: SendOpcode,
    /// The message; the same limits as [`SendWr::data`].
    pub data: Bytes,
    /// Destination; required for UD and RD, ignored for RC.
    pub ah: Option<AddressHandle>,
    /// Produce a completion on success (errors always complete).
    pub signaled: bool,
}

impl SendWrOwned {
    /// The same request, lending the data.
    pub fn borrowed(&self) -> SendWr<'_> {
        SendWr {
            wr_id: self.wr_id,
            opcode: self.opcode,
            data: &self.data,
            ah: self.ah,
            signaled: self.signaled,
        }
    }
}

/// A receive work request. The buffer's length (not its capacity) is the space offered; the
/// buffer comes back, with the same length, in the completion.
#[derive(Debug)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message goes; its length is the space offered.
    pub buf: Vec<u8>,
}

/// An RDMA Write work request (RC): `data` goes into the peer's region `remote_stag` at
/// `remote_offset`. The data is only borrowed, as for [`SendWr`]. The peer sees no completion.
#[derive(Debug, Clone, Copy)]
pub struct RdmaWriteWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    pub data: &'a [u8],
    /// A region the peer registered with `remote_write`.
    pub remote_stag: Stag,
    /// Zero-based offset into that region.
    pub remote_offset: u64,
    /// Produce a completion on success (errors always complete).
    pub signaled: bool,
}

/// An RDMA Read work request (RC): `len` bytes of the peer's region `remote_stag` from
/// `remote_offset` land in this queue pair's region `local_stag` from `local_offset`. Always
/// completes, with `byte_len` = `len`.
#[derive(Debug, Clone, Copy)]
pub struct RdmaReadWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// A region registered on this queue pair with `local_write`.
    pub local_stag: Stag,
    /// Zero-based offset into it.
    pub local_offset: u64,
    /// Bytes to read, below 4 GiB.
    pub len: usize,
    /// A region the peer registered with `remote_read`.
    pub remote_stag: Stag,
    /// Zero-based offset into that region.
    pub remote_offset: u64,
}

/// What a completion completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    Send,
    Recv,
    /// An RDMA Write (RC), complete once its last byte is in the kernel.
    RdmaWrite,
    /// An RDMA Read (RC), complete once its data is in the local region.
    RdmaRead,
}

/// How a work request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    Success,
    /// The message was longer than the receive buffer; `byte_len` is the message's length.
    LocalLengthError,
    /// The queue pair went to the error state before this request could run.
    FlushError,
    /// The request was under way when the transport failed (peer gone, socket or stream error).
    TransportError,
}

/// A work completion.
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// Send: the message length. Receive: the received message's length (on success the valid
    /// bytes are `buf[..byte_len]`; with `LocalLengthError` the length of the message that did
    /// not fit; on flush 0, on a transport error the bytes placed so far).
    pub byte_len: usize,
    /// UD and RD receive: the sender's address.
    pub src: Option<SocketAddr>,
    /// Receive: the message was a Send with Solicited Event.
    pub solicited: bool,
    /// Receive: the posted buffer, with its posted length. Bytes past `byte_len` (and, on error,
    /// all bytes) are unspecified; nothing past its length is ever written.
    pub buf: Option<Vec<u8>>,
}

impl fmt::Debug for WorkCompletion {
    // The buffer is shown by length only: a failed assertion should not print megabytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkCompletion")
            .field("wr_id", &self.wr_id)
            .field("status", &self.status)
            .field("opcode", &self.opcode)
            .field("byte_len", &self.byte_len)
            .field("src", &self.src)
            .field("solicited", &self.solicited)
            .field("buf_len", &self.buf.as_ref().map(Vec::len))
            .finish()
    }
}

impl WorkCompletion {
    /// The received bytes of a successful receive completion (empty otherwise).
    pub fn data(&self) -> &[u8] {
        match (&self.buf, self.status) {
            (Some(buf), WcStatus::Success) => &buf[..self.byte_len.min(buf.len())],
            _ => &[],
        }
    }
}

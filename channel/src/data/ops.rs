//! The records the data path keeps per operation.

use std::net::SocketAddr;
use std::time::Instant;

use iwarp::verbs::AddressHandle;

use super::push::PushKey;
use crate::ffi::mem::UserMem;
use crate::matching::{Delivery, Kind};

/// A send or inject, as the application posted it.
#[derive(Debug)]
pub struct SendArgs {
    pub kind: Kind,
    /// The peer's `fi_addr_t`.
    pub dest: u64,
    pub mem: UserMem,
    pub tag: u64,
    /// Remote CQ data (the `*data` calls and FI_REMOTE_CQ_DATA).
    pub data: Option<u64>,
    pub context: usize,
    /// Operation flags in force (op_flags for plain calls, the given flags for `*msg`).
    pub flags: u64,
}

/// A receive, as the application posted it.
#[derive(Debug)]
pub struct RecvArgs {
    pub kind: Kind,
    /// The peer's `fi_addr_t`, or FI_ADDR_UNSPEC.
    pub src: u64,
    pub mem: UserMem,
    pub tag: u64,
    pub ignore: u64,
    pub context: usize,
    pub flags: u64,
}

/// A posted receive's buffer and flags: the matcher's `R`.
#[derive(Clone, Debug)]
pub struct Recv {
    pub mem: UserMem,
    pub flags: u64,
}

/// An unexpected message's payload: the matcher's `U`.
#[derive(Debug)]
pub enum Held {
    /// The eager bytes, copied out of the receive buffer.
    Eager(Box<[u8]>),
    /// A rendezvous request: where to send the clear-to-send.
    Rndv { handle: u64, from: AddressHandle },
}

/// A send waiting for its completion.
#[derive(Debug)]
pub struct PendingSend {
    pub kind: Kind,
    pub context: usize,
    pub flags: u64,
    pub tag: u64,
    pub len: usize,
    /// Rendezvous: the data, read when the clear-to-send comes.
    pub mem: Option<UserMem>,
    pub to: AddressHandle,
    /// Queue-pair sends of this operation not yet acknowledged or not yet posted.
    pub outstanding: u32,
    /// Rendezvous: the receiver has answered (and `outstanding` counts the chunks).
    pub cleared: bool,
    /// Rendezvous: bytes pushed before the answer (`push.rs`).
    pub pushed: usize,
}

/// A matched rendezvous receive whose chunks are arriving.
#[derive(Debug)]
pub struct RndvRecv {
    pub kind: Kind,
    pub delivery: Delivery<Recv>,
    pub from: SocketAddr,
    pub got: usize,
    /// When the CTS was posted: a receive that hears nothing from its sender for the peer
    /// timeout after this fails instead of waiting forever for a sender that is gone.
    pub last: Instant,
    /// Its sender pushes chunks into it (`State::pushing_into`).
    pub push_key: Option<PushKey>,
}

/// What a queue-pair send work request carries, found again by its `wr_id` on completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// An eager message whose acknowledgement completes send `send`.
    Part { send: u64 },
    /// A rendezvous chunk of send `send`.
    Chunk { send: u64 },
    /// A rendezvous request: an error fails send `send`, success means nothing yet.
    Rts { send: u64 },
    /// A clear-to-send: an error (the sender is gone) fails rendezvous receive `recv`.
    Cts { recv: u64 },
    /// A liveness probe: an error (the peer is gone) fails every send to `peer`.
    Ping { peer: SocketAddr },
    /// Control traffic and injects: nothing waits on it.
    Free,
}

/// A send not yet handed to the queue pair (it was full), in posting order.
#[derive(Debug)]
pub enum Outgoing {
    Message {
        to: AddressHandle,
        bytes: bytes::Bytes,
        role: Role,
    },
    /// A rendezvous chunk, read from the application's buffer when it is posted: for the
    /// receiver's receive `recv_id`, or pushed ahead of its answer (`None`).
    Chunk {
        send: u64,
        recv_id: Option<u64>,
        offset: usize,
        len: usize,
    },
}

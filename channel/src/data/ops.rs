//! The records the data path keeps per operation.

use std::time::Instant;

use super::push::PushKey;
use crate::matching::{Delivery, Kind};
use crate::peer::SlotId;
use crate::raw::mem::UserMem;

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

/// In an operation's flags: it came from an `fi_inject*` call, which generates no completion.
/// FI_INJECT alone, as `*msg` calls give it, only means that the buffer is copied at once;
/// such an operation completes as any other. One of the four bits (60 to 63) libfabric leaves
/// to providers, which are never taken from the application.
pub const INJECT_CALL: u64 = 1 << 60;

/// The flag bits libfabric leaves to providers.
pub const PROVIDER_BITS: u64 = 0xF << 60;

/// A posted receive's buffer and flags: the matcher's `R`.
#[derive(Clone, Debug)]
pub struct Recv {
    pub mem: UserMem,
    pub flags: u64,
    /// A multi-receive buffer's id, which the descriptors of all its pieces share.
    pub multi: Option<u64>,
}

/// An unexpected message's payload: the matcher's `U`.
#[derive(Debug)]
pub enum Held {
    /// The eager bytes, copied out of the receive buffer.
    Eager(Box<[u8]>),
    /// A rendezvous request: where to send the clear-to-send.
    Rndv { handle: u64, from: SlotId },
}

/// An RMA operation, as the application posted it (`rma.rs`).
#[derive(Debug)]
pub struct RmaArgs {
    /// The target's `fi_addr_t`.
    pub dest: u64,
    /// The initiator's buffer: the source of a write, the destination of a read.
    pub mem: UserMem,
    /// The offset in the target's region `key`.
    pub addr: u64,
    pub key: u64,
    pub context: usize,
    pub flags: u64,
}

/// What a [`PendingSend`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A message (eager or rendezvous).
    Send,
    /// An RMA write to `addr` of the target's region `key`: its chunks are WRITEs. It
    /// completes when every chunk is acknowledged and the target answered the last
    /// (`cleared`); `refused` if the target refused any.
    Write { key: u64, addr: u64, refused: bool },
    /// An RMA read into `mem`: it completes when READ_DATA has brought all `len` bytes
    /// (`cleared`) and the READ was acknowledged.
    Read { got: usize },
    /// An atomic operation: it completes when the target answered (with the values from
    /// before, into `mem`, if `fetch`) and the request was acknowledged.
    Atomic { fetch: bool },
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::Write { .. } => "RMA write",
            Op::Read { .. } => "RMA read",
            Op::Atomic { .. } => "atomic",
        }
    }
}

/// A send waiting for its completion.
#[derive(Debug)]
pub struct PendingSend {
    pub op: Op,
    pub kind: Kind,
    pub context: usize,
    pub flags: u64,
    pub tag: u64,
    pub len: usize,
    /// Rendezvous: the data, read when the clear-to-send comes.
    pub mem: Option<UserMem>,
    /// The peer, which its answers come from.
    pub to: SlotId,
    /// Queue-pair sends of this operation not yet acknowledged or not yet posted.
    pub outstanding: u32,
    /// Rendezvous: the receiver has answered (and `outstanding` counts the chunks).
    pub cleared: bool,
    /// Rendezvous: bytes pushed before the answer (`push.rs`).
    pub pushed: usize,
}

impl PendingSend {
    /// An operation of `len` bytes to `to` waiting for one queue-pair message.
    #[allow(clippy::too_many_arguments)] // the operation's own fields
    pub fn new(
        op: Op,
        kind: Kind,
        context: usize,
        flags: u64,
        tag: u64,
        len: usize,
        to: SlotId,
    ) -> PendingSend {
        PendingSend {
            op,
            kind,
            context,
            flags,
            tag,
            len,
            mem: None,
            to,
            outstanding: 1,
            cleared: true,
            pushed: 0,
        }
    }
}

/// A matched rendezvous receive whose chunks are arriving.
#[derive(Debug)]
pub struct RndvRecv {
    pub kind: Kind,
    pub delivery: Delivery<Recv>,
    pub from: SlotId,
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
    /// A rendezvous chunk of send `send`; `lent` bytes of it are the application's buffer
    /// itself (0 when copied), charged to nobody's account while the queue pair holds them.
    Chunk { send: u64, lent: u32 },
    /// A rendezvous request: an error fails send `send`, success means nothing yet.
    Rts { send: u64 },
    /// A clear-to-send: an error (the sender is gone) fails rendezvous receive `recv`.
    Cts { recv: u64 },
    /// A liveness probe: an error (the peer is gone) fails every send to `peer`.
    Ping { peer: SlotId },
    /// A READ_DATA chunk served to `peer`'s read `id`: the chunk window waits on it, and
    /// its failure (the peer is gone) drops the rest of the read.
    Served { id: u64, peer: SlotId },
    /// An eager send already reported done to the caller (an inject, or a copy that asked
    /// for no completion needing the peer): its failure is reported without a context, as
    /// libfabric reports the errors of operations that had no completion of their own.
    Copied { kind: Kind, to: SlotId },
    /// Control traffic: nothing waits on it.
    Free,
}

/// Marks the request id of a send posted unsignaled that still has a role; bit 62 then tells
/// a CTS from an RTS, and the bits below hold the id of the receive or send.
const QUIET: u64 = 1 << 63;
const QUIET_CTS: u64 = 1 << 62;
const QUIET_COPIED: u64 = 1 << 61;

impl Role {
    /// The request id of an RTS or a CTS, posted unsignaled: nobody waits for its
    /// acknowledgement (the sender waits for the CTS, the receiver for the data), so the peer
    /// need not hurry its ACK, which on a CTS cost an ACK datagram per rendezvous message. Its
    /// failure still completes (errors complete unsignaled sends too), and the id names what
    /// failed without a table entry, which a success would never remove. A copied send goes
    /// unsignaled for the same reason, its kind in the id. `None`: signal it.
    pub fn quiet_id(self) -> Option<u64> {
        match self {
            Role::Rts { send } if send < QUIET_COPIED => Some(QUIET | send),
            Role::Cts { recv } if recv < QUIET_COPIED => Some(QUIET | QUIET_CTS | recv),
            Role::Copied { kind, to } => {
                Some(QUIET | QUIET_COPIED | u64::from(to.0) << 1 | u64::from(kind == Kind::Tagged))
            }
            _ => None,
        }
    }

    /// The role a [`Role::quiet_id`] names.
    pub fn from_quiet_id(id: u64) -> Option<Role> {
        if id & QUIET == 0 {
            return None;
        }
        let n = id & (QUIET_COPIED - 1);
        Some(if id & QUIET_COPIED != 0 {
            let kind = if n & 1 == 0 { Kind::Msg } else { Kind::Tagged };
            Role::Copied {
                kind,
                to: SlotId((n >> 1) as u32),
            }
        } else if id & QUIET_CTS != 0 {
            Role::Cts { recv: n }
        } else {
            Role::Rts { send: n }
        })
    }
}

/// A send not yet handed to the queue pair (it was full), in posting order.
#[derive(Debug)]
pub enum Outgoing {
    Message {
        to: SlotId,
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
    /// The rest of a peer's read `id` of our region `key`, from `offset` on (`len` bytes):
    /// posted one READ_DATA chunk at a time, each copied from the region when posted (the
    /// region may change or go before the peer acknowledges it), the rest queued again.
    Served {
        to: SlotId,
        id: u64,
        key: u64,
        addr: u64,
        offset: usize,
        len: usize,
    },
    /// A message sent over an RC connection that went before the peer acknowledged it: sent
    /// again over RD as it was, its per-peer header (`head`) and number unchanged.
    Again {
        to: SlotId,
        head: Vec<u8>,
        data: bytes::Bytes,
        role: Role,
    },
}

impl Role {
    /// Whether its completion waits for the peer's acknowledgement: over RC that is asked
    /// for at once.
    pub fn waits_for_peer(self) -> bool {
        matches!(
            self,
            Role::Part { .. } | Role::Chunk { .. } | Role::Ping { .. } | Role::Served { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_request_ids_name_their_role_and_no_other_id() {
        for role in [
            Role::Rts { send: 7 },
            Role::Cts { recv: 7 },
            Role::Cts { recv: 0 },
            Role::Copied {
                kind: Kind::Msg,
                to: SlotId(0),
            },
            Role::Copied {
                kind: Kind::Tagged,
                to: SlotId(u32::MAX),
            },
        ] {
            let id = role.quiet_id().unwrap();
            assert_eq!(Role::from_quiet_id(id), Some(role));
        }
        assert_ne!(
            Role::Rts { send: 7 }.quiet_id(),
            Role::Cts { recv: 7 }.quiet_id()
        );
        let peer = SlotId(1);
        for role in [
            Role::Part { send: 7 },
            Role::Chunk { send: 7, lent: 0 },
            Role::Free,
            Role::Ping { peer },
        ] {
            assert_eq!(role.quiet_id(), None, "{role:?}");
        }
        // Ids too large to carry a role are signaled instead.
        assert_eq!(Role::Cts { recv: 1 << 62 }.quiet_id(), None);
        assert_eq!(Role::Rts { send: 1 << 61 }.quiet_id(), None);
        // Request ids from the endpoint's counter name no role.
        for id in [0, 1, 1 << 40, (1 << 63) - 1] {
            assert_eq!(Role::from_quiet_id(id), None);
        }
    }
}

//! The vocabulary shared by the matcher and the endpoint that drives it.

use super::multi::Piece;

/// A peer as the address vector numbers it (its `fi_addr_t` index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub u32);

impl PeerId {
    /// Any peer: a receive posted with `FI_ADDR_UNSPEC`, or any receive on an endpoint opened
    /// without FI_DIRECTED_RECV.
    pub const ANY: PeerId = PeerId(u32::MAX);

    /// Whether this is [`PeerId::ANY`].
    pub fn is_any(self) -> bool {
        self == Self::ANY
    }
}

/// Which of the two independent matching domains an operation belongs to: FI_MSG receives
/// never see FI_TAGGED messages and vice versa.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Untagged (`fi_send`/`fi_recv`); matched on the peer alone.
    Msg,
    /// Tagged (`fi_tsend`/`fi_trecv`); matched on the peer and the tag under the ignore mask.
    Tagged,
}

impl Kind {
    pub(super) fn index(self) -> usize {
        match self {
            Kind::Msg => 0,
            Kind::Tagged => 1,
        }
    }
}

/// The application's per-operation `void *context`, by which FI_CLAIM and `fi_cancel` name an
/// operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Context(pub usize);

/// What a receive accepts and how much room it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSpec {
    /// The only peer it accepts, or [`PeerId::ANY`].
    pub peer: PeerId,
    /// The tag it wants (tagged receives only; untagged receives are stored with 0).
    pub tag: u64,
    /// Tag bits that need not match (libfabric's `ignore`; untagged receives are stored with 0).
    pub ignore: u64,
    /// Bytes the receive buffer holds.
    pub capacity: usize,
    /// The application's context for this operation.
    pub context: Context,
}

impl RecvSpec {
    /// An untagged receive.
    pub fn untagged(peer: PeerId, capacity: usize, context: Context) -> RecvSpec {
        RecvSpec {
            peer,
            tag: 0,
            ignore: 0,
            capacity,
            context,
        }
    }

    /// A tagged receive.
    pub fn tagged(
        peer: PeerId,
        tag: u64,
        ignore: u64,
        capacity: usize,
        context: Context,
    ) -> RecvSpec {
        RecvSpec {
            peer,
            tag,
            ignore,
            capacity,
            context,
        }
    }

    /// libfabric's rule: the peer matches (or the receive takes any peer) and the tags agree
    /// outside the ignored bits.
    pub fn matches(&self, h: &Header) -> bool {
        (self.peer.is_any() || self.peer == h.peer)
            && (h.tag | self.ignore) == (self.tag | self.ignore)
    }

    /// Exact receives live in the hashed buckets; the others are searched in order.
    pub(super) fn is_exact(&self) -> bool {
        !self.peer.is_any() && self.ignore == 0
    }

    /// Untagged queues ignore tags entirely; storing zeros lets one code path serve both.
    pub(super) fn normalized(mut self, kind: Kind) -> RecvSpec {
        if kind == Kind::Msg {
            self.tag = 0;
            self.ignore = 0;
        }
        self
    }
}

/// How the sender is delivering the message body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The body follows the header on the wire; if unexpected, the endpoint buffers all of it
    /// (possibly while the rest is still arriving).
    Eager,
    /// Only a request to send arrived; the body is fetched after the match.
    Rendezvous {
        /// The transport's name for the pending send, echoed in the clear-to-send.
        handle: u64,
    },
}

/// An arriving message's matching data, in the order the transport hands messages over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The sender.
    pub peer: PeerId,
    /// The tag (0 for untagged messages; the matcher zeroes it on the untagged queue).
    pub tag: u64,
    /// Remote CQ data, when the sender supplied it (FI_REMOTE_CQ_DATA).
    pub data: Option<u64>,
    /// The full message length.
    pub len: usize,
    /// How the body travels.
    pub protocol: Protocol,
}

/// An unexpected message held by the matcher. Valid while the message is queued or claimed;
/// a stale id (message since taken) is refused, never aliased.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnexpectedId {
    pub(super) kind: Kind,
    pub(super) key: u32,
    pub(super) seq: u64,
}

/// A receive paired with a message: where the bytes go and what the completion reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery<R> {
    /// The receive's buffer descriptor. For a multi-receive buffer that stays posted this is a
    /// clone; the last piece carries the original.
    pub recv: R,
    /// The receive's context, for the completion.
    pub context: Context,
    /// The message.
    pub header: Header,
    /// Where in the receive buffer the message starts (non-zero only in multi-receive buffers).
    pub offset: usize,
    /// Bytes of the message that land in the buffer: the completion's `len`.
    pub placed: usize,
    /// Whether the receive is a multi-receive buffer.
    pub multi_recv: bool,
    /// For a multi-receive buffer: this was its last message, so the completion carries
    /// FI_MULTI_RECV and the buffer returns to the application.
    pub released: bool,
}

impl<R> Delivery<R> {
    /// Bytes the buffer had no room for: non-zero means FI_ETRUNC with this as `olen`.
    pub fn truncated(&self) -> usize {
        self.header.len - self.placed
    }

    pub(super) fn whole(recv: R, spec: &RecvSpec, header: Header) -> Delivery<R> {
        Delivery {
            recv,
            context: spec.context,
            header,
            offset: 0,
            placed: header.len.min(spec.capacity),
            multi_recv: false,
            released: false,
        }
    }

    pub(super) fn piece(recv: R, spec: &RecvSpec, header: Header, piece: Piece) -> Delivery<R> {
        Delivery {
            recv,
            context: spec.context,
            header,
            offset: piece.offset,
            placed: piece.placed,
            multi_recv: true,
            released: piece.released,
        }
    }
}

/// A message that was waiting in the unexpected queue, handed back when something takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unexpected<U> {
    /// The id it had while queued (now stale), for the endpoint's own bookkeeping.
    pub id: UnexpectedId,
    /// Its header.
    pub header: Header,
    /// The endpoint's payload: buffered bytes or rendezvous state.
    pub payload: U,
}

/// A receive that took a waiting message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken<R, U> {
    /// Where the message goes.
    pub delivery: Delivery<R>,
    /// The message, out of the matcher's custody.
    pub message: Unexpected<U>,
}

/// What became of an arriving message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Arrival<R> {
    /// A posted receive takes it.
    Matched(Delivery<R>),
    /// No posted receive wants it; the matcher holds it as unexpected.
    Buffered(UnexpectedId),
}

/// What became of a posted receive.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Post<R, U> {
    /// It took a waiting message.
    Matched(Taken<R, U>),
    /// It waits in the posted queue.
    Queued,
}

/// The result of an FI_PEEK search.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Peek<T> {
    /// A message matched.
    Found(T),
    /// Nothing matched: the endpoint reports an FI_ENOMSG error completion.
    NoMessage,
}

impl<T> Peek<T> {
    /// The found value, if any.
    pub fn found(self) -> Option<T> {
        match self {
            Peek::Found(t) => Some(t),
            Peek::NoMessage => None,
        }
    }
}

/// A receive removed by `fi_cancel`; the endpoint reports FI_ECANCELED for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cancelled<R> {
    /// Which queue it was in.
    pub kind: Kind,
    /// Its context.
    pub context: Context,
    /// Its buffer descriptor.
    pub recv: R,
    /// Whether it was a multi-receive buffer (its completion carries FI_MULTI_RECV).
    pub multi_recv: bool,
}

/// Sizes of one kind's queues, for tests and the memory report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Posted receives waiting (multi-receive buffers included).
    pub posted: usize,
    /// Unexpected messages waiting to be matched.
    pub unexpected: usize,
    /// Messages reserved by FI_PEEK|FI_CLAIM.
    pub claimed: usize,
    /// Hashed lists (exact buckets and per-peer lists) allocated in both queues.
    pub lists: usize,
}

//! MPI message matching, independent of any transport.
//!
//! The endpoint feeds a [`Matcher`] two streams — receives the application posts, and message
//! headers the transport delivers in each peer's send order — and learns from the returned
//! values which receive takes which message. Nothing here performs I/O or moves payload
//! bytes: receive buffers (`R`) and buffered messages (`U`) are the endpoint's opaque types.
//!
//! The rules are libfabric's as MPI uses them:
//!
//! - A receive matches a message when it names the sender or [`PeerId::ANY`], and the tags
//!   agree outside the receive's ignore mask. Untagged (FI_MSG) and tagged (FI_TAGGED) traffic
//!   live in separate queues.
//! - An arriving message goes to the *oldest* posted receive that matches; a posted receive
//!   takes the *oldest* waiting message that matches. With per-peer in-order arrival this is
//!   MPI's non-overtaking rule.
//! - FI_PEEK, FI_CLAIM and FI_DISCARD, `fi_cancel`, FI_MULTI_RECV buffers and truncation are
//!   decided here; the endpoint turns the results into completions.
//!
//! Exact (peer, tag) matches are O(1) in both directions; wildcard receives cost a scan of the
//! narrowest ordered list that can hold their match. See `posted.rs` and `unexpected.rs` for
//! the structures and the sequence numbers that order them.

mod account;
mod arena;
mod matcher;
mod multi;
mod posted;
mod types;
mod unexpected;

#[cfg(test)]
mod tests;

pub use account::{Account, MemCounter};
pub use matcher::Matcher;
pub use multi::MULTI_RECV_ALIGN;
pub use types::{
    Arrival, Cancelled, Context, Delivery, Header, Kind, Peek, PeerId, Post, Protocol, RecvSpec,
    Stats, Taken, Unexpected, UnexpectedId,
};
pub use unexpected::unexpected_charge;

//! RD queue pairs: reliable datagrams (seed 000 §III-B) over the UD socket, with the
//! `reliability` engine as the LLP beneath DDP.
//!
//! One UDP socket per queue pair and one engine session per peer. A send is one message of any
//! size: it gets an untagged DDP/RDMAP Send header, the engine segments it, and it completes
//! when the peer has acknowledged every byte. Segments are placed straight into the posted
//! receive bound to their message, in whatever order they arrive; messages complete in order
//! per peer. Peers agree on session ids with a small handshake ([`hello`]) unless the caller
//! pre-seeds them.
//!
//! Everything runs inside `post_send` and `poll_cq`: the clock is read once per call, engine
//! timers run when due, and [`RdPath::next_deadline`](path::RdPath::next_deadline) tells a
//! timer thread when to poll.
//!
//! The files are floors, each using only those below it. At the bottom, the pieces: the
//! transmit queue ([`tx`]), the receive ring ([`ring`]), buffer reuse ([`pool`], [`copies`]),
//! connected sockets ([`conn`]), the handshake's datagrams ([`hello`]), counters ([`stats`]),
//! what is handed back to the caller ([`returned`]);
//! then the receive state of one peer and the receiver sinks ([`rx`]), a peer's whole state
//! ([`peer`]: an always-present compact entry and an active part only a peer with work holds),
//! the table of peers ([`table`]: a slab found by address and by session id), the queue pair's
//! own ([`path`]: the transmit loop, idle peers' retirement), the
//! handshake and sessions ([`sessions`]), the send path ([`send`]), progress ([`progress`]:
//! reading, engine events, timers), hand-back ([`handback`]: a silent peer reported, its sends
//! returned whole, a probe to greet it again) and the memory ledger ([`memory`]).

mod conn;
mod copies;
mod handback;
mod hello;
mod memory;
mod path;
mod peer;
mod pool;
mod progress;
mod returned;
mod ring;
mod rx;
mod send;
mod sessions;
mod stats;
mod table;
mod tx;

/// The handshake's datagrams, for tests that forge peers ([`RdQp::inject_datagram`]).
///
/// [`RdQp::inject_datagram`]: crate::verbs::RdQp::inject_datagram
#[doc(hidden)]
pub use hello::{Hello as RdHello, HelloKind as RdHelloKind, HELLO_LEN as RD_HELLO_LEN};
pub use memory::RdMemory;
pub(crate) use path::RdPath;
pub use path::RD_SOCKET_BUFFER;
pub use peer::same_host;
pub use returned::Returned as RdReturned;
pub use rx::{RdReceiver, RD_MAX_MESSAGE, SEGMENT_HEAD};
pub use send::RD_OWNED_MIN;
pub use stats::RdStats;

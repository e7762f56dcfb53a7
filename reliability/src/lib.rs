//! Sans-IO reliable-datagram sessions for diwarp: the "LLP" under datagram-iWARP's reliable
//! datagram service. Sequence numbers, batched and selective ACKs, RTT-based retransmission,
//! credits, reordering, segmentation with out-of-order placement, and coalescing. No sockets and
//! no clock reads: the caller passes time and bytes in and takes datagrams, deadlines and events
//! out, as with quinn-proto's `Connection`.
//!
//! A [`Session`] talks to one peer; an [`Endpoint`] owns many and finds them by the session id
//! in each datagram's [header]. See the crate README for the protocol and its defaults.

pub mod config;
mod crc;
mod deadline;
mod dormant;
pub mod endpoint;
pub mod header;
pub mod reassembly;
pub mod rtt;
mod send;
pub mod seq;
pub mod session;
pub mod stats;

pub use config::{Config, ConfigError};
pub use dormant::Dormant;
pub use endpoint::{Endpoint, EndpointStats, Slept};
pub use reassembly::{Delivery, Placement, Sink};
pub use seq::{MsgId, MsgRange, Seq};
pub use session::{
    DropReason, Event, GatherTransmit, Refused, SendError, Session, SessionIds, Transmit,
};
pub use stats::{EndpointMemory, Memory, RttStats, Stats};

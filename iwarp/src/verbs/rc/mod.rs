//! RC queue pairs: iWARP over MPA over TCP, after the start-up exchange.
//!
//! Sending: a message becomes untagged DDP Send segments of at most `seg_payload` bytes (MSN per
//! message, MO = offset, L on the last), one FPDU each. Without markers the FPDUs are framed in
//! place and gathered, up to [`BATCH`](send::BATCH) of them per `sendmsg`, so the payload is never copied;
//! with markers (which must be spliced into the payload) they are encoded into a reusable buffer.
//! Whatever the kernel does not take at once is copied into that buffer and written from
//! `poll_cq`; a send completes once its last byte is in the kernel.
//!
//! Receiving: the socket is read straight into the [`FpduDecoder`]'s buffer, and each segment's
//! payload is copied to its MO in the receive buffer at the head of the receive queue. A message
//! that does not fit completes with `LocalLengthError` when its last segment arrives; its other
//! segments are read and dropped so the stream stays in step. With no receive posted (and no
//! RDMA under way, below) the socket is not read: TCP flow control then holds the sender back
//! (and a peer's close is only noticed once a receive is posted or a send fails).
//! In receiver mode (`QueuePair::poll_cq_with`) no receives are posted: each message is lent to
//! the receiver where it lies in the decoder's buffer when one FPDU carried it, and joined in a
//! buffer first otherwise; one longer than the receiver takes breaks the connection. A long
//! message the receiver knows where to put is read from the socket straight there
//! ([`in_place`]).
//!
//! RDMA (RFC 5040 §4, RFC 5041): an RDMA Write is tagged segments (STag and TO of the peer's
//! region) encoded into the send buffer; it completes as a send does and is silent at the
//! target. An RDMA Read is one Read Request on queue 1 (its own MSN); the responder encodes the
//! whole Read Response into its send buffer, behind whatever is queued, when the request is
//! decoded, and the requester completes its oldest read when the last response segment is
//! placed. Tagged segments and requests are handled as they are decoded, in stream order, in
//! both receive modes, so a Send that follows a Write finds its data in place. With posted
//! receives and none posted, the socket is still read while memory is registered or a read
//! is in flight: the first Send segment that finds no receive is kept aside and stops the
//! reading until one is posted, so Sends still hold the peer back through TCP.
//!
//! Any decoding, CRC, marker or sequencing error, a reset or an end of stream breaks the
//! connection (RFC 5044 §8): the socket is shut down and everything outstanding completes in
//! error. So does an RDMA segment the registrations do not allow. No Terminate message is
//! sent.
//!
//! Not enforced: RFC 5044 §7.1.2 lets the responder send only after the initiator's first FPDU,
//! and RFC 6581's ready-to-receive message is not offered (IRD/ORD go out as 0/0 without the
//! peer-to-peer bits). Between two of these queue pairs either side may send first.
//!
//! The files are floors, each using only those below it: [`state`] (the pieces of a
//! connection's state), [`in_place`], [`path`] (the connection, its flush and its failure),
//! [`send`], [`rdma`] (RDMA Write and Read, both ends), [`recv`] (progress: the receive path).

mod in_place;
mod path;
mod rdma;
mod recv;
mod send;
mod state;

pub(crate) use path::RcPath;
pub use state::RcSettings;

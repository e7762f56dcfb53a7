//! The provider's message header: the first bytes of every RD message between two endpoints.
//!
//! MPI matching data rides in front of the eager payload (DESIGN.md "Wire"); a rendezvous is
//! RTS (matching data and the sender's handle), CTS (the receiver's handle and how many bytes
//! it takes) and DATA chunks that name the receive and their offset, so each is placed where it
//! belongs whatever order the engine hands them over in. PUSH chunks are the message's first
//! bytes, sent behind an RTS flagged `F_PUSHED` before any CTS: they name the sender's handle,
//! and a CTS flagged `F_TAKEN` says the receiver keeps them (`push.rs`). Integers are
//! little-endian.
//!
//! ```text
//! byte 0 op | byte 1 flags | 2..4 zero | 4..8 sender's QP number | then per op:
//! EAGER, RTS  tag u64 | cq data u64 | length u64 | handle u64 (RTS; EAGER 0)   payload (EAGER)
//! CTS         handle u64 | receive id u64 | wanted u64
//! DATA        receive id u64 | offset u64                                    payload
//! PUSH        handle u64 | offset u64                                        payload
//! PING        (nothing: asks the engine for an acknowledgement, see `State::ping_peers`)
//! WRITE       key u64 | address u64 | write id u64                          payload
//! READ        read id u64 | key u64 | address u64 | length u64
//! READ_DATA   read id u64 | offset u64                                      payload
//! RMA_ANSWER  write or read id u64 | fi errno u64 (0: done)
//! ATOMIC      request id u64 | key u64 | address u64 | count u32, datatype u8, op u8, 0 u16
//!                                                                operand, compare operand
//! ATOMIC_ANSWER  request id u64 | fi errno u64 (0: done)          the values before (F_FETCH)
//! ```
//!
//! RMA (`rma.rs`): a WRITE places its payload at `address` of the target's memory region
//! `key`; a READ asks the target for READ_DATA chunks naming the read. A target that refuses
//! either (no such region, out of its bounds, access not granted) answers RMA_ANSWER with an
//! errno, and it answers a write's last WRITE (flagged `F_LAST`) in any case, echoing the flag:
//! that answer, not the acknowledgement, completes the write.
//!
//! Atomics (`atomic.rs`): ATOMIC carries RFC 7306's Atomic Request fields (request identifier,
//! the target's STag and tagged offset, the operands) with what MPI needs beyond its 64-bit
//! fetch-add and compare-swap: a count of elements, their datatype and the operation, in
//! libfabric's codes. The target applies it and answers ATOMIC_ANSWER, which carries the values
//! from before the operation when the request is flagged `F_FETCH` (RFC 7306's Atomic Response
//! carries one such value).
//!
//! [`Packet`] is a view over a message's bytes and [`Repr`] its parsed form, in smoltcp's manner
//! as `iwarp::wire::ddp` and `reliability::header` are. The data path sends most payloads from
//! buffers of its own (a chunk straight from the application's memory), so the appenders
//! (`eager`, `cts`, `write`, …; one file per kind of message) write the header alone and the
//! caller adds the payload; [`parse`] hands back the message with its payload borrowed.

/// Rendezvous data per chunk: one RD message of this size plus its header fits a datagram.
pub const CHUNK: usize = 60 * 1024;

mod atomic;
mod msg;
mod packet;
mod repr;
mod rma;

pub use atomic::{atomic, atomic_answer};
pub use msg::{cts, data, eager, ping, rts};
pub use packet::{
    Packet, WireError, ATOMIC_ANSWER_HEADER, ATOMIC_HEADER, CTS_HEADER, DATA_HEADER, MATCH_HEADER,
    PING_LEN, READ_LEN, RMA_ANSWER_LEN, WRITE_HEADER,
};
use packet::{DATA, EAGER, RTS};
pub use repr::{AtomicRequest, Matching, Msg, Repr};
pub use rma::{read, read_data, rma_answer, write};

/// Whether a message goes to the matcher (an eager message or an RTS), so that its sender must
/// be known to match a directed receive.
pub fn is_matched(b: &[u8]) -> bool {
    matches!(b.first(), Some(&EAGER | &RTS))
}

/// Whether a message is a rendezvous chunk the receiver asked for (which may be placed out of
/// turn; a PUSH is handled in turn, after its RTS).
pub fn is_data(b: &[u8]) -> bool {
    b.first() == Some(&DATA)
}

/// Whether `b` is a rendezvous request.
pub fn is_rts(b: &[u8]) -> bool {
    b.first() == Some(&RTS)
}

/// The sender's QP number and the message.
pub fn parse(b: &[u8]) -> Result<(u32, Msg<'_>), WireError> {
    let Repr { qpn, msg } = Repr::parse(&Packet::new_checked(b)?)?;
    Ok((qpn, msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse(&b);
        }
    }
}

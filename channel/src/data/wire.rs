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

use crate::matching::Kind;

/// Rendezvous data per chunk: one RD message of this size plus its header fits a datagram.
pub const CHUNK: usize = 60 * 1024;

const EAGER: u8 = 1;
const RTS: u8 = 2;
const CTS: u8 = 3;
const DATA: u8 = 4;
const PING: u8 = 5;
const PUSH: u8 = 6;
const WRITE: u8 = 7;
const READ: u8 = 8;
const READ_DATA: u8 = 9;
const RMA_ANSWER: u8 = 10;
const ATOMIC: u8 = 11;
const ATOMIC_ANSWER: u8 = 12;

const F_TAGGED: u8 = 1;
const F_CQ_DATA: u8 = 2;
/// RTS: PUSH chunks follow it.
const F_PUSHED: u8 = 4;
/// CTS: the receiver keeps the pushed chunks; the sender sends the rest after them.
const F_TAKEN: u8 = 1;
/// WRITE: the write's last; RMA_ANSWER: answers a write's last WRITE.
const F_LAST: u8 = 1;
/// ATOMIC: the values from before the operation are wanted back.
const F_FETCH: u8 = 1;

/// Header bytes of EAGER and RTS.
pub const MATCH_HEADER: usize = 40;
/// Header bytes of CTS.
pub const CTS_HEADER: usize = 32;
/// Header bytes of DATA and PUSH.
pub const DATA_HEADER: usize = 24;
/// Bytes of a PING.
pub const PING_LEN: usize = 8;
/// Header bytes of WRITE.
pub const WRITE_HEADER: usize = 32;
/// Bytes of READ.
pub const READ_LEN: usize = 40;
/// Bytes of RMA_ANSWER.
pub const RMA_ANSWER_LEN: usize = 24;
/// Header bytes of ATOMIC and of ATOMIC_ANSWER.
pub const ATOMIC_HEADER: usize = 40;
pub const ATOMIC_ANSWER_HEADER: usize = 24;

/// Matching data of an EAGER or RTS message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Matching {
    pub kind: Kind,
    pub tag: u64,
    pub data: Option<u64>,
    pub len: u64,
}

/// A parsed message; payloads borrow from the datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Msg<'a> {
    Eager {
        m: Matching,
        payload: &'a [u8],
    },
    Rts {
        m: Matching,
        handle: u64,
        pushed: bool,
    },
    Cts {
        handle: u64,
        recv_id: u64,
        wanted: u64,
        taken: bool,
    },
    Data {
        recv_id: u64,
        offset: u64,
        payload: &'a [u8],
    },
    Push {
        handle: u64,
        offset: u64,
        payload: &'a [u8],
    },
    Ping,
    Write {
        key: u64,
        addr: u64,
        id: u64,
        last: bool,
        payload: &'a [u8],
    },
    Read {
        id: u64,
        key: u64,
        addr: u64,
        len: u64,
    },
    ReadData {
        id: u64,
        offset: u64,
        payload: &'a [u8],
    },
    RmaAnswer {
        id: u64,
        errno: u64,
        last: bool,
    },
    Atomic(AtomicRequest<'a>),
    AtomicAnswer {
        id: u64,
        errno: u64,
        fetched: &'a [u8],
    },
}

/// An ATOMIC message. Codes are libfabric's, unchecked: the target answers an error for one
/// it does not take.
#[derive(Debug, PartialEq, Eq)]
pub struct AtomicRequest<'a> {
    pub id: u64,
    pub key: u64,
    pub addr: u64,
    pub count: u32,
    pub datatype: u8,
    pub op: u8,
    pub fetch: bool,
    /// The operand, then the compare operand (compare operations).
    pub operands: &'a [u8],
}

/// Why a message was dropped (each is counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message shorter than its header")]
    Short,
    #[error("unknown operation {0}")]
    Op(u8),
    #[error("reserved bits set")]
    Reserved,
    #[error("eager length {len} disagrees with the {payload} bytes carried")]
    Length { len: u64, payload: usize },
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put(out: &mut Vec<u8>, qpn: u32, op: u8, flags: u8, words: &[u64]) {
    out.extend_from_slice(&[op, flags, 0, 0]);
    out.extend_from_slice(&qpn.to_le_bytes());
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

fn match_flags(m: &Matching) -> u8 {
    let mut f = 0;
    if m.kind == Kind::Tagged {
        f |= F_TAGGED;
    }
    if m.data.is_some() {
        f |= F_CQ_DATA;
    }
    f
}

/// Appends an EAGER header; the caller appends `m.len` payload bytes.
pub fn eager(out: &mut Vec<u8>, qpn: u32, m: &Matching) {
    put(
        out,
        qpn,
        EAGER,
        match_flags(m),
        &[m.tag, m.data.unwrap_or(0), m.len, 0],
    );
}

pub fn rts(out: &mut Vec<u8>, qpn: u32, m: &Matching, handle: u64, pushed: bool) {
    let flags = match_flags(m) | if pushed { F_PUSHED } else { 0 };
    put(
        out,
        qpn,
        RTS,
        flags,
        &[m.tag, m.data.unwrap_or(0), m.len, handle],
    );
}

pub fn cts(out: &mut Vec<u8>, qpn: u32, handle: u64, recv_id: u64, wanted: u64, taken: bool) {
    let flags = if taken { F_TAKEN } else { 0 };
    put(out, qpn, CTS, flags, &[handle, recv_id, wanted]);
}

/// Appends a DATA header (`recv_id` is the receiver's) or, with `recv_id` `None`, a PUSH
/// header naming send `handle`; the caller appends the chunk.
pub fn data(out: &mut Vec<u8>, qpn: u32, recv_id: Option<u64>, handle: u64, offset: u64) {
    match recv_id {
        Some(id) => put(out, qpn, DATA, 0, &[id, offset]),
        None => put(out, qpn, PUSH, 0, &[handle, offset]),
    }
}

/// Appends a PING.
pub fn ping(out: &mut Vec<u8>, qpn: u32) {
    put(out, qpn, PING, 0, &[]);
}

/// Appends a WRITE header; the caller appends the bytes to place at `addr`.
pub fn write(out: &mut Vec<u8>, qpn: u32, key: u64, addr: u64, id: u64, last: bool) {
    put(
        out,
        qpn,
        WRITE,
        if last { F_LAST } else { 0 },
        &[key, addr, id],
    );
}

pub fn read(out: &mut Vec<u8>, qpn: u32, id: u64, key: u64, addr: u64, len: u64) {
    put(out, qpn, READ, 0, &[id, key, addr, len]);
}

/// Appends a READ_DATA header; the caller appends the bytes read from `offset` on.
pub fn read_data(out: &mut Vec<u8>, qpn: u32, id: u64, offset: u64) {
    put(out, qpn, READ_DATA, 0, &[id, offset]);
}

pub fn rma_answer(out: &mut Vec<u8>, qpn: u32, id: u64, errno: u64, last: bool) {
    put(
        out,
        qpn,
        RMA_ANSWER,
        if last { F_LAST } else { 0 },
        &[id, errno],
    );
}

/// Appends an ATOMIC header; the caller appends the operands.
pub fn atomic(out: &mut Vec<u8>, qpn: u32, r: &AtomicRequest<'_>) {
    let last = u64::from(r.count) | u64::from(r.datatype) << 32 | u64::from(r.op) << 40;
    let flags = if r.fetch { F_FETCH } else { 0 };
    put(out, qpn, ATOMIC, flags, &[r.id, r.key, r.addr, last]);
}

/// Appends an ATOMIC_ANSWER header; the caller appends the values fetched.
pub fn atomic_answer(out: &mut Vec<u8>, qpn: u32, id: u64, errno: u64) {
    put(out, qpn, ATOMIC_ANSWER, 0, &[id, errno]);
}

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
    if b.len() < 8 {
        return Err(WireError::Short);
    }
    let (op, flags) = (b[0], b[1]);
    if b[2..4].iter().any(|&x| x != 0) {
        return Err(WireError::Reserved);
    }
    let qpn = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    let need = match op {
        EAGER | RTS => MATCH_HEADER,
        CTS => CTS_HEADER,
        DATA | PUSH | READ_DATA => DATA_HEADER,
        PING => PING_LEN,
        WRITE => WRITE_HEADER,
        READ => READ_LEN,
        RMA_ANSWER => RMA_ANSWER_LEN,
        ATOMIC => ATOMIC_HEADER,
        ATOMIC_ANSWER => ATOMIC_ANSWER_HEADER,
        _ => return Err(WireError::Op(op)),
    };
    if b.len() < need {
        return Err(WireError::Short);
    }
    let allowed = match op {
        EAGER => F_TAGGED | F_CQ_DATA,
        RTS => F_TAGGED | F_CQ_DATA | F_PUSHED,
        CTS => F_TAKEN,
        WRITE | RMA_ANSWER => F_LAST,
        ATOMIC => F_FETCH,
        _ => 0,
    };
    if flags & !allowed != 0 {
        return Err(WireError::Reserved);
    }
    let matching = || Matching {
        kind: if flags & F_TAGGED != 0 {
            Kind::Tagged
        } else {
            Kind::Msg
        },
        tag: u64_at(b, 8),
        data: (flags & F_CQ_DATA != 0).then(|| u64_at(b, 16)),
        len: u64_at(b, 24),
    };
    Ok((
        qpn,
        match op {
            EAGER => {
                let m = matching();
                let payload = &b[MATCH_HEADER..];
                if m.len != payload.len() as u64 || u64_at(b, 32) != 0 {
                    return Err(WireError::Length {
                        len: m.len,
                        payload: payload.len(),
                    });
                }
                Msg::Eager { m, payload }
            }
            RTS => {
                if b.len() != MATCH_HEADER {
                    return Err(WireError::Short);
                }
                Msg::Rts {
                    m: matching(),
                    handle: u64_at(b, 32),
                    pushed: flags & F_PUSHED != 0,
                }
            }
            CTS => {
                if b.len() != CTS_HEADER {
                    return Err(WireError::Short);
                }
                Msg::Cts {
                    handle: u64_at(b, 8),
                    recv_id: u64_at(b, 16),
                    wanted: u64_at(b, 24),
                    taken: flags & F_TAKEN != 0,
                }
            }
            PING => {
                if b.len() != PING_LEN {
                    return Err(WireError::Short);
                }
                Msg::Ping
            }
            READ | RMA_ANSWER if b.len() != need => return Err(WireError::Short),
            WRITE => Msg::Write {
                key: u64_at(b, 8),
                addr: u64_at(b, 16),
                id: u64_at(b, 24),
                last: flags & F_LAST != 0,
                payload: &b[WRITE_HEADER..],
            },
            READ => Msg::Read {
                id: u64_at(b, 8),
                key: u64_at(b, 16),
                addr: u64_at(b, 24),
                len: u64_at(b, 32),
            },
            READ_DATA => Msg::ReadData {
                id: u64_at(b, 8),
                offset: u64_at(b, 16),
                payload: &b[DATA_HEADER..],
            },
            RMA_ANSWER => Msg::RmaAnswer {
                id: u64_at(b, 8),
                errno: u64_at(b, 16),
                last: flags & F_LAST != 0,
            },
            ATOMIC => {
                let last = u64_at(b, 32);
                if last >> 48 != 0 {
                    return Err(WireError::Reserved);
                }
                Msg::Atomic(AtomicRequest {
                    id: u64_at(b, 8),
                    key: u64_at(b, 16),
                    addr: u64_at(b, 24),
                    count: last as u32,
                    datatype: (last >> 32) as u8,
                    op: (last >> 40) as u8,
                    fetch: flags & F_FETCH != 0,
                    operands: &b[ATOMIC_HEADER..],
                })
            }
            ATOMIC_ANSWER => Msg::AtomicAnswer {
                id: u64_at(b, 8),
                errno: u64_at(b, 16),
                fetched: &b[ATOMIC_ANSWER_HEADER..],
            },
            PUSH => Msg::Push {
                handle: u64_at(b, 8),
                offset: u64_at(b, 16),
                payload: &b[DATA_HEADER..],
            },
            _ => Msg::Data {
                recv_id: u64_at(b, 8),
                offset: u64_at(b, 16),
                payload: &b[DATA_HEADER..],
            },
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(kind: Kind, data: Option<u64>, len: u64) -> Matching {
        Matching {
            kind,
            tag: 0x8000_0000_0000_0001,
            data,
            len,
        }
    }

    #[test]
    fn round_trips() {
        let mut b = vec![];
        eager(&mut b, 3, &m(Kind::Tagged, Some(7), 3));
        b.extend_from_slice(b"abc");
        assert_eq!(
            parse(&b),
            Ok((
                3,
                Msg::Eager {
                    m: m(Kind::Tagged, Some(7), 3),
                    payload: b"abc"
                }
            ))
        );
        b.clear();
        for pushed in [false, true] {
            b.clear();
            rts(&mut b, 3, &m(Kind::Msg, None, 1 << 40), 99, pushed);
            assert_eq!(
                parse(&b),
                Ok((
                    3,
                    Msg::Rts {
                        m: m(Kind::Msg, None, 1 << 40),
                        handle: 99,
                        pushed
                    }
                ))
            );
        }
        for taken in [false, true] {
            b.clear();
            cts(&mut b, 3, 1, 2, 3, taken);
            assert_eq!(
                parse(&b),
                Ok((
                    3,
                    Msg::Cts {
                        handle: 1,
                        recv_id: 2,
                        wanted: 3,
                        taken
                    }
                ))
            );
        }
        b.clear();
        data(&mut b, 3, Some(5), 7, 6);
        b.push(9);
        assert_eq!(
            parse(&b),
            Ok((
                3,
                Msg::Data {
                    recv_id: 5,
                    offset: 6,
                    payload: &[9]
                }
            ))
        );
        assert!(is_data(&b));
        b.clear();
        data(&mut b, 3, None, 7, 6);
        b.push(9);
        assert_eq!(
            parse(&b),
            Ok((
                3,
                Msg::Push {
                    handle: 7,
                    offset: 6,
                    payload: &[9]
                }
            ))
        );
        assert!(!is_data(&b), "a push waits for its turn");
        b.clear();
        ping(&mut b, 4);
        assert_eq!(b.len(), PING_LEN);
        assert_eq!(parse(&b), Ok((4, Msg::Ping)));
        b.push(0);
        assert_eq!(parse(&b).err(), Some(WireError::Short));
    }

    #[test]
    fn rma_round_trips() {
        let mut b = vec![];
        write(&mut b, 3, 1 << 63 | 5, 4096, 77, true);
        b.extend_from_slice(b"xy");
        let want = Msg::Write {
            key: 1 << 63 | 5,
            addr: 4096,
            id: 77,
            last: true,
            payload: b"xy",
        };
        assert_eq!(parse(&b), Ok((3, want)));
        assert!(!is_data(&b) && !is_matched(&b));
        assert_eq!(parse(&b[..WRITE_HEADER - 1]).err(), Some(WireError::Short));
        b.clear();
        read(&mut b, 3, 8, 9, 10, 1 << 40);
        let want = Msg::Read {
            id: 8,
            key: 9,
            addr: 10,
            len: 1 << 40,
        };
        assert_eq!(parse(&b), Ok((3, want)));
        b.push(0);
        assert_eq!(
            parse(&b).err(),
            Some(WireError::Short),
            "a READ carries no payload"
        );
        b.clear();
        read_data(&mut b, 3, 8, 61440);
        b.push(1);
        let want = Msg::ReadData {
            id: 8,
            offset: 61440,
            payload: &[1],
        };
        assert_eq!(parse(&b), Ok((3, want)));
        b.clear();
        for last in [false, true] {
            b.clear();
            rma_answer(&mut b, 3, 8, 13, last);
            let want = Msg::RmaAnswer {
                id: 8,
                errno: 13,
                last,
            };
            assert_eq!(parse(&b), Ok((3, want)));
        }
        b[1] = 2;
        assert_eq!(parse(&b).err(), Some(WireError::Reserved));
    }

    #[test]
    fn atomic_round_trips() {
        let mut b = vec![];
        for fetch in [false, true] {
            b.clear();
            let r = AtomicRequest {
                id: 8,
                key: 1 << 63 | 5,
                addr: 24,
                count: u32::MAX,
                datatype: 9,
                op: 18,
                fetch,
                operands: b"abcdefgh",
            };
            atomic(&mut b, 3, &r);
            b.extend_from_slice(r.operands);
            assert_eq!(b.len(), ATOMIC_HEADER + 8);
            assert_eq!(parse(&b), Ok((3, Msg::Atomic(r))));
        }
        assert_eq!(parse(&b[..ATOMIC_HEADER - 1]).err(), Some(WireError::Short));
        b[ATOMIC_HEADER - 1] = 1;
        assert_eq!(parse(&b).err(), Some(WireError::Reserved));
        b.clear();
        atomic_answer(&mut b, 3, 8, 0);
        b.extend_from_slice(b"old");
        let want = Msg::AtomicAnswer {
            id: 8,
            errno: 0,
            fetched: b"old",
        };
        assert_eq!(parse(&b), Ok((3, want)));
        b[1] = 1;
        assert_eq!(parse(&b).err(), Some(WireError::Reserved));
    }

    #[test]
    fn malformed_is_refused() {
        let mut b = vec![];
        eager(&mut b, 3, &m(Kind::Msg, None, 4));
        b.extend_from_slice(b"abc");
        assert!(matches!(parse(&b), Err(WireError::Length { .. })));
        assert_eq!(parse(&b[..7]).err(), Some(WireError::Short));
        let mut x = b.clone();
        x[0] = 0xEE;
        assert_eq!(parse(&x).err(), Some(WireError::Op(0xEE)));
        let mut x = b.clone();
        x[3] = 1;
        assert_eq!(parse(&x).err(), Some(WireError::Reserved));
        let mut c = vec![];
        cts(&mut c, 3, 1, 2, 3, false);
        c[1] = F_CQ_DATA;
        assert_eq!(parse(&c).err(), Some(WireError::Reserved));
        let mut e = vec![];
        eager(&mut e, 3, &m(Kind::Msg, None, 0));
        e[1] = F_PUSHED;
        assert_eq!(
            parse(&e).err(),
            Some(WireError::Reserved),
            "only an RTS is pushed"
        );
        c[1] = 0;
        c.push(0);
        assert_eq!(parse(&c).err(), Some(WireError::Short));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse(&b);
        }
    }
}

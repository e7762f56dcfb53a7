//! What a message says ([`Msg`]) and [`Repr`], which reads it from a [`Packet`] and writes it
//! into one.

use super::packet::*;
use crate::matching::Kind;

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

const fn flag(on: bool, f: u8) -> u8 {
    if on {
        f
    } else {
        0
    }
}

impl<'a> Msg<'a> {
    /// The operation that carries it.
    pub const fn op(&self) -> u8 {
        match self {
            Msg::Eager { .. } => EAGER,
            Msg::Rts { .. } => RTS,
            Msg::Cts { .. } => CTS,
            Msg::Data { .. } => DATA,
            Msg::Push { .. } => PUSH,
            Msg::Ping => PING,
            Msg::Write { .. } => WRITE,
            Msg::Read { .. } => READ,
            Msg::ReadData { .. } => READ_DATA,
            Msg::RmaAnswer { .. } => RMA_ANSWER,
            Msg::Atomic(_) => ATOMIC,
            Msg::AtomicAnswer { .. } => ATOMIC_ANSWER,
        }
    }

    /// The bytes behind the header (empty for the operations that carry none).
    pub const fn payload(&self) -> &'a [u8] {
        match self {
            Msg::Eager { payload, .. }
            | Msg::Data { payload, .. }
            | Msg::Push { payload, .. }
            | Msg::Write { payload, .. }
            | Msg::ReadData { payload, .. } => payload,
            Msg::Atomic(r) => r.operands,
            Msg::AtomicAnswer { fetched, .. } => fetched,
            _ => &[],
        }
    }
}

/// A parsed message: its sender's QP number and what it says, the payload borrowed from the
/// buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Repr<'a> {
    pub qpn: u32,
    pub msg: Msg<'a>,
}

impl<'a> Repr<'a> {
    /// Reads a message, refusing what [`Packet::check`] refuses, flags its operation does not
    /// take, a payload on an operation that carries none, and an EAGER whose length is not
    /// its payload's.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>) -> Result<Repr<'a>, WireError> {
        p.check()?;
        let (op, flags) = (p.op(), p.flags());
        if flags & !allowed_flags(op) != 0 {
            return Err(WireError::Reserved);
        }
        let payload = p.payload();
        let bare = |msg| {
            if payload.is_empty() {
                Ok(msg)
            } else {
                Err(WireError::Short)
            }
        };
        let matching = || Matching {
            kind: if flags & F_TAGGED != 0 {
                Kind::Tagged
            } else {
                Kind::Msg
            },
            tag: p.tag(),
            data: (flags & F_CQ_DATA != 0).then(|| p.cq_data()),
            len: p.msg_len(),
        };
        let msg = match op {
            EAGER => {
                let m = matching();
                if m.len != payload.len() as u64 || p.rts_handle() != 0 {
                    return Err(WireError::Length {
                        len: m.len,
                        payload: payload.len(),
                    });
                }
                Msg::Eager { m, payload }
            }
            RTS => bare(Msg::Rts {
                m: matching(),
                handle: p.rts_handle(),
                pushed: flags & F_PUSHED != 0,
            })?,
            CTS => bare(Msg::Cts {
                handle: p.cts_handle(),
                recv_id: p.cts_recv_id(),
                wanted: p.cts_wanted(),
                taken: flags & F_TAKEN != 0,
            })?,
            DATA => Msg::Data {
                recv_id: p.chunk_id(),
                offset: p.chunk_offset(),
                payload,
            },
            PUSH => Msg::Push {
                handle: p.chunk_id(),
                offset: p.chunk_offset(),
                payload,
            },
            PING => bare(Msg::Ping)?,
            WRITE => Msg::Write {
                key: p.write_key(),
                addr: p.write_addr(),
                id: p.write_id(),
                last: flags & F_LAST != 0,
                payload,
            },
            READ => bare(Msg::Read {
                id: p.read_id(),
                key: p.read_key(),
                addr: p.read_addr(),
                len: p.read_len(),
            })?,
            READ_DATA => Msg::ReadData {
                id: p.chunk_id(),
                offset: p.chunk_offset(),
                payload,
            },
            RMA_ANSWER => bare(Msg::RmaAnswer {
                id: p.answer_id(),
                errno: p.answer_errno(),
                last: flags & F_LAST != 0,
            })?,
            ATOMIC => {
                if p.atomic_reserved() != 0 {
                    return Err(WireError::Reserved);
                }
                Msg::Atomic(AtomicRequest {
                    id: p.atomic_id(),
                    key: p.atomic_key(),
                    addr: p.atomic_addr(),
                    count: p.atomic_count(),
                    datatype: p.atomic_datatype(),
                    op: p.atomic_op(),
                    fetch: flags & F_FETCH != 0,
                    operands: payload,
                })
            }
            ATOMIC_ANSWER => Msg::AtomicAnswer {
                id: p.answer_id(),
                errno: p.answer_errno(),
                fetched: payload,
            },
            // `check` refused every other operation.
            _ => return Err(WireError::Op(op)),
        };
        Ok(Repr { qpn: p.qpn(), msg })
    }

    /// Header bytes of the message's operation.
    pub fn header_len(&self) -> usize {
        header_len_for(self.msg.op()).expect("every Msg has a known operation")
    }

    /// Bytes the message takes: its header and its payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.msg.payload().len()
    }

    /// Writes the message, header then payload, into the first [`Repr::buffer_len`] bytes of
    /// `p`.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_op(self.msg.op());
        p.set_reserved(0);
        p.set_qpn(self.qpn);
        let flags = match self.msg {
            Msg::Eager { ref m, .. } => {
                emit_matching(p, m);
                p.set_rts_handle(0);
                match_flags(m)
            }
            Msg::Rts {
                ref m,
                handle,
                pushed,
            } => {
                emit_matching(p, m);
                p.set_rts_handle(handle);
                match_flags(m) | flag(pushed, F_PUSHED)
            }
            Msg::Cts {
                handle,
                recv_id,
                wanted,
                taken,
            } => {
                p.set_cts_handle(handle);
                p.set_cts_recv_id(recv_id);
                p.set_cts_wanted(wanted);
                flag(taken, F_TAKEN)
            }
            Msg::Data {
                recv_id: id,
                offset,
                ..
            }
            | Msg::Push {
                handle: id, offset, ..
            }
            | Msg::ReadData { id, offset, .. } => {
                p.set_chunk_id(id);
                p.set_chunk_offset(offset);
                0
            }
            Msg::Ping => 0,
            Msg::Write {
                key,
                addr,
                id,
                last,
                ..
            } => {
                p.set_write_key(key);
                p.set_write_addr(addr);
                p.set_write_id(id);
                flag(last, F_LAST)
            }
            Msg::Read { id, key, addr, len } => {
                p.set_read_id(id);
                p.set_read_key(key);
                p.set_read_addr(addr);
                p.set_read_len(len);
                0
            }
            Msg::RmaAnswer { id, errno, last } => {
                p.set_answer_id(id);
                p.set_answer_errno(errno);
                flag(last, F_LAST)
            }
            Msg::Atomic(ref r) => {
                p.set_atomic_id(r.id);
                p.set_atomic_key(r.key);
                p.set_atomic_addr(r.addr);
                p.set_atomic_count(r.count);
                p.set_atomic_datatype(r.datatype);
                p.set_atomic_op(r.op);
                p.set_atomic_reserved(0);
                flag(r.fetch, F_FETCH)
            }
            Msg::AtomicAnswer { id, errno, .. } => {
                p.set_answer_id(id);
                p.set_answer_errno(errno);
                0
            }
        };
        p.set_flags(flags);
        let payload = self.msg.payload();
        p.payload_mut()[..payload.len()].copy_from_slice(payload);
    }

    /// Appends the message to `out`.
    pub fn append(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + self.buffer_len(), 0);
        self.emit(&mut Packet::new_unchecked(&mut out[at..]));
    }
}

fn emit_matching<T: AsRef<[u8]> + AsMut<[u8]>>(p: &mut Packet<T>, m: &Matching) {
    p.set_tag(m.tag);
    p.set_cq_data(m.data.unwrap_or(0));
    p.set_msg_len(m.len);
}

/// The header of a message whose payload the caller appends: `msg` with an empty payload.
pub(super) fn append_header(out: &mut Vec<u8>, qpn: u32, msg: Msg<'_>) {
    debug_assert!(msg.payload().is_empty());
    Repr { qpn, msg }.append(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message of every operation, every flag set that it takes, payloads where it has one.
    fn every_kind() -> Vec<Repr<'static>> {
        let m = Matching {
            kind: Kind::Tagged,
            tag: 0x8000_0000_0000_0001,
            data: Some(7),
            len: 3,
        };
        let msgs = vec![
            Msg::Eager { m, payload: b"abc" },
            Msg::Rts {
                m: Matching { len: 1 << 40, ..m },
                handle: 99,
                pushed: true,
            },
            Msg::Cts {
                handle: 1,
                recv_id: 2,
                wanted: 3,
                taken: true,
            },
            Msg::Data {
                recv_id: 5,
                offset: 6,
                payload: &[9],
            },
            Msg::Push {
                handle: 7,
                offset: 6,
                payload: &[9, 8],
            },
            Msg::Ping,
            Msg::Write {
                key: 1 << 63 | 5,
                addr: 4096,
                id: 77,
                last: true,
                payload: b"xy",
            },
            Msg::Read {
                id: 8,
                key: 9,
                addr: 10,
                len: 1 << 40,
            },
            Msg::ReadData {
                id: 8,
                offset: 61440,
                payload: &[1],
            },
            Msg::RmaAnswer {
                id: 8,
                errno: 13,
                last: true,
            },
            Msg::Atomic(AtomicRequest {
                id: 8,
                key: 1 << 63 | 5,
                addr: 24,
                count: u32::MAX,
                datatype: 9,
                op: 18,
                fetch: true,
                operands: b"abcdefgh",
            }),
            Msg::AtomicAnswer {
                id: 8,
                errno: 0,
                fetched: b"old",
            },
        ];
        msgs.into_iter()
            .map(|msg| Repr {
                qpn: 0x0102_0304,
                msg,
            })
            .collect()
    }

    #[test]
    fn every_kind_round_trips() {
        let all = every_kind();
        let ops: std::collections::BTreeSet<u8> = all.iter().map(|r| r.msg.op()).collect();
        assert_eq!(ops.len(), 12, "one sample per operation");
        for r in &all {
            // Stale bytes under the zero fields must not survive.
            let mut b = vec![0xff; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(p.header_len(), r.header_len());
            assert_eq!(p.payload(), r.msg.payload());
            assert_eq!(Repr::parse(&p).as_ref(), Ok(r));
            let mut appended = vec![0xee];
            r.append(&mut appended);
            assert_eq!(appended[1..], b[..], "{:?}", r.msg);
        }
    }

    #[test]
    fn truncated_headers_are_refused() {
        for r in every_kind() {
            let mut b = vec![0; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            for n in 0..r.header_len() {
                assert_eq!(
                    Packet::new_checked(&b[..n]).err(),
                    Some(WireError::Short),
                    "{:?} cut to {n}",
                    r.msg
                );
                let unchecked = Packet::new_unchecked(&b[..n]);
                assert_eq!(Repr::parse(&unchecked).err(), Some(WireError::Short));
            }
            if r.msg.payload().is_empty() {
                b.push(0);
                let p = Packet::new_checked(&b[..]).unwrap();
                assert_eq!(
                    Repr::parse(&p).err(),
                    Some(WireError::Short),
                    "{:?} carries no payload",
                    r.msg
                );
            }
        }
    }
}

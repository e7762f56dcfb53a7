//! Appending the two-sided messages: EAGER, the rendezvous (RTS, CTS, DATA, PUSH) and PING.

use super::repr::{append_header, Matching, Msg};

/// Appends an EAGER header; the caller appends `m.len` payload bytes.
pub fn eager(out: &mut Vec<u8>, qpn: u32, m: &Matching) {
    let msg = Msg::Eager {
        m: *m,
        payload: &[],
    };
    append_header(out, qpn, msg);
}

pub fn rts(out: &mut Vec<u8>, qpn: u32, m: &Matching, handle: u64, pushed: bool) {
    let msg = Msg::Rts {
        m: *m,
        handle,
        pushed,
    };
    append_header(out, qpn, msg);
}

pub fn cts(out: &mut Vec<u8>, qpn: u32, handle: u64, recv_id: u64, wanted: u64, taken: bool) {
    let msg = Msg::Cts {
        handle,
        recv_id,
        wanted,
        taken,
    };
    append_header(out, qpn, msg);
}

/// Appends a DATA header (`recv_id` is the receiver's) or, with `recv_id` `None`, a PUSH
/// header naming send `handle`; the caller appends the chunk.
pub fn data(out: &mut Vec<u8>, qpn: u32, recv_id: Option<u64>, handle: u64, offset: u64) {
    let payload = &[];
    let msg = match recv_id {
        Some(recv_id) => Msg::Data {
            recv_id,
            offset,
            payload,
        },
        None => Msg::Push {
            handle,
            offset,
            payload,
        },
    };
    append_header(out, qpn, msg);
}

/// Appends a PING.
pub fn ping(out: &mut Vec<u8>, qpn: u32) {
    append_header(out, qpn, Msg::Ping);
}

#[cfg(test)]
mod tests {
    use super::super::packet::{F_CQ_DATA, F_PUSHED};
    use super::super::*;
    use super::*;
    use crate::matching::Kind;

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
}

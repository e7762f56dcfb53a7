//! Appending the atomic messages: ATOMIC and ATOMIC_ANSWER (`data::atomic`).

use super::repr::{append_header, AtomicRequest, Msg};

/// Appends an ATOMIC header; the caller appends the operands.
pub fn atomic(out: &mut Vec<u8>, qpn: u32, r: &AtomicRequest<'_>) {
    let header = AtomicRequest {
        operands: &[],
        ..*r
    };
    append_header(out, qpn, Msg::Atomic(header));
}

/// Appends an ATOMIC_ANSWER header; the caller appends the values fetched.
pub fn atomic_answer(out: &mut Vec<u8>, qpn: u32, id: u64, errno: u64) {
    let msg = Msg::AtomicAnswer {
        id,
        errno,
        fetched: &[],
    };
    append_header(out, qpn, msg);
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

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
}

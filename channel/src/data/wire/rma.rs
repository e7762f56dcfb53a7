//! Appending the RMA messages: WRITE, READ, READ_DATA and RMA_ANSWER (`data::rma`).

use super::repr::{append_header, Msg};

/// Appends a WRITE header; the caller appends the bytes to place at `addr`.
pub fn write(out: &mut Vec<u8>, qpn: u32, key: u64, addr: u64, id: u64, last: bool) {
    let msg = Msg::Write {
        key,
        addr,
        id,
        last,
        payload: &[],
    };
    append_header(out, qpn, msg);
}

pub fn read(out: &mut Vec<u8>, qpn: u32, id: u64, key: u64, addr: u64, len: u64) {
    append_header(out, qpn, Msg::Read { id, key, addr, len });
}

/// Appends a READ_DATA header; the caller appends the bytes read from `offset` on.
pub fn read_data(out: &mut Vec<u8>, qpn: u32, id: u64, offset: u64) {
    let msg = Msg::ReadData {
        id,
        offset,
        payload: &[],
    };
    append_header(out, qpn, msg);
}

pub fn rma_answer(out: &mut Vec<u8>, qpn: u32, id: u64, errno: u64, last: bool) {
    append_header(out, qpn, Msg::RmaAnswer { id, errno, last });
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

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
}

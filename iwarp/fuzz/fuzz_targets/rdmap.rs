//! RDMAP segment and opcode headers: arbitrary bytes never panic; whatever parses re-emits to
//! the same bytes.
#![no_main]

use iwarp::wire::rdmap::{OpHeader, Opcode, SegmentRepr};
use libfuzzer_sys::fuzz_target;

fn op_header_round_trip(opcode: Opcode, bytes: &[u8]) {
    if let Ok((h, rest)) = OpHeader::parse(opcode, bytes) {
        let n = h.buffer_len();
        assert_eq!(n + rest.len(), bytes.len());
        let mut out = vec![0u8; n];
        assert_eq!(h.emit(&mut out), Ok(n));
        assert_eq!(out, &bytes[..n]);
        assert_eq!(OpHeader::parse(opcode, &out).map(|(h2, _)| h2), Ok(h));
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok((seg, payload)) = SegmentRepr::parse(data) {
        let hl = seg.header_len();
        assert_eq!(hl + payload.len(), data.len());
        let mut out = vec![0u8; hl];
        assert_eq!(seg.emit(&mut out), Ok(hl));
        assert_eq!(out, &data[..hl]);
        op_header_round_trip(seg.opcode, payload);
    }
    // The opcode headers on their own, so the fuzzer need not find a valid segment first.
    if let Some((&sel, rest)) = data.split_first() {
        if let Some(&op) = Opcode::ALL.get(usize::from(sel) % Opcode::ALL.len()) {
            op_header_round_trip(op, rest);
        }
    }
});

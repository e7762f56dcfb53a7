//! DDP headers: arbitrary bytes never panic; whatever parses re-emits to the same bytes.
#![no_main]

use iwarp::wire::ddp::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let Ok(repr) = Repr::parse(&packet) else {
        return;
    };
    let hl = repr.header_len();
    assert_eq!(hl, packet.header_len());
    let mut out = data.to_vec();
    out[..hl].fill(0xa5);
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, data);
    assert_eq!(Packet::new_unchecked(&out[..]).payload(), &data[hl..]);
});

//! Arbitrary bytes into the header parser: no panic, and whatever parses emits back identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reliability::header::Repr;

fuzz_target!(|data: &[u8]| {
    if let Ok((repr, payload)) = Repr::parse(data) {
        let mut buf = vec![0u8; repr.header_len()];
        repr.emit(&mut buf);
        assert_eq!(&buf[..], &data[..repr.header_len()]);
        assert!(payload.len() <= data.len());
    }
});

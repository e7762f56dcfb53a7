//! MPA start-up frames: arbitrary bytes never panic; a parsed frame re-emits to the octets it was
//! parsed from, and every proper prefix of those asks for more.
#![no_main]

use iwarp::wire::mpa::{StartupFrame, StartupRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Some((repr, n))) = StartupRepr::parse(data) else {
        return;
    };
    assert!(n <= data.len());
    let frame = &data[..n];
    assert_eq!(repr.emit().unwrap(), frame);
    assert_eq!(repr.buffer_len(), n);
    assert_eq!(StartupFrame::new_checked(frame).unwrap().frame_len(), n);
    for cut in [0, n / 2, n - 1] {
        assert_eq!(StartupRepr::parse(&frame[..cut]), Ok(None));
    }
});

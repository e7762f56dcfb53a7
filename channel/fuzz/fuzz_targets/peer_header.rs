//! cargo-fuzz entry for `peer_header` (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    diwarp_fuzz::channel_targets::peer_header(data);
});

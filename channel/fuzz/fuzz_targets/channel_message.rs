//! cargo-fuzz entry for `channel_message` (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    diwarp_fuzz::channel_targets::message(data);
});

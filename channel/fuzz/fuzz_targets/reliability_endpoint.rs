//! cargo-fuzz entry for `reliability_endpoint` (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    diwarp_fuzz::reliability_targets::endpoint(data);
});

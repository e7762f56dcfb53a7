//! cargo-fuzz entry for `rd_hello` (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    diwarp_fuzz::iwarp_targets::rd_hello(data);
});

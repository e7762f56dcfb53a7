//! cargo-fuzz entry for `rdmap` (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    diwarp_fuzz::iwarp_targets::rdmap(data);
});

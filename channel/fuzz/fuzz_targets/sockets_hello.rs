//! cargo-fuzz entry for `sockets_hello` (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    diwarp_fuzz::sockets_targets::hello_datagram(data);
});

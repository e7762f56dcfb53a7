//! Fuzz targets for every parser of bytes that come from the network, a stable runner that CI
//! runs, and the seed corpus (README.md).
//!
//! A target is a plain function of the input bytes that panics on a broken property. It
//! returns how many bytes it handed to the parsers, which the runner's allocation bound is a
//! multiple of (an input's length, except where a target expands it on purpose).
//! `fuzz_targets/` wraps each for cargo-fuzz; `tests/fuzz.rs` runs them on stable.

pub mod channel_targets;
pub mod engine;
pub mod iwarp_targets;
pub mod reliability_targets;
pub mod seeds;
pub mod sockets_targets;

/// One fuzz target.
#[derive(Clone, Copy)]
pub struct Target {
    /// As cargo-fuzz and `corpus/` name it.
    pub name: &'static str,
    pub run: fn(&[u8]) -> usize,
    /// Longest input the runner makes.
    pub max_len: usize,
    /// Heap bytes a run may hold at once beyond [`HEAP_PER_BYTE`] per byte handed to the
    /// parsers: the fixed state a target builds (a session, a decoder's buffer).
    pub heap_base: usize,
}

/// Heap bytes a run may hold per byte handed to the parsers.
pub const HEAP_PER_BYTE: usize = 16;

const KIB: usize = 1024;

/// Every target, in the order the runner takes them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "ddp",
        run: iwarp_targets::ddp,
        max_len: 512,
        heap_base: KIB,
    },
    Target {
        name: "rdmap",
        run: iwarp_targets::rdmap,
        max_len: 512,
        heap_base: KIB,
    },
    Target {
        name: "datagram",
        run: iwarp_targets::datagram,
        max_len: 512,
        heap_base: KIB,
    },
    Target {
        name: "mpa_startup",
        run: iwarp_targets::mpa_startup,
        max_len: 1024,
        heap_base: 2 * KIB,
    },
    Target {
        name: "mpa_stream",
        run: iwarp_targets::mpa_stream,
        max_len: 1024,
        heap_base: 8 * KIB,
    },
    Target {
        name: "rd_hello",
        run: iwarp_targets::rd_hello,
        max_len: 64,
        heap_base: KIB,
    },
    Target {
        name: "reliability_header",
        run: reliability_targets::header,
        max_len: 512,
        heap_base: KIB,
    },
    Target {
        name: "reliability_session",
        run: reliability_targets::session,
        max_len: 2048,
        heap_base: 16 * KIB,
    },
    Target {
        name: "reliability_endpoint",
        run: reliability_targets::endpoint,
        max_len: 2048,
        heap_base: 32 * KIB,
    },
    Target {
        name: "channel_message",
        run: channel_targets::message,
        max_len: 256,
        heap_base: KIB,
    },
    Target {
        name: "peer_header",
        run: channel_targets::peer_header,
        max_len: 256,
        heap_base: KIB,
    },
    Target {
        name: "sockets_hello",
        run: sockets_targets::hello_datagram,
        max_len: 64,
        heap_base: KIB,
    },
];

//! Byte-exact iWARP wire formats, in smoltcp's style: zero-copy views over `&[u8]` with checked
//! accessors, plus `Repr` types that parse and emit.
//!
//! - [`ddp`]: DDP segment headers (RFC 5041), tagged and untagged.
//! - [`rdmap`]: RDMAP opcodes and headers (RFC 5040, RFC 7306 immediate data and atomics).
//! - [`mpa`]: MPA start-up frames, FPDU framing, markers and a streaming decoder (RFC 5044, 6581).
//! - [`datagram`]: datagram-iWARP framing for UD/RD (seed 000): one DDP segment per datagram,
//!   no MPA, CRC32c trailer.

pub mod datagram;
pub mod ddp;
mod error;
pub mod mpa;
pub mod rdmap;

pub use error::{Error, Result};

//! `libdiwarp-sockets.so`, loaded with `LD_PRELOAD`: an unmodified program's sockets stay the
//! kernel's, untouched (each overloaded call goes to libc through `dlsym(RTLD_NEXT)` after one
//! atomic load), and a connected stream socket that both ends switch with
//! `setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, ..)` carries its data over an RC queue pair
//! (`include/diwarp_sockets.h`). Seed 004, §3.1.
//!
//! - `switch`: the handshake that turns a connected socket into an RC queue pair, or leaves it
//!   plain (and its stream clean) when the peer does not switch; `handshake`: a datagram
//!   socket's hello exchange, as a machine without I/O.
//! - `conduit`: what a switched socket carries its data over, the trait beneath `stream`, a
//!   byte stream over an RC queue pair's messages, and `datagram`, messages over an RD queue
//!   pair; `switched`: a switched descriptor's state and which of the two it has.
//! - `inbox`: the bytes that came and wait for reads; `readiness`: what `poll` and `epoll`
//!   say of a switched socket.
//! - `extensions`: posted sends and receives, RDMA Write and Read, completions.
//! - `pending`: sockets marked for the switch before they were connected.
//! - `registry`: which descriptors are switched; `epoll_table`: the program's epoll
//!   registrations; `ticker`: the one thread that moves switched datagram sockets between
//!   the program's calls.
//! - `ffi`: the overloaded calls, and the only `unsafe` code; the top floor, which no other
//!   module imports (a conduit that must wait on its socket is handed `ffi`'s wait).
//!
//! The modules form no import circle, checked by `scripts/tests/test_floors.py`.

pub mod conduit;
pub mod datagram;
pub mod epoll_table;
pub mod extensions;
mod ffi;
pub mod handshake;
pub mod inbox;
pub mod pending;
pub mod readiness;
pub mod registry;
pub mod stream;
pub mod switch;
pub mod switched;
pub mod ticker;

pub use switch::{DIWARP_IWARP_MODE, SOL_DIWARP};

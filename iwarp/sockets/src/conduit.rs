//! What a switched socket carries its data over: a byte stream over an RC queue pair
//! (`stream`), or datagrams over an RD queue pair (`datagram`). Every call tries once and
//! never waits: the caller waits on the socket, without the conduit's lock, so that one
//! thread blocked in a read does not hold up another's write.
//!
//! The trait sits below both kinds; which kind a descriptor has is `switched`'s, above them.

use std::io;
use std::time::{Duration, Instant};

use crate::readiness::Ready;

/// What a read took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Got {
    /// Bytes copied into the caller's buffer.
    pub copied: usize,
    /// The datagram's whole length (a stream's: `copied`); more than `copied` means it was cut.
    pub len: usize,
}

pub trait Conduit: Send {
    /// Bytes into `buf` (left where they are if `peek`); zero at the end of a stream,
    /// `WouldBlock` if none have come.
    fn try_read(&mut self, buf: &mut [u8], peek: bool) -> io::Result<Got>;
    /// Posts `buf` (a stream: its first bytes, as many as one message takes); how many, and
    /// the id [`Conduit::sent`] follows. `WouldBlock` while earlier writes hold the room.
    fn try_write(&mut self, buf: &[u8]) -> io::Result<(usize, u64)>;
    /// Whether write `id` has left (a stream: is in the kernel), or the failure that stopped it.
    fn sent(&mut self, id: u64) -> io::Result<bool>;
    /// Waits (bounded by `until`) for what was written to leave, before a close, through
    /// `wait`: its socket ready for some poll events, for at most some time; false if a
    /// signal ended the wait. The waiting is `ffi`'s, which polls through libc's own `poll`
    /// (the program's `poll` is the library's), so that no conduit reaches up into it.
    fn flush(&mut self, until: Instant, wait: &mut dyn FnMut(i16, Duration) -> bool);
    /// `shutdown(2)` on the program's end.
    fn shutdown(&mut self, read: bool, write: bool) -> io::Result<()>;
    /// The state `poll`, `select` and `epoll` report, after moving what has come and what
    /// waits to go.
    fn ready(&mut self) -> Ready;
    /// `SO_ERROR`: the failure as an errno, once; 0 if none.
    fn take_error(&mut self) -> i32;
    /// Bytes the next read would return (`FIONREAD`).
    fn readable_bytes(&mut self) -> usize;
    /// Poll events a blocked call waits for besides its own (sends that wait to go).
    fn also_wait_for(&self) -> i16;
    /// When the conduit's timers next want it moved (retransmissions, acknowledgements),
    /// whatever the socket says.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    /// Moves what came and what is due while no call of the program does (the ticker's):
    /// retransmissions, acknowledgements, answers. A stream needs nothing: TCP's are the
    /// kernel's.
    fn tick(&mut self) {}
}

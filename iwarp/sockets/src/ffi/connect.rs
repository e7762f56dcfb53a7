//! `connect`, `accept` and `accept4` of sockets marked for iWARP mode before they were
//! connected (`pending`): the switch runs as the connection comes up.

use std::ffi::c_int;

use libc::{sockaddr, socklen_t};

use super::opt::switch_fd;
use super::{errno, inside, is_inside, real};
use crate::pending;

/// # Safety
/// libc's contract for `connect`. A marked socket that connects switches before this
/// returns; if the switch fails, the call fails with its errno and the socket stays a
/// connected plain socket. A non-blocking connect (`EINPROGRESS`) leaves the mark unused:
/// set the option again once connected.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let r = (real().connect)(fd, addr, len);
    if r != 0 || is_inside() {
        return r;
    }
    if pending::is_marked(fd) {
        return inside(|| {
            pending::unmark(fd);
            switch_fd(fd).map(|()| 0)
        });
    }
    if pending::auto() && tcp(fd) {
        switch_quietly(fd);
    }
    r
}

/// Whether `fd` is a TCP socket (IPv4 or IPv6): what `DIWARP_SOCKETS_AUTO` switches.
fn tcp(fd: c_int) -> bool {
    let int = |level, name| {
        let mut v: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: an int option into a live local.
        let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut v).cast(), &mut len) };
        (r == 0).then_some(v)
    };
    int(libc::SOL_SOCKET, libc::SO_TYPE) == Some(libc::SOCK_STREAM)
        && matches!(
            int(libc::SOL_SOCKET, libc::SO_DOMAIN),
            Some(libc::AF_INET | libc::AF_INET6)
        )
}

/// Switches `fd` if its peer does too; otherwise it goes on plain, and errno is as it was.
fn switch_quietly(fd: c_int) {
    let saved = errno();
    inside(|| {
        let _ = switch_fd(fd);
        Ok::<i8, i32>(0)
    });
    super::set_errno(saved);
}

/// A connection `r` accepted by `listener`: switched if the listener was marked. A failed
/// switch leaves it plain (`getsockopt(DIWARP_IWARP_MODE)` says which), as the connection is
/// the program's either way.
fn accepted(listener: c_int, r: c_int) -> c_int {
    if r >= 0 && !is_inside() && (pending::is_marked(listener) || pending::auto() && tcp(r)) {
        switch_quietly(r);
    }
    r
}

/// # Safety
/// libc's contract for `accept`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    accepted(fd, (real().accept4)(fd, addr, len, 0))
}

/// # Safety
/// libc's contract for `accept4`.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    accepted(fd, (real().accept4)(fd, addr, len, flags))
}

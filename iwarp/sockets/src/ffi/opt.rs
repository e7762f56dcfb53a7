//! `setsockopt`/`getsockopt`: the switch (`SOL_DIWARP`, `DIWARP_IWARP_MODE`) and a switched
//! socket's `SO_ERROR`.

use std::ffi::{c_int, c_void};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use libc::{socklen_t, ssize_t};

use super::{fd::watch_forks, inside, is_inside, nonblocking, poll_one, real};
use crate::readiness::{kernel_events, Interest};
use crate::switch::{self, DatagramWire, Wire, DIWARP_IWARP_MODE, SOL_DIWARP};
use crate::switched::{Carrier, Switched};
use crate::{epoll_table, pending, registry};

/// The switch's socket calls, on `fd` through libc.
struct Libc(c_int);

impl Wire for Libc {
    fn send_urgent(&mut self, byte: u8) -> bool {
        let flags = libc::MSG_OOB | libc::MSG_NOSIGNAL;
        // SAFETY: one byte from a live local.
        unsafe { (real().send)(self.0, (&raw const byte).cast(), 1, flags) == 1 }
    }

    fn recv_urgent(&mut self, until: Instant) -> Option<u8> {
        loop {
            let left = until.checked_duration_since(Instant::now())?;
            let mut p = libc::pollfd {
                fd: self.0,
                events: libc::POLLPRI,
                revents: 0,
            };
            if poll_one(&mut p, left) && p.revents & libc::POLLPRI != 0 {
                let mut b = 0u8;
                // SAFETY: one byte into a live local.
                let n = unsafe { (real().recv)(self.0, (&raw mut b).cast(), 1, libc::MSG_OOB) };
                return (n == 1).then_some(b);
            }
            if p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                return None;
            }
        }
    }

    fn peek(&mut self, buf: &mut [u8], until: Instant) -> bool {
        let flags = libc::MSG_PEEK | libc::MSG_DONTWAIT;
        loop {
            // SAFETY: `buf` is valid for its length.
            let n = unsafe { (real().recv)(self.0, buf.as_mut_ptr().cast(), buf.len(), flags) };
            if n == buf.len() as ssize_t {
                return true;
            }
            if n == 0 || Instant::now() >= until {
                return false;
            }
            // Some bytes, or none: look again shortly (a readable socket would not wait).
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl DatagramWire for Libc {
    fn send(&mut self, d: &[u8]) -> Result<(), i32> {
        // SAFETY: `d` is valid for its length.
        let n = unsafe { (real().send)(self.0, d.as_ptr().cast(), d.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(super::errno());
        }
        Ok(())
    }

    fn peek(&mut self, buf: &mut [u8], until: Instant) -> Option<usize> {
        loop {
            let flags = libc::MSG_PEEK | libc::MSG_DONTWAIT | libc::MSG_TRUNC;
            // SAFETY: `buf` is valid for its length.
            let n = unsafe { (real().recv)(self.0, buf.as_mut_ptr().cast(), buf.len(), flags) };
            if let Ok(n) = usize::try_from(n) {
                return Some(n);
            }
            let left = until.checked_duration_since(Instant::now())?;
            let mut p = libc::pollfd {
                fd: self.0,
                events: libc::POLLIN,
                revents: 0,
            };
            poll_one(&mut p, left);
            if Instant::now() >= until && p.revents == 0 {
                return None;
            }
        }
    }

    fn discard(&mut self) {
        let mut b = 0u8;
        // SAFETY: one byte into a live local; the rest of the datagram is dropped.
        unsafe { (real().recv)(self.0, (&raw mut b).cast(), 1, libc::MSG_DONTWAIT) };
    }
}

/// Switches `fd`: a stream socket to an RC queue pair, a datagram socket to an RD queue pair
/// (`switch`). The queue pair gets a duplicate of it, so the caller's descriptor stays the
/// socket it polls and closes.
pub(super) fn switch_fd(fd: c_int) -> Result<(), i32> {
    if registry::get(fd).is_some() {
        return Ok(());
    }
    watch_forks();
    let nonblock = nonblocking(fd);
    let mut ty: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: an int option into a live local.
    let r = unsafe {
        (real().getsockopt)(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&raw mut ty).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(libc::ENOTSOCK);
    }
    if ty != libc::SOCK_STREAM && ty != libc::SOCK_DGRAM {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: duplicates a descriptor the caller owns; the new one is ours, and an exec'd
    // program does not inherit it.
    let dup = unsafe { (real().fcntl)(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(libc::EBADF);
    }
    let conduit = if ty == libc::SOCK_STREAM {
        // SAFETY: `dup` is a fresh descriptor owned by nobody else.
        let stream = unsafe { TcpStream::from_raw_fd(dup) };
        Carrier::Stream(Box::new(
            switch::switch(stream, &mut Libc(fd)).map_err(switch::Failure::errno)?,
        ))
    } else {
        // SAFETY: as above.
        let sock = unsafe { UdpSocket::from_raw_fd(dup) };
        Carrier::Datagram(Box::new(
            switch::switch_datagram(sock, &mut Libc(fd)).map_err(switch::Failure::errno)?,
        ))
    };
    let datagram = matches!(conduit, Carrier::Datagram(_));
    registry::insert(
        fd,
        Switched {
            nonblock,
            generation: registry::generation(),
            conduit,
        },
    );
    if datagram {
        super::start_ticker();
    }
    // Registrations made before the switch: from now on the kernel tells input only.
    for (epfd, i) in epoll_table::of(fd) {
        let mut ev = libc::epoll_event {
            events: kernel_events(i.events),
            u64: i.data,
        };
        // SAFETY: a valid event for a registration that exists.
        unsafe { (real().epoll_ctl)(epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
        epoll_table::set(epfd, fd, Interest::new(i.events, i.data));
    }
    Ok(())
}

/// Whether `fd` is a connected socket (a socket not yet connected, or listening, is marked
/// instead of switched).
fn connected(fd: c_int) -> Result<bool, i32> {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: a valid address buffer and its length.
    if unsafe { libc::getpeername(fd, (&raw mut addr).cast(), &mut len) } == 0 {
        return Ok(true);
    }
    match super::errno() {
        libc::ENOTCONN => Ok(false),
        e => Err(e),
    }
}

/// # Safety
/// libc's contract for `setsockopt`.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    if level != SOL_DIWARP || is_inside() {
        return (real().setsockopt)(fd, level, name, value, len);
    }
    inside(|| {
        if name != DIWARP_IWARP_MODE {
            return Err(libc::ENOPROTOOPT);
        }
        if value.is_null() || (len as usize) < std::mem::size_of::<c_int>() {
            return Err(libc::EINVAL);
        }
        match *value.cast::<c_int>() {
            0 if registry::get(fd).is_none() => {
                pending::unmark(fd);
                Ok(0)
            }
            // A switched socket stays switched.
            0 => Err(libc::EINVAL),
            _ if !connected(fd)? => {
                pending::mark(fd);
                Ok(0)
            }
            _ => switch_fd(fd).map(|()| 0),
        }
    })
}

/// Writes an int option value.
///
/// SAFETY: `value` and `len` are the caller's `getsockopt` arguments.
unsafe fn put_int(value: *mut c_void, len: *mut socklen_t, v: c_int) -> Result<c_int, i32> {
    let size = std::mem::size_of::<c_int>();
    if value.is_null() || len.is_null() || (*len as usize) < size {
        return Err(libc::EINVAL);
    }
    *value.cast::<c_int>() = v;
    *len = size as socklen_t;
    Ok(0)
}

/// # Safety
/// libc's contract for `getsockopt`.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    if is_inside() {
        return (real().getsockopt)(fd, level, name, value, len);
    }
    if level == libc::SOL_SOCKET && name == libc::SO_ERROR {
        if let Some(s) = registry::get(fd) {
            return inside(|| put_int(value, len, s.lock().conduit.take_error()));
        }
    }
    if level != SOL_DIWARP {
        return (real().getsockopt)(fd, level, name, value, len);
    }
    inside(|| {
        if name != DIWARP_IWARP_MODE {
            return Err(libc::ENOPROTOOPT);
        }
        put_int(value, len, c_int::from(registry::get(fd).is_some()))
    })
}

//! Reading and writing a switched socket: `read`, `write`, `recv`, `send`, `recvfrom`,
//! `sendto`, `readv`, `writev`, `recvmsg`, `sendmsg`.

use std::ffi::{c_int, c_void};

use libc::{size_t, socklen_t, ssize_t};

use super::{blocking, inside, iovecs, real, switched};
use crate::conduit::Got;
use crate::registry::Shared;

/// Flags a switched socket's receives take; the rest (`MSG_OOB`, `MSG_ERRQUEUE`, ...) are
/// refused with `EOPNOTSUPP` rather than ignored.
const RECV_FLAGS: c_int = libc::MSG_DONTWAIT
    | libc::MSG_NOSIGNAL
    | libc::MSG_PEEK
    | libc::MSG_WAITALL
    | libc::MSG_TRUNC
    | libc::MSG_CMSG_CLOEXEC;
const SEND_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE | libc::MSG_EOR;

/// Reads into `buf` as `recv(2)` with `flags` would (`MSG_WAITALL` on a stream only, as
/// the kernel's); what it took.
fn read_into(fd: c_int, s: &Shared, buf: &mut [u8], flags: c_int) -> Result<Got, i32> {
    if flags & !RECV_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let peek = flags & libc::MSG_PEEK != 0;
    let mut got = blocking(fd, s, dontwait, libc::POLLIN, |c| c.try_read(buf, peek))?;
    let stream = got.len == got.copied;
    if flags & libc::MSG_WAITALL != 0 && !peek && stream && got.copied > 0 {
        while got.copied < buf.len() {
            let at = got.copied;
            match blocking(fd, s, dontwait, libc::POLLIN, |c| {
                c.try_read(&mut buf[at..], false)
            }) {
                Ok(g) if g.copied > 0 => {
                    got.copied += g.copied;
                    got.len += g.len;
                }
                _ => break,
            }
        }
    }
    Ok(got)
}

/// What `recv` returns: the bytes taken, or with `MSG_TRUNC` a datagram's whole length.
fn returned(got: Got, flags: c_int) -> usize {
    if flags & libc::MSG_TRUNC != 0 {
        got.len
    } else {
        got.copied
    }
}

/// Writes `buf` as `send(2)` with `flags` would: one message of at most `MAX_SEND` bytes,
/// returned once in the kernel (non-blocking: once posted). A broken connection raises
/// `SIGPIPE` unless `MSG_NOSIGNAL`, as the kernel's socket does.
fn write_from(fd: c_int, s: &Shared, buf: &[u8], flags: c_int) -> Result<usize, i32> {
    if flags & !SEND_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let r = blocking(fd, s, dontwait, libc::POLLOUT, |c| c.try_write(buf)).and_then(|(n, wr)| {
        if !dontwait && !s.lock().nonblock {
            blocking(fd, s, false, libc::POLLOUT, |c| match c.sent(wr) {
                Ok(true) => Ok(()),
                Ok(false) => Err(std::io::ErrorKind::WouldBlock.into()),
                Err(e) => Err(e),
            })?;
        }
        Ok(n)
    });
    if r == Err(libc::EPIPE) && flags & libc::MSG_NOSIGNAL == 0 {
        // SAFETY: raising a signal at the calling thread.
        unsafe { libc::raise(libc::SIGPIPE) };
    }
    r
}

/// SAFETY: `buf` is valid for `len` bytes (or `len` is 0).
unsafe fn slice_mut<'a>(buf: *mut c_void, len: size_t) -> &'a mut [u8] {
    if len == 0 || buf.is_null() {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(buf.cast::<u8>(), len)
    }
}

/// SAFETY: `buf` is valid for `len` bytes (or `len` is 0).
pub(super) unsafe fn slice<'a>(buf: *const c_void, len: size_t) -> &'a [u8] {
    if len == 0 || buf.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(buf.cast::<u8>(), len)
    }
}

fn count(r: Result<usize, i32>) -> Result<ssize_t, i32> {
    r.map(|n| n as ssize_t)
}

/// # Safety
/// libc's contract for `read`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t {
    match switched(fd) {
        Some(s) => inside(|| count(read_into(fd, &s, slice_mut(buf, len), 0).map(|g| g.copied))),
        None => (real().read)(fd, buf, len),
    }
}

/// # Safety
/// libc's contract for `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t {
    match switched(fd) {
        Some(s) => inside(|| count(write_from(fd, &s, slice(buf, len), 0))),
        None => (real().write)(fd, buf, len),
    }
}

/// # Safety
/// libc's contract for `recv`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    match switched(fd) {
        Some(s) => inside(|| {
            count(read_into(fd, &s, slice_mut(buf, len), flags).map(|g| returned(g, flags)))
        }),
        None => (real().recv)(fd, buf, len, flags),
    }
}

/// # Safety
/// libc's contract for `send`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    match switched(fd) {
        Some(s) => inside(|| count(write_from(fd, &s, slice(buf, len), flags))),
        None => (real().send)(fd, buf, len, flags),
    }
}

/// # Safety
/// libc's contract for `recvfrom`. A connected stream names no sender (`*addrlen` 0).
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    let Some(s) = switched(fd) else {
        return (real().recvfrom)(fd, buf, len, flags, addr, addrlen);
    };
    inside(|| {
        let n = returned(read_into(fd, &s, slice_mut(buf, len), flags)?, flags);
        if !addrlen.is_null() {
            *addrlen = 0;
        }
        count(Ok(n))
    })
}

/// # Safety
/// libc's contract for `sendto`. The address is ignored, as a connected TCP socket does.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const libc::sockaddr,
    addrlen: socklen_t,
) -> ssize_t {
    match switched(fd) {
        Some(s) => inside(|| count(write_from(fd, &s, slice(buf, len), flags))),
        None => (real().sendto)(fd, buf, len, flags, addr, addrlen),
    }
}

/// Reads as `recv` with `flags` would, scattered over `iov` (one read's bytes).
///
/// SAFETY: the iovecs are valid.
unsafe fn read_scattered(
    fd: c_int,
    s: &Shared,
    iov: &[libc::iovec],
    flags: c_int,
) -> Result<Got, i32> {
    let total: usize = iov.iter().map(|e| e.iov_len).sum();
    let mut tmp = vec![0u8; total];
    let got = read_into(fd, s, &mut tmp, flags)?;
    let mut rest = &tmp[..got.copied];
    for e in iov {
        let k = rest.len().min(e.iov_len);
        if k > 0 {
            std::ptr::copy_nonoverlapping(rest.as_ptr(), e.iov_base.cast::<u8>(), k);
        }
        rest = &rest[k..];
    }
    Ok(got)
}

/// Writes `iov` gathered into one message, as `send` with `flags` would.
///
/// SAFETY: the iovecs are valid.
unsafe fn write_gathered(
    fd: c_int,
    s: &Shared,
    iov: &[libc::iovec],
    flags: c_int,
) -> Result<usize, i32> {
    let mut all = Vec::new();
    for e in iov {
        all.extend_from_slice(slice(e.iov_base, e.iov_len));
    }
    write_from(fd, s, &all, flags)
}

/// # Safety
/// libc's contract for `readv`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    let Some(s) = switched(fd) else {
        return (real().readv)(fd, iov, n);
    };
    inside(|| {
        let v = iovecs(iov, usize::try_from(n).map_err(|_| libc::EINVAL)?)?;
        count(read_scattered(fd, &s, v, 0).map(|g| g.copied))
    })
}

/// # Safety
/// libc's contract for `writev`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    let Some(s) = switched(fd) else {
        return (real().writev)(fd, iov, n);
    };
    inside(|| {
        let v = iovecs(iov, usize::try_from(n).map_err(|_| libc::EINVAL)?)?;
        count(write_gathered(fd, &s, v, 0))
    })
}

/// # Safety
/// libc's contract for `recvmsg`. A connected stream names no sender and carries no control
/// messages: `msg_namelen` and `msg_controllen` come back 0.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    let Some(s) = switched(fd) else {
        return (real().recvmsg)(fd, msg, flags);
    };
    inside(|| {
        let m = msg.as_mut().ok_or(libc::EFAULT)?;
        let v = iovecs(m.msg_iov, m.msg_iovlen)?;
        let got = read_scattered(fd, &s, v, flags)?;
        m.msg_namelen = 0;
        m.msg_controllen = 0;
        m.msg_flags = if got.len > got.copied {
            libc::MSG_TRUNC
        } else {
            0
        };
        count(Ok(returned(got, flags)))
    })
}

/// # Safety
/// libc's contract for `sendmsg`. Control messages are refused (`EOPNOTSUPP`): none of the
/// kernel's would mean anything on the queue pair's stream.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    let Some(s) = switched(fd) else {
        return (real().sendmsg)(fd, msg, flags);
    };
    inside(|| {
        let m = msg.as_ref().ok_or(libc::EFAULT)?;
        if m.msg_controllen != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let v = iovecs(m.msg_iov, m.msg_iovlen)?;
        count(write_gathered(fd, &s, v, flags))
    })
}

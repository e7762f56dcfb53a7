//! The overloaded libc calls, and the only module with `unsafe` code. Each call on a
//! descriptor that was never switched goes to libc's own (found with `dlsym(RTLD_NEXT)`)
//! after one atomic load. Calls made while the library itself is inside a call (the queue
//! pair reading its socket, say) go straight to libc too. Every entry catches panics and
//! fails with `EIO` instead.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::net::TcpStream;
use std::os::fd::FromRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libc::{size_t, socklen_t, ssize_t};

use crate::registry;
use crate::stream::Stream;
use crate::switch::{self, Wire, DIWARP_IWARP_MODE, SOL_DIWARP};

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type RecvFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
type SendFn = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type ReadvFn = unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> ssize_t;
type SetFn = unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
type GetFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;

/// libc's own calls.
struct Real {
    read: ReadFn,
    write: WriteFn,
    recv: RecvFn,
    send: SendFn,
    close: CloseFn,
    readv: ReadvFn,
    writev: ReadvFn,
    setsockopt: SetFn,
    getsockopt: GetFn,
}

/// SAFETY: `T` is the function pointer type of libc's `name`.
unsafe fn next<T: Copy>(name: &CStr) -> T {
    let p = libc::dlsym(libc::RTLD_NEXT, name.as_ptr());
    assert!(!p.is_null(), "libc has no {name:?}");
    std::mem::transmute_copy(&p)
}

fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    // SAFETY: each name is looked up with its own C signature.
    REAL.get_or_init(|| unsafe {
        Real {
            read: next(c"read"),
            write: next(c"write"),
            recv: next(c"recv"),
            send: next(c"send"),
            close: next(c"close"),
            readv: next(c"readv"),
            writev: next(c"writev"),
            setsockopt: next(c"setsockopt"),
            getsockopt: next(c"getsockopt"),
        }
    })
}

thread_local! {
    /// The library is inside one of its calls on this thread.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// The stream of a switched `fd`, unless the library is inside a call already.
fn switched(fd: c_int) -> Option<std::sync::Arc<parking_lot::Mutex<Stream>>> {
    if INSIDE.with(Cell::get) {
        return None;
    }
    registry::get(fd)
}

fn set_errno(e: i32) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` as the library's own call: `Ok(n)` is returned, `Err(errno)` sets errno and
/// returns -1; a panic is `EIO`.
fn inside<R: From<i8>>(f: impl FnOnce() -> Result<R, i32>) -> R {
    let was = INSIDE.with(|i| i.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    INSIDE.with(|i| i.set(was));
    match r {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            set_errno(e);
            R::from(-1)
        }
        Err(_) => {
            set_errno(libc::EIO);
            R::from(-1)
        }
    }
}

fn io_errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(match e.kind() {
        std::io::ErrorKind::WouldBlock => libc::EAGAIN,
        std::io::ErrorKind::BrokenPipe => libc::EPIPE,
        _ => libc::ECONNRESET,
    })
}

/// Whether `fd`'s file is in non-blocking mode.
fn nonblocking(fd: c_int) -> bool {
    // SAFETY: F_GETFL takes no argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// Waits for `p`'s events, at most `wait` (libc's poll: the library does not overload it).
pub(crate) fn poll_one(p: &mut libc::pollfd, wait: Duration) -> bool {
    let ms = c_int::try_from(wait.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(p, 1, ms) > 0 }
}

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

/// Switches `fd` to an RC queue pair (`switch`); the queue pair gets a duplicate of it, so
/// the caller's descriptor stays the socket it polls and closes.
fn switch_fd(fd: c_int) -> Result<(), i32> {
    if registry::get(fd).is_some() {
        return Ok(());
    }
    let nonblock = nonblocking(fd);
    // SAFETY: dup of a descriptor the caller owns; the new one is ours.
    let dup = unsafe { libc::dup(fd) };
    if dup < 0 {
        return Err(libc::EBADF);
    }
    // SAFETY: `dup` is a fresh descriptor owned by nobody else.
    let stream = unsafe { TcpStream::from_raw_fd(dup) };
    match switch::switch(stream, &mut Libc(fd)) {
        Ok(mut s) => {
            s.nonblock = nonblock;
            registry::insert(fd, s);
            Ok(())
        }
        Err(f) => Err(f.errno()),
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
    if level != SOL_DIWARP || INSIDE.with(Cell::get) {
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
            0 if registry::get(fd).is_none() => Ok(0),
            // A switched socket stays switched.
            0 => Err(libc::EINVAL),
            _ => switch_fd(fd).map(|()| 0),
        }
    })
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
    if level != SOL_DIWARP || INSIDE.with(Cell::get) {
        return (real().getsockopt)(fd, level, name, value, len);
    }
    inside(|| {
        if name != DIWARP_IWARP_MODE {
            return Err(libc::ENOPROTOOPT);
        }
        let size = std::mem::size_of::<c_int>();
        if value.is_null() || len.is_null() || (*len as usize) < size {
            return Err(libc::EINVAL);
        }
        *value.cast::<c_int>() = c_int::from(registry::get(fd).is_some());
        *len = size as socklen_t;
        Ok(0)
    })
}

/// A read of a switched socket into `buf` (`len` bytes).
///
/// SAFETY: `buf` is valid for `len` bytes.
unsafe fn read_switched(
    s: &parking_lot::Mutex<Stream>,
    buf: *mut c_void,
    len: size_t,
    dontwait: bool,
) -> ssize_t {
    inside(|| {
        let b = if len == 0 {
            &mut [][..]
        } else {
            std::slice::from_raw_parts_mut(buf.cast::<u8>(), len)
        };
        let mut s = s.lock();
        let nonblock = s.nonblock || dontwait;
        s.read(b, nonblock)
            .map(|n| n as ssize_t)
            .map_err(|e| io_errno(&e))
    })
}

/// A write of `len` bytes at `buf` to a switched socket.
///
/// SAFETY: `buf` is valid for `len` bytes.
unsafe fn write_switched(
    s: &parking_lot::Mutex<Stream>,
    buf: *const c_void,
    len: size_t,
) -> ssize_t {
    inside(|| {
        let b = if len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(buf.cast::<u8>(), len)
        };
        s.lock()
            .write(b)
            .map(|n| n as ssize_t)
            .map_err(|e| io_errno(&e))
    })
}

/// # Safety
/// libc's contract for `read`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t {
    match switched(fd) {
        Some(s) => read_switched(&s, buf, len, false),
        None => (real().read)(fd, buf, len),
    }
}

/// # Safety
/// libc's contract for `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t {
    match switched(fd) {
        Some(s) => write_switched(&s, buf, len),
        None => (real().write)(fd, buf, len),
    }
}

/// The buffers of an iovec array.
///
/// SAFETY: `iov` is valid for `n` iovecs, each valid for its length.
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: c_int) -> Result<&'a [libc::iovec], i32> {
    match usize::try_from(n) {
        Ok(0) => Ok(&[]),
        Ok(n) if n <= 1024 && !iov.is_null() => Ok(std::slice::from_raw_parts(iov, n)),
        _ => Err(libc::EINVAL),
    }
}

/// # Safety
/// libc's contract for `readv`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    let Some(s) = switched(fd) else {
        return (real().readv)(fd, iov, n);
    };
    inside(|| {
        let v = iovecs(iov, n)?;
        let total: usize = v.iter().map(|e| e.iov_len).sum();
        let mut tmp = vec![0u8; total];
        let mut s = s.lock();
        let nonblock = s.nonblock;
        let got = s.read(&mut tmp, nonblock).map_err(|e| io_errno(&e))?;
        let mut rest = &tmp[..got];
        for e in v {
            let k = rest.len().min(e.iov_len);
            if k > 0 {
                std::ptr::copy_nonoverlapping(rest.as_ptr(), e.iov_base.cast::<u8>(), k);
            }
            rest = &rest[k..];
        }
        Ok(got as ssize_t)
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
        let mut all = Vec::new();
        for e in iovecs(iov, n)? {
            if e.iov_len > 0 {
                all.extend_from_slice(std::slice::from_raw_parts(
                    e.iov_base.cast::<u8>(),
                    e.iov_len,
                ));
            }
        }
        s.lock()
            .write(&all)
            .map(|k| k as ssize_t)
            .map_err(|e| io_errno(&e))
    })
}

/// Flags a switched socket's `recv` and `send` take: the rest (`MSG_PEEK`, `MSG_OOB`, ...)
/// are refused with `EOPNOTSUPP` rather than ignored.
const RECV_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
const SEND_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE;

/// # Safety
/// libc's contract for `recv`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    match switched(fd) {
        Some(_) if flags & !RECV_FLAGS != 0 => inside(|| Err(libc::EOPNOTSUPP)),
        Some(s) => read_switched(&s, buf, len, flags & libc::MSG_DONTWAIT != 0),
        None => (real().recv)(fd, buf, len, flags),
    }
}

/// # Safety
/// libc's contract for `send`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    match switched(fd) {
        Some(_) if flags & !SEND_FLAGS != 0 => inside(|| Err(libc::EOPNOTSUPP)),
        Some(s) => write_switched(&s, buf, len),
        None => (real().send)(fd, buf, len, flags),
    }
}

/// # Safety
/// libc's contract for `close`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if !INSIDE.with(Cell::get) {
        // The queue pair and its duplicate descriptor go first.
        inside(|| {
            registry::remove(fd);
            Ok::<i8, i32>(0)
        });
    }
    (real().close)(fd)
}

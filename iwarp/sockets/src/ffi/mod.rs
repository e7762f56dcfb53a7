//! The overloaded libc calls, and the only module with `unsafe` code. Each call on a
//! descriptor that was never switched goes to libc's own (found with `dlsym(RTLD_NEXT)`)
//! after one atomic load. Calls made while the library itself is inside a call (the queue
//! pair reading its socket, say) go straight to libc too. Every entry catches panics and
//! fails with `EIO` instead.
//!
//! - `io`: reading and writing calls.
//! - `fd`: the descriptor's life: `close`, `dup`s, `fcntl`, `ioctl`, `shutdown`, `fork`.
//! - `opt`: `setsockopt`/`getsockopt`, and so the switch; `connect`: `connect` and `accept`
//!   of sockets marked before they were connected.
//! - `poll`: `poll` and `select`; `epoll`: `epoll_ctl` and `epoll_wait`.
//! - `ext`: the extensions' own calls (`diwarp_reg_mr`, `diwarp_post_send`, ...).
//! - `signals`: whether a signal that came while a call waited restarts it (`SA_RESTART`).
#![allow(unsafe_code)]

mod connect;
mod epoll;
mod ext;
mod fd;
mod io;
mod opt;
mod poll;
mod signals;

use std::cell::Cell;
use std::ffi::{c_int, c_ulong, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libc::{size_t, socklen_t, ssize_t};

use crate::conduit::Conduit;
use crate::registry::{self, Shared};
use crate::switched::Switched;

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type RecvFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
type SendFn = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
type RecvFromFn = unsafe extern "C" fn(
    c_int,
    *mut c_void,
    size_t,
    c_int,
    *mut libc::sockaddr,
    *mut socklen_t,
) -> ssize_t;
type SendToFn = unsafe extern "C" fn(
    c_int,
    *const c_void,
    size_t,
    c_int,
    *const libc::sockaddr,
    socklen_t,
) -> ssize_t;
type MsgFn = unsafe extern "C" fn(c_int, *mut libc::msghdr, c_int) -> ssize_t;
type SendMsgFn = unsafe extern "C" fn(c_int, *const libc::msghdr, c_int) -> ssize_t;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
type IoctlFn = unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int;
type ShutdownFn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type ReadvFn = unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> ssize_t;
type SetFn = unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
type GetFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
type PollFn = unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int;
type SelectFn = unsafe extern "C" fn(
    c_int,
    *mut libc::fd_set,
    *mut libc::fd_set,
    *mut libc::fd_set,
    *mut libc::timeval,
) -> c_int;
type ConnectFn = unsafe extern "C" fn(c_int, *const libc::sockaddr, socklen_t) -> c_int;
type Accept4Fn = unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut socklen_t, c_int) -> c_int;
type EpollCtlFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut libc::epoll_event) -> c_int;
type EpollPwaitFn = unsafe extern "C" fn(
    c_int,
    *mut libc::epoll_event,
    c_int,
    c_int,
    *const libc::sigset_t,
) -> c_int;

/// libc's own calls.
struct Real {
    read: ReadFn,
    write: WriteFn,
    recv: RecvFn,
    send: SendFn,
    recvfrom: RecvFromFn,
    sendto: SendToFn,
    recvmsg: MsgFn,
    sendmsg: SendMsgFn,
    readv: ReadvFn,
    writev: ReadvFn,
    close: CloseFn,
    dup: CloseFn,
    dup2: Dup2Fn,
    dup3: Dup3Fn,
    fcntl: FcntlFn,
    ioctl: IoctlFn,
    shutdown: ShutdownFn,
    setsockopt: SetFn,
    getsockopt: GetFn,
    poll: PollFn,
    select: SelectFn,
    connect: ConnectFn,
    accept4: Accept4Fn,
    epoll_ctl: EpollCtlFn,
    epoll_pwait: EpollPwaitFn,
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
            recvfrom: next(c"recvfrom"),
            sendto: next(c"sendto"),
            recvmsg: next(c"recvmsg"),
            sendmsg: next(c"sendmsg"),
            readv: next(c"readv"),
            writev: next(c"writev"),
            close: next(c"close"),
            dup: next(c"dup"),
            dup2: next(c"dup2"),
            dup3: next(c"dup3"),
            fcntl: next(c"fcntl"),
            ioctl: next(c"ioctl"),
            shutdown: next(c"shutdown"),
            setsockopt: next(c"setsockopt"),
            getsockopt: next(c"getsockopt"),
            poll: next(c"poll"),
            select: next(c"select"),
            connect: next(c"connect"),
            accept4: next(c"accept4"),
            epoll_ctl: next(c"epoll_ctl"),
            epoll_pwait: next(c"epoll_pwait"),
        }
    })
}

thread_local! {
    /// The library is inside one of its calls on this thread.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

fn is_inside() -> bool {
    INSIDE.with(Cell::get)
}

/// Starts or wakes the ticker (a datagram socket was switched). Its thread is made with every
/// signal blocked, so that none reaches it before it blocks them itself.
fn start_ticker() {
    // SAFETY: a full set, made by sigfillset, and the calling thread's old mask put back.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        crate::ticker::switched(enter_library);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Makes the calling thread the library's own for good (the ticker's): its socket calls go
/// to libc, and it takes none of the program's signals, which belong to the program's
/// threads (and end their blocked calls).
fn enter_library() {
    INSIDE.with(|i| i.set(true));
    // SAFETY: a full set, made by sigfillset, for the calling thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// The stream of a switched `fd`, unless the library is inside a call already.
fn switched(fd: c_int) -> Option<Shared> {
    if is_inside() {
        return None;
    }
    registry::get(fd)
}

fn set_errno(e: i32) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Runs `f` as the library's own call: `Ok(n)` is returned with errno as the caller left it
/// (the library's own calls inside may have set it, as a kernel call that succeeds does
/// not), `Err(errno)` sets errno and returns -1; a panic is `EIO`.
fn inside<R: From<i8>>(f: impl FnOnce() -> Result<R, i32>) -> R {
    let was = INSIDE.with(|i| i.replace(true));
    let callers = errno();
    let r = catch_unwind(AssertUnwindSafe(f));
    INSIDE.with(|i| i.set(was));
    match r {
        Ok(Ok(n)) => {
            set_errno(callers);
            n
        }
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
    let flags = unsafe { (real().fcntl)(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// Waits for `p`'s events, at most `wait`, through libc's poll; whether they came. A
/// signal ends the wait early.
pub(crate) fn poll_one(p: &mut libc::pollfd, wait: Duration) -> bool {
    let ms = c_int::try_from(wait.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: one valid pollfd.
    unsafe { (real().poll)(p, 1, ms) > 0 }
}

/// Waits until `fd` is ready for `events`, at most `wait`; `EINTR` if a signal came whose
/// handler was installed without `SA_RESTART` (with it, the wait goes on as the kernel's
/// restarted call would).
fn wait_fd(fd: c_int, events: i16, wait: Duration) -> Result<(), i32> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ms = c_int::try_from(wait.as_millis()).unwrap_or(c_int::MAX);
    let libc_own = signals::Libc {
        poll: real().poll,
        close: real().close,
    };
    signals::wait(&libc_own, &mut p, ms)
}

/// Longest a blocked call waits between looks at its stream: another thread's call may
/// have taken what it waits for off the socket, which then says nothing.
const WAIT: Duration = Duration::from_millis(100);

/// Runs `attempt` on `fd`'s conduit until it says more than `WouldBlock`, waiting on the
/// socket for `events` between tries (without the conduit's lock, and no longer than its
/// timers allow), unless the descriptor is non-blocking or `dontwait`. A socket switched
/// before a `fork` is refused in the child (`EOPNOTSUPP`).
fn blocking<T>(
    fd: c_int,
    s: &Shared,
    dontwait: bool,
    events: i16,
    mut attempt: impl FnMut(&mut dyn Conduit) -> std::io::Result<T>,
) -> Result<T, i32> {
    let _waiting = s.waiting();
    loop {
        let (r, nonblock, extra, wake) = {
            let mut guard = s.lock();
            let st: &mut Switched = &mut guard;
            if st.generation != registry::generation() {
                return Err(libc::EOPNOTSUPP);
            }
            let c = &mut *st.conduit;
            let r = attempt(c);
            (
                r,
                st.nonblock || dontwait,
                c.also_wait_for(),
                c.next_wakeup(),
            )
        };
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && !nonblock => {
                let wait = wake.map_or(WAIT, |t| {
                    t.saturating_duration_since(Instant::now()).min(WAIT)
                });
                wait_fd(fd, events | extra, wait)?;
            }
            Err(e) => return Err(io_errno(&e)),
            Ok(v) => return Ok(v),
        }
    }
}

/// The buffers of an iovec array.
///
/// SAFETY: `iov` is valid for `n` iovecs, each valid for its length.
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: usize) -> Result<&'a [libc::iovec], i32> {
    match n {
        0 => Ok(&[]),
        n if n <= 1024 && !iov.is_null() => Ok(std::slice::from_raw_parts(iov, n)),
        _ => Err(libc::EINVAL),
    }
}

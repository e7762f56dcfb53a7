//! A switched descriptor's life: `close`, `dup`/`dup2`/`dup3`/`F_DUPFD`, the blocking mode
//! (`fcntl`, `ioctl(FIONBIO)`), `ioctl(FIONREAD)`, `shutdown`, and `fork`.

use std::ffi::{c_int, c_ulong, c_void};
use std::sync::Arc;
use std::sync::Once;
use std::time::Instant;

use super::{inside, is_inside, real, switched, wait_fd};
use crate::{epoll_table, pending, registry, switch};

/// # Safety
/// libc's contract for `close`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    // A program that never switched, marked or registered anything pays atomic loads only.
    if !is_inside() && (registry::any() || epoll_table::any() || pending::any()) {
        inside(|| {
            epoll_table::closed(fd);
            pending::unmark(fd);
            if let Some(s) = registry::remove(fd) {
                // The last descriptor of the stream: what was written goes out first, as
                // it would from the kernel's buffer (bounded, as a lingering close is).
                if Arc::strong_count(&s) == 1 {
                    let mut st = s.lock();
                    if st.generation == registry::generation() {
                        let until = Instant::now() + switch::timeout();
                        st.conduit
                            .flush(until, &mut |events, wait| wait_fd(fd, events, wait).is_ok());
                    }
                }
            }
            Ok::<i8, i32>(0)
        });
    }
    (real().close)(fd)
}

/// `new` came from duplicating `old` (`r` is the call's result).
fn duplicated(old: c_int, r: c_int) -> c_int {
    if r >= 0 && !is_inside() {
        registry::alias(old, r);
    }
    r
}

/// `new` is about to be replaced by a duplicate: a stream there goes, as `close` drops it.
fn replacing(old: c_int, new: c_int) {
    if old != new && !is_inside() {
        inside(|| {
            epoll_table::closed(new);
            registry::remove(new);
            Ok::<i8, i32>(0)
        });
    }
}

/// # Safety
/// libc's contract for `dup`.
#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    duplicated(old, (real().dup)(old))
}

/// # Safety
/// libc's contract for `dup2`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    replacing(old, new);
    duplicated(old, (real().dup2)(old, new))
}

/// # Safety
/// libc's contract for `dup3`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    replacing(old, new);
    duplicated(old, (real().dup3)(old, new, flags))
}

/// `fcntl` (its third argument, when there is one, is an int or a pointer: taken as a
/// machine word, as the variadic call passes it). On a switched socket the blocking mode is
/// the library's: the file stays non-blocking for the queue pair, and `F_GETFL` shows the
/// mode the program set.
///
/// # Safety
/// libc's contract for `fcntl`.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let Some(s) = switched(fd) else {
        let r = (real().fcntl)(fd, cmd, arg);
        if matches!(cmd, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) {
            return duplicated(fd, r);
        }
        return r;
    };
    inside(|| {
        let flags_of = |r: c_int| if r < 0 { Err(super::errno()) } else { Ok(r) };
        match cmd {
            libc::F_GETFL => {
                let f = flags_of((real().fcntl)(fd, cmd))? & !libc::O_NONBLOCK;
                Ok(if s.lock().nonblock {
                    f | libc::O_NONBLOCK
                } else {
                    f
                })
            }
            libc::F_SETFL => {
                let want = arg as c_int;
                flags_of((real().fcntl)(fd, cmd, want | libc::O_NONBLOCK))?;
                s.lock().nonblock = want & libc::O_NONBLOCK != 0;
                Ok(0)
            }
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                let r = flags_of((real().fcntl)(fd, cmd, arg))?;
                registry::alias(fd, r);
                Ok(r)
            }
            _ => flags_of((real().fcntl)(fd, cmd, arg)),
        }
    })
}

/// # Safety
/// libc's contract for `fcntl64` (glibc's name for `fcntl` in some builds).
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    fcntl(fd, cmd, arg)
}

/// `ioctl`: on a switched socket `FIONBIO` sets the library's blocking mode and `FIONREAD`
/// counts the bytes a read would return; the rest go to the kernel.
///
/// # Safety
/// libc's contract for `ioctl`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    let Some(s) = switched(fd) else {
        return (real().ioctl)(fd, req, arg);
    };
    inside(|| {
        let val = arg.cast::<c_int>().as_mut().ok_or(libc::EFAULT);
        match req {
            libc::FIONBIO => {
                s.lock().nonblock = *val? != 0;
                Ok(0)
            }
            libc::FIONREAD => {
                let n = s.lock().conduit.readable_bytes();
                *val? = c_int::try_from(n).unwrap_or(c_int::MAX);
                Ok(0)
            }
            _ => {
                let r = (real().ioctl)(fd, req, arg);
                if r < 0 {
                    Err(super::errno())
                } else {
                    Ok(r)
                }
            }
        }
    })
}

/// # Safety
/// libc's contract for `shutdown`. On a switched socket each direction ends on its own: the
/// write side with an end-of-stream message the peer reads as 0, the read side here.
#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    let Some(s) = switched(fd) else {
        return (real().shutdown)(fd, how);
    };
    inside(|| {
        let (read, write) = match how {
            libc::SHUT_RD => (true, false),
            libc::SHUT_WR => (false, true),
            libc::SHUT_RDWR => (true, true),
            _ => return Err(libc::EINVAL),
        };
        let mut st = s.lock();
        if st.generation != registry::generation() {
            return Err(libc::EOPNOTSUPP);
        }
        st.conduit
            .shutdown(read, write)
            .map_err(|e| super::io_errno(&e))?;
        Ok(0)
    })
}

extern "C" fn in_child() {
    registry::forked();
}

/// From the first switch on, a child of `fork` knows its parent's streams are not its own:
/// both would move the one queue pair's state on, which the peer cannot follow. The child's
/// calls on them fail with `EOPNOTSUPP`; it may close them.
pub(super) fn watch_forks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only bumps an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
}

//! `epoll_ctl` and `epoll_wait` with switched sockets in the set: the library keeps every
//! registration (`epoll_table`), asks the kernel for a switched socket's input only, and
//! reports what the program asked for from the stream's state, level- or edge-triggered,
//! one-shot or not (`readiness::Interest`).

use std::ffi::c_int;
use std::time::Instant;

use super::poll::{deadline, own_stream, slice};
use super::{errno, inside, is_inside, real};
use crate::epoll_table;
use crate::readiness::{kernel_events, Interest};
use crate::registry::{self, Shared};

/// # Safety
/// libc's contract for `epoll_ctl`.
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut libc::epoll_event,
) -> c_int {
    if is_inside() {
        return (real().epoll_ctl)(epfd, op, fd, event);
    }
    inside(|| {
        let asked = event.as_ref().copied();
        let r = match (op, asked) {
            (libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD, Some(ev))
                if registry::get(fd).is_some() =>
            {
                let mut k = libc::epoll_event {
                    events: kernel_events(ev.events),
                    u64: ev.u64,
                };
                (real().epoll_ctl)(epfd, op, fd, &mut k)
            }
            _ => (real().epoll_ctl)(epfd, op, fd, event),
        };
        if r < 0 {
            return Err(errno());
        }
        match (op, asked) {
            (libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD, Some(ev)) => {
                epoll_table::set(epfd, fd, Interest::new(ev.events, ev.u64));
            }
            (libc::EPOLL_CTL_DEL, _) => epoll_table::remove(epfd, fd),
            _ => {}
        }
        Ok(r)
    })
}

/// The switched members of `epfd`: descriptor, data, stream.
fn switched_members(epfd: c_int) -> Vec<(c_int, u64, Shared)> {
    let mut streams = Vec::new();
    let members = epoll_table::members(epfd, |fd| {
        own_stream(fd).is_some_and(|s| {
            streams.push((fd, s));
            true
        })
    });
    members
        .into_iter()
        .filter_map(|(fd, data)| {
            let s = streams.iter().find(|(f, _)| *f == fd)?.1.clone();
            Some((fd, data, s))
        })
        .collect()
}

/// `epoll_pwait` on a set with switched members.
///
/// SAFETY: `out` is valid for `max` events; `sigmask` is null or valid.
unsafe fn wait_mixed(
    epfd: c_int,
    out: *mut libc::epoll_event,
    max: usize,
    timeout_ms: c_int,
    sigmask: *const libc::sigset_t,
    members: &[(c_int, u64, Shared)],
) -> Result<c_int, i32> {
    let deadline = deadline(timeout_ms);
    let mut kernel = vec![libc::epoll_event { events: 0, u64: 0 }; max];
    let _waiting: Vec<_> = members.iter().map(|(_, _, s)| s.waiting()).collect();
    loop {
        let mut got: Vec<libc::epoll_event> = Vec::with_capacity(max);
        let mut pending = false;
        let mut wake: Option<Instant> = None;
        for (fd, data, s) in members {
            if got.len() == max {
                break;
            }
            let (r, w) = {
                let mut st = s.lock();
                (st.conduit.ready(), st.conduit.next_wakeup())
            };
            pending |= r.pending;
            wake = [wake, w].into_iter().flatten().min();
            let ev = epoll_table::with(epfd, *fd, |i| i.report(&r)).unwrap_or(0);
            if ev != 0 {
                got.push(libc::epoll_event {
                    events: ev,
                    u64: *data,
                });
            }
        }
        let room = max - got.len();
        let mut mine_woke = false;
        if room > 0 {
            let wait = if got.is_empty() {
                slice(deadline, pending, wake)
            } else {
                0
            };
            let n = (real().epoll_pwait)(epfd, kernel.as_mut_ptr(), room as c_int, wait, sigmask);
            if n < 0 && got.is_empty() {
                return Err(errno());
            }
            for k in &kernel[..usize::try_from(n).unwrap_or(0)] {
                let data = k.u64;
                if members.iter().any(|(_, d, _)| *d == data) {
                    // Its state is the library's to say: looked at on the next round.
                    mine_woke = true;
                } else {
                    got.push(*k);
                }
            }
        }
        if !got.is_empty() {
            std::ptr::copy_nonoverlapping(got.as_ptr(), out, got.len());
            return Ok(got.len() as c_int);
        }
        if !mine_woke && deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
    }
}

/// # Safety
/// libc's contract for `epoll_pwait`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> c_int {
    if is_inside() || !registry::any() || max <= 0 || events.is_null() {
        return (real().epoll_pwait)(epfd, events, max, timeout, sigmask);
    }
    let members = switched_members(epfd);
    if members.is_empty() {
        return (real().epoll_pwait)(epfd, events, max, timeout, sigmask);
    }
    inside(|| wait_mixed(epfd, events, max as usize, timeout, sigmask, &members))
}

/// # Safety
/// libc's contract for `epoll_wait`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    epoll_pwait(epfd, events, max, timeout, std::ptr::null())
}

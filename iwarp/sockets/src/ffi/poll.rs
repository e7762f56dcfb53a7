//! `poll` and `select` over sets that hold switched sockets: their readiness is the
//! library's (`readiness`), the rest the kernel's, waited for together.

use std::ffi::c_int;
use std::time::{Duration, Instant};

use super::{errno, inside, is_inside, real, WAIT};
use crate::readiness::{poll_revents, Ready};
use crate::registry::{self, Shared};

/// The stream of `fd` if it is switched and this process's to move.
pub(super) fn own_stream(fd: c_int) -> Option<Shared> {
    let s = registry::get(fd)?;
    let mine = s.lock().generation == registry::generation();
    mine.then_some(s)
}

/// How long to wait next: until `deadline` (`None`: for ever), in slices that let the
/// library look at its sockets again, short ones while sends wait to go, and none past
/// `wake`, when a conduit's timers want it moved.
pub(super) fn slice(deadline: Option<Instant>, pending: bool, wake: Option<Instant>) -> c_int {
    let mut cap = if pending {
        Duration::from_millis(1)
    } else {
        WAIT
    };
    if let Some(w) = wake {
        cap = cap.min(w.saturating_duration_since(Instant::now()));
    }
    let left = deadline.map_or(cap, |d| {
        d.saturating_duration_since(Instant::now()).min(cap)
    });
    c_int::try_from(left.as_millis()).unwrap_or(c_int::MAX)
}

pub(super) fn deadline(timeout_ms: c_int) -> Option<Instant> {
    u64::try_from(timeout_ms)
        .ok()
        .map(|ms| Instant::now() + Duration::from_millis(ms))
}

/// `poll` over `fds`, some switched (`streams`: index, stream).
fn poll_mixed(
    fds: &mut [libc::pollfd],
    streams: &[(usize, Shared)],
    timeout_ms: c_int,
) -> Result<c_int, i32> {
    let deadline = deadline(timeout_ms);
    let mut ask = fds.to_vec();
    let _waiting: Vec<_> = streams.iter().map(|(_, s)| s.waiting()).collect();
    loop {
        let mut wake: Option<Instant> = None;
        let ready: Vec<Ready> = streams
            .iter()
            .map(|(_, s)| {
                let mut st = s.lock();
                wake = [wake, st.conduit.next_wakeup()].into_iter().flatten().min();
                st.conduit.ready()
            })
            .collect();
        let found = streams
            .iter()
            .zip(&ready)
            .any(|((i, _), r)| poll_revents(r, fds[*i].events) != 0);
        let pending = ready.iter().any(|r| r.pending);
        for ((i, _), r) in streams.iter().zip(&ready) {
            ask[*i].events = libc::POLLIN | if r.pending { libc::POLLOUT } else { 0 };
        }
        let wait = if found {
            0
        } else {
            slice(deadline, pending, wake)
        };
        // SAFETY: `ask` is a valid array of its length.
        let n = unsafe { (real().poll)(ask.as_mut_ptr(), ask.len() as libc::nfds_t, wait) };
        if n < 0 {
            return Err(errno());
        }
        let mut count = 0;
        for (i, p) in fds.iter_mut().enumerate() {
            p.revents = match streams.iter().find(|(j, _)| *j == i) {
                Some((_, s)) => poll_revents(&s.lock().conduit.ready(), p.events),
                None => ask[i].revents,
            };
            count += c_int::from(p.revents != 0);
        }
        if count > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(count);
        }
    }
}

/// # Safety
/// libc's contract for `poll`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
    if is_inside() || !registry::any() || fds.is_null() || n == 0 {
        return (real().poll)(fds, n, timeout);
    }
    let all = std::slice::from_raw_parts_mut(fds, n as usize);
    let streams: Vec<(usize, Shared)> = all
        .iter()
        .enumerate()
        .filter_map(|(i, p)| own_stream(p.fd).map(|s| (i, s)))
        .collect();
    if streams.is_empty() {
        return (real().poll)(fds, n, timeout);
    }
    inside(|| poll_mixed(all, &streams, timeout))
}

/// # Safety
/// libc's contract for `select`: on sets that hold a switched socket it is `poll`'s, on the
/// same descriptors (the timeout is not updated with the time left).
#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    let plain = || (real().select)(nfds, r, w, e, timeout);
    if is_inside() || !registry::any() {
        return plain();
    }
    let limit = nfds.clamp(0, libc::FD_SETSIZE as c_int);
    let has = |set: *mut libc::fd_set, fd: c_int| !set.is_null() && libc::FD_ISSET(fd, set);
    let mut fds = Vec::new();
    let mut streams = Vec::new();
    for fd in 0..limit {
        let events = if has(r, fd) { libc::POLLIN } else { 0 }
            | if has(w, fd) { libc::POLLOUT } else { 0 }
            | if has(e, fd) { libc::POLLPRI } else { 0 };
        if events != 0 {
            if let Some(s) = own_stream(fd) {
                streams.push((fds.len(), s));
            }
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
        }
    }
    if streams.is_empty() {
        return plain();
    }
    let ms = timeout.as_ref().map_or(-1, |t| {
        let ms = t
            .tv_sec
            .saturating_mul(1000)
            .saturating_add(t.tv_usec / 1000);
        c_int::try_from(ms.max(0)).unwrap_or(c_int::MAX)
    });
    inside(|| {
        poll_mixed(&mut fds, &streams, ms)?;
        let mut count = 0;
        for set in [r, w, e] {
            if !set.is_null() {
                libc::FD_ZERO(set);
            }
        }
        for p in &fds {
            let bad = p.revents & (libc::POLLHUP | libc::POLLERR) != 0;
            for (set, bits) in [(r, libc::POLLIN), (w, libc::POLLOUT), (e, libc::POLLPRI)] {
                let hit = p.revents & bits != 0 || (bad && bits != libc::POLLPRI);
                if p.events & bits != 0 && hit {
                    libc::FD_SET(p.fd, set);
                    count += 1;
                }
            }
        }
        Ok(count)
    })
}

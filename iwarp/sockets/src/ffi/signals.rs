//! A blocked call's wait, with the kernel's rule for signals: a socket call that blocks is
//! restarted after a handler installed with `SA_RESTART` and fails with `EINTR` after one
//! without. `poll` never says which signal ended it, so the wait runs with every signal
//! blocked and a signalfd in the set: a signal that comes wakes it while still pending,
//! which handlers it will run is read from `sigaction`, and then the mask is put back, so
//! that the handlers run inside the call, as in the kernel's.

use std::ffi::c_int;

/// libc's own `poll` and `close` (the program's are the library's), handed down by the caller.
pub(super) struct Libc {
    pub poll: unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int,
    pub close: unsafe extern "C" fn(c_int) -> c_int,
}

/// One past the highest signal number (glibc's `_NSIG`).
const NSIG: c_int = 65;

/// Waits for `p`'s events, at most `ms` milliseconds; `EINTR` if a signal came whose
/// handler has no `SA_RESTART`.
pub(super) fn wait(real: &Libc, p: &mut libc::pollfd, ms: c_int) -> Result<(), i32> {
    // SAFETY: sigset_t is plain data, set up by sigfillset/sigemptyset before use; the masks
    // are the calling thread's; the signalfd is ours and closed before returning.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old) != 0 {
            return plain_wait(real, p, ms);
        }
        // Only the signals the program leaves open may end the wait.
        let mut open = all;
        for s in 1..NSIG {
            if libc::sigismember(&old, s) == 1 {
                libc::sigdelset(&mut open, s);
            }
        }
        let sfd = libc::signalfd(-1, &open, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if sfd < 0 {
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return plain_wait(real, p, ms);
        }
        let mut fds = [
            *p,
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let n = (real.poll)(fds.as_mut_ptr(), 2, ms);
        *p = fds[0];
        let interrupts = n > 0 && fds[1].revents & libc::POLLIN != 0 && interrupting(&old);
        (real.close)(sfd);
        // The pending signals are delivered here, their handlers run.
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if interrupts {
            Err(libc::EINTR)
        } else {
            Ok(())
        }
    }
}

/// Whether a pending signal that `old` (the program's mask) leaves open runs a handler
/// installed without `SA_RESTART`. Ignored signals and default actions end no call: the
/// process dies, stops (and the call goes on after `SIGCONT`), or nothing happens.
///
/// SAFETY: `old` is a valid signal set.
unsafe fn interrupting(old: &libc::sigset_t) -> bool {
    let mut pending: libc::sigset_t = std::mem::zeroed();
    if libc::sigpending(&mut pending) != 0 {
        return true;
    }
    (1..NSIG).any(|s| {
        if libc::sigismember(&pending, s) != 1 || libc::sigismember(old, s) == 1 {
            return false;
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(s, std::ptr::null(), &mut act) != 0 {
            return false;
        }
        act.sa_sigaction != libc::SIG_DFL
            && act.sa_sigaction != libc::SIG_IGN
            && act.sa_flags & libc::SA_RESTART == 0
    })
}

/// The wait without telling signals apart (no signalfd to be had): any signal is `EINTR`.
///
/// SAFETY: `p` is one valid pollfd.
unsafe fn plain_wait(real: &Libc, p: &mut libc::pollfd, ms: c_int) -> Result<(), i32> {
    let interrupted = || std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
    if (real.poll)(p, 1, ms) < 0 && interrupted() {
        return Err(libc::EINTR);
    }
    Ok(())
}

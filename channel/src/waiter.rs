//! What the endpoint's progress waits on: one epoll set holding every socket the endpoint has
//! (the datagram socket, the RC listener, each RC connection and each connection being set up)
//! and an eventfd that wakes its waiter at once (to stop, or to look at a socket just added).

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use parking_lot::Mutex;

/// The token of the eventfd in the set.
const WAKE: u64 = u64::MAX;
/// The token of the endpoint's datagram socket.
pub const DATAGRAMS: u64 = 0;
/// The token of the endpoint's TCP listener and RC connections (`path`).
pub const CONNECTIONS: u64 = 1;

/// What a watched socket wakes the waiter for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// Nothing: it stays in the set (level-triggered readiness would wake the waiter over and
    /// over while the application reads the socket itself).
    Quiet,
    Readable,
    /// A connect completing, or start-up bytes the socket had no room for.
    Writable,
}

impl Interest {
    /// `Readable` if `on`, else `Quiet`.
    pub fn readable_if(on: bool) -> Interest {
        if on {
            Interest::Readable
        } else {
            Interest::Quiet
        }
    }

    fn flags(self) -> EpollFlags {
        match self {
            Interest::Quiet => EpollFlags::empty(),
            Interest::Readable => EpollFlags::EPOLLIN,
            Interest::Writable => EpollFlags::EPOLLOUT,
        }
    }
}

/// An epoll set of sockets, each under a token, and a way to wake its waiter.
pub struct Waiter {
    epoll: Epoll,
    wake: EventFd,
    /// Each watched descriptor's interest, so that an unchanged one costs no system call.
    interest: Mutex<HashMap<RawFd, EpollFlags>>,
}

impl Waiter {
    pub fn new() -> nix::Result<Waiter> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let wake =
            EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        epoll.add(wake.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, WAKE))?;
        Ok(Waiter {
            epoll,
            wake,
            interest: Mutex::new(HashMap::new()),
        })
    }

    /// Watches `fd` under `token` for `what`.
    pub fn watch(&self, fd: BorrowedFd<'_>, token: u64, what: Interest) -> nix::Result<()> {
        let flags = what.flags();
        let mut interest = self.interest.lock();
        match interest.get(&fd.as_raw_fd()) {
            Some(&f) if f == flags => return Ok(()),
            // ENOENT: a socket closed without being forgotten left the set, and its number
            // came back for this one.
            Some(_) => match self.epoll.modify(fd, &mut EpollEvent::new(flags, token)) {
                Err(nix::errno::Errno::ENOENT) => {
                    self.epoll.add(fd, EpollEvent::new(flags, token))?
                }
                r => r?,
            },
            None => self.epoll.add(fd, EpollEvent::new(flags, token))?,
        }
        interest.insert(fd.as_raw_fd(), flags);
        Ok(())
    }

    /// Takes `fd` out of the set (before it is closed: its number may come back for another
    /// socket).
    pub fn forget(&self, fd: BorrowedFd<'_>) -> nix::Result<()> {
        if self.interest.lock().remove(&fd.as_raw_fd()).is_some() {
            self.epoll.delete(fd)?;
        }
        Ok(())
    }

    /// Wakes a waiter now, or the next wait at once.
    pub fn wake(&self) {
        // A full counter (2^64 - 2 wakes unread) already wakes it.
        let _ = self.wake.write(1);
    }

    /// Sleeps until a watched socket is ready, a wake, or `timeout` (nanosecond resolution,
    /// which `epoll_wait` lacks: the set's own descriptor is polled). Returns the tokens of the
    /// ready sockets; a wake is consumed and not listed.
    pub fn wait(&self, timeout: Duration, ready: &mut Vec<u64>) {
        ready.clear();
        let mut fds = [PollFd::new(self.epoll.0.as_fd(), PollFlags::POLLIN)];
        // An error (EINTR) only ends this wait early.
        if !matches!(ppoll(&mut fds, Some(TimeSpec::from(timeout)), None), Ok(n) if n > 0) {
            return;
        }
        let mut events = [EpollEvent::empty(); 8];
        let n = self.epoll.wait(&mut events, 0u8).unwrap_or(0);
        for e in &events[..n] {
            if e.data() == WAKE {
                let _ = self.wake.read();
            } else {
                ready.push(e.data());
            }
        }
    }
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn wakes_on_a_watched_socket_on_a_wake_and_at_the_timeout() {
        let w = Waiter::new().unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        w.watch(a.as_fd(), 7, Interest::Readable).unwrap();
        w.watch(b.as_fd(), 9, Interest::Readable).unwrap();
        let mut ready = vec![];
        let t = Instant::now();
        w.wait(Duration::from_millis(30), &mut ready);
        assert!(ready.is_empty() && t.elapsed() >= Duration::from_millis(29));
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        w.wait(Duration::from_secs(10), &mut ready);
        assert_eq!(ready, vec![7]);
        // Quiet: the datagram is still there, and nothing wakes the waiter for it.
        w.watch(a.as_fd(), 7, Interest::Quiet).unwrap();
        let t = Instant::now();
        w.wait(Duration::from_millis(30), &mut ready);
        assert!(
            ready.is_empty() && t.elapsed() >= Duration::from_millis(29),
            "{ready:?}"
        );
        // A wake from another thread ends a long wait at once and lists nothing.
        let w = Arc::new(w);
        let w2 = Arc::clone(&w);
        let t = Instant::now();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w2.wake();
        });
        w.wait(Duration::from_secs(10), &mut ready);
        assert!(ready.is_empty() && t.elapsed() < Duration::from_secs(5));
        waker.join().unwrap();
        // Watching again: the waiting datagram wakes it.
        w.watch(a.as_fd(), 7, Interest::Readable).unwrap();
        w.wait(Duration::from_secs(10), &mut ready);
        assert_eq!(ready, vec![7]);
        // Forgotten, it wakes nobody, and it can be watched again afresh.
        w.forget(a.as_fd()).unwrap();
        let t = Instant::now();
        w.wait(Duration::from_millis(30), &mut ready);
        assert!(
            ready.is_empty() && t.elapsed() >= Duration::from_millis(29),
            "{ready:?}"
        );
        w.watch(a.as_fd(), 8, Interest::Readable).unwrap();
        w.wait(Duration::from_secs(10), &mut ready);
        assert_eq!(ready, vec![8]);
    }
    #[test]
    fn wakes_on_a_writable_socket_and_survives_a_socket_closed_unforgotten() {
        use std::io::Write;
        use std::net::{TcpListener, TcpStream};
        let w = Waiter::new().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut ready = vec![];
        // Connected and nothing to read: readable interest sleeps, writable wakes at once.
        w.watch(c.as_fd(), 3, Interest::Readable).unwrap();
        let t = Instant::now();
        w.wait(Duration::from_millis(30), &mut ready);
        assert!(ready.is_empty() && t.elapsed() >= Duration::from_millis(29));
        w.watch(c.as_fd(), 3, Interest::Writable).unwrap();
        w.wait(Duration::from_secs(10), &mut ready);
        assert_eq!(ready, vec![3]);
        // Closed while watched, a socket leaves the set behind the map's back, and its number
        // comes back for the next socket: watching that one with another interest adds it.
        w.epoll.delete(c.as_fd()).unwrap();
        w.watch(c.as_fd(), 4, Interest::Readable).unwrap();
        l.accept().unwrap().0.write_all(b"x").unwrap();
        w.wait(Duration::from_secs(10), &mut ready);
        assert_eq!(ready, vec![4]);
    }
}

//! What `poll`, `select` and `epoll` report for a switched socket. The kernel cannot say it:
//! bytes taken off the socket wait in the library (so the kernel sees nothing to read), and
//! bytes in the socket may be half a message (so the kernel sees what a read cannot return).
//! Pure functions of the stream's state, so that every rule is tested without sockets.

/// A switched socket's state, as the calls that wait for it need it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    /// A read would not block: bytes wait, the stream ended, or the connection did.
    pub readable: bool,
    /// How many times the socket became (more) readable: edge-triggered waiters report each.
    pub arrivals: u64,
    /// A write would not block: nothing of an earlier one waits to go, or it would fail.
    pub writable: bool,
    /// How many times the last waiting write went out: edge-triggered waiters report each.
    pub drains: u64,
    /// The peer ended its direction (its `shutdown(SHUT_WR)`, or the connection's end).
    pub rdhup: bool,
    /// The connection is gone both ways.
    pub hup: bool,
    /// It failed (`SO_ERROR` says why).
    pub error: bool,
    /// Bytes of a write still wait to go into the kernel: the waiter must push them.
    pub pending: bool,
}

/// `poll`'s `revents` for a switched socket asked for `events`.
pub fn poll_revents(r: &Ready, events: i16) -> i16 {
    let mut ev = 0;
    if events & libc::POLLIN != 0 && r.readable {
        ev |= libc::POLLIN;
    }
    if events & libc::POLLOUT != 0 && r.writable {
        ev |= libc::POLLOUT;
    }
    if events & libc::POLLRDHUP != 0 && r.rdhup {
        ev |= libc::POLLRDHUP;
    }
    // As the kernel's: reported whether asked for or not.
    if r.hup {
        ev |= libc::POLLHUP;
    }
    if r.error {
        ev |= libc::POLLERR;
    }
    ev
}

/// One registration of a switched socket in an epoll set, as the program made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    pub events: u32,
    pub data: u64,
    /// The arrivals and drains reported last (edge-triggered).
    seen_arrivals: u64,
    seen_drains: u64,
    /// Off after an `EPOLLONESHOT` report, until the program's next `EPOLL_CTL_MOD`.
    armed: bool,
}

const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;
const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
const HUP: u32 = libc::EPOLLHUP as u32;
const ERR: u32 = libc::EPOLLERR as u32;

impl Interest {
    /// A registration (`EPOLL_CTL_ADD`, or `MOD`, which re-arms): an edge-triggered one
    /// reports the state it finds once, as the kernel's does.
    pub fn new(events: u32, data: u64) -> Interest {
        Interest {
            events,
            data,
            seen_arrivals: 0,
            seen_drains: 0,
            armed: true,
        }
    }

    /// The events to report now for a socket in state `r` (none: 0); an edge-triggered or
    /// one-shot registration remembers what it reported.
    pub fn report(&mut self, r: &Ready) -> u32 {
        if !self.armed {
            return 0;
        }
        let edge = self.events & ET != 0;
        let mut ev = 0;
        if self.events & IN != 0 && r.readable && (!edge || r.arrivals != self.seen_arrivals) {
            ev |= IN;
        }
        if self.events & OUT != 0 && r.writable && (!edge || r.drains != self.seen_drains) {
            ev |= OUT;
        }
        if self.events & RDHUP != 0 && r.rdhup && (!edge || r.arrivals != self.seen_arrivals) {
            ev |= RDHUP;
        }
        let changed = r.arrivals != self.seen_arrivals || r.drains != self.seen_drains;
        if r.hup && (!edge || changed) {
            ev |= HUP;
        }
        if r.error && (!edge || changed) {
            ev |= ERR;
        }
        if ev != 0 {
            self.seen_arrivals = r.arrivals;
            self.seen_drains = r.drains;
            if self.events & ONESHOT != 0 {
                self.armed = false;
            }
        }
        ev
    }
}

/// The events the kernel is asked for on a switched socket's registration, whatever the
/// program asked: level-triggered input only. Its data arriving is the one thing the kernel
/// can tell; the rest is the library's, which edge-triggers and disarms by itself.
pub fn kernel_events(program: u32) -> u32 {
    IN | (program & RDHUP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> Ready {
        Ready {
            writable: true,
            drains: 1,
            ..Ready::default()
        }
    }

    #[test]
    fn poll_reports_bytes_the_library_holds_and_hup_and_err_unasked() {
        let mut r = ready();
        assert_eq!(poll_revents(&r, libc::POLLIN), 0);
        assert_eq!(
            poll_revents(&r, libc::POLLIN | libc::POLLOUT),
            libc::POLLOUT
        );
        r.readable = true;
        assert_eq!(poll_revents(&r, libc::POLLIN), libc::POLLIN);
        r.pending = true;
        r.writable = false;
        assert_eq!(poll_revents(&r, libc::POLLOUT), 0);
        r.hup = true;
        r.error = true;
        assert_eq!(poll_revents(&r, 0), libc::POLLHUP | libc::POLLERR);
        r.rdhup = true;
        assert_eq!(
            poll_revents(&r, libc::POLLRDHUP) & libc::POLLRDHUP,
            libc::POLLRDHUP
        );
    }

    #[test]
    fn level_triggered_reports_while_the_state_lasts() {
        let mut i = Interest::new(IN, 7);
        let mut r = ready();
        assert_eq!(i.report(&r), 0);
        r.readable = true;
        r.arrivals = 1;
        assert_eq!(i.report(&r), IN);
        assert_eq!(i.report(&r), IN, "still readable, reported again");
    }

    #[test]
    fn edge_triggered_reports_each_arrival_once_even_one_a_write_took_in() {
        let mut i = Interest::new(IN | OUT | ET, 7);
        let mut r = ready();
        assert_eq!(i.report(&r), OUT, "the state found at registration, once");
        assert_eq!(i.report(&r), 0);
        // Bytes came in while the program wrote: the kernel's edge is gone, this one is not.
        r.readable = true;
        r.arrivals = 1;
        assert_eq!(i.report(&r), IN);
        assert_eq!(i.report(&r), 0, "not again for the same bytes");
        r.arrivals = 2;
        assert_eq!(i.report(&r), IN, "more bytes, a new edge");
        // A write that had to wait went out.
        r.writable = false;
        r.pending = true;
        assert_eq!(i.report(&r), 0);
        r.writable = true;
        r.pending = false;
        r.drains = 2;
        assert_eq!(i.report(&r), OUT);
    }

    #[test]
    fn oneshot_reports_once_until_rearmed() {
        let mut i = Interest::new(IN | ONESHOT, 7);
        let r = Ready {
            readable: true,
            arrivals: 1,
            ..ready()
        };
        assert_eq!(i.report(&r), IN);
        assert_eq!(i.report(&r), 0);
        let mut i = Interest::new(IN | ONESHOT, 7);
        assert_eq!(i.report(&r), IN, "EPOLL_CTL_MOD re-arms");
    }

    #[test]
    fn the_end_of_the_connection_is_reported_to_edge_triggered_waiters_once() {
        let mut i = Interest::new(IN | RDHUP | ET, 7);
        let r = Ready {
            readable: true,
            arrivals: 3,
            rdhup: true,
            hup: true,
            ..ready()
        };
        assert_eq!(i.report(&r), IN | RDHUP | HUP);
        assert_eq!(i.report(&r), 0);
    }

    #[test]
    fn the_kernel_is_asked_for_input_only_level_triggered() {
        assert_eq!(kernel_events(OUT | ET | ONESHOT), IN);
        assert_eq!(kernel_events(IN | RDHUP | ET), IN | RDHUP);
    }
}

//! Sockets the program asked to switch before they were connected: a stream socket switches
//! when its `connect` succeeds, every socket a listener `accept`s switches as it is
//! accepted, a datagram socket switches when it is `connect`ed. With
//! `DIWARP_SOCKETS_AUTO=1` every TCP socket is asked, for programs that cannot ask.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

/// Marked sockets, so that a program that never asks pays one atomic load per `connect`.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn set() -> &'static Mutex<HashSet<i32>> {
    static SET: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    SET.get_or_init(Mutex::default)
}

/// Whether any socket is marked.
pub fn any() -> bool {
    COUNT.load(Ordering::Relaxed) != 0
}

pub fn mark(fd: i32) {
    if set().lock().insert(fd) {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// Forgets `fd` (the program unset the option, or closed it); whether it was marked.
pub fn unmark(fd: i32) -> bool {
    if !any() {
        return false;
    }
    let gone = set().lock().remove(&fd);
    if gone {
        COUNT.fetch_sub(1, Ordering::Relaxed);
    }
    gone
}

/// `DIWARP_SOCKETS_AUTO=1`: every TCP connection switches as it comes up, and one whose
/// peer does not switch goes on plain.
pub fn auto() -> bool {
    static AUTO: OnceLock<bool> = OnceLock::new();
    *AUTO.get_or_init(|| std::env::var("DIWARP_SOCKETS_AUTO").is_ok_and(|v| v == "1"))
}

pub fn is_marked(fd: i32) -> bool {
    any() && set().lock().contains(&fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_kept_until_unmarked() {
        assert!(!is_marked(4242));
        mark(4242);
        mark(4242);
        assert!(is_marked(4242));
        assert!(unmark(4242));
        assert!(!unmark(4242));
        assert!(!is_marked(4242));
    }
}

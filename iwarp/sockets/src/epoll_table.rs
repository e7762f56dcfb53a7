//! Every epoll registration the program makes, by epoll descriptor and descriptor: a socket
//! may be registered before it is switched, and once it is, what the program asked for is
//! the library's to report (`readiness`), the kernel being asked for input only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::readiness::Interest;

/// Registrations held, so that `close` of a program that never used epoll looks no further.
static COUNT: AtomicUsize = AtomicUsize::new(0);

type Sets = HashMap<i32, HashMap<i32, Interest>>;

fn sets() -> &'static Mutex<Sets> {
    static SETS: OnceLock<Mutex<Sets>> = OnceLock::new();
    SETS.get_or_init(Mutex::default)
}

/// Whether any registration is held.
pub fn any() -> bool {
    COUNT.load(Ordering::Relaxed) != 0
}

/// `EPOLL_CTL_ADD` or `EPOLL_CTL_MOD` of `fd` in `epfd` succeeded.
pub fn set(epfd: i32, fd: i32, interest: Interest) {
    if sets()
        .lock()
        .entry(epfd)
        .or_default()
        .insert(fd, interest)
        .is_none()
    {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// `EPOLL_CTL_DEL` of `fd` from `epfd` succeeded.
pub fn remove(epfd: i32, fd: i32) {
    let mut s = sets().lock();
    if let Some(set) = s.get_mut(&epfd) {
        if set.remove(&fd).is_some() {
            COUNT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// `fd` is being closed: as an epoll set, and as a member of any.
pub fn closed(fd: i32) {
    if !any() {
        return;
    }
    let mut s = sets().lock();
    let mut gone = s.remove(&fd).map_or(0, |set| set.len());
    for set in s.values_mut() {
        gone += usize::from(set.remove(&fd).is_some());
    }
    COUNT.fetch_sub(gone, Ordering::Relaxed);
}

/// The registrations of `fd` in any set, as (epoll descriptor, registration).
pub fn of(fd: i32) -> Vec<(i32, Interest)> {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return Vec::new();
    }
    let s = sets().lock();
    s.iter()
        .filter_map(|(&ep, set)| set.get(&fd).map(|i| (ep, *i)))
        .collect()
}

/// The members of `epfd` that `pick` keeps, as (descriptor, data).
pub fn members(epfd: i32, mut pick: impl FnMut(i32) -> bool) -> Vec<(i32, u64)> {
    let s = sets().lock();
    s.get(&epfd).map_or(Vec::new(), |set| {
        set.iter()
            .filter(|(&fd, _)| pick(fd))
            .map(|(&fd, i)| (fd, i.data))
            .collect()
    })
}

/// Runs `f` on the registration of `fd` in `epfd`, if there is one.
pub fn with<R>(epfd: i32, fd: i32, f: impl FnOnce(&mut Interest) -> R) -> Option<R> {
    sets().lock().get_mut(&epfd)?.get_mut(&fd).map(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the table is the process's.
    #[test]
    fn registrations_follow_add_del_and_close() {
        set(900, 5, Interest::new(1, 55));
        set(900, 6, Interest::new(1, 66));
        set(901, 5, Interest::new(4, 77));
        let mut m = members(900, |_| true);
        m.sort_unstable();
        assert_eq!(m, vec![(5, 55), (6, 66)]);
        assert_eq!(members(900, |fd| fd == 6), vec![(6, 66)]);
        let mut o: Vec<i32> = of(5).into_iter().map(|(ep, _)| ep).collect();
        o.sort_unstable();
        assert_eq!(o, vec![900, 901]);
        remove(900, 6);
        assert_eq!(members(900, |_| true), vec![(5, 55)]);
        closed(5);
        assert!(of(5).is_empty());
        assert!(members(900, |_| true).is_empty());
        set(902, 7, Interest::new(1, 1));
        closed(902);
        assert!(of(7).is_empty(), "closing the set forgets its members");
        assert_eq!(with(902, 7, |_| ()), None);
    }
}

//! The switched descriptors. Every overloaded call asks first whether its descriptor is one;
//! while none is, the answer is one relaxed atomic load. A `dup` of a switched descriptor is
//! the same stream under a second number, as it is the same socket.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::switched::Switched;

/// A switched descriptor's state, and how many of the program's calls are waiting on it
/// (they move it themselves, so the ticker leaves it alone; counted outside the lock, which
/// a waiting call does not hold).
pub struct Entry {
    state: Mutex<Switched>,
    waiting: AtomicUsize,
}

impl Deref for Entry {
    type Target = Mutex<Switched>;

    fn deref(&self) -> &Mutex<Switched> {
        &self.state
    }
}

impl Entry {
    /// A call waits on the socket until the guard is dropped.
    pub fn waiting(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(&self.waiting)
    }

    /// Whether a call waits on the socket.
    pub fn waited_on(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) != 0
    }
}

/// See [`Entry::waiting`].
pub struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

static COUNT: AtomicUsize = AtomicUsize::new(0);
/// How many `fork`s made this process: a stream made in an earlier generation is the
/// parent's, whose queue pair state a child must not move on.
static GENERATION: AtomicU64 = AtomicU64::new(0);

pub type Shared = Arc<Entry>;
type Map = Mutex<HashMap<i32, Shared>>;

fn map() -> &'static Map {
    static MAP: OnceLock<Map> = OnceLock::new();
    MAP.get_or_init(Map::default)
}

/// Whether any descriptor is switched.
pub fn any() -> bool {
    COUNT.load(Ordering::Relaxed) != 0
}

/// The stream behind `fd`, if it was switched.
pub fn get(fd: i32) -> Option<Shared> {
    if !any() {
        return None;
    }
    map().lock().get(&fd).cloned()
}

/// `fd` now carries `s`.
pub fn insert(fd: i32, s: Switched) {
    put(
        fd,
        Arc::new(Entry {
            state: Mutex::new(s),
            waiting: AtomicUsize::new(0),
        }),
    );
}

/// Every switched socket once (a `dup`'s too: the same socket under two numbers).
pub fn all() -> Vec<Shared> {
    if !any() {
        return Vec::new();
    }
    let mut v: Vec<Shared> = map().lock().values().cloned().collect();
    v.sort_by_key(|s| Arc::as_ptr(s) as usize);
    v.dedup_by(|a, b| Arc::ptr_eq(a, b));
    v
}

fn put(fd: i32, s: Shared) {
    let mut m = map().lock();
    if m.insert(fd, s).is_none() {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// `new` is a duplicate of `old`: if `old` is switched, `new` is the same stream.
pub fn alias(old: i32, new: i32) {
    if let Some(s) = get(old) {
        put(new, s);
    }
}

/// `fd` is being closed: its stream goes when no other descriptor has it.
pub fn remove(fd: i32) -> Option<Shared> {
    if !any() {
        return None;
    }
    let mut m = map().lock();
    let s = m.remove(&fd);
    if s.is_some() {
        COUNT.fetch_sub(1, Ordering::Relaxed);
    }
    s
}

pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// In a child of `fork`: the streams it inherited are its parent's.
pub fn forked() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

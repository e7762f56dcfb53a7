//! The switched descriptors. Every overloaded call asks first whether its descriptor is one;
//! while none is, the answer is one relaxed atomic load. A `dup` of a switched descriptor is
//! the same stream under a second number, as it is the same socket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::switched::Switched;

static COUNT: AtomicUsize = AtomicUsize::new(0);
/// How many `fork`s made this process: a stream made in an earlier generation is the
/// parent's, whose queue pair state a child must not move on.
static GENERATION: AtomicU64 = AtomicU64::new(0);

pub type Shared = Arc<Mutex<Switched>>;
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
    put(fd, Arc::new(Mutex::new(s)));
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

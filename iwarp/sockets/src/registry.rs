//! The switched descriptors. Every overloaded call asks first whether its descriptor is one;
//! while none is, the answer is one relaxed atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::stream::Stream;

static COUNT: AtomicUsize = AtomicUsize::new(0);

type Map = Mutex<HashMap<i32, Arc<Mutex<Stream>>>>;

fn map() -> &'static Map {
    static MAP: OnceLock<Map> = OnceLock::new();
    MAP.get_or_init(Map::default)
}

/// The stream behind `fd`, if it was switched.
pub fn get(fd: i32) -> Option<Arc<Mutex<Stream>>> {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    map().lock().get(&fd).cloned()
}

/// `fd` now carries `s`.
pub fn insert(fd: i32, s: Stream) {
    let mut m = map().lock();
    if m.insert(fd, Arc::new(Mutex::new(s))).is_none() {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// `fd` is being closed: its stream goes (and its queue pair's descriptor with it).
pub fn remove(fd: i32) -> Option<Arc<Mutex<Stream>>> {
    let mut m = map().lock();
    let s = m.remove(&fd);
    if s.is_some() {
        COUNT.fetch_sub(1, Ordering::Relaxed);
    }
    s
}

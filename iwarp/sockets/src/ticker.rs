//! One thread for the process that moves switched datagram sockets while the program is in
//! none of its calls on them (it sleeps, or computes): RD retransmissions, acknowledgements
//! and answers to the peer's hellos would otherwise wait for its next call, and the peer
//! would give up on it. The thread starts with the first switched datagram socket and then
//! sleeps on a condition variable, for ever while no socket is switched; while some are, it
//! wakes at the soonest of their timers, and at least every [`IDLE_TICK`] to read what came.
//! A socket that a call waits on, or whose lock a call holds, is that call's to move.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::registry;
use crate::switched::Carrier;

/// Longest the thread sleeps while some socket is switched: bounds how long a peer waits
/// for an acknowledgement from a program that is not calling.
pub const IDLE_TICK: Duration = Duration::from_millis(20);

struct Ticker {
    /// The process the thread runs in (a `fork`'s child has none until it switches).
    pid: Mutex<Option<u32>>,
    wake: Condvar,
}

fn ticker() -> &'static Ticker {
    static T: OnceLock<Ticker> = OnceLock::new();
    T.get_or_init(|| Ticker {
        pid: Mutex::new(None),
        wake: Condvar::new(),
    })
}

/// A datagram socket was switched: the thread starts (running `enter` first, which makes
/// its socket calls the library's own), or wakes if it sleeps.
pub fn switched(enter: fn()) {
    let t = ticker();
    let mut pid = t.pid.lock();
    let me = std::process::id();
    if *pid != Some(me) {
        let spawned = std::thread::Builder::new()
            .name("diwarp-ticker".into())
            .spawn(move || {
                enter();
                run();
            });
        if spawned.is_ok() {
            *pid = Some(me);
        }
    }
    t.wake.notify_one();
}

/// Moves every switched socket nobody else is moving; the soonest of their timers.
pub fn tick() -> Option<Instant> {
    let mut soonest: Option<Instant> = None;
    let mut any = false;
    for s in registry::all() {
        if s.waited_on() {
            any = true;
            continue;
        }
        let Some(mut st) = s.try_lock() else {
            any = true;
            continue;
        };
        if st.generation != registry::generation() || !matches!(st.conduit, Carrier::Datagram(_)) {
            continue;
        }
        any = true;
        st.conduit.tick();
        soonest = [soonest, st.conduit.next_wakeup()]
            .into_iter()
            .flatten()
            .min();
    }
    any.then(|| {
        soonest.map_or(Instant::now() + IDLE_TICK, |w| {
            w.min(Instant::now() + IDLE_TICK)
        })
    })
}

fn run() {
    let t = ticker();
    loop {
        let next = tick();
        let mut pid = t.pid.lock();
        match next {
            Some(at) => {
                t.wake.wait_until(&mut pid, at);
            }
            None => t.wake.wait(&mut pid),
        }
    }
}

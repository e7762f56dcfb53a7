//! The endpoint's progress thread, waiting on the endpoint's [`Waiter`].
//!
//! While the application polls, the thread stays out of the way; while the application
//! computes, it makes progress when a datagram arrives, at the data path's next deadline (an
//! ACK or a retransmission due) or at a tick, whichever comes first. Waking on arrivals is what
//! keeps a computing rank from looking dead to its peers: their sends complete when we
//! acknowledge, and their retransmission timers (1 ms floor) would fire again and again over a
//! 10 ms tick. It never waits for the application: it takes the data path's lock only if it
//! is free (a report, when one is due, waits for it).

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::waiter::{Interest, Waiter, DATAGRAMS};

/// The progress thread wakes at least this often while the application does not poll, so
/// peers are acknowledged even when no timer is due.
pub const TICK: Duration = Duration::from_millis(10);

/// The thread leaves progress to the application while it polled within this long.
const APP_ACTIVE: Duration = Duration::from_millis(2);

/// After an arrival woke the thread, it does not wake for arrivals again for this long (timers
/// still wake it). Each wake takes the core from the computing application (what one wake per
/// message cost NPB LU is in `channel/README.md`, "Progress"). What
/// waits meanwhile: a rendezvous with a rank that computes (over TCP it would wait for the
/// application to call MPI), and acknowledgements of sends above the inject size, whose
/// senders' timers have learned the lag.
const ARRIVAL_PACE: Duration = Duration::from_millis(2);

/// What the progress thread drives: the endpoint, seen from below.
pub trait Driven: Send + Sync + 'static {
    /// Progress calls the application made so far.
    fn polls(&self) -> u64;
    /// How long the thread sleeps at most while nothing is due.
    fn tick(&self) -> Duration;
    /// The thread's turn, if the data path is free, over its part of the endpoint (`Some(r)`:
    /// rail `r` alone, and with rail 0 what is not a rail's): when something is next due, and
    /// whether a wake by an arrival (`woke_readable`) found nothing to take (`taken`: datagrams
    /// read so far), so the next wait should not watch.
    fn try_progress_alone(
        &self,
        part: Option<u8>,
        taken: &mut u64,
        woke_readable: bool,
    ) -> Option<(Instant, bool)>;
    /// A periodic report, if one is due at `now`; returns when the next one is.
    fn report_if_due(&self, now: Instant) -> Option<Instant>;
    /// Whether the thread's epoll set watches the connections for arrivals.
    fn watch_connections(&self, on: bool);
}

/// A progress thread of an enabled endpoint: the endpoint's only one, or one rail's.
#[derive(Debug)]
pub struct Ticker {
    stop: Arc<AtomicBool>,
    waiter: Arc<Waiter>,
    thread: JoinHandle<()>,
}

impl Ticker {
    /// Starts the thread for `ep`'s `part` (`None`: all of it; `Some(r)`: rail `r`, see
    /// [`Driven::try_progress_alone`]), waiting on `arrivals` (a descriptor of each datagram
    /// socket of the part, one per rail); without them the thread runs on its timers alone.
    pub fn start<E: Driven>(
        ep: Weak<E>,
        arrivals: Vec<std::net::UdpSocket>,
        part: Option<u8>,
    ) -> nix::Result<Ticker> {
        let stop = Arc::new(AtomicBool::new(false));
        let waiter = Arc::new(Waiter::new()?);
        let (flag, w) = (Arc::clone(&stop), Arc::clone(&waiter));
        let name = part.map_or("diwarp-progress".into(), |r| format!("diwarp-rail{r}"));
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(&ep, part, &flag, &w, &arrivals))
            .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EAGAIN)))?;
        Ok(Ticker {
            stop,
            waiter,
            thread,
        })
    }

    /// The thread's epoll set, for the data path to add its connections to.
    pub fn waiter(&self) -> Arc<Waiter> {
        Arc::clone(&self.waiter)
    }

    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.waiter.wake();
        let _ = self.thread.join();
    }
}

fn run<E: Driven>(
    ep: &Weak<E>,
    part: Option<u8>,
    stop: &AtomicBool,
    waiter: &Waiter,
    arrivals: &[std::net::UdpSocket],
) {
    let mut seen = u64::MAX;
    // Datagrams the last progress took off the socket. A wake by an arrival after which this
    // did not move (nothing could be taken) makes the next wait a plain sleep, not a spin.
    let mut taken = 0;
    let mut woke_readable = false;
    let mut paced_until: Option<Instant> = None;
    let mut ready = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let Some(ep) = ep.upgrade() else { return };
        let now = Instant::now();
        let (wake, watch) = if ep.polls() != seen {
            seen = ep.polls();
            (now + APP_ACTIVE, false)
        } else {
            match ep.try_progress_alone(part, &mut taken, woke_readable) {
                Some((due, stuck)) => (due.min(now + ep.tick()), !stuck),
                None => (now + Duration::from_micros(200), false),
            }
        };
        // The rest of the endpoint goes with the first rail's thread.
        let whole = part.is_none_or(|r| r == 0);
        // A report waits for the lock: the application may poll all the time.
        let report = whole.then(|| ep.report_if_due(now)).flatten();
        let wake = report.map_or(wake, |r| wake.min(r));
        // Connections are watched when datagrams are (level-triggered, a connection the
        // application is reading would wake the thread over and over).
        if whole {
            ep.watch_connections(watch);
        }
        drop(ep);
        if woke_readable {
            paced_until = Some(now + ARRIVAL_PACE);
        }
        let paced = paced_until.filter(|t| now < *t);
        let wake = paced.map_or(wake, |t| wake.min(t));
        let wait = wake
            .saturating_duration_since(Instant::now())
            .max(Duration::from_micros(50));
        for sock in arrivals {
            // Only an error of the kernel's own keeps it from waking on arrivals: the timers
            // still run.
            let _ = waiter.watch(
                sock.as_fd(),
                DATAGRAMS,
                Interest::readable_if(watch && paced.is_none()),
            );
        }
        waiter.wait(wait, &mut ready);
        woke_readable = ready.contains(&DATAGRAMS);
    }
}

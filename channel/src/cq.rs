//! Completion queues. Reads never return 0 entries: an empty queue is FI_EAGAIN (both MPIs treat
//! 0 as fatal) and an error entry is FI_EAVAIL until `readerr` takes it. Entries come out in
//! the order they went in, errors included (as libfabric's own queues keep them): a
//! multi-receive buffer's last completion, or its cancellation, must come after the others.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::sys::*;

/// How much of each completion the application reads (`struct fi_cq_*_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqFormat {
    Context,
    Msg,
    Data,
    Tagged,
}

impl CqFormat {
    /// `FI_CQ_FORMAT_UNSPEC` lets the provider choose; the smallest will do.
    pub fn from_raw(format: u32) -> Result<CqFormat> {
        match format {
            FI_CQ_FORMAT_UNSPEC | FI_CQ_FORMAT_CONTEXT => Ok(CqFormat::Context),
            FI_CQ_FORMAT_MSG => Ok(CqFormat::Msg),
            FI_CQ_FORMAT_DATA => Ok(CqFormat::Data),
            FI_CQ_FORMAT_TAGGED => Ok(CqFormat::Tagged),
            _ => Err(Errno::INVAL),
        }
    }
}

/// One completion, in the widest (tagged) form; `op_context` and `buf` are the application's
/// pointers, kept as addresses. `src` is the sender's fi_addr for `readfrom`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub op_context: usize,
    pub flags: u64,
    pub len: usize,
    pub buf: usize,
    pub data: u64,
    pub tag: u64,
    pub src: Option<u64>,
}

/// An error completion (`struct fi_cq_err_entry`): a truncated receive (`err` FI_ETRUNC with
/// `olen` the bytes that did not fit), a cancelled operation, a peek miss (FI_ENOMSG).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletionError {
    pub completion: Completion,
    pub olen: usize,
    pub err: Errno,
    pub prov_errno: i32,
}

#[derive(Debug, Default)]
struct Entries {
    ok: VecDeque<Completion>,
    /// Each error with the number of successful entries pushed before it.
    err: VecDeque<(u64, CompletionError)>,
    ok_pushed: u64,
    ok_taken: u64,
}

impl Entries {
    /// Successful entries ahead of the oldest error (all of them if there is none).
    fn ok_ahead(&self) -> usize {
        match self.err.front() {
            Some(&(before, _)) => (before - self.ok_taken) as usize,
            None => self.ok.len(),
        }
    }
}

/// Something that makes progress when the application reads the queue: the endpoints bound
/// to it (manual progress, FI_PROGRESS_MANUAL).
pub trait Progress: Send + Sync {
    fn progress(&self);
}

/// Empty reads in a row after which each further empty read yields the CPU: with more ranks
/// than cores a spinning rank would otherwise hold the core its peer needs to answer.
const SPINS_BEFORE_YIELD: u32 = 64;

/// Empty reads by one thread alone, after another thread read, before they yield again.
const SOLO_READS_BEFORE_YIELD: u32 = 4096;

/// Whether an empty read yields the CPU. A single polling thread yields after a short spin.
/// Threads taking turns do not: each reads with the MPI library's own lock held (MPICH's
/// per-VCI mutex under MPI_THREAD_MULTIPLE), so a yield would take that lock off the core with
/// it, and the library yields between its threads' polls itself. With yields there, MPICH's
/// 8-rank `threads` test on 2 cores took 22–139 s; without, 1.9–2.4 s (MPICH over tcp: 3.4).
#[derive(Default)]
struct IdlePolls {
    empty: AtomicU32,
    last_reader: AtomicU64,
    /// Reads left before a thread reading alone may yield again.
    shared: AtomicU32,
}

impl IdlePolls {
    /// Notes a read by this thread; with `found` false, says whether to yield after it.
    fn read(&self, found: bool) -> bool {
        let me = reader_id();
        let last = self.last_reader.load(Ordering::Relaxed);
        if last != me {
            self.last_reader.store(me, Ordering::Relaxed);
            // The first reader takes no turn from anybody.
            if last != 0 {
                self.shared
                    .store(SOLO_READS_BEFORE_YIELD, Ordering::Relaxed);
            }
        }
        if found {
            self.empty.store(0, Ordering::Relaxed);
            return false;
        }
        let spun = self.empty.fetch_add(1, Ordering::Relaxed) >= SPINS_BEFORE_YIELD;
        let shared = self.shared.load(Ordering::Relaxed);
        if shared > 0 {
            self.shared.store(shared - 1, Ordering::Relaxed);
            return false;
        }
        spun
    }
}

/// A number naming the calling thread (cheaper than `thread::current().id()`).
fn reader_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
    ID.with(|id| *id)
}

pub struct CompletionQueue {
    pub domain: Arc<Domain>,
    pub format: CqFormat,
    entries: Mutex<Entries>,
    /// Replaced whole when an endpoint is added, so a read takes it without allocating.
    sources: Mutex<Arc<[Weak<dyn Progress>]>>,
    idle: IdlePolls,
    /// Opened with a wait object (FI_WAIT_UNSPEC): `fi_cq_sread` may be used.
    waitable: bool,
    /// `fi_cq_signal` came: the blocking read under way returns.
    signaled: AtomicBool,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl CompletionQueue {
    /// Bytes of the entries' queues.
    pub fn memory_bytes(&self) -> usize {
        let e = self.entries.lock();
        e.ok.capacity() * std::mem::size_of::<Completion>()
            + e.err.capacity() * std::mem::size_of::<(u64, CompletionError)>()
    }

    /// No wait objects of the system's: MPICH and Open MPI poll, and FI_WAIT_UNSPEC makes
    /// `fi_cq_sread` poll too (progress is manual). `size` is advisory; the queue grows as
    /// needed.
    pub fn open(
        domain: &Arc<Domain>,
        format: u32,
        wait_obj: u32,
        size: usize,
    ) -> Result<Arc<CompletionQueue>> {
        let format = CqFormat::from_raw(format)?;
        if ![FI_WAIT_NONE, FI_WAIT_UNSPEC].contains(&wait_obj) {
            return Err(Errno::NOSYS);
        }
        let entries = Entries {
            ok: VecDeque::with_capacity(size.min(1024)),
            ..Entries::default()
        };
        Ok(Arc::new(CompletionQueue {
            domain: Arc::clone(domain),
            format,
            entries: Mutex::new(entries),
            sources: Mutex::new(Arc::from([])),
            idle: IdlePolls::default(),
            waitable: wait_obj == FI_WAIT_UNSPEC,
            signaled: AtomicBool::new(false),
        }))
    }

    /// `source` makes progress whenever this queue is read, until it is dropped. Adding it
    /// again (an endpoint binds one queue for both sends and receives) changes nothing: a
    /// second progress per read would cost a second empty socket read, and it would sit
    /// between a message's arrival and the caller's reply half the time.
    pub fn add_source(&self, source: Weak<dyn Progress>) {
        let mut s = self.sources.lock();
        if s.iter().any(|w| Weak::ptr_eq(w, &source)) {
            return;
        }
        let live = s.iter().filter(|w| w.strong_count() > 0).cloned();
        *s = live.chain([source]).collect();
    }

    fn drive(&self) {
        // Taken out so an endpoint's progress runs without this lock held.
        let sources = Arc::clone(&self.sources.lock());
        for s in sources.iter().filter_map(Weak::upgrade) {
            s.progress();
        }
    }

    pub fn push(&self, c: Completion) {
        let mut q = self.entries.lock();
        q.ok.push_back(c);
        q.ok_pushed += 1;
    }

    pub fn push_error(&self, e: CompletionError) {
        let mut q = self.entries.lock();
        let before = q.ok_pushed;
        q.err.push_back((before, e));
    }

    /// Makes progress on the bound endpoints, then hands up to `max` completions to `out`,
    /// oldest first, and returns how many.
    pub fn read(&self, max: usize, out: impl FnMut(usize, &Completion)) -> Result<usize> {
        self.drive();
        let r = self.take(max, out);
        if self.idle.read(r != Err(Errno::AGAIN)) {
            std::thread::yield_now();
        }
        r
    }

    /// `fi_cq_sread`: reads until an entry or an error entry comes, `timeout` passes (then
    /// FI_EAGAIN, as libfabric's own queues answer) or `fi_cq_signal` interrupts. Only on a
    /// queue opened with a wait object.
    pub fn sread(
        &self,
        max: usize,
        timeout: Option<Duration>,
        mut out: impl FnMut(usize, &Completion),
    ) -> Result<usize> {
        if !self.waitable {
            return Err(Errno::NOSYS);
        }
        if max == 0 {
            // Nothing could end the wait but the timeout.
            return self.read(0, out);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            match self.read(max, &mut out) {
                Err(e) if e == Errno::AGAIN => {}
                r => return r,
            }
            if self.signaled.swap(false, Ordering::AcqRel)
                || deadline.is_some_and(|d| Instant::now() >= d)
            {
                return Err(Errno::AGAIN);
            }
        }
    }

    /// `fi_cq_signal`.
    pub fn signal(&self) -> Result<()> {
        if !self.waitable {
            return Err(Errno::NOSYS);
        }
        self.signaled.store(true, Ordering::Release);
        Ok(())
    }

    fn take(&self, max: usize, mut out: impl FnMut(usize, &Completion)) -> Result<usize> {
        let mut q = self.entries.lock();
        let ahead = q.ok_ahead();
        if ahead == 0 && !q.err.is_empty() {
            return Err(Errno(FI_EAVAIL));
        }
        if ahead == 0 || max == 0 {
            return Err(Errno::AGAIN);
        }
        let n = max.min(ahead);
        for (i, c) in q.ok.drain(..n).enumerate() {
            out(i, &c);
        }
        q.ok_taken += n as u64;
        Ok(n)
    }

    /// Takes the oldest error completion, once the entries before it are read.
    pub fn read_err(&self) -> Result<CompletionError> {
        let mut q = self.entries.lock();
        if q.ok_ahead() > 0 {
            return Err(Errno::AGAIN);
        }
        q.err.pop_front().map(|(_, e)| e).ok_or(Errno::AGAIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::domain;

    fn cq() -> Arc<CompletionQueue> {
        CompletionQueue::open(&domain(), FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0).unwrap()
    }

    fn c(n: usize) -> Completion {
        Completion {
            op_context: n,
            len: n,
            ..Default::default()
        }
    }

    #[test]
    fn empty_is_eagain_never_zero() {
        let q = cq();
        assert_eq!(q.read(8, |_, _| panic!("no entry")), Err(Errno::AGAIN));
        assert_eq!(q.read_err(), Err(Errno::AGAIN));
        q.push(c(1));
        assert_eq!(q.read(0, |_, _| panic!("no room")), Err(Errno::AGAIN));
    }

    #[test]
    fn reads_in_order_in_batches() {
        let q = cq();
        for i in 0..5 {
            q.push(c(i));
        }
        let mut seen = vec![];
        assert_eq!(q.read(3, |_, e| seen.push(e.op_context)), Ok(3));
        assert_eq!(q.read(8, |_, e| seen.push(e.op_context)), Ok(2));
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        assert_eq!(q.read(8, |_, _| ()), Err(Errno::AGAIN));
    }

    #[test]
    fn errors_come_in_their_turn_and_block_reads_until_taken() {
        let q = cq();
        let err = |n| CompletionError {
            completion: c(n),
            olen: 10,
            err: Errno::TRUNC,
            prov_errno: 0,
        };
        q.push(c(1));
        q.push(c(2));
        q.push_error(err(3));
        q.push(c(4));
        q.push_error(err(5));
        q.push_error(err(6));
        let mut seen = vec![];
        assert_eq!(q.read_err(), Err(Errno::AGAIN), "entries are ahead of it");
        assert_eq!(q.read(8, |_, e| seen.push(e.op_context)), Ok(2));
        assert_eq!(q.read(8, |_, _| ()), Err(Errno(FI_EAVAIL)));
        assert_eq!(q.read_err(), Ok(err(3)));
        assert_eq!(q.read(8, |_, e| seen.push(e.op_context)), Ok(1));
        assert_eq!(q.read(8, |_, _| ()), Err(Errno(FI_EAVAIL)));
        assert_eq!(q.read_err(), Ok(err(5)));
        assert_eq!(q.read_err(), Ok(err(6)));
        assert_eq!(q.read_err(), Err(Errno::AGAIN));
        assert_eq!(q.read(8, |_, _| ()), Err(Errno::AGAIN));
        assert_eq!(seen, [1, 2, 4]);
    }

    #[test]
    fn blocking_reads_wait_for_an_entry_a_timeout_or_a_signal() {
        let q = cq();
        assert_eq!(
            q.sread(1, None, |_, _| ()),
            Err(Errno::NOSYS),
            "no wait object"
        );
        let q = CompletionQueue::open(&domain(), FI_CQ_FORMAT_TAGGED, FI_WAIT_UNSPEC, 0).unwrap();
        let start = Instant::now();
        let limit = Duration::from_millis(20);
        assert_eq!(q.sread(1, Some(limit), |_, _| ()), Err(Errno::AGAIN));
        assert!(start.elapsed() >= limit);
        q.push(c(7));
        let mut seen = vec![];
        assert_eq!(q.sread(4, None, |_, e| seen.push(e.op_context)), Ok(1));
        assert_eq!(seen, [7]);
        q.signal().unwrap();
        assert_eq!(
            q.sread(1, None, |_, _| ()),
            Err(Errno::AGAIN),
            "a signal ends the wait"
        );
    }

    struct Counting(AtomicU32);

    impl Progress for Counting {
        fn progress(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_source_added_twice_progresses_once_per_read() {
        let q = cq();
        let a = Arc::new(Counting(AtomicU32::new(0)));
        let b = Arc::new(Counting(AtomicU32::new(0)));
        let weak = |s: &Arc<Counting>| Arc::downgrade(s) as Weak<dyn Progress>;
        q.add_source(weak(&a));
        q.add_source(weak(&a));
        q.add_source(weak(&b));
        assert_eq!(q.read(8, |_, _| ()), Err(Errno::AGAIN));
        assert_eq!(a.0.load(Ordering::Relaxed), 1);
        assert_eq!(b.0.load(Ordering::Relaxed), 1);
        // A dropped source is let go; one added afresh later progresses again.
        drop(a);
        let c = Arc::new(Counting(AtomicU32::new(0)));
        q.add_source(weak(&c));
        assert_eq!(q.read(8, |_, _| ()), Err(Errno::AGAIN));
        assert_eq!(
            (b.0.load(Ordering::Relaxed), c.0.load(Ordering::Relaxed)),
            (2, 1)
        );
        assert_eq!(q.sources.lock().len(), 2);
    }

    #[test]
    fn formats_and_wait_objects() {
        let d = domain();
        assert_eq!(
            CqFormat::from_raw(FI_CQ_FORMAT_UNSPEC),
            Ok(CqFormat::Context)
        );
        assert_eq!(CqFormat::from_raw(99), Err(Errno::INVAL));
        let fd = CompletionQueue::open(&d, FI_CQ_FORMAT_MSG, FI_WAIT_FD, 0);
        assert_eq!(fd.err(), Some(Errno::NOSYS));
    }

    /// `reads` empty reads by the calling thread; how many of them would yield.
    fn yields(idle: &IdlePolls, reads: u32) -> u32 {
        (0..reads).filter(|_| idle.read(false)).count() as u32
    }

    #[test]
    fn one_thread_yields_after_a_spin_and_threads_taking_turns_do_not() {
        let idle = IdlePolls::default();
        // Alone: the first SPINS_BEFORE_YIELD empty reads spin, the rest yield.
        assert_eq!(yields(&idle, SPINS_BEFORE_YIELD + 100), 100);
        // A completion found starts the spin over.
        assert!(!idle.read(true));
        assert_eq!(yields(&idle, SPINS_BEFORE_YIELD + 10), 10);
        // Another thread reads: neither yields while they take turns, however long.
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(yields(&idle, 10), 0));
        });
        assert_eq!(yields(&idle, 10), 0);
        for _ in 0..3 {
            std::thread::scope(|s| {
                s.spawn(|| assert_eq!(yields(&idle, SOLO_READS_BEFORE_YIELD / 2), 0));
            });
            assert_eq!(yields(&idle, SOLO_READS_BEFORE_YIELD / 2), 0);
        }
        // Once it has read alone SOLO_READS_BEFORE_YIELD times, it yields again.
        assert_eq!(yields(&idle, SOLO_READS_BEFORE_YIELD / 2), 0);
        assert_eq!(yields(&idle, 5), 5);
    }
}

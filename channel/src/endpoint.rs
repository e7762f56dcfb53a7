//! The RDM endpoint: its name, what it is bound to, enabling, options, and the entry to its
//! data path ([`crate::data`]) with the progress thread and the linger at close.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::addr::{EpName, MoreRails, NameError, RailAddr};
use crate::av::AddressVector;
use crate::cntr::Counter;
use crate::cq::{CompletionQueue, Progress};
use crate::data::{DataPath, Outputs, RecvArgs, RmaArgs, SendArgs, DEFAULT_MIN_MULTI_RECV};
use crate::diag;
use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::info::{negotiate, Info, RX_OP_FLAGS, TX_OP_FLAGS};
use crate::log::{misconfigured, Subsys};
use crate::memory::report::{Counters, Heap, RailCounters, Report, SCHEMA};
use crate::memory::{self, Shared, Watch};
use crate::params::Config;
use crate::path::Rail;
use crate::progress::{Driven, Ticker, TICK};
use crate::sys::*;

/// What `fi_ep_bind` attaches.
pub enum Bind {
    Av(Arc<AddressVector>),
    Cq(Arc<CompletionQueue>),
    Cntr(Arc<Counter>),
}

#[derive(Debug, Default)]
struct Bound {
    av: Option<Arc<AddressVector>>,
    tx_cq: Option<Arc<CompletionQueue>>,
    rx_cq: Option<Arc<CompletionQueue>>,
    /// FI_SELECTIVE_COMPLETION per direction: only operations flagged FI_COMPLETION complete.
    tx_selective: bool,
    rx_selective: bool,
    cntrs: Vec<(Arc<Counter>, u64)>,
}

#[derive(Debug)]
struct State {
    bound: Bound,
    min_multi_recv: usize,
    tx_op_flags: u64,
    rx_op_flags: u64,
}

#[derive(Debug)]
pub struct Endpoint {
    pub domain: Arc<Domain>,
    pub info: Info,
    name: EpName,
    state: Mutex<State>,
    data: Mutex<DataPath>,
    /// The progress thread, or one per rail (FI_DIWARP_RAIL_THREADS), the first rail's first.
    tickers: Mutex<Vec<Ticker>>,
    /// Read without a lock on every data call.
    enabled: AtomicBool,
    /// Progress calls the application made; the thread stays out of its way while this moves.
    polls: AtomicU64,
    /// The data path's socket (a second descriptor of it), for the progress thread to wait on
    /// while the application computes; taken when the thread starts.
    arrivals: Mutex<Vec<UdpSocket>>,
    /// [`TICK`], in microseconds; tests stretch it to show what wakes the thread.
    tick_us: AtomicU64,
    /// Times the progress thread made progress for an application that was not polling.
    wakes: AtomicU64,
    /// The memory ledger, sampled now and then (`SAMPLE_EVERY`) and at each report.
    memory: Mutex<Watch>,
}

/// Application progress calls between two samples of the memory ledger (the progress thread
/// samples at each of its wakes too): peaks the layers do not track themselves are seen at
/// this grain.
const SAMPLE_EVERY: u64 = 1024;

/// After its own data is acknowledged, a closing endpoint keeps answering this long, so the
/// acknowledgement a peer's last send waits for still goes out.
const CLOSE_ACK_GRACE: Duration = Duration::from_millis(3);

/// Events a counter can count here. Not the target side of RMA (FI_REMOTE_READ,
/// FI_REMOTE_WRITE): that needs FI_RMA_EVENT, which diwarp does not offer, and a counter bound
/// for it would never move.
const CNTR_FLAGS: u64 = FI_SEND | FI_RECV | FI_READ | FI_WRITE;

impl Endpoint {
    pub fn open(domain: &Arc<Domain>, api_version: u32, info: &Info) -> Result<Arc<Endpoint>> {
        let info = negotiate(api_version, Some(info)).map_err(|r| {
            diag!(Warn, EpCtrl, "fi_endpoint: unsupported attribute {}", r.0);
            Errno::NODATA
        })?;
        let ips =
            crate::iface::resolve_rails(domain.fabric.config.iface.as_deref()).map_err(|e| {
                diag!(Warn, EpCtrl, "FI_DIWARP_IFACE: {e}");
                Errno::NODATA
            })?;
        let range = domain.fabric.config.port_range.clone().map_err(|e| {
            misconfigured(
                Subsys::EpCtrl,
                module_path!(),
                line!(),
                format_args!("{}={e}; the endpoint does not open", crate::ports::VAR),
            );
            Errno::INVAL
        })?;
        let mut sockets = Vec::with_capacity(ips.len());
        let mut rails = Vec::with_capacity(ips.len());
        for ip in ips {
            let socket = crate::ports::bind_udp(range, ip).map_err(|e| {
                let errno = Errno(e.raw_os_error().map_or(FI_EOTHER, |n| n as u32));
                let why = format!("cannot bind a UDP socket on {ip}: {e}");
                if matches!(e, crate::ports::BindError::Exhausted { .. }) {
                    misconfigured(
                        Subsys::EpCtrl,
                        module_path!(),
                        line!(),
                        format_args!("{why}"),
                    );
                } else {
                    diag!(Warn, EpCtrl, "{why}");
                }
                errno
            })?;
            let udp_port = socket.local_addr().map_err(|_| Errno::OTHER)?.port();
            rails.push(RailAddr {
                ip,
                udp_port,
                tcp_port: 0,
            });
            sockets.push(socket);
        }
        let first = rails[0];
        let mut name = EpName {
            ip: first.ip,
            udp_port: first.udp_port,
            qpn: 0,
            tcp_port: 0,
            nonce: RandomState::new().hash_one((std::process::id(), first.udp_port)),
            more: MoreRails::from_slice(&rails[1..]),
        };
        if !name.fits() {
            diag!(
                Warn,
                EpCtrl,
                "FI_DIWARP_IFACE: {} rails do not fit in an endpoint name ({})",
                rails.len(),
                NameError::TooLong
            );
            return Err(Errno::NODATA);
        }
        // Without the second descriptors the thread still runs, on its timers alone.
        let arrivals = sockets.iter().filter_map(|s| s.try_clone().ok()).collect();
        let config = Config {
            job_key: domain.job_key.clone(),
            ..domain.fabric.config.clone()
        };
        let data = DataPath::new(sockets, &config, &mut name)?;
        diag!(Info, EpCtrl, "endpoint {name}");
        let state = State {
            bound: Bound::default(),
            min_multi_recv: DEFAULT_MIN_MULTI_RECV,
            tx_op_flags: info.tx.op_flags,
            rx_op_flags: info.rx.op_flags,
        };
        Ok(Arc::new(Endpoint {
            domain: Arc::clone(domain),
            info,
            name,
            state: Mutex::new(state),
            data: Mutex::new(data),
            tickers: Mutex::new(Vec::new()),
            enabled: AtomicBool::new(false),
            polls: AtomicU64::new(0),
            arrivals: Mutex::new(arrivals),
            tick_us: AtomicU64::new(TICK.as_micros() as u64),
            wakes: AtomicU64::new(0),
            memory: Mutex::new(Watch::default()),
        }))
    }

    pub fn name(&self) -> EpName {
        self.name
    }

    pub fn bind(&self, target: Bind, flags: u64) -> Result<()> {
        let mut st = self.state.lock();
        if self.is_enabled() {
            return Err(Errno::OPBADSTATE);
        }
        let same_domain = |d: &Arc<Domain>| Arc::ptr_eq(d, &self.domain);
        let b = &mut st.bound;
        match target {
            Bind::Av(av) => {
                if !same_domain(&av.domain) {
                    return Err(Errno::INVAL);
                }
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if b.av.is_some() {
                    return Err(Errno::INVAL);
                }
                b.av = Some(av);
            }
            Bind::Cq(cq) => {
                if !same_domain(&cq.domain) {
                    return Err(Errno::INVAL);
                }
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0
                    || flags & (FI_TRANSMIT | FI_RECV) == 0
                {
                    return Err(Errno::BADFLAGS);
                }
                let selective = flags & FI_SELECTIVE_COMPLETION != 0;
                if (flags & FI_TRANSMIT != 0 && b.tx_cq.is_some())
                    || (flags & FI_RECV != 0 && b.rx_cq.is_some())
                {
                    return Err(Errno::INVAL);
                }
                if flags & FI_TRANSMIT != 0 {
                    b.tx_cq = Some(Arc::clone(&cq));
                    b.tx_selective = selective;
                }
                if flags & FI_RECV != 0 {
                    b.rx_cq = Some(cq);
                    b.rx_selective = selective;
                }
            }
            Bind::Cntr(cntr) => {
                if !same_domain(&cntr.domain) {
                    return Err(Errno::INVAL);
                }
                if flags & !CNTR_FLAGS != 0 || flags == 0 {
                    return Err(Errno::BADFLAGS);
                }
                b.cntrs.push((cntr, flags));
            }
        }
        Ok(())
    }

    /// An RDM endpoint needs an AV to address peers, and somewhere to report each direction's
    /// completions (a CQ, or a counter for that direction). Enabling connects the data path
    /// to them and starts the progress thread.
    pub fn enable(self: &Arc<Self>) -> Result<()> {
        let st = self.state.lock();
        if self.is_enabled() {
            return Ok(());
        }
        let b = &st.bound;
        let Some(av) = b.av.clone() else {
            return Err(Errno::NOAV);
        };
        let counted = |f: u64| b.cntrs.iter().any(|(_, flags)| flags & f != 0);
        if (b.tx_cq.is_none() && !counted(FI_SEND)) || (b.rx_cq.is_none() && !counted(FI_RECV)) {
            return Err(Errno(FI_ENOCQ));
        }
        let out = Outputs {
            tx_cq: b.tx_cq.clone(),
            rx_cq: b.rx_cq.clone(),
            tx_selective: b.tx_selective,
            rx_selective: b.rx_selective,
            cntrs: b.cntrs.clone(),
        };
        let me: Weak<dyn Progress> = Arc::downgrade(self) as Weak<dyn Progress>;
        for cq in [&b.tx_cq, &b.rx_cq].into_iter().flatten() {
            cq.add_source(me.clone());
        }
        let directed = self.info.caps & FI_DIRECTED_RECV != 0;
        let mut d = self.data.lock();
        d.enable(av, out, directed, Arc::clone(&self.domain.mrs));
        // Still under the state lock: a bind or a second enable waits for all of it.
        let first = memory::charge(&d.memory(), &self.shared_memory_of(b));
        drop(d);
        let config = &self.domain.fabric.config;
        let every = config
            .mem_report_every
            .filter(|_| config.mem_report.is_some());
        self.memory.lock().start(
            &first,
            crate::raw::heap::provider_heap(),
            Instant::now(),
            every,
        );
        self.enabled.store(true, Ordering::Release);
        self.start_progress(std::mem::take(&mut *self.arrivals.lock()));
        drop(st);
        Ok(())
    }

    /// The progress thread over `arrivals` (one socket per rail), or with
    /// FI_DIWARP_RAIL_THREADS and several rails one thread per rail. Without threads, the
    /// endpoint still progresses whenever the application polls.
    fn start_progress(self: &Arc<Self>, arrivals: Vec<UdpSocket>) {
        let parts: Vec<(Vec<UdpSocket>, Option<u8>)> =
            if self.domain.fabric.config.rail_threads && arrivals.len() > 1 {
                (0u8..)
                    .zip(arrivals)
                    .map(|(r, s)| (vec![s], Some(r)))
                    .collect()
            } else {
                vec![(arrivals, None)]
            };
        let mut tickers = self.tickers.lock();
        for (socks, part) in parts {
            match Ticker::start(Arc::downgrade(self), socks, part) {
                Ok(t) => tickers.push(t),
                Err(e) => diag!(
                    Warn,
                    EpCtrl,
                    "no progress thread{} ({e}): progress only while the application polls",
                    part.map_or(String::new(), |r| format!(" for rail {r}"))
                ),
            }
        }
        // The connections wake the thread that drives them (the first).
        if let Some(t) = tickers.first() {
            self.data.lock().set_waiter(t.waiter());
        }
    }

    /// Stops the progress threads and waits for them.
    fn stop_progress(&self) {
        let tickers = std::mem::take(&mut *self.tickers.lock());
        tickers.into_iter().for_each(Ticker::stop);
    }

    /// Progress calls the application made so far.
    pub(crate) fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// How long the progress thread sleeps at most while nothing is due.
    pub(crate) fn tick(&self) -> Duration {
        Duration::from_micros(self.tick_us.load(Ordering::Relaxed))
    }

    /// The progress thread's turn, if the data path is free: progress, every ACK owed sent (nobody
    /// polls to reply soon, and an ACK left waiting would cost a wake), a ledger sample. Returns
    /// when something is next due, and whether a wake by an arrival (`woke_readable`) found
    /// nothing to take (`taken`: datagrams read so far), so the next wait should not watch.
    pub(crate) fn try_progress_alone(
        &self,
        part: Option<u8>,
        taken: &mut u64,
        woke_readable: bool,
    ) -> Option<(Instant, bool)> {
        let part = part.map(Rail);
        let mut d = self.data.try_lock()?;
        self.wakes.fetch_add(1, Ordering::Relaxed);
        d.progress_part(part);
        d.flush_acks();
        let now_taken = d.datagrams_read_of(part);
        let stuck = woke_readable && now_taken == *taken;
        *taken = now_taken;
        let far = Instant::now() + self.tick();
        let due = d.next_deadline_of(part).unwrap_or(far);
        // Taken under the lock this thread already holds: it never waits for the application.
        let mem = self.sampling().then(|| d.memory());
        drop(d);
        if let Some(mem) = mem {
            if let Some(st) = self.state.try_lock() {
                let s = memory::charge(&mem, &self.shared_memory_of(&st.bound));
                drop(st);
                self.memory.lock().ledger.record(&s);
            }
        }
        Some((due, stuck))
    }

    /// Whether the progress thread's epoll set watches the RC connections (and the
    /// listener) for arrivals; left as it was if the application holds the data path.
    pub(crate) fn watch_connections(&self, on: bool) {
        if let Some(mut d) = self.data.try_lock() {
            d.watch_connections(on);
        }
    }

    /// Stops the progress thread: with the application not polling either, the endpoint
    /// then answers nobody, as a stopped process would not.
    #[cfg(test)]
    pub(crate) fn stop_progress_thread(&self) {
        self.stop_progress();
    }

    /// Sets how long the progress thread sleeps at most while nothing is due.
    #[cfg(test)]
    pub(crate) fn set_tick(&self, tick: Duration) {
        self.tick_us
            .store(tick.as_micros() as u64, Ordering::Relaxed);
    }

    /// The address vector bound, for tests.
    #[cfg(test)]
    pub(crate) fn bound_av(&self) -> Option<Arc<AddressVector>> {
        self.state.lock().bound.av.clone()
    }

    /// The data path, for tests that steer it by hand.
    #[cfg(test)]
    pub(crate) fn with_data<R>(&self, f: impl FnOnce(&mut DataPath) -> R) -> R {
        f(&mut self.data.lock())
    }

    fn data_op<T>(&self, f: impl FnOnce(&mut DataPath) -> Result<T>) -> Result<T> {
        if !self.is_enabled() {
            return Err(Errno::OPBADSTATE);
        }
        f(&mut self.data.lock())
    }

    pub fn send(&self, a: SendArgs) -> Result<()> {
        self.data_op(|d| d.send(a))
    }

    /// An RMA write (`write`) or read.
    pub fn rma(&self, write: bool, a: RmaArgs) -> Result<()> {
        self.data_op(|d| d.rma(write, a))
    }

    pub fn atomic(&self, a: crate::data::AtomicArgs) -> Result<()> {
        self.data_op(|d| d.atomic(a))
    }

    pub fn recv(&self, mut a: RecvArgs) -> Result<()> {
        if a.flags & FI_MULTI_RECV != 0 && self.info.caps & FI_MULTI_RECV == 0 {
            a.flags &= !FI_MULTI_RECV;
        }
        self.data_op(|d| d.recv(a))
    }

    /// The data path's counters.
    pub fn data_stats(&self) -> crate::data::Stats {
        self.data.lock().stats()
    }

    pub fn cancel(&self, context: usize) -> Result<()> {
        self.data_op(|d| d.cancel(context))
    }

    /// Stops the progress thread and lingers (bounded by FI_DIWARP_LINGER_MS) until the
    /// endpoint's data is acknowledged: MPICH closes right after its last send, with no
    /// barrier, and the peer still needs those bytes (and our acknowledgements).
    pub fn shutdown(&self) {
        self.stop_progress();
        let linger = self.domain.fabric.config.linger;
        let start = Instant::now();
        let mut idle_since: Option<Instant> = None;
        self.data.lock().closing();
        loop {
            let mut d = self.data.lock();
            d.progress();
            let now = Instant::now();
            if d.idle() {
                let since = *idle_since.get_or_insert(now);
                if now - since >= CLOSE_ACK_GRACE {
                    break;
                }
            } else {
                idle_since = None;
            }
            if now - start >= linger {
                if !d.idle() {
                    diag!(
                        Warn,
                        EpCtrl,
                        "closing with data not acknowledged after {linger:?}"
                    );
                }
                break;
            }
            drop(d);
            std::thread::sleep(Duration::from_micros(50));
        }
        self.report_memory("finalize");
    }

    /// What the layers outside the data path hold: the AV, the CQs, the memory regions.
    fn shared_memory(&self) -> Shared {
        self.shared_memory_of(&self.state.lock().bound)
    }

    fn shared_memory_of(&self, b: &Bound) -> Shared {
        let cqs = match (&b.tx_cq, &b.rx_cq) {
            (Some(t), Some(r)) if Arc::ptr_eq(t, r) => t.memory_bytes(),
            (t, r) => [t, r].into_iter().flatten().map(|c| c.memory_bytes()).sum(),
        };
        Shared {
            av: b.av.as_ref().map_or((0, 0), |av| av.memory()),
            cqs,
            mrs: self.domain.mrs.memory_bytes(),
        }
    }

    /// Every account's bytes now.
    pub fn sample_memory(&self) -> policies::Sample {
        let d = self.data.lock().memory();
        memory::charge(&d, &self.shared_memory())
    }

    /// Takes a sample into the ledger.
    pub fn record_memory(&self) {
        let s = self.sample_memory();
        self.memory.lock().ledger.record(&s);
    }

    /// Whether the ledger is sampled between reports: only if a report is asked for.
    fn sampling(&self) -> bool {
        self.domain.fabric.config.mem_report.is_some()
    }

    /// Writes a report to FI_DIWARP_MEM_REPORT, if set: `at` is `running` or `finalize`.
    fn report_memory(&self, at: &'static str) {
        let Some(dest) = self.domain.fabric.config.mem_report.as_deref() else {
            return;
        };
        let line = self.memory_report(at);
        if let Err(e) = memory::report::write(dest, &line) {
            diag!(Warn, EpCtrl, "FI_DIWARP_MEM_REPORT={dest}: {e}");
        }
    }

    /// The report, as one line of JSON.
    pub fn memory_report(&self, at: &'static str) -> String {
        let (mem, counters, kernel, budget) = {
            let d = self.data.lock();
            let counters = Counters {
                data: d.stats(),
                peers: d.peer_stats(),
                paths: d.path_counters(),
                queue_pair: d.rd_stats(),
                faults: d.fault_stats(),
                progress_wakes: self.wakes.load(Ordering::Relaxed),
                rails: self
                    .name
                    .rails()
                    .zip(d.rail_stats())
                    .map(|(r, (rd, lane, ev))| RailCounters {
                        address: r.udp_addr().to_string(),
                        data_sent: rd.data_sent,
                        retransmits: rd.retransmits,
                        datagrams_read: rd.datagrams_read,
                        chunks: lane.chunks,
                        chunks_per_s: lane.chunks_per_s,
                        stalls: rd.stalls,
                        taken_down: ev.taken_down,
                        back_up: ev.back_up,
                        moved: ev.moved,
                        failed: ev.failed,
                    })
                    .collect(),
            };
            let kernel = memory::kernel::read(&d.sockets());
            (d.memory(), counters, kernel, d.budget())
        };
        let sample = memory::charge(&mem, &self.shared_memory());
        let (in_use, held) = crate::raw::heap::process_heap();
        let heap = Heap {
            provider: crate::raw::heap::provider_heap() as u64,
            process_in_use: in_use as u64,
            process_held: held as u64,
        };
        let process = memory::proc::read();
        let mut w = self.memory.lock();
        w.ledger.record(&sample);
        let report = Report {
            schema: SCHEMA,
            pid: std::process::id(),
            endpoint: self.name.to_string(),
            at,
            elapsed_ms: w.enabled_at.map_or(0, |t| t.elapsed().as_millis() as u64),
            ledger: &w.ledger,
            budget,
            baseline: w.baseline,
            growth: Report::growth(&heap, &w.ledger, &w.baseline),
            unexplained: heap.provider as i64 - w.ledger.total() as i64,
            heap,
            process,
            kernel,
            counters,
        };
        report.to_line()
    }

    /// A periodic report, if one is due at `now`; returns when the next one is.
    pub(crate) fn report_if_due(&self, now: Instant) -> Option<Instant> {
        let every = self.domain.fabric.config.mem_report_every?;
        let due = self.memory.lock().next_report?;
        if now < due {
            return Some(due);
        }
        self.report_memory("running");
        let next = due.max(now - every) + every;
        self.memory.lock().next_report = Some(next);
        Some(next)
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    pub fn min_multi_recv(&self) -> usize {
        self.state.lock().min_multi_recv
    }

    pub fn set_min_multi_recv(&self, n: usize) {
        self.state.lock().min_multi_recv = n;
        self.data.lock().set_min_multi_recv(n);
    }

    /// FI_GETOPSFLAG: `selector` holds FI_TRANSMIT or FI_RECV.
    pub fn op_flags(&self, selector: u64) -> Result<u64> {
        let st = self.state.lock();
        if selector & FI_TRANSMIT != 0 {
            Ok(st.tx_op_flags)
        } else if selector & FI_RECV != 0 {
            Ok(st.rx_op_flags)
        } else {
            Err(Errno::INVAL)
        }
    }

    /// The flags a `*msg` call gave, or else the default flags of `selector`'s direction.
    pub fn flags_or_default(&self, given: Option<u64>, selector: u64) -> Result<u64> {
        given.map_or_else(|| self.op_flags(selector), Ok)
    }

    /// FI_SETOPSFLAG: `value` is FI_TRANSMIT or FI_RECV plus the new default flags.
    pub fn set_op_flags(&self, value: u64) -> Result<()> {
        let mut st = self.state.lock();
        if value & FI_TRANSMIT != 0 {
            let flags = value & !FI_TRANSMIT;
            if flags & !(TX_OP_FLAGS | FI_INJECT) != 0 {
                return Err(Errno::BADFLAGS);
            }
            st.tx_op_flags = flags;
        } else if value & FI_RECV != 0 {
            let flags = value & !FI_RECV;
            if flags & !RX_OP_FLAGS != 0 {
                return Err(Errno::BADFLAGS);
            }
            st.rx_op_flags = flags;
        } else {
            return Err(Errno::INVAL);
        }
        Ok(())
    }
}

impl Driven for Endpoint {
    fn polls(&self) -> u64 {
        Endpoint::polls(self)
    }
    fn tick(&self) -> Duration {
        Endpoint::tick(self)
    }
    fn try_progress_alone(
        &self,
        part: Option<u8>,
        taken: &mut u64,
        woke_readable: bool,
    ) -> Option<(Instant, bool)> {
        Endpoint::try_progress_alone(self, part, taken, woke_readable)
    }
    fn report_if_due(&self, now: Instant) -> Option<Instant> {
        Endpoint::report_if_due(self, now)
    }
    fn watch_connections(&self, on: bool) {
        Endpoint::watch_connections(self, on)
    }
}

/// Only enabled endpoints are progress sources of a CQ.
impl Progress for Endpoint {
    fn progress(&self) {
        let polls = self.polls.fetch_add(1, Ordering::Relaxed);
        self.data.lock().progress();
        if polls % SAMPLE_EVERY == SAMPLE_EVERY - 1 && self.sampling() {
            self.record_memory();
        }
    }
}

#[cfg(test)]
mod port_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::domain;

    fn parts() -> (
        Arc<Endpoint>,
        Arc<AddressVector>,
        Arc<CompletionQueue>,
        Arc<Counter>,
    ) {
        let d = domain();
        let ep = Endpoint::open(&d, crate::info::fi_version(1, 17), &d.info.clone()).unwrap();
        let av = AddressVector::open(&d, FI_AV_TABLE, 0, 0, false, 0).unwrap();
        let cq = CompletionQueue::open(&d, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0).unwrap();
        let cntr = Counter::open(&d, FI_CNTR_EVENTS_COMP, FI_WAIT_UNSPEC, 0).unwrap();
        (ep, av, cq, cntr)
    }

    #[test]
    fn mpich_binding_sequence() {
        let (ep, av, cq, cntr) = parts();
        assert_eq!(ep.enable(), Err(Errno::NOAV));
        ep.bind(Bind::Av(av), 0).unwrap();
        assert_eq!(ep.enable(), Err(Errno(FI_ENOCQ)));
        ep.bind(
            Bind::Cq(cq.clone()),
            FI_SEND | FI_RECV | FI_SELECTIVE_COMPLETION,
        )
        .unwrap();
        assert_eq!(ep.bind(Bind::Cq(cq), FI_RECV), Err(Errno::INVAL));
        ep.bind(Bind::Cntr(cntr), FI_READ | FI_WRITE).unwrap();
        ep.enable().unwrap();
        assert!(ep.is_enabled());
        let (_, av2, _, _) = parts();
        assert_eq!(ep.bind(Bind::Av(av2), 0), Err(Errno::OPBADSTATE));
    }

    #[test]
    fn bind_checks_domain_and_flags() {
        let (ep, _, cq, cntr) = parts();
        let (_, other_av, _, _) = parts();
        assert_eq!(ep.bind(Bind::Av(other_av), 0), Err(Errno::INVAL));
        assert_eq!(ep.bind(Bind::Cq(cq.clone()), 0), Err(Errno::BADFLAGS));
        assert_eq!(
            ep.bind(Bind::Cq(cq), FI_RECV | FI_MULTI_RECV),
            Err(Errno::BADFLAGS)
        );
        assert_eq!(ep.bind(Bind::Cntr(cntr.clone()), 0), Err(Errno::BADFLAGS));
        for remote in [FI_REMOTE_READ, FI_REMOTE_WRITE] {
            assert_eq!(
                ep.bind(Bind::Cntr(cntr.clone()), FI_WRITE | remote),
                Err(Errno::BADFLAGS),
                "target-side RMA events are not counted"
            );
        }
    }

    #[test]
    fn name_is_a_bound_socket_and_queue_pair() {
        let (ep, ..) = parts();
        let n = ep.name();
        assert_ne!(n.udp_port, 0);
        assert_ne!(n.qpn, 0);
        assert!(UdpSocket::bind(n.udp_addr()).is_err(), "the port is taken");
        assert_eq!(EpName::decode(&n.encode()), Ok(n));
    }

    #[test]
    fn options_and_op_flags() {
        let (ep, ..) = parts();
        assert_eq!(ep.min_multi_recv(), DEFAULT_MIN_MULTI_RECV);
        ep.set_min_multi_recv(100);
        assert_eq!(ep.min_multi_recv(), 100);
        ep.set_op_flags(FI_TRANSMIT | FI_COMPLETION | FI_DELIVERY_COMPLETE)
            .unwrap();
        assert_eq!(
            ep.op_flags(FI_TRANSMIT),
            Ok(FI_COMPLETION | FI_DELIVERY_COMPLETE)
        );
        assert_eq!(ep.set_op_flags(FI_RECV | FI_INJECT), Err(Errno::BADFLAGS));
        assert_eq!(ep.op_flags(0), Err(Errno::INVAL));
    }
}

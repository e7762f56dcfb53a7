//! Shared pieces of the Rust MPI tests, the counterpart of `channel/mpi-tests/check.h`: checks
//! that say which rank expected what and got what, byte patterns that name every message, a
//! watchdog that turns a hang into a report, and a digest of everything received.
//!
//! Every program:
//!
//! ```text
//! let t = Test::init("name");          // MPI initialised, watchdog armed
//! t.phase("..."); t.waiting("..."); ... t.check_eq("what", expected, got) ...
//! t.finish(digest)                     // barrier, "name: checksum ..." and "name: OK" from rank 0
//! ```
//!
//! Environment: `MPI_TESTS_WATCHDOG` (seconds, default 240), `MPI_TESTS_SEED` (default 1),
//! `MPI_TESTS_VERBOSE=1` (rank 0 prints each phase).
//!
//! A failed check prints `[name rank R/N pid P] FAIL file:line: ...` and aborts the job with
//! status 1. The watchdog prints `[name rank R/N pid P] WATCHDOG ... phase: ...; waiting for: ...`
//! on every rank still running, waits 5 s (so that every rank's line gets out before the
//! launcher kills the rest) and exits with status 86.

use std::fmt::Debug;
use std::io::Write;
use std::panic::Location;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpi::environment::Universe;
use mpi::point_to_point::Status;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

pub const EXIT_WATCHDOG: i32 = 86;

// Read by the watchdog thread while the main thread runs MPI: a lock, not a signal handler, so
// plain strings do.
static PHASE: Mutex<String> = Mutex::new(String::new());
static WAITING: Mutex<String> = Mutex::new(String::new());

pub struct Test {
    pub name: &'static str,
    pub rank: i32,
    pub size: i32,
    pub seed: u64,
    pub world: SimpleCommunicator,
    prefix: String,
    verbose: bool,
    t0: Instant,
    // Dropped last: MPI_Finalize.
    _universe: Universe,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// One write per line, so that the lines of different ranks do not interleave.
fn say(line: &str) {
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn lock(m: &Mutex<String>) -> std::sync::MutexGuard<'_, String> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Test {
    pub fn init(name: &'static str) -> Test {
        let watchdog = env_u64("MPI_TESTS_WATCHDOG", 240);
        let seed = env_u64("MPI_TESTS_SEED", 1);
        let verbose = env_u64("MPI_TESTS_VERBOSE", 0) == 1;
        // Armed before MPI is: an initialisation that hangs is reported too.
        let pid = std::process::id();
        let prefix = std::sync::Arc::new(Mutex::new(format!("[{name} pid {pid}]")));
        let dog_prefix = prefix.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(watchdog));
            say(&format!(
                "{} WATCHDOG: still running after {watchdog} s; phase: {}; waiting for: {}\n",
                lock(&dog_prefix),
                lock(&PHASE),
                match lock(&WAITING).as_str() {
                    "" => "(nothing recorded)".to_string(),
                    w => w.to_string(),
                }
            ));
            // The launcher kills every rank as soon as one exits: the others' alarms fire a
            // little later, and their lines must get out first.
            std::thread::sleep(Duration::from_secs(5));
            std::process::exit(EXIT_WATCHDOG);
        });
        let universe = mpi::initialize().unwrap_or_else(|| {
            say(&format!(
                "[{name} pid {pid}] FAIL: MPI is already initialised\n"
            ));
            std::process::exit(1)
        });
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let p = format!("[{name} rank {rank}/{size} pid {pid}]");
        *lock(&prefix) = p.clone();
        let t = Test {
            name,
            rank,
            size,
            seed,
            world,
            prefix: p,
            verbose,
            t0: Instant::now(),
            _universe: universe,
        };
        t.phase("MPI initialised");
        t
    }

    /// What this rank is doing; clears what it waits for.
    pub fn phase(&self, what: &str) {
        *lock(&PHASE) = what.to_string();
        lock(&WAITING).clear();
        if self.verbose && self.rank == 0 {
            say(&format!(
                "[{} {:.2}s] {what}\n",
                self.name,
                self.t0.elapsed().as_secs_f64()
            ));
        }
    }

    /// Call before every blocking MPI call: the watchdog prints the last one.
    pub fn waiting(&self, what: &str) {
        *lock(&WAITING) = what.to_string();
    }

    #[track_caller]
    pub fn fail(&self, msg: &str) -> ! {
        let at = Location::caller();
        say(&format!(
            "{} FAIL {}:{}: {msg} [phase: {}]\n",
            self.prefix,
            at.file(),
            at.line(),
            lock(&PHASE)
        ));
        self.world.abort(1)
    }

    #[track_caller]
    pub fn check(&self, cond: bool, msg: impl FnOnce() -> String) {
        if !cond {
            self.fail(&msg());
        }
    }

    #[track_caller]
    pub fn check_eq<T: PartialEq + Debug>(&self, what: &str, expected: T, got: T) {
        if expected != got {
            self.fail(&format!("{what}: expected {expected:?}, received {got:?}"));
        }
    }

    /// Two arrays, element by element: the first difference and how many differ.
    #[track_caller]
    pub fn check_slice<T: PartialEq + Debug>(&self, what: &str, expected: &[T], got: &[T]) {
        self.check_eq(&format!("{what}: elements"), expected.len(), got.len());
        let bad = expected.iter().zip(got).filter(|(e, g)| e != g).count();
        if let Some(i) = expected.iter().zip(got).position(|(e, g)| e != g) {
            self.fail(&format!(
                "{what}: {bad} of {} elements differ; the first, element {i}: expected {:?}, received {:?}",
                got.len(),
                expected[i],
                got[i]
            ));
        }
    }

    /// Source, tag and element count of a received message.
    #[track_caller]
    pub fn check_status<T: Equivalence>(
        &self,
        st: &Status,
        what: &str,
        src: i32,
        tag: i32,
        count: usize,
    ) {
        let c = st.count(T::equivalent_datatype()) as i64;
        if st.source_rank() != src || st.tag() != tag || c != count as i64 {
            self.fail(&format!(
                "{what}: expected source {src} tag {tag} {count} elements, received source {} tag {} {c} elements",
                st.source_rank(),
                st.tag()
            ));
        }
    }

    /// A message's bytes: see `msg_fill`.
    pub fn msg(&self, salt: u64, src: i32, dst: i32, seq: u64, n: usize) -> Vec<u8> {
        let mut v = filled(n, 0);
        msg_fill(&mut v, self.seed, salt, src, dst, seq);
        v
    }

    /// Checks every byte; on a mismatch says where, what was expected and what arrived.
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn msg_check(&self, got: &[u8], salt: u64, src: i32, dst: i32, seq: u64, what: &str) {
        let want = self.msg(salt, src, dst, seq, got.len());
        let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
        if let (Some(&first), Some(&last)) = (bad.first(), bad.last()) {
            let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x} ")).collect::<String>();
            let end = (first + 16).min(got.len());
            self.fail(&format!(
                "{what}: message seq {seq} from {src} to {dst} ({} bytes): {} bytes differ, first at offset {first}, \
                 last at {last}; {}\n    expected at {first}: {}\n    received at {first}: {}\n   ",
                got.len(),
                bad.len(),
                describe(got),
                hex(&want[first..end]),
                hex(&got[first..end])
            ));
        }
    }

    /// Reproducible per rank (and per salt) small random numbers.
    pub fn rng(&self, salt: u64) -> Rng {
        Rng(mix64(self.seed ^ salt))
    }

    /// Barrier, then rank 0 prints the digest of what every rank received and "name: OK".
    /// The digest is the same over every transport of a correct MPI (scripts/mpi-tests compares
    /// it with a run over the MPI's own tcp).
    pub fn finish(self, digest: Digest) {
        self.phase("finish: gathering digests");
        let root = self.world.process_at_rank(0);
        let mine = [digest.sum, digest.messages, digest.bytes];
        self.waiting("gather of the digests at rank 0");
        if self.rank == 0 {
            let mut all = vec![0u64; 3 * self.size as usize];
            root.gather_into_root(&mine[..], &mut all[..]);
            let (mut sum, mut messages, mut bytes) = (0u64, 0u64, 0u64);
            for r in all.chunks(3) {
                sum = sum.wrapping_add(r[0]);
                messages += r[1];
                bytes += r[2];
            }
            println!(
                "{}: checksum {sum:016x} over {messages} messages, {bytes} bytes received ({} ranks, seed {})",
                self.name, self.size, self.seed
            );
        } else {
            root.gather_into(&mine[..]);
        }
        self.waiting("final barrier");
        self.world.barrier();
        lock(&WAITING).clear();
        if self.rank == 0 {
            println!(
                "{}: OK ({:.2} s)",
                self.name,
                self.t0.elapsed().as_secs_f64()
            );
        }
        let _ = std::io::stdout().flush();
    }
}

/// `n` bytes of `value`, at an address of the heap even when `n` is 0: an empty `Vec<u8>`'s
/// pointer is 0x1, which is Open MPI's `MPI_IN_PLACE` (its `MPI_Bcast` fails with `MPI_ERR_ARG`).
pub fn filled(n: usize, value: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(n.max(1));
    v.resize(n, value);
    v
}

pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A seed naming one message: test seed, salt, source, destination, sequence number.
pub fn msg_seed(seed: u64, salt: u64, src: i32, dst: i32, seq: u64) -> u64 {
    let pair = ((src as u32 as u64) << 32) | dst as u32 as u64;
    mix64(seed ^ mix64(salt ^ mix64(pair ^ mix64(seq))))
}

const MSG_MAGIC: u32 = 0xD1DA_7E57;
const HDR: usize = 16;

/// The pattern of (seed, salt, src, dst, seq), its first 16 bytes (if it has them) replaced by
/// a header naming the message, so that a misdelivered message says what it is.
pub fn msg_fill(buf: &mut [u8], seed: u64, salt: u64, src: i32, dst: i32, seq: u64) {
    let s = msg_seed(seed, salt, src, dst, seq);
    for (i, c) in buf.chunks_mut(8).enumerate() {
        let w = mix64(s ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)).to_le_bytes();
        c.copy_from_slice(&w[..c.len()]);
    }
    if buf.len() >= HDR {
        for (k, v) in [MSG_MAGIC, src as u32, dst as u32, seq as u32]
            .iter()
            .enumerate()
        {
            buf[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
}

fn describe(buf: &[u8]) -> String {
    let word = |k: usize| u32::from_le_bytes(buf[4 * k..4 * k + 4].try_into().unwrap());
    if buf.len() >= HDR && word(0) == MSG_MAGIC {
        format!(
            "its header names message seq {} from {} to {}",
            word(3),
            word(1),
            word(2)
        )
    } else {
        "no message header in its first bytes".to_string()
    }
}

pub struct Rng(u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// What a rank received, as a sum of one hash per message: the same whatever order wildcard
/// receives matched the messages in.
#[derive(Default, Clone, Copy)]
pub struct Digest {
    pub sum: u64,
    pub messages: u64,
    pub bytes: u64,
}

impl Digest {
    /// One message: where it came from, its tag and its bytes.
    pub fn add(&mut self, src: i32, tag: i32, bytes: &[u8]) {
        let mut h = mix64(((src as u32 as u64) << 32) | tag as u32 as u64) ^ bytes.len() as u64;
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            h = mix64(h ^ u64::from_le_bytes(w));
        }
        self.sum = self.sum.wrapping_add(mix64(h));
        self.messages += 1;
        self.bytes += bytes.len() as u64;
    }

    /// A received array of numbers, by their little-endian bytes.
    pub fn add_words<T: Copy + Into<i128>>(&mut self, src: i32, tag: i32, v: &[T]) {
        let b: Vec<u8> = v
            .iter()
            .flat_map(|&x| (x.into() as i64).to_le_bytes())
            .collect();
        self.add(src, tag, &b);
    }
}

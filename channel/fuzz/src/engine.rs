//! The stable runner's engine: seeded mutations of the corpus and random inputs, each run on a
//! worker thread under a time limit and an allocation bound.
//!
//! Not coverage-guided (that is cargo-fuzz's, on nightly): it replays what the seeds and their
//! mutations reach, the same inputs on every run for a given seed, so that CI's verdict is
//! reproducible and a failure can be replayed from the case number alone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::{Target, HEAP_PER_BYTE};

use fastrand::Rng;

/// Values that sit on the edges parsers check: zero, one, the top bit, all ones, lengths.
fn interesting(rng: &mut Rng, len: usize) -> u64 {
    const V: [u64; 12] = [
        0,
        1,
        2,
        0x7f,
        0x80,
        0xff,
        0x7fff,
        0x8000,
        0xffff,
        0x7fff_ffff,
        0x8000_0000,
        u64::MAX,
    ];
    match rng.usize(..4) {
        0 => len as u64,
        1 => (len as u64).wrapping_sub(rng.usize(..8) as u64),
        _ => V[rng.usize(..V.len())],
    }
}

/// One to four stacked mutations of `input`, at most `max_len` bytes: bit flips, bytes and
/// big- or little-endian words set to edge values, ranges inserted, deleted or duplicated, a
/// cut, or a splice with another corpus entry.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.usize(..4) {
        let len = b.len();
        match rng.usize(..10) {
            0 | 1 if len > 0 => {
                let i = rng.usize(..len);
                b[i] ^= 1 << rng.usize(..8);
            }
            2 if len > 0 => {
                let i = rng.usize(..len);
                b[i] = match rng.usize(..2) {
                    0 => rng.u8(..),
                    _ => interesting(rng, len) as u8,
                };
            }
            3 if len > 0 => {
                let width = [2, 4, 8][rng.usize(..3)].min(len);
                let at = rng.usize(..len - width + 1);
                let v = interesting(rng, len);
                let bytes = if rng.usize(..2) == 0 {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                };
                let src = if rng.usize(..2) == 0 {
                    &bytes[8 - width..]
                } else {
                    &bytes[..width]
                };
                b[at..at + width].copy_from_slice(src);
            }
            4 => {
                let at = rng.usize(..len + 1);
                let n = 1 + rng.usize(..16);
                let fill: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
                b.splice(at..at, fill);
            }
            5 if len > 0 => {
                let at = rng.usize(..len);
                let n = 1 + rng.usize(..len - at);
                b.drain(at..at + n);
            }
            6 if len > 0 => {
                let at = rng.usize(..len);
                let n = 1 + rng.usize(..(len - at).min(64));
                let chunk = b[at..at + n].to_vec();
                let to = rng.usize(..len + 1);
                b.splice(to..to, chunk);
            }
            7 => b.truncate(rng.usize(..len + 1)),
            8 if !corpus.is_empty() => {
                let other = &corpus[rng.usize(..corpus.len())];
                let keep = rng.usize(..len + 1);
                let from = rng.usize(..other.len() + 1);
                b.truncate(keep);
                b.extend_from_slice(&other[from..]);
            }
            _ => {
                if len > 0 {
                    let i = rng.usize(..len);
                    b[i] = b[i].wrapping_add(1 + rng.usize(..3) as u8);
                }
            }
        }
    }
    b.truncate(max_len);
    b
}

/// How much the runner does, and how long an input may take.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Mutated inputs per target (and an eighth as many random ones), besides the corpus and
    /// its prefixes.
    pub cases: usize,
    pub seed: u64,
    /// A run longer than this fails, as a hang.
    pub timeout: Duration,
}

/// The inputs of case `i` onward are made in order from the seed, so `case` names an input.
pub struct Cases<'a> {
    corpus: &'a [Vec<u8>],
    rng: Rng,
    max_len: usize,
    fixed: Vec<Vec<u8>>,
    mutated: usize,
    random: usize,
}

impl<'a> Cases<'a> {
    pub fn new(target: &Target, corpus: &'a [Vec<u8>], budget: &Budget) -> Cases<'a> {
        // Every target gets its own stream, whatever order they run in.
        let name_hash = target.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
            (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
        });
        let mut fixed: Vec<Vec<u8>> = vec![Vec::new()];
        for c in corpus {
            fixed.extend((0..=c.len()).map(|n| c[..n].to_vec()));
        }
        Cases {
            corpus,
            rng: Rng::with_seed(budget.seed ^ name_hash),
            max_len: target.max_len,
            fixed,
            mutated: budget.cases,
            random: budget.cases / 8,
        }
    }

    pub fn len(&self) -> usize {
        self.fixed.len() + self.mutated + self.random
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Iterator for Cases<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if let Some(f) = self.fixed.pop() {
            return Some(f);
        }
        if self.mutated > 0 {
            self.mutated -= 1;
            if self.corpus.is_empty() {
                let n = self.rng.usize(..self.max_len + 1);
                return Some((0..n).map(|_| self.rng.u8(..)).collect());
            }
            let base = &self.corpus[self.rng.usize(..self.corpus.len())];
            return Some(mutate(&mut self.rng, base, self.corpus, self.max_len));
        }
        if self.random > 0 {
            self.random -= 1;
            let n = self.rng.usize(..self.max_len + 1);
            return Some((0..n).map(|_| self.rng.u8(..)).collect());
        }
        None
    }
}

/// How heap bytes are counted: from a mark, the most held since.
pub struct Heap {
    pub watch: fn() -> usize,
    pub peak: fn() -> usize,
}

/// What a target's run found.
#[derive(Debug)]
pub enum Verdict {
    Passed {
        cases: usize,
        /// The most heap one run held beyond what it may per byte handed to the parsers.
        worst_base: usize,
        slowest: Duration,
    },
    Failed {
        case: usize,
        why: String,
        input: Vec<u8>,
    },
}

struct Shared {
    /// Nanoseconds since `epoch` at which the running case started, plus one; 0 between cases.
    started: AtomicU64,
    case: AtomicUsize,
    done: AtomicBool,
    current: Mutex<Vec<u8>>,
    verdict: Mutex<Option<Verdict>>,
}

/// Runs every case of `cases` through `target` on a worker thread, the calling thread watching
/// for a hang. Only the worker may allocate while a case runs (the heap count is the
/// process's), which is why the watcher only sleeps and reads atomics.
pub fn run(target: Target, cases: Cases<'_>, budget: &Budget, heap: Heap) -> Verdict {
    let inputs: Vec<Vec<u8>> = cases.collect();
    let shared = Arc::new(Shared {
        started: AtomicU64::new(0),
        case: AtomicUsize::new(0),
        done: AtomicBool::new(false),
        current: Mutex::new(Vec::with_capacity(target.max_len.max(4096))),
        verdict: Mutex::new(None),
    });
    let epoch = Instant::now();
    let timeout = budget.timeout;
    let worker = {
        let shared = shared.clone();
        thread::spawn(move || {
            let v = work(target, &inputs, timeout, &heap, &shared, epoch);
            *shared.verdict.lock().unwrap() = Some(v);
            shared.done.store(true, Ordering::Release);
        })
    };
    while !shared.done.load(Ordering::Acquire) {
        thread::sleep(Duration::from_millis(5));
        let started = shared.started.load(Ordering::Acquire);
        if started == 0 {
            continue;
        }
        let ran = epoch
            .elapsed()
            .saturating_sub(Duration::from_nanos(started - 1));
        // Twice the limit: the worker fails a slow case itself; this is for one that never ends.
        if ran > timeout * 2 {
            let case = shared.case.load(Ordering::Acquire);
            let input = shared.current.lock().map(|c| c.clone()).unwrap_or_default();
            // The worker is left spinning: the caller reports and exits.
            return Verdict::Failed {
                case,
                why: format!("hang: still running after {ran:?}"),
                input,
            };
        }
    }
    worker.join().expect("the worker catches panics");
    let v = shared.verdict.lock().unwrap().take();
    v.expect("the worker leaves a verdict")
}

fn work(
    target: Target,
    inputs: &[Vec<u8>],
    timeout: Duration,
    heap: &Heap,
    shared: &Shared,
    epoch: Instant,
) -> Verdict {
    let mut worst_base = 0;
    let mut slowest = Duration::ZERO;
    for (case, input) in inputs.iter().enumerate() {
        {
            let mut cur = shared.current.lock().unwrap();
            cur.clear();
            cur.extend_from_slice(input);
        }
        shared.case.store(case, Ordering::Release);
        let t0 = Instant::now();
        shared.started.store(
            t0.duration_since(epoch).as_nanos() as u64 + 1,
            Ordering::Release,
        );
        let base = (heap.watch)();
        let r = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
        let peak = (heap.peak)();
        let took = t0.elapsed();
        shared.started.store(0, Ordering::Release);
        let fail = |why: String| Verdict::Failed {
            case,
            why,
            input: input.clone(),
        };
        let fed = match r {
            Ok(fed) => fed,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| e.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                return fail(format!("panic: {msg}"));
            }
        };
        if took > timeout {
            return fail(format!("slow: {took:?}, the limit is {timeout:?}"));
        }
        let held = peak.saturating_sub(base);
        let over = held.saturating_sub(HEAP_PER_BYTE * fed);
        if over > target.heap_base {
            return fail(format!(
                "allocation: held {held} heap bytes at once for {fed} bytes parsed (the bound is \
                 {HEAP_PER_BYTE} per byte + {})",
                target.heap_base
            ));
        }
        worst_base = worst_base.max(over);
        slowest = slowest.max(took);
    }
    Verdict::Passed {
        cases: inputs.len(),
        worst_base,
        slowest,
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;

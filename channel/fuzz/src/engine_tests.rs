//! The runner fails what it must: a panic, a hang, a run that holds too much heap.

use super::*;
use diwarp_fi::fuzzing::{heap_peak, watch_heap};

fn heap() -> Heap {
    Heap {
        watch: watch_heap,
        peak: heap_peak,
    }
}

fn target(run: fn(&[u8]) -> usize) -> Target {
    Target {
        name: "test",
        run,
        max_len: 64,
        heap_base: 1024,
    }
}

fn budget(timeout_ms: u64) -> Budget {
    Budget {
        cases: 200,
        seed: 1,
        timeout: Duration::from_millis(timeout_ms),
    }
}

fn verdict(run: fn(&[u8]) -> usize, timeout_ms: u64) -> Verdict {
    let t = target(run);
    let corpus = vec![b"seed".to_vec()];
    let b = budget(timeout_ms);
    run_cases(t, &corpus, &b)
}

/// The heap count is the process's: one runner at a time, so that none sees another's blocks.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run_cases(t: Target, corpus: &[Vec<u8>], b: &Budget) -> Verdict {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    super::run(t, Cases::new(&t, corpus, b), b, heap())
}

#[test]
fn a_panic_fails_with_its_input() {
    let v = verdict(
        |d| {
            assert!(d.len() < 6, "long input");
            d.len()
        },
        1000,
    );
    match v {
        Verdict::Failed { why, input, .. } => {
            assert!(why.contains("long input"), "{why}");
            assert!(input.len() >= 6);
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn a_run_that_never_ends_fails_as_a_hang() {
    let v = verdict(
        |d| {
            if d == b"seed" {
                thread::sleep(Duration::from_millis(400));
            }
            d.len()
        },
        20,
    );
    match v {
        Verdict::Failed { why, input, .. } => {
            assert!(why.starts_with("hang") || why.starts_with("slow"), "{why}");
            assert_eq!(input, b"seed");
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn a_run_that_holds_more_than_its_bound_fails() {
    let v = verdict(
        |d| {
            let held = std::hint::black_box(vec![0u8; 1 << 20]);
            held.len().min(d.len())
        },
        1000,
    );
    match v {
        Verdict::Failed { why, .. } => assert!(why.starts_with("allocation"), "{why}"),
        v => panic!("{v:?}"),
    }
}

#[test]
fn cases_repeat_for_a_seed_and_differ_across_seeds() {
    let t = target(|d| d.len());
    let corpus = vec![b"abcdefgh".to_vec(), vec![0; 20]];
    let make = |seed| Cases::new(&t, &corpus, &Budget { seed, ..budget(1) }).collect::<Vec<_>>();
    let a = make(1);
    assert_eq!(a, make(1));
    assert_ne!(a, make(2));
    // The empty input, every prefix of each entry, then the mutated and random ones.
    assert_eq!(a.len(), 1 + 9 + 21 + 200 + 25);
    assert!(a.iter().all(|c| c.len() <= t.max_len));
}

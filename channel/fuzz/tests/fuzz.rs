//! The stable fuzz runner (README.md): for each target, the corpus and every prefix of it, then
//! seeded mutations and random inputs; a panic, a run over the time limit or a run that holds
//! more heap than its bound fails the target.
//!
//! `cargo test --release -p diwarp-fuzz --test fuzz [-- TARGET… | -- TARGET --replay FILE]`;
//! `DIWARP_FUZZ_CASES` (mutated inputs per target), `DIWARP_FUZZ_SEED`,
//! `DIWARP_FUZZ_TIMEOUT_MS`; `DIWARP_FUZZ_WRITE_SEEDS=1` rewrites `corpus/` from the encoders.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use std::{env, fs};

use diwarp_fi::fuzzing::{heap_peak, watch_heap};
use diwarp_fuzz::engine::{self, Budget, Cases, Heap, Verdict};
use diwarp_fuzz::{seeds, Target, TARGETS};

fn env_num(name: &str, default: u64) -> u64 {
    match env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        Err(_) => default,
    }
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

fn failures_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("fuzz-failures")
}

/// The committed seeds must be what the encoders make now; `write` makes them so.
fn check_seeds(target: &str, write: bool) -> Result<(), String> {
    let dir = corpus_dir(target);
    let seeds = seeds::for_target(target);
    if seeds.is_empty() {
        return Err("no seeds".into());
    }
    if write {
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for (name, bytes) in seeds {
        let path = dir.join(&name);
        if write {
            fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        } else if fs::read(&path).ok().as_deref() != Some(&bytes[..]) {
            return Err(format!(
                "{} is missing or not what the encoders make now: rerun with \
                 DIWARP_FUZZ_WRITE_SEEDS=1 and commit corpus/",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Every file of the target's corpus: the seeds, and any input kept since (a regression).
fn load_corpus(target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = fs::read_dir(corpus_dir(target))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| fs::read(p).ok()).collect()
}

fn hex(b: &[u8]) -> String {
    let shown: String = b.iter().take(256).map(|x| format!("{x:02x}")).collect();
    if b.len() > 256 {
        format!("{shown}… ({} bytes)", b.len())
    } else {
        shown
    }
}

fn report_failure(target: &Target, case: usize, why: &str, input: &[u8]) {
    let dir = failures_dir();
    let path = dir.join(format!("{}-case{case}", target.name));
    let saved = fs::create_dir_all(&dir).and_then(|()| fs::write(&path, input));
    println!("fuzz {}: FAILED at case {case}: {why}", target.name);
    println!("  input ({} bytes): {}", input.len(), hex(input));
    match saved {
        Ok(()) => println!(
            "  saved to {}; replay: cargo test --release -p diwarp-fuzz --test fuzz -- {} \
             --replay {}",
            path.display(),
            target.name,
            path.display()
        ),
        Err(e) => println!("  could not save it to {}: {e}", path.display()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let replay = args
        .iter()
        .position(|a| a == "--replay")
        .map(|i| PathBuf::from(args.get(i + 1).expect("--replay FILE")));
    // Names alone select targets; libtest's flags, which cargo may pass, are ignored.
    let names: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-') && replay.as_deref() != Some(Path::new(a.as_str())))
        .map(String::as_str)
        .collect();
    let heap = || Heap {
        watch: watch_heap,
        peak: heap_peak,
    };
    let release = !cfg!(debug_assertions);
    // A wall-clock limit far above any parse (microseconds), so that a loaded machine's
    // scheduling never fails a target; a hang is a loop that never ends.
    let budget = Budget {
        cases: env_num("DIWARP_FUZZ_CASES", if release { 200_000 } else { 1_000 }) as usize,
        seed: env_num("DIWARP_FUZZ_SEED", 0),
        timeout: Duration::from_millis(env_num(
            "DIWARP_FUZZ_TIMEOUT_MS",
            if release { 5_000 } else { 30_000 },
        )),
    };
    let write = env::var_os("DIWARP_FUZZ_WRITE_SEEDS").is_some_and(|v| v == "1");
    let (mut passed, mut failed) = (0, 0);
    let t_all = Instant::now();
    for target in TARGETS
        .iter()
        .filter(|t| names.is_empty() || names.contains(&t.name))
    {
        let t0 = Instant::now();
        let input_set;
        let cases = if let Some(file) = &replay {
            input_set = vec![fs::read(file).expect("the replayed file")];
            Cases::new(target, &input_set, &Budget { cases: 0, ..budget })
        } else {
            if let Err(e) = check_seeds(target.name, write) {
                println!("fuzz {}: FAILED: {e}", target.name);
                failed += 1;
                continue;
            }
            input_set = load_corpus(target.name);
            Cases::new(target, &input_set, &budget)
        };
        match engine::run(*target, cases, &budget, heap()) {
            Verdict::Passed {
                cases,
                worst_base,
                slowest,
            } => {
                passed += 1;
                println!(
                    "fuzz {}: {cases} inputs ({} in corpus) in {:.2?}; slowest {slowest:.2?}; \
                     heap beyond {}/byte at most {worst_base} B (bound {} B)",
                    target.name,
                    input_set.len(),
                    t0.elapsed(),
                    diwarp_fuzz::HEAP_PER_BYTE,
                    target.heap_base
                );
            }
            Verdict::Failed { case, why, input } => {
                failed += 1;
                report_failure(target, case, &why, &input);
                if why.starts_with("hang") {
                    // The hung worker cannot be stopped; nothing after it would be measured
                    // fairly.
                    println!("{passed} passed, {failed} failed");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    println!("fuzz: seed {} in {:.1?}", budget.seed, t_all.elapsed());
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

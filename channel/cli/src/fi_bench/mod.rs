//! `diwarp fi-bench`: provider-level ping-pong (channel/mpi-bench/fi-pingpong.c, the libfabric
//! calls MPI makes for a blocking send and receive, without MPI) over diwarp and the libfabric
//! providers it is compared with, side by side in one run. Each (provider, size) runs --runs
//! times, interleaved; medians and diwarp's ratios are printed as Markdown, every run goes to
//! the CSV.

mod args;
mod pingpong;
mod table;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

pub use args::FiBenchArgs;

use crate::harness::{paths, progress};
use crate::provider;
use pingpong::PROVIDERS;

const WHO: &str = "diwarp fi-bench";

fn fail(msg: &str) -> ExitCode {
    eprintln!("{WHO}: {msg}");
    ExitCode::from(2)
}

pub fn main(a: FiBenchArgs) -> ExitCode {
    let dir = paths::target().join("fi-bench");
    if let Err(e) = fs::create_dir_all(&dir) {
        return fail(&format!("cannot make {}: {e}", dir.display()));
    }
    let out = a.out.clone().unwrap_or_else(|| dir.join("results.csv"));
    let exe = dir.join("fi-pingpong");
    let build_log = dir.join("build.log");
    match pingpong::build(&exe, &build_log) {
        Ok(warnings) => eprint!("{warnings}"),
        Err(e) => {
            eprint!("{}", fs::read_to_string(&build_log).unwrap_or_default());
            return fail(&format!(
                "fi-pingpong does not build (needs libfabric-dev: scripts/setup): {e}"
            ));
        }
    }
    let given = std::env::var_os("DIWARP_PROVIDER_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let provider_dir = match provider::locate(given.as_deref()) {
        Ok(f) => f.dir,
        Err(e) => return fail(&e),
    };
    if let Err(e) = run_all(&a, &exe, &provider_dir, &out, &dir.join("run.log")) {
        return fail(&format!("{}: {e}", out.display()));
    }
    let text = fs::read_to_string(&out).unwrap_or_default();
    crate::print(&table::markdown(&text, &out.display().to_string()));
    ExitCode::SUCCESS
}

/// Every run, interleaved (run 1 of every size and provider, then run 2, ...), each result
/// appended to the CSV `out` as it comes, each launch's output in `log` (kept for the last).
fn run_all(
    a: &FiBenchArgs,
    exe: &std::path::Path,
    provider_dir: &std::path::Path,
    out: &std::path::Path,
    log: &std::path::Path,
) -> std::io::Result<()> {
    fs::write(out, format!("{}\n", table::HEADER))?;
    let mut csv = OpenOptions::new().append(true).open(out)?;
    let ntotal = a.runs as usize * a.sizes.len() * PROVIDERS.len();
    let t_all = Instant::now();
    let mut k = 0;
    for r in 1..=a.runs {
        for &n in &a.sizes {
            for p in PROVIDERS {
                let line =
                    pingpong::run(exe, provider_dir, p, n, a.verify, log).unwrap_or_else(|e| e);
                k += 1;
                let Some(v) = pingpong::latency(&line) else {
                    eprintln!("{WHO}: {p} {n} B run {r} failed: {line}");
                    continue;
                };
                writeln!(csv, "{p},{n},{r},{v}")?;
                eprintln!(
                    "{} run {r}/{} {p:<12} {n:>8} B  {v:>9} us",
                    progress(k, ntotal, t_all.elapsed().as_secs()),
                    a.runs
                );
            }
        }
    }
    Ok(())
}

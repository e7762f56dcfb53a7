//! What the benchmark subcommands (`diwarp bench`, `mem-bench`, `fi-bench`, ...) share: where
//! they read and write, the sizes they are given, building their programs, launching them
//! through `diwarp run`, their CSV, the progress lines and the command line their results name.

pub mod build;
pub mod csv;
pub mod launch;
pub mod paths;
pub mod plot;
pub mod size;

/// "[ k/N ~M:SS left]": where the run stands after k of its N launches, and the time left at
/// the pace so far; every harness starts its per-launch lines with it (scripts/transports.sh's
/// progress).
pub fn progress(k: usize, n: usize, elapsed_secs: u64) -> String {
    let left = if k > 0 {
        elapsed_secs * (n - k) as u64 / k as u64
    } else {
        0
    };
    let w = n.to_string().len();
    format!("[{k:>w$}/{n} ~{}:{:02} left]", left / 60, left % 60)
}

/// The command line for results.md: the name it was called by (the wrapper script sets
/// DIWARP_BENCH_COMMAND, e.g. scripts/mpi-bench), else `diwarp <sub>`, then the arguments as
/// given.
pub fn cmdline(sub: &str) -> String {
    let name = std::env::var("DIWARP_BENCH_COMMAND")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("diwarp {sub}"));
    let rest: Vec<String> = std::env::args().skip_while(|a| a != sub).skip(1).collect();
    format!("{name} {}", rest.join(" ")).trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::progress;

    #[test]
    fn progress_lines_match_the_shell_harnesses() {
        assert_eq!(progress(0, 12, 0), "[ 0/12 ~0:00 left]");
        assert_eq!(progress(3, 12, 30), "[ 3/12 ~1:30 left]");
        assert_eq!(progress(12, 12, 500), "[12/12 ~0:00 left]");
        assert_eq!(progress(1, 5, 61), "[1/5 ~4:04 left]");
    }
}

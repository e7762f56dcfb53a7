//! `diwarp fi-bench`'s options.

use std::path::PathBuf;

use clap::Args;

use crate::harness::size::parse_size;

#[derive(Args)]
// A later option wins over an earlier one, as in the shell harness this replaces.
#[command(after_long_help = AFTER_HELP, args_override_self = true)]
pub struct FiBenchArgs {
    /// Runs per (provider, size), interleaved: run 1 of everything, then run 2, ...
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Message sizes in bytes, comma-separated, K/M suffixes.
    #[arg(
        long,
        value_name = "S,...",
        value_delimiter = ',',
        action = clap::ArgAction::Set,
        default_value = "1,1K,64K,1M",
        value_parser = parse_size
    )]
    pub sizes: Vec<u64>,
    /// CSV of every run (default <target>/fi-bench/results.csv, target = $CARGO_TARGET_DIR or
    /// the checkout's target/).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Check every received byte (timings then include the checking).
    #[arg(long)]
    pub verify: bool,
}

const AFTER_HELP: &str = "\
Provider-level ping-pong (channel/mpi-bench/fi-pingpong.c: the libfabric calls MPI makes for a \
blocking send and receive, without MPI, built with gcc into <target>/fi-bench/fi-pingpong) over \
diwarp and the libfabric providers it is compared with, side by side in one run: Debian \
libfabric's tcp;ofi_rxm and udp;ofi_rxd, all on loopback. Each (provider, size) runs --runs \
times, interleaved, each run about 50 MiB or 20000 round trips, whichever is fewer (at least \
200), under a 120 s timeout. Medians and diwarp's ratios are printed as Markdown, every run \
goes to the CSV (provider,size,run,latency_us); a run that fails is said on stderr and left out.";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Command, FromArgMatches};

    fn parse(args: &[&str]) -> Result<FiBenchArgs, clap::Error> {
        let cmd = FiBenchArgs::augment_args(Command::new("fi-bench"));
        let m =
            cmd.try_get_matches_from(std::iter::once("fi-bench").chain(args.iter().copied()))?;
        FiBenchArgs::from_arg_matches(&m)
    }

    #[test]
    fn defaults_are_the_shell_harness_ones() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.runs, 5);
        assert_eq!(a.sizes, [1, 1024, 64 << 10, 1 << 20]);
        assert!(a.out.is_none() && !a.verify);
    }

    #[test]
    fn sizes_runs_and_a_later_option_winning() {
        let a = parse(&["--sizes", "8", "--sizes", "1,1K", "--runs", "1", "--verify"]).unwrap();
        assert_eq!((a.runs, a.verify), (1, true));
        assert_eq!(a.sizes, [1, 1024]);
        for bad in [
            ["--runs", "0"],
            ["--runs", "x"],
            ["--sizes", "1,x"],
            ["--sizes", "1,"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}

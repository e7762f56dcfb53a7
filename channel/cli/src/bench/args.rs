//! `diwarp bench`'s options, and reading the sizes and iteration counts they are given in.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::harness::size::parse_size;

/// The transports of a default run.
pub const DEFAULT_TRANSPORTS: &str =
    "mpich-diwarp,mpich-tcp,mpich-udp-rxd,ompi-btl-tcp,ompi-diwarp";

#[derive(Args)]
// A later option wins over an earlier one, so that scripts/bench's defaults can be overridden
// by the arguments appended to them.
#[command(after_long_help = AFTER_HELP, args_override_self = true)]
pub struct BenchArgs {
    /// Runs of every (transport, mode), interleaved: run 1 of everything, then run 2, ...
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Transports, comma-separated: names of `diwarp transports` (the table of
    /// baselines.md). Every diwarp transport (any mode) gets a ratio to every peer (the
    /// others; with none, to the first diwarp transport).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = DEFAULT_TRANSPORTS)]
    pub transports: Vec<String>,
    /// Modes, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        action = clap::ArgAction::Set,
        default_value = "latency,bw,bibw"
    )]
    pub modes: Vec<PtMode>,
    /// Message sizes MIN:MAX, powers of two from MIN, K/M/G suffixes (bw and bibw skip 0).
    #[arg(long, default_value = "0:4M", value_parser = parse_sizes)]
    pub sizes: Sizes,
    /// pt2pt's iterations, N up to 8 KiB and L above (default pt2pt's own: latency
    /// 10000:1000, bw/bibw 100:20).
    #[arg(long, value_parser = parse_counts)]
    pub iters: Option<String>,
    /// pt2pt's warm-up iterations, N[:L] (default pt2pt's own: latency 1000:100, bw/bibw 10:2).
    #[arg(long, value_parser = parse_counts)]
    pub warmup: Option<String>,
    /// udp;ofi_rxd (under either MPI) is slow for large messages: its sizes stop here, and
    /// unless --iters is given it gets fewer iterations above 8 KiB (latency 200, bw/bibw 5).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size_given)]
    pub rxd_max: (u64, String),
    /// pt2pt --verify: every byte checked (timings then include the checking).
    #[arg(long)]
    pub verify: bool,
    /// Output directory (default <target>/mpi-bench/<date-time>, target = $CARGO_TARGET_DIR
    /// or the checkout's target/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also results.png (matplotlib of the checkout's .venv, scripts/mpi-bench-plot.py).
    #[arg(long)]
    pub plot: bool,
    /// Every launch is killed after S seconds.
    #[arg(long, value_name = "S", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// A rank without progress for S..2S seconds reports and exits.
    #[arg(long, value_name = "S", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub watchdog: u64,
    /// libdiwarp-fi.so's directory (default: installed beside this command, or the build
    /// tree's, as `diwarp run` finds it).
    #[arg(long, env = "DIWARP_PROVIDER_DIR")]
    pub provider_dir: Option<PathBuf>,
    /// Do not bind the 2 ranks to cores (implied with MPIRUN_DIWARP_NETNS, where every
    /// namespace is a host with the same cores: both ranks would get core 0).
    #[arg(long)]
    pub no_bind: bool,
}

const AFTER_HELP: &str = "\
Runs channel/mpi-bench/pt2pt.c (built with each MPI's mpicc into \
<target>/mpi-bench/bin/<mpi>/pt2pt) on 2 ranks over every transport and mode, each through \
`diwarp run` with shared memory off and the ranks bound to cores 0 and 1.

Output in --out: results.csv and results.md (medians per size; ± marks a max-min spread of \
10 % of the median or more; (k/N) a value from fewer runs; diwarp ÷ peer ratios), raw.csv \
(every value), runs.csv (every launch: status, seconds, reason), transports.tsv (what each \
name ran), launch.txt (the exact launch lines), logs/.

A transport whose launch fails, hangs (watchdog) or times out is reported as failed in the \
tables and the benchmark goes on; after a hang or timeout that (transport, mode) is skipped \
in the later runs. Exit status 0 if at least one launch produced results, 1 if none did, 2 \
on usage errors.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum PtMode {
    Latency,
    Bw,
    Bibw,
}

impl PtMode {
    pub fn name(self) -> &'static str {
        match self {
            PtMode::Latency => "latency",
            PtMode::Bw => "bw",
            PtMode::Bibw => "bibw",
        }
    }
}

/// The sizes given, in bytes, and as written (for the banner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub min: u64,
    pub max: u64,
    pub given: String,
}

/// A size and how it was written, for messages.
pub fn parse_size_given(s: &str) -> Result<(u64, String), String> {
    Ok((parse_size(s)?, s.to_owned()))
}

pub fn parse_sizes(s: &str) -> Result<Sizes, String> {
    let (lo, hi) = s
        .split_once(':')
        .ok_or_else(|| format!("wants MIN:MAX, got '{s}'"))?;
    let (min, max) = (parse_size(lo)?, parse_size(hi)?);
    if min > max {
        return Err(format!("MIN is above MAX in '{s}'"));
    }
    Ok(Sizes {
        min,
        max,
        given: s.to_owned(),
    })
}

/// Iteration counts: N or N:L.
pub fn parse_counts(s: &str) -> Result<String, String> {
    let num = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    let ok = match s.split_once(':') {
        Some((n, l)) => num(n) && num(l),
        None => num(s),
    };
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!("wants N or N:L, got '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_ranges() {
        let s = parse_sizes("0:4M").unwrap();
        assert_eq!((s.min, s.max, s.given.as_str()), (0, 4 << 20, "0:4M"));
        assert_eq!(parse_sizes("1:1").map(|s| (s.min, s.max)), Ok((1, 1)));
        assert!(parse_sizes("4M").is_err());
        assert!(parse_sizes("8:4").is_err());
        assert!(parse_sizes("1:x").is_err());
    }

    #[test]
    fn a_later_option_wins() {
        use clap::{Args as _, Command, FromArgMatches};
        let cmd = BenchArgs::augment_args(Command::new("bench"));
        let m = cmd
            .try_get_matches_from([
                "bench",
                "--runs",
                "3",
                "--transports",
                "mpich-diwarp,mpich-tcp",
                "--runs",
                "1",
                "--transports",
                "ompi-diwarp",
                "--modes",
                "bw,latency",
            ])
            .unwrap();
        let a = BenchArgs::from_arg_matches(&m).unwrap();
        assert_eq!(a.runs, 1);
        assert_eq!(a.transports, ["ompi-diwarp"]);
        assert_eq!(a.modes, [PtMode::Bw, PtMode::Latency]);
    }

    #[test]
    fn iteration_counts() {
        assert!(parse_counts("100").is_ok());
        assert!(parse_counts("10000:200").is_ok());
        for bad in ["", ":", "1:", ":1", "1:2:3", "a"] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }
}

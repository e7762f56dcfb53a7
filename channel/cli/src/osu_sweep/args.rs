//! `diwarp osu-sweep`'s options.

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
// A later option wins over an earlier one, as in the shell harness this replaces.
#[command(after_long_help = AFTER_HELP, args_override_self = true)]
pub struct OsuSweepArgs {
    /// OSU's MPI benchmarks: a build tree's c/mpi, or an install's
    /// libexec/osu-micro-benchmarks/mpi (holding pt2pt/, collective/, one-sided/). Required.
    #[arg(long, value_name = "DIR")]
    pub osu: Option<PathBuf>,
    /// mpich (default) or openmpi; the OSU build must be for that MPI.
    #[arg(long, value_name = "M")]
    pub mpi: Option<String>,
    /// diwarp transports of `diwarp transports`, comma-separated, each a column of the table
    /// (default mpich-diwarp or ompi-diwarp, by --mpi): e.g.
    /// mpich-diwarp,mpich-diwarp-rc,mpich-diwarp-hybrid; all of one MPI, which --mpi then need
    /// not name.
    #[arg(long, value_name = "T,...", value_delimiter = ',', action = clap::ArgAction::Set)]
    pub transports: Vec<String>,
    /// Ranks for point-to-point, one-sided and startup benchmarks.
    #[arg(short = 'n', value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub np: u32,
    /// Ranks for collectives and congestion benchmarks.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub coll_n: u32,
    /// Largest message in bytes (OSU's -m 1:B).
    #[arg(long, value_name = "B", default_value_t = 1_048_576, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_size: u64,
    /// Iterations (OSU's -i).
    #[arg(long, value_name = "I", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,
    /// Seconds per run; a run that overstays counts as a failure.
    #[arg(long, value_name = "S", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Only benchmarks whose path (e.g. collective/blocking/osu_bcast) matches this extended
    /// regular expression (grep -E).
    #[arg(long, value_name = "REGEX")]
    pub only: Option<String>,
    /// Also write the Markdown table there.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

const AFTER_HELP: &str = "\
Runs every benchmark of a user-provided OSU micro-benchmarks build over diwarp (in one or more \
of its modes, side by side), with OSU's own data validation (-c) wherever the benchmark offers \
it, and re-runs each failure over a peer transport (MPICH: mpich-tcp, Open MPI: its TCP BTL, \
ompi-btl-tcp) to tell diwarp's failures from those of the MPI library or of OSU itself. Nothing \
here builds OSU: build it with the MPI's own mpicc. Every launch is `diwarp run`.

Each row, per transport: pass, FAIL (diwarp only: a diwarp bug), \"fails on the peer too\" (not \
diwarp's; the peer runs once per benchmark that failed over any of them), and its seconds, with \
the last lines of output of every failure below the table (logs in /tmp/osu-sweep.XXXXXX). Exit \
status 1 if any benchmark failed over diwarp only (in any of the transports), 2 on usage \
errors, else 0.";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Command, FromArgMatches};

    fn parse(args: &[&str]) -> Result<OsuSweepArgs, clap::Error> {
        let cmd = OsuSweepArgs::augment_args(Command::new("osu-sweep"));
        let m =
            cmd.try_get_matches_from(std::iter::once("osu-sweep").chain(args.iter().copied()))?;
        OsuSweepArgs::from_arg_matches(&m)
    }

    #[test]
    fn defaults_are_the_shell_harness_ones() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.np, a.coll_n, a.iters), (2, 4, 30));
        assert_eq!((a.max_size, a.timeout), (1_048_576, 120));
        assert!(a.osu.is_none() && a.mpi.is_none() && a.only.is_none() && a.out.is_none());
        assert!(a.transports.is_empty());
    }

    #[test]
    fn every_option_and_a_later_one_winning() {
        let a = parse(&[
            "--osu",
            "/o",
            "--mpi",
            "openmpi",
            "-n",
            "3",
            "--coll-n",
            "8",
            "--max-size",
            "64",
            "--iters",
            "5",
            "--timeout",
            "9",
            "--only",
            "bcast|latency",
            "--out",
            "t.md",
            "--transports",
            "x",
            "--transports",
            "ompi-diwarp,ompi-diwarp-rc",
            "-n",
            "2",
        ])
        .unwrap();
        assert_eq!(a.osu.unwrap().to_str(), Some("/o"));
        assert_eq!(a.mpi.as_deref(), Some("openmpi"));
        assert_eq!(
            (a.np, a.coll_n, a.max_size, a.iters, a.timeout),
            (2, 8, 64, 5, 9)
        );
        assert_eq!(a.only.as_deref(), Some("bcast|latency"));
        assert_eq!(a.transports, ["ompi-diwarp", "ompi-diwarp-rc"]);
        for bad in [
            ["-n", "0"],
            ["--iters", "x"],
            ["--max-size", "1M"],
            ["--timeout", "0"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}

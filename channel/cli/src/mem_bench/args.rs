//! `diwarp mem-bench`'s options.

use std::path::PathBuf;

use clap::Args;

/// The transports of a default run.
pub const DEFAULT_TRANSPORTS: &str =
    "mpich-diwarp,mpich-tcp,mpich-udp-rxd,ompi-diwarp,ompi-btl-tcp,ompi-mtl-ofi-tcp";

#[derive(Args)]
// A later option wins over an earlier one, as in the shell harness this replaces.
#[command(after_long_help = AFTER_HELP, args_override_self = true)]
pub struct MemBenchArgs {
    /// Runs of every (transport, ranks), interleaved: run 1 of everything, then run 2, ...
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Rank counts, comma-separated (more ranks than cores are oversubscribed).
    #[arg(
        long,
        value_name = "N,...",
        value_delimiter = ',',
        action = clap::ArgAction::Set,
        default_value = "2,4,8",
        value_parser = parse_ranks
    )]
    pub ranks: Vec<u32>,
    /// Transports, comma-separated: names of `diwarp transports` (also mpich-tcp-rxm,
    /// ompi-udp-rxd, and diwarp's modes: mpich-diwarp-rc, -hybrid, -hybrid4, -hybrid16,
    /// ompi-diwarp-rc, ompi-diwarp-hybrid).
    #[arg(long, value_name = "T,...", value_delimiter = ',', action = clap::ArgAction::Set, default_value = DEFAULT_TRANSPORTS)]
    pub transports: Vec<String>,
    /// footprint's --rounds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Output directory (default <target>/mem-bench/<date-time>, target = $CARGO_TARGET_DIR or
    /// the checkout's target/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also results.png (matplotlib of the checkout's .venv, scripts/mem-bench-plot.py).
    #[arg(long)]
    pub plot: bool,
    /// Every launch is killed after S seconds.
    #[arg(long, value_name = "S", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// libdiwarp-fi.so's directory (default: installed beside this command, or the build
    /// tree's, as `diwarp run` finds it).
    #[arg(long, value_name = "D", env = "DIWARP_PROVIDER_DIR")]
    pub provider_dir: Option<PathBuf>,
    /// diwarp's ranks also report every N ms (FI_DIWARP_MEM_REPORT_MS; the tables use the
    /// finalize lines only).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub report_ms: Option<u64>,
    /// Run nothing: remake the tables (and --plot) of the earlier run in --out from what it
    /// recorded, under the command that made it.
    #[arg(long)]
    pub tables_only: bool,
}

const AFTER_HELP: &str = "\
Memory per rank of diwarp and its peers, side by side in one run, read from /proc/self by every \
rank of channel/mpi-bench/footprint.c (built with each MPI's mpicc into \
<target>/mem-bench/bin/footprint-<mpi>) after MPI_Init, and after traffic with every peer \
(eager and rendezvous sizes, a window with unexpected messages, an alltoall), with the kernel \
memory its sockets hold (SO_MEMINFO) at both samples. Every launch is `diwarp run`. Medians \
over every rank of every run, diwarp's ratio to each peer under the same MPI (same library, so \
the difference is the transport's). diwarp's own ledger (each rank's \"finalize\" line of \
FI_DIWARP_MEM_REPORT) is reported beside it: every account's peak, the total, the share of the \
provider's heap growth it explains, the bytes per peer. scripts/mem-report reads one run's \
report (logs/T.npN.R.mem.jsonl) and projects it to more ranks; --peers OUT fits the peers' \
raw.csv beside it.

Output in --out: raw.csv (every rank of every run), ledger.csv (every diwarp rank's report at \
finalize), results.md, results.csv, runs.csv, reports.csv, transports.tsv (what each name \
ran), command.txt, logs/ (launch logs, diwarp's reports *.mem.jsonl).

Sockets per rank: footprint counts every socket of the rank after the traffic (the MPI's and \
the launcher's too); for diwarp the table adds, from its report, the endpoint's own sockets and \
the RC connections open at once at most (rc and hybrid: one TCP socket each, besides the \
rank's listener).

A launch that fails or times out is reported in the tables and the benchmark goes on. Exit \
status 0 once the tables are written, 2 on usage errors.";

/// A rank count: a positive number without leading zeros, as the shell harness took it.
fn parse_ranks(s: &str) -> Result<u32, String> {
    let ok =
        s.starts_with(|c: char| ('1'..='9').contains(&c)) && s.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| s.parse().ok())
        .flatten()
        .ok_or_else(|| format!("--ranks wants N,N,... (positive numbers), got '{s}'"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Command, FromArgMatches};

    fn parse(args: &[&str]) -> Result<MemBenchArgs, clap::Error> {
        let cmd = MemBenchArgs::augment_args(Command::new("mem-bench"));
        let m =
            cmd.try_get_matches_from(std::iter::once("mem-bench").chain(args.iter().copied()))?;
        MemBenchArgs::from_arg_matches(&m)
    }

    #[test]
    fn defaults_are_the_shell_harness_ones() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.runs, a.rounds, a.timeout), (3, 5, 120));
        assert_eq!(a.ranks, [2, 4, 8]);
        assert_eq!(a.transports.join(","), DEFAULT_TRANSPORTS);
        assert!(!a.plot && !a.tables_only && a.report_ms.is_none() && a.out.is_none());
    }

    #[test]
    fn ranks_and_a_later_option_winning() {
        let a = parse(&[
            "--ranks",
            "16",
            "--ranks",
            "2,32",
            "--transports",
            "mpich-tcp",
            "--report-ms",
            "50",
        ])
        .unwrap();
        assert_eq!(a.ranks, [2, 32]);
        assert_eq!(a.transports, ["mpich-tcp"]);
        assert_eq!(a.report_ms, Some(50));
        for bad in ["0", "2,", "02", "2,x", "-1", ""] {
            assert!(parse(&["--ranks", bad]).is_err(), "{bad}");
        }
        for bad in [
            ["--runs", "0"],
            ["--rounds", "0"],
            ["--timeout", "0"],
            ["--report-ms", "0"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}

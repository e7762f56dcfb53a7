//! `diwarp`: runs MPI programs over the diwarp libfabric provider (or over a peer transport, to
//! compare), says which provider it would load and how its parameters are set, and prints the
//! provider's man page.

mod bench;
mod doctor;
mod fi_bench;
mod harness;
mod hostfile;
mod info;
mod install;
mod job_key;
mod launch;
mod man;
mod mem_bench;
mod mpiexec;
mod osu_sweep;
mod procs;
mod provider;
mod run;
mod shell;
mod transports;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "diwarp",
    version,
    about = "MPI over diwarp, datagram-iWARP for commodity Ethernet (libfabric provider libdiwarp-fi.so)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run an MPI program over diwarp (or a peer transport) under a timeout that kills every rank.
    Run(run::RunArgs),
    /// The provider this command would load and every FI_DIWARP_* parameter: default, value, source.
    Info(info::InfoArgs),
    /// Print the provider's man page, fi_diwarp(7), in roff.
    Man,
    /// Check one host, or several (--hosts), before a job: the interface and MTU diwarp
    /// would use, UDP and TCP between the hosts, kernel buffer limits, huge pages; one line
    /// per finding with what to change.
    Doctor(doctor::DoctorArgs),
    /// Install this command, the provider and the man page under a prefix.
    Install(install::InstallArgs),
    /// MPI point-to-point latency and bandwidth (pt2pt.c) over diwarp and its peers side by
    /// side: interleaved runs, medians, diwarp's ratio to each peer.
    Bench(bench::BenchArgs),
    /// Memory per rank (footprint.c) of diwarp and its peers side by side on every rank count:
    /// interleaved runs, medians, diwarp's ratio to each peer, diwarp's ledger at finalize.
    MemBench(mem_bench::MemBenchArgs),
    /// Provider-level ping-pong (fi-pingpong.c, no MPI) over diwarp, tcp;ofi_rxm and
    /// udp;ofi_rxd side by side: interleaved runs, medians, diwarp's ratios.
    FiBench(fi_bench::FiBenchArgs),
    /// Every benchmark of an OSU build over diwarp with validation, each failure re-run over a
    /// peer transport: pass, FAIL (diwarp only) or "fails on the peer too", per transport.
    OsuSweep(osu_sweep::OsuSweepArgs),
    /// The transports the benchmarks compare, by name: MPI, transport, diwarp's mode and
    /// settings, tab-separated.
    Transports(transports::TransportsArgs),
}

/// Variables `diwarp run` reads as options: set but empty, they mean unset, as they did to the
/// script it replaces (clap would take the empty value).
const ENV_OPTIONS: [&str; 4] = [
    "DIWARP_PROVIDER_DIR",
    "MPIRUN_DIWARP_MPI",
    "MPIRUN_DIWARP_TRANSPORT",
    "MPIRUN_DIWARP_NETNS",
];

fn main() -> ExitCode {
    for v in ENV_OPTIONS {
        if std::env::var_os(v).is_some_and(|x| x.is_empty()) {
            std::env::remove_var(v);
        }
    }
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(args) => run::main(args),
        Cmd::Info(args) => info::main(&args),
        Cmd::Doctor(args) => doctor::main(args),
        Cmd::Install(args) => install::main(&args),
        Cmd::Bench(args) => bench::main(args),
        Cmd::MemBench(args) => mem_bench::main(args),
        Cmd::FiBench(args) => fi_bench::main(args),
        Cmd::OsuSweep(args) => osu_sweep::main(args),
        Cmd::Transports(args) => transports::main(&args),
        Cmd::Man => {
            print(&man::page());
            ExitCode::SUCCESS
        }
    }
}

/// Writes `text` to stdout; a reader that went away (`| head`) ends the output quietly.
fn print(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("diwarp: writing to stdout: {e}");
        }
    }
}

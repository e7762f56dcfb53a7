//! `diwarp osu-sweep`: every benchmark of a user-provided OSU micro-benchmarks build over
//! diwarp (in one or more of its modes, side by side), with OSU's own data validation wherever
//! the benchmark offers it, each failure re-run over a peer transport (MPICH: mpich-tcp, Open
//! MPI: ompi-btl-tcp) to tell diwarp's failures from those of the MPI library or of OSU. Every
//! launch is `diwarp run`.

mod args;
mod benches;
mod logs;
mod report;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

pub use args::OsuSweepArgs;
use report::{Row, Setup, Verdict};

use crate::harness::{launch, progress};
use crate::launch::Mpi;
use crate::transports::{self, Entry};

const WHO: &str = "diwarp osu-sweep";

/// The exit status of a run whose launch succeeded but whose validation failed.
const VALIDATION_FAILED: i32 = 97;

fn usage(msg: &str) -> ExitCode {
    eprintln!("{WHO}: {msg}");
    ExitCode::from(2)
}

/// The MPI of the sweep, its peer, and its diwarp transports, from --mpi and --transports; else
/// the message to give.
fn choose(
    mpi: Option<&str>,
    given: &[String],
) -> Result<(&'static str, &'static Entry, Vec<&'static Entry>), String> {
    let mut mpi = mpi.map(str::to_owned);
    let list = transports::lookup(given)?;
    if !list.is_empty() {
        for n in transports::owned_notes(WHO, &list, |v| std::env::var(v).ok()) {
            eprintln!("{n}");
        }
    }
    for t in &list {
        if !t.is_diwarp() {
            return Err(format!(
                "'{}' is not diwarp; this sweep runs diwarp's transports (peers only re-run \
                 failures)",
                t.name
            ));
        }
        let m = t.mpi.name();
        let want = mpi.get_or_insert_with(|| m.to_owned());
        if m != want {
            return Err(format!(
                "{} is {m}'s, not {want}'s: one MPI per sweep",
                t.name
            ));
        }
    }
    let (mpi, peer, default) = match mpi.as_deref().unwrap_or("mpich") {
        "mpich" => (Mpi::Mpich, "mpich-tcp", "mpich-diwarp"),
        "openmpi" => (Mpi::Openmpi, "ompi-btl-tcp", "ompi-diwarp"),
        _ => return Err("--mpi is mpich or openmpi".into()),
    };
    let peer = transports::find(peer).expect("the peers are in the table");
    if !list.is_empty() {
        return Ok((mpi.name(), peer, list));
    }
    let list = transports::lookup(&[default.to_owned()])?;
    for n in transports::owned_notes(WHO, &list, |v| std::env::var(v).ok()) {
        eprintln!("{n}");
    }
    Ok((mpi.name(), peer, list))
}

pub fn main(a: OsuSweepArgs) -> ExitCode {
    let Some(osu) = a.osu.as_ref().filter(|d| d.is_dir()) else {
        return usage("--osu DIR is required (OSU's c/mpi; see --help)");
    };
    let (mpi, peer, list) = match choose(a.mpi.as_deref(), &a.transports) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let mut found = benches::find(osu);
    if let Some(only) = &a.only {
        found = match benches::matching(&found, only) {
            Ok(f) => f,
            Err(e) => return usage(&format!("cannot run grep: {e}")),
        };
    }
    if found.is_empty() {
        return usage(&format!("no osu_* executables under {}", osu.display()));
    }
    let logs = match temp_dir() {
        Ok(d) => d,
        Err(e) => return usage(&format!("cannot make a directory for the logs: {e}")),
    };
    let setup = Setup {
        mpi,
        peer: peer.name,
        transports: list.iter().map(|t| (t.name, t.mode_words())).collect(),
        max: a.max_size,
        iters: a.iters,
        np: a.np,
        coll_np: a.coll_n,
    };
    let rows = sweep(&a, osu, &found, &list, peer, &logs);
    let table = report::table(&setup, &rows);
    crate::print(&table);
    if let Some(out) = &a.out {
        if let Err(e) = fs::write(out, &table) {
            eprintln!("{WHO}: {}: {e}", out.display());
        }
    }
    crate::print(&report::failures(&setup, &rows, |b, t| {
        let log = log_name(&logs, b, t);
        let text = launch::read_log(&log);
        let lines = logs::excerpt(&text)
            .into_iter()
            .map(str::to_owned)
            .collect();
        (log.display().to_string(), lines)
    }));
    let any_bad = rows.iter().any(|r| {
        r.cells
            .iter()
            .any(|(v, _)| matches!(v, Verdict::DiwarpOnly(_)))
    });
    if any_bad {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A fresh directory for the logs, as `mktemp -d /tmp/osu-sweep.XXXXXX` makes it.
fn temp_dir() -> Result<PathBuf, String> {
    let out = std::process::Command::new("mktemp")
        .args(["-d", "/tmp/osu-sweep.XXXXXX"])
        .output()
        .map_err(|e| e.to_string())?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || dir.is_empty() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(PathBuf::from(dir))
}

/// The log of benchmark `bench` over transport `t`.
fn log_name(logs: &Path, bench: &str, t: &str) -> PathBuf {
    logs.join(format!("{}.{t}.log", bench.replace('/', "_")))
}

/// Runs `program` over transport `t` on `np` ranks, with `extra` settings, its output in `log`:
/// its exit status, [`VALIDATION_FAILED`] if it succeeded but OSU's validation failed.
fn run(
    t: &Entry,
    np: u32,
    timeout: u64,
    extra: &[(&str, &str)],
    program: &[String],
    log: &Path,
) -> i32 {
    let mut c = launch::run_cmd(t, np, timeout, None);
    c.set.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let rc = launch::run(&c, program, log).unwrap_or_else(|e| {
        eprintln!("{WHO}: {e}");
        127
    });
    let text = launch::read_log(log);
    if rc == 0 && logs::validation_failed(&text) {
        VALIDATION_FAILED
    } else {
        rc
    }
}

/// Every benchmark over every transport of `list`, each failure re-run once over `peer`.
fn sweep(
    a: &OsuSweepArgs,
    osu: &Path,
    found: &[String],
    list: &[&'static Entry],
    peer: &'static Entry,
    logs: &Path,
) -> Vec<Row> {
    let ntotal = found.len() * list.len();
    let t_all = Instant::now();
    let mut k = 0;
    let mut rows = Vec::new();
    for b in found {
        let exe = osu.join(b);
        let n = benches::ranks(b, a.np, a.coll_n);
        let args = benches::args_for(b, &benches::help_of(&exe), a.max_size, a.iters);
        let validated = args.iter().any(|x| x == "-c");
        let program: Vec<String> = std::iter::once(exe.display().to_string())
            .chain(args)
            .collect();
        let mut cells = Vec::new();
        for t in list {
            let start = Instant::now();
            let rc = run(t, n, a.timeout, &[], &program, &log_name(logs, b, t.name));
            cells.push((rc, start.elapsed().as_secs()));
        }
        let mut peer_run = None;
        if cells.iter().any(|&(rc, _)| rc != 0) {
            // diwarp offers no FI_RMA, so MPICH runs one-sided over active messages: so must
            // the peer.
            let rma_off = peer.mpi == Mpi::Mpich && b.starts_with("one-sided/");
            let (extra, how): (&[(&str, &str)], &str) = if rma_off {
                (
                    &[("MPIR_CVAR_CH4_OFI_ENABLE_RMA", "0")],
                    " (RMA off, as over diwarp)",
                )
            } else {
                (&[], "")
            };
            let log = log_name(logs, b, peer.name);
            peer_run = Some((run(peer, n, a.timeout, extra, &program, &log) == 0, how));
        }
        let row = Row {
            bench: b.clone(),
            ranks: n,
            validated,
            cells: cells
                .into_iter()
                .map(|(rc, secs)| {
                    let v = match peer_run {
                        _ if rc == 0 => Verdict::Pass,
                        Some((true, _)) | None => Verdict::DiwarpOnly(rc),
                        Some((false, how)) => Verdict::PeerToo {
                            peer: peer.name,
                            how,
                            rc,
                        },
                    };
                    (v, secs)
                })
                .collect(),
        };
        for (t, (v, secs)) in list.iter().zip(&row.cells) {
            k += 1;
            eprintln!(
                "{} {b:<50} np={n} {:<21} {v} ({secs}s)",
                progress(k, ntotal, t_all.elapsed().as_secs()),
                t.name
            );
        }
        rows.push(row);
    }
    rows
}

//! `diwarp mem-bench`: memory per rank of diwarp and its peers (channel/mpi-bench/footprint.c
//! on every rank count), each (transport, ranks) repeated --runs times, interleaved (run 1 of
//! everything, then run 2, ...); medians with diwarp's ratio to each peer under the same MPI,
//! and diwarp's own ledger at finalize (FI_DIWARP_MEM_REPORT) beside them. Every launch is
//! `diwarp run`.

mod args;
mod footprint;
mod numbers;
mod report;
mod tables;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub use args::MemBenchArgs;

use crate::harness::build::{self, Program};
use crate::harness::launch::{self, why};
use crate::harness::{self, csv, paths, progress};
use crate::provider;
use crate::transports::{self, Entry};

const WHO: &str = "diwarp mem-bench";

fn usage(msg: &str) -> ExitCode {
    eprintln!("{WHO}: {msg}");
    ExitCode::from(2)
}

fn open_append(p: &Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).open(p)
}

pub fn main(a: MemBenchArgs) -> ExitCode {
    if a.tables_only {
        return tables_only(&a);
    }
    let list = match transports::lookup(&a.transports) {
        Ok(l) if l.is_empty() => return usage("no transport given"),
        Ok(l) => l,
        Err(e) => return usage(&e),
    };
    for n in transports::owned_notes(WHO, &list, |v| std::env::var(v).ok()) {
        eprintln!("{n}");
    }
    let provider_dir = if list.iter().any(|t| t.is_diwarp()) {
        match provider::locate(a.provider_dir.as_deref()) {
            Ok(f) => Some(f.dir),
            Err(e) => return usage(&e),
        }
    } else {
        None
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| paths::default_out("mem-bench"));
    if let Err(e) = fs::create_dir_all(out.join("logs")) {
        return usage(&format!("cannot make {}: {e}", out.display()));
    }
    let out = out.canonicalize().unwrap_or(out);
    let done = run_all(&a, &list, provider_dir.as_deref(), &out).and_then(|ok| {
        let cmdline = fs::read_to_string(out.join("command.txt"))?;
        finish(&out, cmdline.trim_end(), &a.transports, a.plot)?;
        Ok(ok)
    });
    match done {
        // As diwarp bench: a run in which no launch gave results is a failure.
        Ok(0) => {
            eprintln!("{WHO}: no launch produced results");
            ExitCode::FAILURE
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{WHO}: {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

/// The tables (printed too) and the plot of the run in `out`.
fn finish(out: &Path, cmdline: &str, transports: &[String], plot: bool) -> std::io::Result<()> {
    let text = tables::write(out, cmdline, transports)?;
    crate::print(&text);
    if plot {
        harness::plot::draw(WHO, "mem-bench-plot.py", out);
    }
    Ok(())
}

/// --tables-only: the tables of the run in --out, from its own record of what it ran.
fn tables_only(a: &MemBenchArgs) -> ExitCode {
    let Some(out) = a
        .out
        .as_ref()
        .filter(|o| o.join("raw.csv").is_file() && o.join("command.txt").is_file())
    else {
        return usage(
            "--tables-only needs --out DIR of an earlier run (with raw.csv and command.txt)",
        );
    };
    let out = out.canonicalize().unwrap_or_else(|_| out.clone());
    let read = |name: &str| fs::read_to_string(out.join(name));
    let done = read("command.txt").and_then(|cmdline| {
        let names: Vec<String> = read("transports.tsv")?
            .lines()
            .filter_map(|l| l.split('\t').next())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        finish(&out, cmdline.trim_end(), &names, a.plot)
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{WHO}: {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn run_all(
    a: &MemBenchArgs,
    list: &[&'static Entry],
    provider_dir: Option<&Path>,
    out: &Path,
) -> std::io::Result<usize> {
    let bindir = paths::target().join("mem-bench/bin");
    let exe = |mpi: crate::launch::Mpi| bindir.join(format!("footprint-{}", mpi.name()));
    // What each name runs: the tables read it (which are diwarp, under which MPI, in which mode).
    let tsv: String = list.iter().map(|t| t.line() + "\n").collect();
    fs::write(out.join("transports.tsv"), tsv)?;
    fs::write(
        out.join("command.txt"),
        harness::cmdline("mem-bench") + "\n",
    )?;
    let footprint = Program {
        name: "footprint",
        flags: &["-O2", "-Wall", "-Wextra"],
        libs: &[],
    };
    let cant: HashMap<&str, String> = build::for_transports(WHO, &footprint, list, out, exe);

    fs::write(out.join("raw.csv"), format!("{}\n", footprint::RAW_HEADER))?;
    fs::write(out.join("runs.csv"), "transport,ranks,run,status\n")?;
    fs::write(out.join("reports.csv"), "transport,ranks,run,file\n")?;
    let mut raw = open_append(&out.join("raw.csv"))?;
    let mut runs_csv = open_append(&out.join("runs.csv"))?;
    let mut reports = open_append(&out.join("reports.csv"))?;
    let ranks: Vec<String> = a.ranks.iter().map(u32::to_string).collect();
    println!(
        "{WHO}: {} transports x ranks {} x {} runs; output in {}",
        list.len(),
        ranks.join(","),
        a.runs,
        out.display()
    );
    let ntotal = a.runs as usize * a.ranks.len() * list.len();
    let t_all = Instant::now();
    let mut k = 0;
    let mut ok = 0;
    for r in 1..=a.runs {
        for &n in &a.ranks {
            for t in list {
                let log = out.join(format!("logs/{}.np{n}.{r}.log", t.name));
                let rep_name = format!("{}.np{n}.{r}.mem.jsonl", t.name);
                let rep = out.join("logs").join(&rep_name);
                let mut note = String::new();
                let status = if let Some(why) = cant.get(t.name) {
                    format!("failed: {why}")
                } else {
                    let _ = fs::remove_file(&rep);
                    let mut c = launch::run_cmd(t, n, a.timeout, provider_dir);
                    if t.is_diwarp() {
                        // Only diwarp reads it; every rank appends its lines to the one file.
                        c.set
                            .push(("FI_DIWARP_MEM_REPORT".into(), rep.display().to_string()));
                        if let Some(ms) = a.report_ms {
                            c.set
                                .push(("FI_DIWARP_MEM_REPORT_MS".into(), ms.to_string()));
                        }
                    }
                    let program = [
                        exe(t.mpi).display().to_string(),
                        "--rounds".into(),
                        a.rounds.to_string(),
                    ];
                    let rc = launch::run(&c, &program, &log).unwrap_or_else(|e| {
                        eprintln!("{WHO}: {e}");
                        127
                    });
                    let text = launch::read_log(&log);
                    if rc == 0 && footprint::done(&text) {
                        for s in footprint::samples(&text) {
                            writeln!(raw, "{},{n},{r},{s}", t.name)?;
                        }
                        if t.is_diwarp() {
                            writeln!(reports, "{},{n},{r},logs/{rep_name}", t.name)?;
                            let fin = fs::read(&rep).ok().map_or("no".to_owned(), |b| {
                                footprint::finalize_lines(&String::from_utf8_lossy(&b)).to_string()
                            });
                            note = format!("  (report: {fin} finalize lines)");
                        }
                        ok += 1;
                        "ok".to_owned()
                    } else if rc == 124 {
                        format!("timeout after {}s", a.timeout)
                    } else {
                        format!("failed (exit {rc}): {}", why(&text))
                    }
                };
                writeln!(runs_csv, "{},{n},{r},{}", t.name, csv::quote(&status))?;
                k += 1;
                let short: String = status.chars().take(140).collect();
                println!(
                    "{} run {r}/{}  np={n:<2} {:<21} {short}{note}",
                    progress(k, ntotal, t_all.elapsed().as_secs()),
                    a.runs,
                    t.name
                );
            }
        }
    }
    Ok(ok)
}

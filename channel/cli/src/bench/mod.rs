//! `diwarp bench`: MPI point-to-point (channel/mpi-bench/pt2pt.c: latency, bw, bibw per
//! message size on 2 ranks) over diwarp and its peers side by side, each (transport, mode)
//! repeated --runs times, interleaved (run 1 of everything, then run 2, ...) so that a drift
//! of the machine spreads over every transport; medians reported with diwarp's ratio to every
//! peer. Every launch is `diwarp run` (shared memory off, ranks bound to cores 0 and 1).

mod args;
mod launch;
mod plan;
mod tables;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

pub use args::BenchArgs;
use launch::Status;

use crate::harness::build::{self, Program};
use crate::harness::{self, csv, paths, progress};
use crate::provider;
use crate::transports::{self, Entry};

fn say(msg: &str) {
    eprintln!("diwarp bench: {msg}");
}

fn usage(msg: &str) -> ExitCode {
    say(msg);
    ExitCode::from(2)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn proc_text(p: &str) -> String {
    fs::read_to_string(p).unwrap_or_default().trim().to_owned()
}

/// Ranks of an earlier run still alive skew everything (baselines.md, "What did not work", 7).
fn stray_pt2pt() -> Vec<String> {
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| proc_text(&format!("/proc/{pid}/comm")) == "pt2pt")
        .collect();
    pids.sort_unstable();
    pids.iter().map(u32::to_string).collect()
}

/// Why each transport cannot run at all: pt2pt does not build with its MPI, or it is diwarp
/// and there is no provider. Also returns the provider's directory when there is one.
fn setup(
    list: &[&'static Entry],
    a: &BenchArgs,
    out: &Path,
    bindir: &Path,
) -> (HashMap<&'static str, String>, Option<PathBuf>) {
    let pt2pt = Program {
        name: "pt2pt",
        flags: &["-O2", "-g", "-Wall", "-Wextra"],
        libs: &[],
    };
    let mut fail = build::for_transports("diwarp bench", &pt2pt, list, out, |mpi| {
        bindir.join(mpi.name()).join("pt2pt")
    });
    let mut dir = None;
    if list.iter().any(|t| t.is_diwarp()) {
        match provider::locate(a.provider_dir.as_deref()) {
            Ok(f) => dir = Some(f.dir),
            Err(e) => {
                say(&e);
                for t in list.iter().filter(|t| t.is_diwarp()) {
                    fail.entry(t.name)
                        .or_insert_with(|| format!("no provider: {e}"));
                }
            }
        }
    }
    (fail, dir)
}

fn open_append(p: &Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).open(p)
}

pub fn main(a: BenchArgs) -> ExitCode {
    let list = match transports::lookup(&a.transports) {
        Ok(l) if l.is_empty() => return usage("no transport given"),
        Ok(l) => l,
        Err(e) => return usage(&e),
    };
    for n in transports::owned_notes("diwarp bench", &list, |v| std::env::var(v).ok()) {
        eprintln!("{n}");
    }
    let netns = std::env::var("MPIRUN_DIWARP_NETNS")
        .ok()
        .filter(|s| !s.is_empty());
    let settings = plan::Settings {
        size_min: a.sizes.min,
        size_max: a.sizes.max,
        rxd_max: a.rxd_max.0,
        iters: a.iters.clone(),
        warmup: a.warmup.clone(),
        verify: a.verify,
        watchdog: a.watchdog,
        timeout: a.timeout,
        bind: !a.no_bind && netns.is_none(),
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| paths::default_out("mpi-bench"));
    if let Err(e) = fs::create_dir_all(out.join("logs")) {
        return usage(&format!("cannot make {}: {e}", out.display()));
    }
    let out = out.canonicalize().unwrap_or(out);
    match run_all(&a, &list, &settings, &out, netns.as_deref()) {
        Ok(code) => code,
        Err(e) => {
            say(&format!("{}: {e}", out.display()));
            ExitCode::FAILURE
        }
    }
}

fn run_all(
    a: &BenchArgs,
    list: &[&'static Entry],
    s: &plan::Settings,
    out: &Path,
    netns: Option<&str>,
) -> std::io::Result<ExitCode> {
    let bindir = paths::target().join("mpi-bench/bin");
    // What each name runs: the tables and the plot read it (which are diwarp, in which mode).
    let tsv: String = list.iter().map(|t| t.line() + "\n").collect();
    fs::write(out.join("transports.tsv"), tsv)?;
    let stray = stray_pt2pt();
    if !stray.is_empty() {
        say(&format!(
            "warning: pt2pt processes already running (pids {}); numbers will suffer",
            stray.join(" ")
        ));
    }
    let (setup_fail, provider_dir) = setup(list, a, out, &bindir);
    let pt2pt = |t: &Entry| {
        bindir
            .join(t.mpi.name())
            .join("pt2pt")
            .display()
            .to_string()
    };

    // The exact launch lines, for results.md.
    let mut launch_txt = String::new();
    for t in list.iter().filter(|t| !setup_fail.contains_key(t.name)) {
        let c = plan::run_cmd(t, s, provider_dir.as_deref());
        let b = plan::pt2pt_args(t, a.modes[0], s).map_or(Vec::new(), |x| x.0);
        let o = c
            .command()?
            .args(["--dry-run", "--", &pt2pt(t)])
            .args(&b)
            .output()?;
        launch_txt.push_str(&format!("[{}]\n", t.name));
        launch_txt.push_str(&String::from_utf8_lossy(&o.stdout));
        launch_txt.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    fs::write(out.join("launch.txt"), launch_txt)?;

    fs::write(out.join("raw.csv"), "transport,mode,run,size,value\n")?;
    fs::write(
        out.join("runs.csv"),
        "transport,mode,run,status,seconds,max_size,reason\n",
    )?;
    let mut raw = open_append(&out.join("raw.csv"))?;
    let mut runs_csv = open_append(&out.join("runs.csv"))?;
    let mut skip: HashMap<(&str, args::PtMode), String> = HashMap::new();
    let mut ok_launches = 0;
    let ntotal = a.runs as usize * list.len() * a.modes.len();
    let load: Vec<String> = proc_text("/proc/loadavg")
        .split(' ')
        .take(3)
        .map(str::to_owned)
        .collect();
    println!(
        "diwarp bench: {} transports x {} modes x {} runs, sizes {}, {} cores, load {}; output in {}",
        list.len(),
        a.modes.len(),
        a.runs,
        a.sizes.given,
        cores(),
        load.join(" "),
        out.display()
    );
    let t_all = Instant::now();
    let mut k = 0;
    for r in 1..=a.runs {
        for t in list {
            for &m in &a.modes {
                k += 1;
                let log = out.join(format!("logs/{}.{}.{r}.log", t.name, m.name()));
                let b = plan::pt2pt_args(t, m, s);
                let max = b.as_ref().map(|x| x.1.to_string()).unwrap_or_default();
                let (mut status, mut reason, mut secs, mut nsizes) =
                    (Status::Failed, String::new(), "0".to_owned(), 0);
                if let Some(why) = setup_fail.get(t.name) {
                    reason = why.clone();
                } else if b.is_none() {
                    status = Status::NotRun;
                    reason = format!("no size at or below --rxd-max {}", a.rxd_max.1);
                } else if let Some(why) = skip.get(&(t.name, m)) {
                    status = Status::Skipped;
                    reason = why.clone();
                } else if let Some((b, _)) = &b {
                    let c = plan::run_cmd(t, s, provider_dir.as_deref());
                    let mut program = vec![pt2pt(t)];
                    program.extend(b.iter().cloned());
                    let t0 = Instant::now();
                    let rc = harness::launch::run(&c, &program, &log).unwrap_or_else(|e| {
                        say(&e);
                        127
                    });
                    let ms = t0.elapsed().as_millis();
                    secs = format!("{}.{}", ms / 1000, ms % 1000 / 100);
                    let text = harness::launch::read_log(&log);
                    let vals = launch::values(&text, m.name());
                    nsizes = vals.len();
                    for (size, v) in vals {
                        writeln!(raw, "{},{},{r},{size},{v}", t.name, m.name())?;
                    }
                    let e = launch::ending(rc, &text, m.name(), a.timeout, r);
                    status = e.status;
                    reason = e.reason;
                    if let Some(why) = e.skip {
                        skip.insert((t.name, m), why);
                    }
                    if status == Status::Ok {
                        ok_launches += 1;
                    }
                }
                writeln!(
                    runs_csv,
                    "{},{},{r},{},{secs},{max},{}",
                    t.name,
                    m.name(),
                    status.name(),
                    csv::quote(&reason)
                )?;
                let mut line = format!(
                    "{} run {r}/{} {:<21} {:<8} {:<8} {secs:>6} s",
                    progress(k, ntotal, t_all.elapsed().as_secs()),
                    a.runs,
                    t.name,
                    m.name(),
                    status.name()
                );
                if status == Status::Ok {
                    line.push_str(&format!("  ({nsizes} sizes)"));
                } else {
                    let short: String = reason.chars().take(150).collect();
                    line.push_str(&format!("  {short}"));
                }
                println!("{line}");
            }
        }
    }
    println!("diwarp bench: runs took {} s", t_all.elapsed().as_secs());

    let place = match netns {
        Some(ns) => {
            format!("2 ranks on network namespaces {ns} as two hosts (MPIRUN_DIWARP_NETNS)")
        }
        None => "2 ranks on one host, loopback".to_owned(),
    };
    let host = format!(
        "Host: {}, {} cores, kernel {}.",
        proc_text("/proc/sys/kernel/hostname"),
        cores(),
        proc_text("/proc/sys/kernel/osrelease")
    );
    let cmdline = harness::cmdline("bench");
    let cx = tables::Context {
        cmdline: &cmdline,
        nruns: a.runs,
        transports: &list.iter().map(|t| t.name.to_owned()).collect::<Vec<_>>(),
        modes: &a.modes,
        size_min: a.sizes.min,
        size_max: a.sizes.max,
        place: &place,
        host: &host,
    };
    let text = tables::write(out, &cx)?;
    crate::print(&format!("{text}\n"));
    if a.plot {
        harness::plot::draw("diwarp bench", "mpi-bench-plot.py", out);
    }
    println!(
        "diwarp bench: wrote {} and {}",
        out.join("results.md").display(),
        out.join("results.csv").display()
    );
    if ok_launches == 0 {
        say("no launch produced results");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

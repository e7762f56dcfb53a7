//! The processes of a run, found in /proc, and ending them: the launcher's session, its
//! descendants, and every process whose environment carries the run's id (a rank re-parented
//! to init after its launcher died, or one that started a session of its own).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// pid → (parent, session), for every process that could be read.
fn table() -> HashMap<i32, (i32, i32)> {
    let mut out = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(ppid), Some(sid)) = (f.get(1), f.get(3)) {
            if let (Ok(ppid), Ok(sid)) = (ppid.parse(), sid.parse()) {
                out.insert(pid, (ppid, sid));
            }
        }
    }
    out
}

fn carries(pid: i32, needle: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|v| v == needle))
        .unwrap_or(false)
}

fn alive(pid: i32) -> bool {
    // A zombie has been ended; its parent has yet to reap it.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Every process of the run led by `launcher` and tagged `var=id`, this one excepted.
pub fn of_run(launcher: i32, var: &str, id: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let t = table();
    let needle = format!("{var}={id}").into_bytes();
    let mut found: HashSet<i32> = t
        .iter()
        .filter(|(&pid, &(_, sid))| sid == launcher || carries(pid, &needle))
        .map(|(&pid, _)| pid)
        .collect();
    // Descendants of the launcher: a child that called setsid keeps its parent link.
    let mut family: HashSet<i32> = HashSet::from([launcher]);
    loop {
        let before = family.len();
        for (&pid, &(ppid, _)) in &t {
            if family.contains(&ppid) {
                family.insert(pid);
            }
        }
        if family.len() == before {
            break;
        }
    }
    found.extend(family.into_iter().filter(|p| t.contains_key(p)));
    found.remove(&me);
    let mut v: Vec<i32> = found.into_iter().collect();
    v.sort_unstable();
    v
}

/// Ends every process of the run: TERM, then KILL for those alive 3 s later. `why` goes into
/// the message naming them.
pub fn end_run(why: &str, launcher: i32, var: &str, id: &str) {
    let pids = of_run(launcher, var, id);
    if pids.is_empty() {
        return;
    }
    let named: Vec<String> = pids.iter().map(|p| format!("{p}({})", comm(*p))).collect();
    eprintln!(
        "diwarp run: {why}: killing {} process(es) of this run: {}",
        pids.len(),
        named.join(" ")
    );
    for &p in &pids {
        let _ = kill(Pid::from_raw(p), Signal::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(3);
    let mut left = pids;
    while Instant::now() < until {
        sleep(Duration::from_millis(100));
        left.retain(|&p| alive(p));
        if left.is_empty() {
            return;
        }
    }
    eprintln!("diwarp run: still alive after SIGTERM, sending SIGKILL: {left:?}");
    for p in left {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
}

//! One launch of pt2pt through `diwarp run` (this same command, so the run's timeout and
//! cleanup are run's own), and what its log says: the values, and how it ended.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use super::plan::RunCmd;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Failed,
    /// No size at or below --rxd-max.
    NotRun,
    /// Hung or timed out in an earlier run.
    Skipped,
    Timeout,
    Hang,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::NotRun => "not-run",
            Status::Skipped => "skipped",
            Status::Timeout => "timeout",
            Status::Hang => "hang",
        }
    }
}

/// How a launch ended: its status, why (empty when ok), and why later runs of the same
/// (transport, mode) are skipped, if they are.
#[derive(Debug, PartialEq, Eq)]
pub struct Ending {
    pub status: Status,
    pub reason: String,
    pub skip: Option<String>,
}

/// Runs `cmd` (`diwarp run ...`) with `program` after "--", everything it prints in `log`;
/// its exit status (128 + the signal if killed by one).
pub fn run(cmd: &RunCmd, program: &[String], log: &Path) -> Result<i32, String> {
    use std::os::unix::process::ExitStatusExt;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this command: {e}"))?;
    let out = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut c = Command::new(exe);
    for v in &cmd.unset {
        c.env_remove(v);
    }
    c.envs(cmd.set.iter().copied())
        .args(&cmd.args)
        .arg("--")
        .args(program)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let status = c
        .status()
        .map_err(|e| format!("cannot start this command: {e}"))?;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// pt2pt's result lines of `mode` in `log`: "mode,size,value" → (size, value as printed).
pub fn values<'a>(log: &'a str, mode: &str) -> Vec<(&'a str, &'a str)> {
    log.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let sized =
                f.len() == 3 && !f[1].is_empty() && f[1].bytes().all(|b| b.is_ascii_digit());
            (sized && f[0] == mode).then(|| (f[1], f[2]))
        })
        .collect()
}

/// How the launch that wrote `log` and exited with `rc` ended, in run `run` of `mode`.
pub fn ending(rc: i32, log: &str, mode: &str, timeout: u64, run: u32) -> Ending {
    let done = log.lines().any(|l| l.starts_with("# pt2pt: done"));
    let mut e = if rc == 0 && done {
        return Ending {
            status: Status::Ok,
            reason: String::new(),
            skip: None,
        };
    } else if rc == 124 {
        Ending {
            status: Status::Timeout,
            reason: format!("killed after {timeout}s"),
            skip: Some(format!("timed out in run {run}")),
        }
    } else if let Some(l) = log.lines().find(|l| l.contains("WATCHDOG")) {
        let from = l.rfind("WATCHDOG: ").map(|i| i + "WATCHDOG: ".len());
        Ending {
            status: Status::Hang,
            reason: from.map_or(l, |i| &l[i..]).to_owned(),
            skip: Some(format!("hung in run {run}")),
        }
    } else {
        Ending {
            status: Status::Failed,
            reason: format!("exit {rc}: {}", why(log)),
            skip: None,
        }
    };
    if log.lines().any(|l| l.starts_with(&format!("{mode},"))) {
        e.reason.push_str(" (sizes before it kept)");
    }
    e
}

/// The line of a failed launch's log that says best why: pt2pt's own, then the innermost cause
/// the MPI library gives, then anything that looks like an error, else the last line.
pub fn why(log: &str) -> String {
    let signal = |l: &str| {
        l.match_indices("signal ").any(|(i, m)| {
            l[i + m.len()..]
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_digit())
        })
    };
    let pml_cannot = |l: &str| {
        l.find("PML ")
            .is_some_and(|i| l[i + 4..].contains(" cannot"))
    };
    let any = |l: &str, words: &[&str]| words.iter().any(|w| l.contains(w));
    let tests: [&dyn Fn(&str) -> bool; 6] = [
        &|l| l.contains("FAIL:"),
        &|l| any(l, &["panicked", "Segmentation", "core dumped"]) || signal(l),
        &|l| any(l, &["OFI call", "Function not implemented"]),
        &|l| pml_cannot(l) || l.contains("MPI_ERR_"),
        &|l| l.contains("Fatal error"),
        &|l| any(l, &["Error", "error", "Abort", "diwarp run:"]),
    ];
    for t in tests {
        if let Some(l) = log.lines().find(|l| t(l)) {
            return l.to_owned();
        }
    }
    log.lines().last().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_prefers_the_innermost_cause() {
        let log = "start\nAbort(1) on node 0\nMPI_ERR_OTHER: x\nOFI call fi_send failed\nbye\n";
        assert_eq!(why(log), "OFI call fi_send failed");
        assert_eq!(
            why("a\nrank 1 got signal 11\nFAIL: size 8\n"),
            "FAIL: size 8"
        );
        assert_eq!(
            why("a\nkilled by signal 9\nerror: x\n"),
            "killed by signal 9"
        );
        assert_eq!(why("signal x\nlast\n"), "last");
        assert_eq!(
            why("the PML ob1 cannot be selected\nAbort\n"),
            "the PML ob1 cannot be selected"
        );
        assert_eq!(why("PML cannot\nFatal error in X\n"), "Fatal error in X");
        assert_eq!(
            why("ok\ndiwarp run: TIMEOUT\nmore\n"),
            "diwarp run: TIMEOUT"
        );
        assert_eq!(why("one\ntwo\n"), "two");
        assert_eq!(why(""), "");
    }

    #[test]
    fn endings() {
        let ok = "latency,1,2.5\n# pt2pt: done\n";
        assert_eq!(ending(0, ok, "latency", 300, 1).status, Status::Ok);
        let e = ending(124, "latency,1,2.5\n", "latency", 300, 2);
        assert_eq!(
            e,
            Ending {
                status: Status::Timeout,
                reason: "killed after 300s (sizes before it kept)".into(),
                skip: Some("timed out in run 2".into()),
            }
        );
        let e = ending(1, "x WATCHDOG: rank 1 stuck at 64 B\n", "bw", 300, 1);
        assert_eq!(e.status, Status::Hang);
        assert_eq!(e.reason, "rank 1 stuck at 64 B");
        assert_eq!(e.skip.as_deref(), Some("hung in run 1"));
        let e = ending(0, "bw,1,2\n", "bw", 300, 1);
        assert_eq!(e.status, Status::Failed, "no done line");
        assert_eq!(e.reason, "exit 0: bw,1,2 (sizes before it kept)");
    }

    #[test]
    fn values_of_a_mode() {
        let log = "# pt2pt\nlatency,0,1.5\nlatency,x,2\nbw,8,3\nlatency,4,2.0,9\nlatency,8,2.5\n";
        assert_eq!(values(log, "latency"), [("0", "1.5"), ("8", "2.5")]);
    }
}

//! What the log of one pt2pt launch says: the values, and how it ended.

use crate::harness::launch::why;

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

#[cfg(test)]
mod tests {
    use super::*;

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

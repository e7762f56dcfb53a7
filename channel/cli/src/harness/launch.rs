//! One launch of a benchmark's program through `diwarp run` (this same command, so the run's
//! timeout and cleanup are run's own), and the line of its log that says why it failed.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::transports::{Entry, OWNED};

/// The launch of a transport: the variables to clear and to set, and `diwarp run`'s arguments
/// up to the program (which the caller appends after "--").
pub struct RunCmd {
    pub unset: Vec<&'static str>,
    pub set: Vec<(String, String)>,
    pub args: Vec<String>,
}

/// The launch of transport `t` on `np` ranks: its table entry's MPI, transport and settings (the
/// variables the table chooses cleared first, so that a name always means the same run).
pub fn run_cmd(t: &Entry, np: u32, timeout: u64, provider_dir: Option<&Path>) -> RunCmd {
    let mut c = RunCmd {
        unset: Vec::new(),
        set: Vec::new(),
        args: vec![
            "run".into(),
            "--mpi".into(),
            t.mpi.name().into(),
            "--transport".into(),
            t.wrapper.name().into(),
            "-n".into(),
            np.to_string(),
            "--timeout".into(),
            timeout.to_string(),
        ],
    };
    if t.is_diwarp() {
        c.unset.extend(OWNED);
        c.set.extend(
            t.settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        if let Some(d) = provider_dir {
            c.args.push("--provider-dir".into());
            c.args.push(d.display().to_string());
        }
    }
    c
}

impl RunCmd {
    /// `diwarp run` (this same command) with the environment and the arguments up to the
    /// program, which the caller appends.
    pub fn command(&self) -> std::io::Result<Command> {
        let mut c = Command::new(std::env::current_exe()?);
        for v in &self.unset {
            c.env_remove(v);
        }
        c.envs(self.set.iter().map(|(k, v)| (k, v)))
            .args(&self.args);
        Ok(c)
    }
}

/// Runs `cmd` (`diwarp run ...`) with `program` after "--", everything it prints in `log`;
/// its exit status (128 + the signal if killed by one).
pub fn run(cmd: &RunCmd, program: &[String], log: &Path) -> Result<i32, String> {
    use std::os::unix::process::ExitStatusExt;
    let mut c = cmd
        .command()
        .map_err(|e| format!("cannot find this command: {e}"))?;
    let out = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    c.arg("--")
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

/// A launch's log as text (empty if it cannot be read; bytes that are not UTF-8 replaced).
pub fn read_log(log: &Path) -> String {
    String::from_utf8_lossy(&fs::read(log).unwrap_or_default()).into_owned()
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
}

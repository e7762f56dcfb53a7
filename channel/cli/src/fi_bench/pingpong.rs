//! One run of fi-pingpong: building it, its round-trip count for a size, launching it over a
//! provider on loopback, and reading its result line.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::build::{compile, Program};
use crate::harness::launch::read_log;

/// The providers compared, in the order of the table's columns: diwarp first.
pub const PROVIDERS: [&str; 3] = ["diwarp", "tcp;ofi_rxm", "udp;ofi_rxd"];

/// A launch that overstays this is killed and counts as failed.
const TIMEOUT_SECS: u32 = 120;

const PROGRAM: Program = Program {
    name: "fi-pingpong",
    flags: &["-O2", "-Wall", "-Wextra"],
    libs: &["-lfabric"],
};

/// Builds fi-pingpong with gcc into `exe`, the compiler's output in `log`: Ok with its warnings.
pub fn build(exe: &Path, log: &Path) -> Result<String, String> {
    compile("gcc", &PROGRAM, exe, log)
}

/// Round trips for `size` bytes: about 50 MiB or 20000 of them, whichever is fewer, and at
/// least 200 (so that the small sizes are not over in a blink and the large ones not too long).
pub fn iters(size: u64) -> u64 {
    (50 * 1_048_576 / (size + 1)).clamp(200, 20_000)
}

/// The one-way latency of fi-pingpong's result line, "fi PROV SIZE B: V us one-way", as printed.
pub fn latency(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("fi ")?.strip_suffix(" us one-way")?;
    let (_, v) = rest.rsplit_once(" B: ")?;
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')).then_some(v)
}

/// Runs `exe` over `provider` (libfabric finds diwarp in `provider_dir`) for `size` bytes,
/// everything it prints in `log`; the last line it printed (the result line when it worked).
pub fn run(
    exe: &Path,
    provider_dir: &Path,
    provider: &str,
    size: u64,
    verify: bool,
    log: &Path,
) -> Result<String, String> {
    let out = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    // Both ranks are forks of one process: `timeout` ends the parent, and the child's
    // completion wait gives up on its own after 30 s without its peer.
    Command::new("timeout")
        .arg(TIMEOUT_SECS.to_string())
        .arg(exe)
        .args([
            iters(size).to_string(),
            size.to_string(),
            u8::from(verify).to_string(),
        ])
        .env("FI_PROVIDER_PATH", provider_dir)
        .env("FI_PROVIDER", provider)
        .env("FI_DIWARP_IFACE", "127.0.0.1")
        .env("FI_TCP_IFACE", "lo")
        .env("FI_UDP_IFACE", "lo")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot start timeout: {e}"))?;
    let text = read_log(log);
    Ok(text.lines().last().unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_per_size() {
        assert_eq!(iters(1), 20_000);
        assert_eq!(iters(1024), 20_000);
        assert_eq!(iters(64 << 10), 799);
        assert_eq!(iters(1 << 20), 200);
        assert_eq!(iters(0), 20_000);
    }

    #[test]
    fn result_lines() {
        assert_eq!(latency("fi diwarp 1024 B: 11.49 us one-way"), Some("11.49"));
        assert_eq!(
            latency("fi tcp;ofi_rxm 1 B: 46.40 us one-way"),
            Some("46.40")
        );
        assert_eq!(latency("fi x B: y B: 3.5 us one-way"), Some("3.5"));
        for bad in [
            "fi diwarp 1 B:  us one-way",
            "fi diwarp 1 B: 1.0 us one-way ",
            "fi-pingpong: no completion within 30 s",
            "fi diwarp 1 B: 1e3 us one-way",
            "x fi diwarp 1 B: 1.0 us one-way",
            "",
        ] {
            assert_eq!(latency(bad), None, "{bad}");
        }
    }
}

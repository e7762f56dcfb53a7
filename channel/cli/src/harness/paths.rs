//! Where the benchmarks find the checkout's files (the C programs, the venvs, the plot scripts)
//! and where they write (the target directory).

use std::path::PathBuf;

/// The checkout this command was built from.
pub fn checkout() -> PathBuf {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    p.canonicalize().unwrap_or(p)
}

/// `$CARGO_TARGET_DIR`, else the checkout's target/.
pub fn target() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(t) => PathBuf::from(t),
        None => checkout().join("target"),
    }
}

/// `<target>/<harness>/<date-time>`, local time as `date` gives it.
pub fn default_out(harness: &str) -> PathBuf {
    let stamp = std::process::Command::new("date")
        .arg("+%Y%m%d-%H%M%S")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            secs.to_string()
        });
    target().join(harness).join(stamp)
}

/// The checkout venv's python (scripts/setup makes it).
pub fn python() -> PathBuf {
    checkout().join(".venv/bin/python")
}

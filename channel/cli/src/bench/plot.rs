//! results.png: the checkout's scripts/mpi-bench-plot.py under its venv's matplotlib, which
//! CI already installs (scripts/setup), rather than a plotting crate with fonts of its own.

use std::path::Path;
use std::process::Command;

use crate::harness::paths::{checkout, python};

/// Draws results.png in `out`; a failure is reported, not fatal.
pub fn draw(out: &Path) {
    let py = python();
    let script = checkout().join("scripts/mpi-bench-plot.py");
    let ok = Command::new(&py)
        .arg(&script)
        .arg(out)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "diwarp bench: plot failed (is matplotlib in {}? scripts/setup installs it)",
            py.display()
        );
    }
}

//! results.png: a plot script of the checkout (scripts/*-plot.py) under its venv's matplotlib,
//! which CI already installs (scripts/setup), rather than a plotting crate with fonts of its own.

use std::path::Path;
use std::process::Command;

use super::paths::{checkout, python};

/// Draws results.png in `out` with `scripts/<script>`; a failure is reported (after `who`), not
/// fatal.
pub fn draw(who: &str, script: &str, out: &Path) {
    let py = python();
    let ok = Command::new(&py)
        .arg(checkout().join("scripts").join(script))
        .arg(out)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "{who}: plot failed (is matplotlib in {}? scripts/setup installs it)",
            py.display()
        );
    }
}

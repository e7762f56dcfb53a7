//! results.md, results.csv and ledger.csv (and results.png): scripts/mem-bench-tables.py under
//! the checkout venv's python.

use std::io;
use std::path::Path;
use std::process::Command;

use crate::harness::paths::{checkout, python};

pub fn write(out: &Path, cmdline: &str, transports: &[String], plot: bool) -> io::Result<()> {
    let status = Command::new(python())
        .arg(checkout().join("scripts/mem-bench-tables.py"))
        .arg(out)
        .arg(cmdline)
        .arg(transports.join(","))
        .arg(if plot { "1" } else { "0" })
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other("scripts/mem-bench-tables.py failed"))
    }
}

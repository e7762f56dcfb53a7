//! `diwarp install --prefix P`: this command, the provider it would load and the man page, laid
//! out as libfabric's own providers are: `P/bin/diwarp`, `P/lib/libfabric/libdiwarp-fi.so`,
//! `P/share/man/man7/fi_diwarp.7`. An installed `diwarp` finds the provider beside it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::{man, provider};

#[derive(Args)]
pub struct InstallArgs {
    /// Where to install (created if missing).
    #[arg(long)]
    prefix: PathBuf,
    /// The directory of libdiwarp-fi.so to install (default: the one this command would load).
    #[arg(long, env = "DIWARP_PROVIDER_DIR")]
    provider_dir: Option<PathBuf>,
}

/// Copies `from` to `to` through a temporary name, so a running rank that mapped the old file
/// keeps its pages and a reader never sees half a file.
fn put(from: &Path, to: &Path) -> std::io::Result<()> {
    let tmp = to.with_extension("diwarp-new");
    fs::copy(from, &tmp)?;
    fs::rename(&tmp, to)
}

fn install(a: &InstallArgs) -> Result<Vec<PathBuf>, String> {
    let found = provider::locate(a.provider_dir.as_deref())?;
    let me = std::env::current_exe().map_err(|e| format!("cannot find this command: {e}"))?;
    let bin = a.prefix.join("bin");
    let lib = a.prefix.join("lib/libfabric");
    let man7 = a.prefix.join("share/man/man7");
    for d in [&bin, &lib, &man7] {
        fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    // The provider as a file of its own (the build tree's is a symlink).
    let so = found.dir.join(provider::FILE);
    let so = so.canonicalize().unwrap_or(so);
    let done = [(so, lib.join(provider::FILE)), (me, bin.join("diwarp"))];
    let mut out = Vec::new();
    for (from, to) in done {
        put(&from, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
        out.push(to);
    }
    let page = man7.join("fi_diwarp.7");
    fs::write(&page, man::page()).map_err(|e| format!("cannot write {}: {e}", page.display()))?;
    out.push(page);
    Ok(out)
}

pub fn main(a: &InstallArgs) -> ExitCode {
    match install(a) {
        Ok(files) => {
            for f in files {
                println!("installed {}", f.display());
            }
            let lib = a.prefix.join("lib/libfabric");
            println!(
                "use it: {}/bin/diwarp run -n 2 -- ./prog, or FI_PROVIDER_PATH={} FI_PROVIDER=diwarp with your MPI's launcher",
                a.prefix.display(),
                lib.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("diwarp install: {e}");
            ExitCode::FAILURE
        }
    }
}

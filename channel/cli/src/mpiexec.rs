//! Finding each MPI's launcher: `MPIEXEC_<MPI>` if set, then the checkout's own (scripts/setup
//! puts the PyPI wheels of MPICH, Open MPI 5 and Intel MPI in `.venv*/`), then `PATH`, where a name is taken only if the
//! launcher says it is that MPI's (Debian points plain `mpiexec` at Open MPI's).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::launch::Mpi;

impl Mpi {
    /// The variable that names this MPI's launcher outright.
    pub fn env_var(self) -> &'static str {
        match self {
            Mpi::Mpich => "MPIEXEC_MPICH",
            Mpi::Openmpi => "MPIEXEC_OPENMPI",
            Mpi::Openmpi5 => "MPIEXEC_OPENMPI5",
            Mpi::Impi => "MPIEXEC_IMPI",
        }
    }

    /// Names to look for on `PATH`, most specific first.
    fn names(self) -> &'static [&'static str] {
        match self {
            Mpi::Mpich => &["mpiexec.hydra", "mpiexec.mpich", "mpiexec", "mpirun"],
            Mpi::Openmpi => &["mpirun.openmpi", "mpiexec.openmpi", "mpirun", "mpiexec"],
            Mpi::Openmpi5 => &["mpirun", "mpiexec"],
            Mpi::Impi => &["mpiexec.hydra", "mpiexec"],
        }
    }

    /// Whether `--version` output comes from this MPI's launcher.
    fn claims(self, version: &str) -> bool {
        match self {
            Mpi::Mpich => version.contains("HYDRA"),
            Mpi::Openmpi => {
                (version.contains("Open MPI") || version.contains("OpenRTE"))
                    && !version.contains("(Open MPI) 5.")
            }
            Mpi::Openmpi5 => version.contains("(Open MPI) 5."),
            Mpi::Impi => version.contains("Intel(R) MPI"),
        }
    }

    /// The launcher inside this checkout, where scripts/setup installs it.
    fn in_checkout(self) -> Option<PathBuf> {
        let at = |p: &str| Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p));
        match self {
            Mpi::Mpich => at(".venv/bin/mpiexec"),
            Mpi::Openmpi => None,
            Mpi::Openmpi5 => at(".venv-openmpi5/bin/mpirun"),
            Mpi::Impi => at(".venv-impi/bin/mpiexec"),
        }
    }
}

fn version_of(exe: &Path) -> String {
    Command::new(exe)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The launcher of `mpi`, or a message saying where it was looked for.
pub fn find(mpi: Mpi) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(mpi.env_var()) {
        let p = PathBuf::from(p);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(format!(
                "{}={} is not an executable",
                mpi.env_var(),
                p.display()
            ))
        };
    }
    if let Some(p) = mpi.in_checkout().filter(|p| executable(p)) {
        return Ok(p.canonicalize().unwrap_or(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in mpi.names() {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if executable(&p) && mpi.claims(&version_of(&p)) {
                return Ok(p);
            }
        }
    }
    Err(format!(
        "no {} launcher found: looked for {} on PATH (set {} to name one; scripts/setup \
         installs MPICH into the checkout's .venv and Debian's Open MPI)",
        mpi.name(),
        mpi.names().join(", "),
        mpi.env_var()
    ))
}

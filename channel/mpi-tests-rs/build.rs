//! rsmpi links libmpi by the directories the MPI's compiler wrapper names, without an rpath:
//! the PyPI MPICH wheel's libmpi is in the venv, where the loader does not look. The
//! wrapper's own rpath (or its library directories) go into the binaries, as its mpicc would.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MPICC");
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    let Ok(out) = Command::new(&mpicc).arg("-show").output() else {
        return;
    };
    let show = String::from_utf8_lossy(&out.stdout).to_string();
    // Open MPI's wrapper knows -showme, not -show.
    let show = if show.trim().is_empty() {
        Command::new(&mpicc)
            .arg("-showme")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default()
    } else {
        show
    };
    for word in show.split_whitespace() {
        if let Some(dir) = word.strip_prefix("-L") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}

//! Loads the built provider into libfabric's own `fi_info` tool (Debian `libfabric-bin`) the
//! way an MPI library would find it: through `FI_PROVIDER_PATH`, as `libdiwarp-fi.so`.
//! Builds nothing: the cdylib cargo built for this test run sits beside the test executable.
//! Runs under the system core (1.17) and, when the project venv has the MPICH wheel, under the
//! 2.x core bundled with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use diwarp_fi::params::PARAMS;

/// A directory holding only `libdiwarp-fi.so`, linked to the freshly built library; removed on
/// drop. The core loads every `*fi.so` in the directory, so nothing else may be there.
struct ProviderDir(PathBuf);

impl ProviderDir {
    fn new(tag: &str) -> ProviderDir {
        // deps/, beside this executable: cargo rebuilds the cdylib there for the tests but
        // refreshes the copy in target/<profile>/ only on `cargo build`.
        let exe = std::env::current_exe().expect("test executable path");
        let lib = exe.with_file_name("libdiwarp_fi.so");
        assert!(
            lib.exists(),
            "{} missing: cargo builds the cdylib with the tests",
            lib.display()
        );
        let dir = std::env::temp_dir().join(format!("diwarp-fi-info-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&lib, dir.join("libdiwarp-fi.so")).unwrap();
        ProviderDir(dir)
    }
}

impl Drop for ProviderDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `fi_info` with the provider directory and nothing from the caller's libfabric settings.
fn fi_info(dir: &ProviderDir, core: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new("fi_info");
    cmd.args(args)
        .env("FI_PROVIDER_PATH", &dir.0)
        .env_remove("FI_PROVIDER")
        .env_remove("FI_LOG_LEVEL");
    if let Some(core) = core {
        cmd.env("LD_LIBRARY_PATH", core);
    }
    cmd.output().expect("run fi_info")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn have_fi_info() -> bool {
    match Command::new("fi_info").arg("--version").output() {
        Ok(_) => true,
        Err(_) => {
            eprintln!(
                "SKIP: fi_info not found (Debian package libfabric-bin; scripts/setup installs it)"
            );
            false
        }
    }
}

/// The libfabric core bundled with the PyPI MPICH wheel, if the project venv has it.
fn mpich_core() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/lib/mpich");
    dir.join("libfabric.so.1").exists().then_some(dir)
}

fn check_listing(dir: &ProviderDir, core: Option<&Path>) {
    let o = fi_info(dir, core, &["-p", "diwarp"]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "fi_info -p diwarp failed: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("provider: diwarp"), "{out}");
    assert!(out.contains("type: FI_EP_RDM"), "{out}");

    let out = stdout(&fi_info(dir, core, &["-p", "diwarp", "-v"]));
    for want in [
        "prov_name: diwarp",
        "type: FI_EP_RDM",
        "FI_MSG",
        "FI_TAGGED",
        "FI_MULTI_RECV",
        "FI_DIRECTED_RECV",
        "max_msg_size: 18446744073709551615",
        "mem_tag_format: 0xaaaaaaaaaaaaaaaa",
        "cq_data_size: 8",
        "msg_order: [ FI_ORDER_SAS ]",
        "addr_format: FI_FORMAT_UNSPEC",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(
        !out.contains("diwarp;diwarp"),
        "prov_name must be left to the core:\n{out}"
    );

    // rxm and rxd look for MSG and DGRAM core endpoints to layer on; there are none.
    for t in ["FI_EP_MSG", "FI_EP_DGRAM"] {
        let o = fi_info(dir, core, &["-p", "diwarp", "-t", t]);
        assert!(
            !o.status.success() && !stdout(&o).contains("diwarp"),
            "{t}: {}",
            stdout(&o)
        );
    }
}

#[test]
fn fi_info_lists_the_provider() {
    if !have_fi_info() {
        return;
    }
    check_listing(&ProviderDir::new("list"), None);
}

#[test]
fn fi_info_lists_the_parameters() {
    if !have_fi_info() {
        return;
    }
    let dir = ProviderDir::new("env");
    let out = stdout(&fi_info(&dir, None, &["-e"]));
    for p in PARAMS {
        let var = format!("FI_DIWARP_{}", p.name.to_uppercase());
        assert!(
            out.contains(&format!("# {var}:")),
            "{var} not listed:\n{out}"
        );
        assert!(
            out.contains(&format!("# diwarp: {}", p.help)),
            "help for {var} not listed"
        );
    }
}

#[test]
fn loads_under_the_mpich_wheel_core() {
    if !have_fi_info() {
        return;
    }
    let Some(core) = mpich_core() else {
        eprintln!("SKIP: no MPICH wheel in .venv (scripts/setup installs it)");
        return;
    };
    let dir = ProviderDir::new("mpich");
    let version = stdout(&fi_info(&dir, Some(&core), &["--version"]));
    assert!(
        version.contains("libfabric: 2."),
        "expected the wheel's 2.x core:\n{version}"
    );
    check_listing(&dir, Some(&core));
}

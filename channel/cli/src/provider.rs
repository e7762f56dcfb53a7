//! Where `libdiwarp-fi.so` is: the directory to give libfabric in `FI_PROVIDER_PATH`.

use std::path::{Path, PathBuf};

pub const FILE: &str = "libdiwarp-fi.so";

/// A provider directory that holds [`FILE`], and how it was found.
pub struct Found {
    pub dir: PathBuf,
    pub how: &'static str,
}

/// The directories looked in, in order, with how each is named: the one given (option or
/// `DIWARP_PROVIDER_DIR`), the install layout beside this command (`P/bin/diwarp`,
/// `P/lib/libfabric/`), and the build tree (`target/<profile>/diwarp`,
/// `target/<profile>/libfabric/`, made by scripts/build-provider).
pub fn candidates(given: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    if let Some(dir) = given {
        return vec![(
            dir.to_owned(),
            "given (--provider-dir or DIWARP_PROVIDER_DIR)",
        )];
    }
    let mut out = Vec::new();
    if let Some(bin) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_owned))
    {
        if let Some(prefix) = bin.parent() {
            out.push((
                prefix.join("lib/libfabric"),
                "installed beside this command",
            ));
        }
        out.push((bin.join("libfabric"), "the build tree of this command"));
    }
    out
}

/// The first candidate that holds the provider; else the message to show, naming every place.
pub fn locate(given: Option<&Path>) -> Result<Found, String> {
    let tried = candidates(given);
    for (dir, how) in &tried {
        if dir.join(FILE).is_file() {
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            return Ok(Found { dir, how });
        }
    }
    let places: Vec<String> = tried.iter().map(|(d, _)| d.display().to_string()).collect();
    Err(format!(
        "no {FILE} in {} (build it with scripts/build-provider, install it with \
         scripts/install, or pass --provider-dir)",
        places.join(", ")
    ))
}

//! The benchmarks of an OSU build: which executables there are, on how many ranks each runs,
//! and the arguments each gets, from what its -h says it takes.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The executables `osu_*` (no dot in the name: not a script or a source) under `root`, as
/// paths relative to it, sorted.
pub fn find(root: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if ft.is_dir() {
                dirs.push(path);
            } else if ft.is_file()
                && name.starts_with("osu_")
                && !name.contains('.')
                && e.metadata()
                    .is_ok_and(|m| m.permissions().mode() & 0o100 != 0)
            {
                if let Ok(rel) = path.strip_prefix(root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    out.sort();
    out
}

/// The paths of `benches` that match the extended regular expression `only`, as `grep -E`
/// reads it (its complaints about the expression go to stderr).
pub fn matching(benches: &[String], only: &str) -> std::io::Result<Vec<String>> {
    let mut grep = Command::new("grep")
        .args(["-E", "--", only])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut input = grep.stdin.take().expect("piped stdin");
    let text: String = benches.iter().map(|b| format!("{b}\n")).collect();
    // A list of paths fits in the pipe's buffer, and grep reads it all before it writes much.
    input.write_all(text.as_bytes())?;
    drop(input);
    let out = grep.wait_with_output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The ranks benchmark `bench` runs on: collectives and congestion benchmarks get `coll_np`.
pub fn ranks(bench: &str, np: u32, coll_np: u32) -> u32 {
    if bench.starts_with("collective/") || bench.contains("/congestion/") {
        coll_np
    } else {
        np
    }
}

/// What `exe -h` prints (stdout and stderr), whatever its exit status.
pub fn help_of(exe: &Path) -> String {
    Command::new(exe)
        .arg("-h")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
        })
        .unwrap_or_default()
}

/// The arguments of benchmark `bench` whose -h printed `help`: sizes up to `max`, `iters`
/// iterations, 3 warm-up ones, validation, as far as it takes them.
pub fn args_for(bench: &str, help: &str, max: u64, iters: u32) -> Vec<String> {
    let mut a = Vec::new();
    let mut add = |on: bool, words: &[&str]| {
        if on {
            a.extend(words.iter().map(|w| (*w).to_owned()));
        }
    };
    add(
        help.contains("--message-size"),
        &["-m", &format!("1:{max}")],
    );
    add(help.contains("--iterations"), &["-i", &iters.to_string()]);
    add(help.contains("--warmup"), &["-x", "3"]);
    add(help.contains("-c, --validation"), &["-c"]);
    // Validation wants as many sender as receiver threads.
    add(bench.ends_with("_mt"), &["-t", "2:2"]);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    const LATENCY_HELP: &str = "Usage: osu_latency [options]\n\
        -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum\n\
        -x, --warmup              ITER - set number of warmup\n\
        -i, --iterations          ITER - number of iterations for timing (default 10000)\n\
        -c, --validation          [log:<dir>]Enable validation. Disabled by default.\n";

    #[test]
    fn arguments_from_the_help() {
        assert_eq!(
            args_for("pt2pt/standard/osu_latency", LATENCY_HELP, 1024, 30).join(" "),
            "-m 1:1024 -i 30 -x 3 -c"
        );
        assert_eq!(
            args_for("pt2pt/standard/osu_latency_mt", LATENCY_HELP, 8, 5).join(" "),
            "-m 1:8 -i 5 -x 3 -c -t 2:2"
        );
        let init = "Usage: osu_init [options]\n  -h, --help  print this help\n";
        assert!(args_for("startup/osu_init", init, 8, 5).is_empty());
        let no_check = "-i, --iterations ITER\n--validation-warmup\n";
        assert_eq!(args_for("x/osu_y", no_check, 8, 5).join(" "), "-i 5");
    }

    #[test]
    fn ranks_by_kind() {
        assert_eq!(ranks("collective/blocking/osu_bcast", 2, 4), 4);
        assert_eq!(ranks("pt2pt/congestion/osu_bw_fan_in", 2, 4), 4);
        assert_eq!(ranks("pt2pt/standard/osu_latency", 2, 4), 2);
        assert_eq!(ranks("one-sided/osu_put_latency", 2, 4), 2);
    }

    #[test]
    fn executables_found_and_filtered() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("osu-sweep-find-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (path, mode) in [
            ("pt2pt/standard/osu_latency", 0o755),
            ("pt2pt/standard/osu_bw", 0o755),
            ("pt2pt/standard/osu_bw.c", 0o755),
            ("pt2pt/standard/osu_notes", 0o644),
            ("collective/blocking/osu_bcast", 0o700),
            ("collective/blocking/helper", 0o755),
        ] {
            let p = root.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "").unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        }
        let all = find(&root);
        assert_eq!(
            all,
            [
                "collective/blocking/osu_bcast",
                "pt2pt/standard/osu_bw",
                "pt2pt/standard/osu_latency"
            ]
        );
        assert_eq!(
            matching(&all, "bcast|_bw$").unwrap(),
            ["collective/blocking/osu_bcast", "pt2pt/standard/osu_bw"]
        );
        assert!(matching(&all, "nothing").unwrap().is_empty());
        fs::remove_dir_all(&root).unwrap();
    }
}

//! The hosts of a run on a cluster (`--hosts`, `--hostfile`), read once and handed to each
//! MPI's launcher in the form it reads: Hydra (MPICH, Intel MPI) takes `-hosts a,b` or
//! `-f FILE` of `host[:N]` lines; Open MPI takes `--host a,b` or `--hostfile FILE` of
//! `host [slots=N]` lines. A file in the other launcher's form is passed as the equivalent
//! host list, so one hostfile serves every MPI.

use std::path::{Path, PathBuf};

/// One host and how many ranks it takes, if the user said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub slots: Option<u32>,
}

/// How a hostfile gives slots: not at all, `host:N` (Hydra's) or `host slots=N` (Open MPI's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Plain,
    Hydra,
    OpenMpi,
}

/// The hosts, and the file they came from (`None`: `--hosts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    pub hosts: Vec<Host>,
    pub file: Option<(PathBuf, Syntax)>,
}

fn slots(what: &str, n: &str) -> Result<u32, String> {
    match n.parse::<u32>() {
        Ok(0) | Err(_) => Err(format!(
            "{what}: slots must be a whole number above 0, not {n:?}"
        )),
        Ok(n) => Ok(n),
    }
}

/// `host[:N]`, as `--hosts` and Hydra's hostfiles write it.
fn hydra_host(what: &str, item: &str) -> Result<Host, String> {
    let (name, n) = match item.rsplit_once(':') {
        // An IPv6 address has colons of its own; only a last part of digits is a count.
        Some((name, n)) if !name.contains(':') => (name, Some(slots(what, n)?)),
        _ => (item, None),
    };
    if name.is_empty() {
        return Err(format!("{what}: an empty host name"));
    }
    if name.chars().any(|c| c.is_whitespace() || c == ',') {
        return Err(format!("{what}: {name:?} is not a host name"));
    }
    Ok(Host {
        name: name.to_owned(),
        slots: n,
    })
}

impl Cluster {
    /// `--hosts a,b[:N],...`.
    pub fn from_list(items: &[String]) -> Result<Cluster, String> {
        let all = items.join(",");
        if items.is_empty() {
            return Err("--hosts: no hosts given".into());
        }
        let hosts = items
            .iter()
            .map(|i| hydra_host(&format!("--hosts {all}"), i.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cluster { hosts, file: None })
    }

    /// A hostfile: one host a line, `#` starts a comment, blank lines are skipped; slots as
    /// `host:N` or `host slots=N` (one form per file).
    pub fn from_file(path: &Path) -> Result<Cluster, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--hostfile {}: cannot read it: {e}", path.display()))?;
        Cluster::parse_file(path, &text)
    }

    fn parse_file(path: &Path, text: &str) -> Result<Cluster, String> {
        let mut hosts = Vec::new();
        let mut syntax = Syntax::Plain;
        for (i, line) in text.lines().enumerate() {
            let what = format!("--hostfile {} line {}", path.display(), i + 1);
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or_default();
            let mut host = hydra_host(&what, first)?;
            let mut this = if host.slots.is_some() {
                Syntax::Hydra
            } else {
                Syntax::Plain
            };
            for w in words {
                match w.split_once('=') {
                    Some(("slots", n)) if this != Syntax::Hydra => {
                        host.slots = Some(slots(&what, n)?);
                        this = Syntax::OpenMpi;
                    }
                    // Open MPI's other per-host settings are its own; Hydra would not read them.
                    Some(("max_slots" | "max-slots", _)) => {
                        return Err(format!(
                            "{what}: {w:?} is Open MPI's alone; give slots=N, which every \
                             MPI's launcher reads"
                        ))
                    }
                    _ => return Err(format!("{what}: {w:?} is not slots=N")),
                }
            }
            if this != Syntax::Plain {
                if syntax != Syntax::Plain && syntax != this {
                    return Err(format!(
                        "{what}: the file mixes host:N and host slots=N; use one form"
                    ));
                }
                syntax = this;
            }
            hosts.push(host);
        }
        if hosts.is_empty() {
            return Err(format!("--hostfile {}: no hosts in it", path.display()));
        }
        Ok(Cluster {
            hosts,
            file: Some((path.to_path_buf(), syntax)),
        })
    }

    /// `a,b:2,...`: the hosts as both launchers' host lists write them.
    fn list(&self) -> String {
        let one = |h: &Host| match h.slots {
            Some(n) => format!("{}:{n}", h.name),
            None => h.name.clone(),
        };
        self.hosts.iter().map(one).collect::<Vec<_>>().join(",")
    }

    /// The arguments Hydra's mpiexec (MPICH, Intel MPI) takes for these hosts.
    pub fn hydra_args(&self) -> Vec<String> {
        match &self.file {
            Some((path, Syntax::Plain | Syntax::Hydra)) => {
                vec!["-f".into(), path.display().to_string()]
            }
            _ => vec!["-hosts".into(), self.list()],
        }
    }

    /// The arguments Open MPI's mpirun takes for these hosts.
    pub fn open_mpi_args(&self) -> Vec<String> {
        match &self.file {
            Some((path, Syntax::Plain | Syntax::OpenMpi)) => {
                vec!["--hostfile".into(), path.display().to_string()]
            }
            _ => vec!["--host".into(), self.list()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<Cluster, String> {
        Cluster::parse_file(Path::new("/h/file"), text)
    }

    fn list(s: &str) -> Result<Cluster, String> {
        Cluster::from_list(&s.split(',').map(str::to_owned).collect::<Vec<_>>())
    }

    #[test]
    fn a_host_list_goes_to_each_launcher_as_given() {
        let c = list("10.0.0.1,node2:4").unwrap();
        assert_eq!(c.hydra_args(), ["-hosts", "10.0.0.1,node2:4"]);
        assert_eq!(c.open_mpi_args(), ["--host", "10.0.0.1,node2:4"]);
        assert_eq!(list("fe80::1").unwrap().hosts[0].name, "fe80::1");
        for (bad, why) in [
            ("a,,b", "an empty host name"),
            ("a,:2", "an empty host name"),
            ("a:0", "slots must be a whole number above 0, not \"0\""),
            ("a:x", "not \"x\""),
            ("a b", "is not a host name"),
        ] {
            let e = list(bad).unwrap_err();
            assert!(e.contains(why) && e.starts_with("--hosts "), "{bad}: {e}");
        }
    }

    #[test]
    fn a_hostfile_is_passed_as_a_file_where_the_launcher_reads_its_form() {
        let plain = file("# the nodes\nnode1\n\n  node2   # spare\n").unwrap();
        assert_eq!(plain.hosts.len(), 2);
        assert_eq!(plain.hydra_args(), ["-f", "/h/file"]);
        assert_eq!(plain.open_mpi_args(), ["--hostfile", "/h/file"]);
        let ompi = file("node1 slots=2\nnode2 slots=3\nnode3\n").unwrap();
        assert_eq!(ompi.hydra_args(), ["-hosts", "node1:2,node2:3,node3"]);
        assert_eq!(ompi.open_mpi_args(), ["--hostfile", "/h/file"]);
        let hydra = file("node1:2\nnode2\n").unwrap();
        assert_eq!(hydra.hydra_args(), ["-f", "/h/file"]);
        assert_eq!(hydra.open_mpi_args(), ["--host", "node1:2,node2"]);
    }

    #[test]
    fn bad_hostfiles_say_where_and_why() {
        for (text, why) in [
            ("", "no hosts in it"),
            ("# only a comment\n\n", "no hosts in it"),
            (
                "a\nb slots=0\n",
                "line 2: slots must be a whole number above 0",
            ),
            ("a slots=two\n", "line 1: slots must be"),
            (
                "a:2\nb slots=2\n",
                "line 2: the file mixes host:N and host slots=N",
            ),
            ("a:2 slots=2\n", "is not slots=N"),
            ("a max_slots=4\n", "Open MPI's alone"),
            ("a cpus=4\n", "\"cpus=4\" is not slots=N"),
        ] {
            let e = file(text).unwrap_err();
            assert!(
                e.starts_with("--hostfile /h/file") && e.contains(why),
                "{text:?}: {e}"
            );
        }
        let e = Cluster::from_file(Path::new("/no/such/hostfile")).unwrap_err();
        assert!(e.contains("/no/such/hostfile: cannot read it"), "{e}");
    }
}

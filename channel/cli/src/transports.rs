//! The transports the benchmarks compare, by name: the MPI, the transport of `diwarp run`, and
//! diwarp's settings for that entry (environment variables every rank of its runs gets). This
//! table is the only one: the benchmark subcommands (`diwarp bench`, `mem-bench`, `osu-sweep`)
//! read it here, and the shell harnesses read it through `diwarp transports`
//! (scripts/transports.sh).
//!
//! A name always means the same run: the variables the table chooses ([`OWNED`]) are cleared
//! from the caller's environment for every diwarp run, then set from the entry (mpich-diwarp is
//! the provider's default even if the shell has FI_DIWARP_MODE=rc). Other FI_DIWARP_* settings
//! of the caller reach every diwarp run.

use std::process::ExitCode;

use clap::Args;

use crate::launch::{Mpi, Transport};

/// One name of the table.
pub struct Entry {
    pub name: &'static str,
    pub mpi: Mpi,
    /// The transport of `diwarp run --transport`.
    pub wrapper: Transport,
    /// NAME=VALUE settings a diwarp run of this entry gets.
    pub settings: &'static [(&'static str, &'static str)],
}

/// The variables the entries choose: cleared for every diwarp run, then set from the entry.
pub const OWNED: [&str; 6] = [
    "FI_DIWARP_MODE",
    "FI_DIWARP_RC_MAX",
    "FI_DIWARP_RAIL_THREADS",
    "FI_DIWARP_AUTH",
    "FI_DIWARP_AUTH_KEY",
    "FI_DIWARP_AUTH_KEY_FILE",
];

const fn e(
    name: &'static str,
    mpi: Mpi,
    wrapper: Transport,
    settings: &'static [(&'static str, &'static str)],
) -> Entry {
    Entry {
        name,
        mpi,
        wrapper,
        settings,
    }
}

const UD: &[(&str, &str)] = &[("FI_DIWARP_MODE", "ud")];
const RC: &[(&str, &str)] = &[("FI_DIWARP_MODE", "rc")];
const HYBRID: &[(&str, &str)] = &[("FI_DIWARP_MODE", "hybrid")];
// Authenticated mode with a fixed key: a benchmark's key protects nothing.
const UD_AUTH: &[(&str, &str)] = &[
    ("FI_DIWARP_MODE", "ud"),
    (
        "FI_DIWARP_AUTH_KEY",
        "diwarp-benchmark-key-0123456789abcdef",
    ),
];
// The same key in the default mode: RC connections prove it at start-up.
const AUTH: &[(&str, &str)] = &[(
    "FI_DIWARP_AUTH_KEY",
    "diwarp-benchmark-key-0123456789abcdef",
)];
// Rails as scripts/netns-hosts names them (dw0, dw1, dw2), in the default mode.
const RAILS1: &[(&str, &str)] = &[("FI_DIWARP_IFACE", "dw0")];
const RAILS2: &[(&str, &str)] = &[("FI_DIWARP_IFACE", "dw0,dw1")];
const RAILS3: &[(&str, &str)] = &[("FI_DIWARP_IFACE", "dw0,dw1,dw2")];
// Two rails, a progress thread each.
const RAILS2_THREADS: &[(&str, &str)] = &[
    ("FI_DIWARP_IFACE", "dw0,dw1"),
    ("FI_DIWARP_RAIL_THREADS", "1"),
];

/// Sorted by name, as `diwarp transports` lists them.
pub static TABLE: &[Entry] = &[
    // MPICH ch4:ofi, FI_PROVIDER=diwarp, the provider's default mode (hybrid).
    e("mpich-diwarp", Mpi::Mpich, Transport::Diwarp, &[]),
    e("mpich-diwarp-auth", Mpi::Mpich, Transport::Diwarp, AUTH),
    // The provider's cap (FI_DIWARP_RC_MAX 16) unless the entry sets one.
    e("mpich-diwarp-hybrid", Mpi::Mpich, Transport::Diwarp, HYBRID),
    e(
        "mpich-diwarp-hybrid16",
        Mpi::Mpich,
        Transport::Diwarp,
        &[("FI_DIWARP_MODE", "hybrid"), ("FI_DIWARP_RC_MAX", "16")],
    ),
    e(
        "mpich-diwarp-hybrid4",
        Mpi::Mpich,
        Transport::Diwarp,
        &[("FI_DIWARP_MODE", "hybrid"), ("FI_DIWARP_RC_MAX", "4")],
    ),
    // One, two and three rails of the multirail test bed.
    e("mpich-diwarp-rails1", Mpi::Mpich, Transport::Diwarp, RAILS1),
    e("mpich-diwarp-rails2", Mpi::Mpich, Transport::Diwarp, RAILS2),
    e(
        "mpich-diwarp-rails2-threads",
        Mpi::Mpich,
        Transport::Diwarp,
        RAILS2_THREADS,
    ),
    e("mpich-diwarp-rails3", Mpi::Mpich, Transport::Diwarp, RAILS3),
    // Every peer over a TCP connection (iWARP/MPA).
    e("mpich-diwarp-rc", Mpi::Mpich, Transport::Diwarp, RC),
    // Every peer over datagrams.
    e("mpich-diwarp-ud", Mpi::Mpich, Transport::Diwarp, UD),
    e(
        "mpich-diwarp-ud-auth",
        Mpi::Mpich,
        Transport::Diwarp,
        UD_AUTH,
    ),
    // libfabric 2.x's native tcp RDM provider (not tcp;ofi_rxm).
    e("mpich-tcp", Mpi::Mpich, Transport::Tcp, &[]),
    e("mpich-tcp-rxm", Mpi::Mpich, Transport::TcpRxm, &[]),
    e("mpich-udp-rxd", Mpi::Mpich, Transport::UdpRxd, &[]),
    // Open MPI, --mca pml ob1 --mca btl tcp,self.
    e("ompi-btl-tcp", Mpi::Openmpi, Transport::OmpiTcp, &[]),
    // Open MPI, pml cm + mtl ofi, provider diwarp.
    e("ompi-diwarp", Mpi::Openmpi, Transport::Diwarp, &[]),
    e(
        "ompi-diwarp-hybrid",
        Mpi::Openmpi,
        Transport::Diwarp,
        HYBRID,
    ),
    e(
        "ompi-diwarp-rails1",
        Mpi::Openmpi,
        Transport::Diwarp,
        RAILS1,
    ),
    e(
        "ompi-diwarp-rails2",
        Mpi::Openmpi,
        Transport::Diwarp,
        RAILS2,
    ),
    e(
        "ompi-diwarp-rails2-threads",
        Mpi::Openmpi,
        Transport::Diwarp,
        RAILS2_THREADS,
    ),
    e(
        "ompi-diwarp-rails3",
        Mpi::Openmpi,
        Transport::Diwarp,
        RAILS3,
    ),
    e("ompi-diwarp-rc", Mpi::Openmpi, Transport::Diwarp, RC),
    e("ompi-diwarp-ud", Mpi::Openmpi, Transport::Diwarp, UD),
    // Open MPI, pml cm + mtl ofi, "tcp;ofi_rxm" (libfabric 1.17).
    e("ompi-mtl-ofi-tcp", Mpi::Openmpi, Transport::Tcp, &[]),
    e("ompi-udp-rxd", Mpi::Openmpi, Transport::UdpRxd, &[]),
];

impl Entry {
    pub fn is_diwarp(&self) -> bool {
        self.wrapper == Transport::Diwarp
    }

    /// diwarp's settings in words, for tables and plot legends: "hybrid (default)", "rc",
    /// "hybrid, RC_MAX=4"; empty for a transport that is not diwarp.
    pub fn mode_words(&self) -> String {
        if !self.is_diwarp() {
            return String::new();
        }
        let mut mode = "hybrid (default)";
        let mut rest = Vec::new();
        for (k, v) in self.settings {
            if *k == "FI_DIWARP_MODE" {
                mode = v;
            } else {
                rest.push(format!("{}={v}", k.trim_start_matches("FI_DIWARP_")));
            }
        }
        if rest.is_empty() {
            mode.to_owned()
        } else {
            format!("{mode}, {}", rest.join(" "))
        }
    }

    /// The settings as NAME=VALUE words.
    pub fn settings_words(&self) -> Vec<String> {
        self.settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// transport, MPI, wrapper transport, mode in words, settings: one tab-separated line.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}",
            self.name,
            self.mpi.name(),
            self.wrapper.name(),
            self.mode_words(),
            self.settings_words().join(" ")
        )
    }
}

pub fn find(name: &str) -> Option<&'static Entry> {
    TABLE.iter().find(|e| e.name == name)
}

/// The entries of `names`, or the message naming the first unknown one and every known one.
pub fn lookup(names: &[String]) -> Result<Vec<&'static Entry>, String> {
    names
        .iter()
        .map(|n| {
            find(n).ok_or_else(|| {
                let known: Vec<&str> = TABLE.iter().map(|e| e.name).collect();
                format!("unknown transport '{n}' (known: {})", known.join(" "))
            })
        })
        .collect()
}

/// What to say when the caller's environment sets a variable the names choose: the diwarp runs
/// among `entries` do not get it.
pub fn owned_notes(
    prog: &str,
    entries: &[&Entry],
    get: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    if !entries.iter().any(|e| e.is_diwarp()) {
        return Vec::new();
    }
    OWNED
        .iter()
        .filter_map(|v| {
            get(v).map(|val| {
                format!(
                    "{prog}: note: {v}={val} in the environment is not used: each transport's \
                     name chooses it (scripts/transports.sh: mpich-diwarp-rc, ...)"
                )
            })
        })
        .collect()
}

#[derive(Args)]
pub struct TransportsArgs {
    /// Print the variables the names choose (cleared for every diwarp run), one a line.
    #[arg(long, conflicts_with = "names")]
    owned: bool,
    /// The transports to list (default: all).
    names: Vec<String>,
}

pub fn main(a: &TransportsArgs) -> ExitCode {
    if a.owned {
        crate::print(&format!("{}\n", OWNED.join("\n")));
        return ExitCode::SUCCESS;
    }
    let entries = if a.names.is_empty() {
        TABLE.iter().collect()
    } else {
        match lookup(&a.names) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("diwarp transports: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let text: String = entries.iter().map(|e| e.line() + "\n").collect();
    crate::print(&text);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Variables some entries set over the caller's, and the others leave to the caller: the
    /// interfaces are the caller's to name (a host's), save in the entries that name rails.
    const PLACED: [&str; 1] = ["FI_DIWARP_IFACE"];

    #[test]
    fn every_name_is_found_once_and_the_table_is_sorted() {
        for w in TABLE.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for e in TABLE {
            assert!(std::ptr::eq(find(e.name).unwrap(), e));
            assert_eq!(e.is_diwarp(), e.name.contains("diwarp"), "{}", e.name);
            let prefix = if e.mpi == Mpi::Mpich {
                "mpich-"
            } else {
                "ompi-"
            };
            assert!(e.name.starts_with(prefix), "{}", e.name);
            for (k, _) in e.settings {
                assert!(
                    OWNED.contains(k) || PLACED.contains(k),
                    "{}: {k} is neither cleared first nor the caller's to place",
                    e.name
                );
            }
        }
    }

    #[test]
    fn mode_in_words() {
        let w = |n: &str| find(n).unwrap().mode_words();
        assert_eq!(w("mpich-diwarp"), "hybrid (default)");
        assert_eq!(w("ompi-diwarp-rc"), "rc");
        assert_eq!(w("mpich-diwarp-hybrid"), "hybrid");
        assert_eq!(w("mpich-diwarp-hybrid4"), "hybrid, RC_MAX=4");
        assert_eq!(w("mpich-tcp"), "");
        assert_eq!(
            find("mpich-diwarp-hybrid16").unwrap().line(),
            "mpich-diwarp-hybrid16\tmpich\tdiwarp\thybrid, RC_MAX=16\t\
             FI_DIWARP_MODE=hybrid FI_DIWARP_RC_MAX=16"
        );
        assert_eq!(
            find("ompi-btl-tcp").unwrap().line(),
            "ompi-btl-tcp\topenmpi\tompi-tcp\t\t"
        );
    }

    #[test]
    fn unknown_names_and_owned_variables() {
        let err = lookup(&["mpich-diwarp".into(), "nope".into()])
            .err()
            .unwrap();
        assert!(
            err.starts_with("unknown transport 'nope' (known: mpich-diwarp mpich-diwarp-auth mpich-diwarp-hybrid "),
            "{err}"
        );
        let diwarp = lookup(&["mpich-diwarp".into()]).unwrap();
        let tcp = lookup(&["mpich-tcp".into()]).unwrap();
        let env = |k: &str| (k == "FI_DIWARP_MODE").then(|| "rc".to_owned());
        let notes = owned_notes("p", &diwarp, env);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("p: note: FI_DIWARP_MODE=rc in the environment"));
        assert!(owned_notes("p", &tcp, env).is_empty());
    }
}

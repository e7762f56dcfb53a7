//! What every launch gets: pt2pt's arguments for a (transport, mode), and the `diwarp run`
//! command of a transport (its table entry's MPI, transport and settings, then this benchmark's
//! options).

use std::path::Path;

use crate::harness::launch::{self, RunCmd};
use crate::launch::{Mpi, Transport};
use crate::transports::Entry;

use super::args::PtMode;

/// The benchmark's settings every launch reads.
pub struct Settings {
    pub size_min: u64,
    pub size_max: u64,
    pub rxd_max: u64,
    pub iters: Option<String>,
    pub warmup: Option<String>,
    pub verify: bool,
    pub watchdog: u64,
    pub timeout: u64,
    pub bind: bool,
}

/// The sizes pt2pt runs from `lo` to `hi` (0, then powers of two from 1; 0 only for latency),
/// so that sizes nobody reached still get a row.
pub fn ladder(lo: u64, hi: u64, mode: PtMode) -> Vec<u64> {
    let mut out = Vec::new();
    let mut s = lo;
    while s <= hi {
        if s > 0 || mode == PtMode::Latency {
            out.push(s);
        }
        s = if s == 0 { 1 } else { 2 * s };
    }
    out
}

/// pt2pt's arguments for transport `t` in `mode` and the largest size they run; `None` when
/// the transport has no size to run (udp;ofi_rxd below the smallest size).
pub fn pt2pt_args(t: &Entry, mode: PtMode, s: &Settings) -> Option<(Vec<String>, u64)> {
    let mut max = s.size_max;
    let mut it = s.iters.clone();
    let mut wu = s.warmup.clone();
    // udp;ofi_rxd is slow for large messages: capped sizes, and fewer iterations above 8 KiB.
    if t.wrapper == Transport::UdpRxd {
        max = max.min(s.rxd_max);
        if s.size_min > max {
            return None;
        }
        if s.iters.is_none() {
            let (i, w) = match mode {
                PtMode::Latency => ("10000:200", "1000:20"),
                PtMode::Bw | PtMode::Bibw => ("100:5", "10:1"),
            };
            it = Some(i.to_owned());
            wu = Some(s.warmup.clone().unwrap_or_else(|| w.to_owned()));
        }
    }
    let mut a: Vec<String> = vec![
        "-m".into(),
        mode.name().into(),
        "-s".into(),
        format!("{}:{max}", s.size_min),
        "--watchdog".into(),
        s.watchdog.to_string(),
    ];
    if let Some(i) = it {
        a.extend(["-i".into(), i]);
    }
    if let Some(w) = wu {
        a.extend(["-w".into(), w]);
    }
    if s.verify {
        a.push("--verify".into());
    }
    Some((a, max))
}

/// The launch of transport `t` on 2 ranks, bound to cores unless `s` says not to.
pub fn run_cmd(t: &Entry, s: &Settings, provider_dir: Option<&Path>) -> RunCmd {
    let mut c = launch::run_cmd(t, 2, s.timeout, provider_dir);
    if s.bind {
        let launcher: &[&str] = if t.mpi == Mpi::Mpich {
            &["-bind-to", "core"]
        } else {
            &["--bind-to", "core", "--map-by", "core"]
        };
        c.args
            .extend(launcher.iter().map(|a| format!("--mpi-arg={a}")));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transports::{find, OWNED};

    fn settings() -> Settings {
        Settings {
            size_min: 0,
            size_max: 4 << 20,
            rxd_max: 1 << 20,
            iters: None,
            warmup: None,
            verify: false,
            watchdog: 20,
            timeout: 300,
            bind: true,
        }
    }

    #[test]
    fn the_ladder_of_sizes() {
        assert_eq!(ladder(0, 8, PtMode::Latency), [0, 1, 2, 4, 8]);
        assert_eq!(ladder(0, 8, PtMode::Bw), [1, 2, 4, 8]);
        assert_eq!(ladder(3, 20, PtMode::Bibw), [3, 6, 12]);
        assert_eq!(ladder(1024, 1024, PtMode::Latency), [1024]);
        assert_eq!(ladder(0, 0, PtMode::Bw), Vec::<u64>::new());
    }

    #[test]
    fn rxd_gets_fewer_sizes_and_iterations() {
        let s = settings();
        let (a, max) = pt2pt_args(find("mpich-tcp").unwrap(), PtMode::Latency, &s).unwrap();
        assert_eq!(a.join(" "), "-m latency -s 0:4194304 --watchdog 20");
        assert_eq!(max, 4 << 20);
        let rxd = find("ompi-udp-rxd").unwrap();
        let (a, max) = pt2pt_args(rxd, PtMode::Latency, &s).unwrap();
        assert_eq!(
            a.join(" "),
            "-m latency -s 0:1048576 --watchdog 20 -i 10000:200 -w 1000:20"
        );
        assert_eq!(max, 1 << 20);
        let s2 = Settings {
            warmup: Some("7".into()),
            verify: true,
            ..settings()
        };
        let (a, _) = pt2pt_args(rxd, PtMode::Bw, &s2).unwrap();
        assert_eq!(
            a.join(" "),
            "-m bw -s 0:1048576 --watchdog 20 -i 100:5 -w 7 --verify"
        );
        let s3 = Settings {
            iters: Some("50".into()),
            ..settings()
        };
        let (a, _) = pt2pt_args(rxd, PtMode::Bw, &s3).unwrap();
        assert_eq!(a.join(" "), "-m bw -s 0:1048576 --watchdog 20 -i 50");
        let s4 = Settings {
            size_min: 2 << 20,
            ..settings()
        };
        assert!(pt2pt_args(rxd, PtMode::Bw, &s4).is_none());
    }

    #[test]
    fn the_run_command_of_a_name() {
        let s = settings();
        let c = run_cmd(
            find("mpich-diwarp-hybrid4").unwrap(),
            &s,
            Some(Path::new("/p")),
        );
        assert_eq!(c.unset, OWNED);
        let set: Vec<(&str, &str)> = c.set.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        assert_eq!(
            set,
            [("FI_DIWARP_MODE", "hybrid"), ("FI_DIWARP_RC_MAX", "4")]
        );
        assert_eq!(
            c.args.join(" "),
            "run --mpi mpich --transport diwarp -n 2 --timeout 300 --provider-dir /p \
             --mpi-arg=-bind-to --mpi-arg=core"
        );
        let c = run_cmd(
            find("ompi-btl-tcp").unwrap(),
            &Settings {
                bind: false,
                ..settings()
            },
            Some(Path::new("/p")),
        );
        assert!(c.unset.is_empty() && c.set.is_empty());
        assert_eq!(
            c.args.join(" "),
            "run --mpi openmpi --transport ompi-tcp -n 2 --timeout 300"
        );
    }
}

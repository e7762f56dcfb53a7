//! The sweep's results: every benchmark's verdict per transport, the Markdown table with its
//! summary, and the failures' excerpts below it.

use std::fmt;

/// How a benchmark ended over one of diwarp's transports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// It failed (exit status) and passed over the peer: diwarp's failure.
    DiwarpOnly(i32),
    /// It failed (exit status) and failed over the peer too, which ran as `how` says.
    PeerToo {
        peer: &'static str,
        how: &'static str,
        rc: i32,
    },
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Verdict::Pass => f.write_str("pass"),
            Verdict::DiwarpOnly(rc) => write!(f, "FAIL (diwarp only, exit {rc})"),
            Verdict::PeerToo { peer, how, rc } => write!(f, "fails on {peer}{how} too (exit {rc})"),
        }
    }
}

/// One benchmark's row: its path, ranks, whether OSU validated its data, and per transport
/// (in the table's order) its verdict and seconds.
pub struct Row {
    pub bench: String,
    pub ranks: u32,
    pub validated: bool,
    pub cells: Vec<(Verdict, u64)>,
}

/// What the sweep ran: the heading's facts.
pub struct Setup {
    pub mpi: &'static str,
    pub peer: &'static str,
    /// Each transport's name and diwarp's mode in words.
    pub transports: Vec<(&'static str, String)>,
    pub max: u64,
    pub iters: u32,
    pub np: u32,
    pub coll_np: u32,
}

/// The table, its heading and the per-transport summary, as `--out` gets it.
pub fn table(s: &Setup, rows: &[Row]) -> String {
    let modes: Vec<String> = s
        .transports
        .iter()
        .map(|(t, m)| format!("{t}: {m}"))
        .collect();
    let mut out = format!(
        "OSU sweep over diwarp: {} ({}), `-m 1:{} -i {}`, point-to-point on {} ranks, \
         collectives on {}\n\n",
        s.mpi,
        modes.join("; "),
        s.max,
        s.iters,
        s.np,
        s.coll_np
    );
    let secs = if s.transports.len() == 1 {
        "seconds"
    } else {
        "s"
    };
    out += "| benchmark | ranks | validated |";
    for (t, _) in &s.transports {
        out += &format!(" {t} | {secs} |");
    }
    out += &format!(
        "\n|---|---:|---|{}\n",
        "---|---:|".repeat(s.transports.len())
    );
    for r in rows {
        let yes = if r.validated { "yes" } else { "no" };
        out += &format!("| `{}` | {} | {yes} |", r.bench, r.ranks);
        for (v, took) in &r.cells {
            out += &format!(" {v} | {took} |");
        }
        out += "\n";
    }
    out += "\n";
    for (i, (t, _)) in s.transports.iter().enumerate() {
        let count = |f: fn(&Verdict) -> bool| rows.iter().filter(|r| f(&r.cells[i].0)).count();
        out += &format!(
            "{t}: {} passed, {} failed over diwarp only, {} failed over {} as well (of {}).\n",
            count(|v| *v == Verdict::Pass),
            count(|v| matches!(v, Verdict::DiwarpOnly(_))),
            count(|v| matches!(v, Verdict::PeerToo { .. })),
            s.peer,
            rows.len()
        );
    }
    out
}

/// Below the table: every failure's log and the lines that show why, `excerpt(bench,
/// transport)` giving (the log's path, those lines).
pub fn failures(
    s: &Setup,
    rows: &[Row],
    excerpt: impl Fn(&str, &str) -> (String, Vec<String>),
) -> String {
    let mut out = String::new();
    for r in rows {
        for ((t, _), (v, _)) in s.transports.iter().zip(&r.cells) {
            if *v == Verdict::Pass {
                continue;
            }
            let (log, lines) = excerpt(&r.bench, t);
            out += &format!("\n--- {} over {t} (log: {log})\n", r.bench);
            for l in lines {
                out += &format!("    {l}\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(transports: &[(&'static str, &str)]) -> Setup {
        Setup {
            mpi: "mpich",
            peer: "mpich-tcp",
            transports: transports
                .iter()
                .map(|(t, m)| (*t, (*m).to_owned()))
                .collect(),
            max: 1024,
            iters: 5,
            np: 2,
            coll_np: 4,
        }
    }

    #[test]
    fn one_transport() {
        let s = setup(&[("mpich-diwarp", "hybrid (default)")]);
        let rows = [
            Row {
                bench: "collective/blocking/osu_bcast".into(),
                ranks: 4,
                validated: true,
                cells: vec![(Verdict::Pass, 3)],
            },
            Row {
                bench: "one-sided/osu_put_latency".into(),
                ranks: 2,
                validated: false,
                cells: vec![(
                    Verdict::PeerToo {
                        peer: "mpich-tcp",
                        how: " (RMA off, as over diwarp)",
                        rc: 124,
                    },
                    120,
                )],
            },
        ];
        assert_eq!(
            table(&s, &rows),
            "OSU sweep over diwarp: mpich (mpich-diwarp: hybrid (default)), `-m 1:1024 -i 5`, \
             point-to-point on 2 ranks, collectives on 4\n\
             \n\
             | benchmark | ranks | validated | mpich-diwarp | seconds |\n\
             |---|---:|---|---|---:|\n\
             | `collective/blocking/osu_bcast` | 4 | yes | pass | 3 |\n\
             | `one-sided/osu_put_latency` | 2 | no | fails on mpich-tcp (RMA off, as over \
             diwarp) too (exit 124) | 120 |\n\
             \n\
             mpich-diwarp: 1 passed, 0 failed over diwarp only, 1 failed over mpich-tcp as well \
             (of 2).\n"
        );
    }

    #[test]
    fn several_transports_and_the_failures_below() {
        let s = setup(&[
            ("mpich-diwarp-ud", "ud"),
            ("mpich-diwarp-hybrid4", "hybrid, RC_MAX=4"),
        ]);
        let rows = [Row {
            bench: "pt2pt/standard/osu_bw".into(),
            ranks: 2,
            validated: true,
            cells: vec![(Verdict::DiwarpOnly(97), 1), (Verdict::Pass, 2)],
        }];
        let t = table(&s, &rows);
        assert!(t.starts_with(
            "OSU sweep over diwarp: mpich (mpich-diwarp-ud: ud; mpich-diwarp-hybrid4: hybrid, \
             RC_MAX=4), `-m 1:1024 -i 5`"
        ));
        assert!(t.contains(
            "\n| benchmark | ranks | validated | mpich-diwarp-ud | s | mpich-diwarp-hybrid4 | s |\n\
             |---|---:|---|---|---:|---|---:|\n\
             | `pt2pt/standard/osu_bw` | 2 | yes | FAIL (diwarp only, exit 97) | 1 | pass | 2 |\n\n"
        ));
        assert!(t.ends_with(
            "mpich-diwarp-ud: 0 passed, 1 failed over diwarp only, 0 failed over mpich-tcp as \
             well (of 1).\nmpich-diwarp-hybrid4: 1 passed, 0 failed over diwarp only, 0 failed \
             over mpich-tcp as well (of 1).\n"
        ));
        let f = failures(&s, &rows, |b, t| {
            (format!("/tmp/l/{b}.{t}.log"), vec!["1 2.5 Fail".into()])
        });
        assert_eq!(
            f,
            "\n--- pt2pt/standard/osu_bw over mpich-diwarp-ud (log: \
             /tmp/l/pt2pt/standard/osu_bw.mpich-diwarp-ud.log)\n    1 2.5 Fail\n"
        );
    }
}

//! results.csv and results.md (also printed) from what a run recorded in its output directory:
//! raw.csv, runs.csv, transports.tsv, and diwarp's reports (ledger.csv, written here too).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use super::numbers::{g, median};
use super::report::{self, Ledger};
use crate::harness::csv;

const MIB: f64 = 1024.0;

/// The tables' metrics: raw.csv's columns and the ones made from them, with their titles.
pub const METRICS: [(&str, &str); 7] = [
    ("anon1_kb", "Anonymous after traffic"),
    (
        "user_kernel1_kb",
        "User + kernel after traffic (Anonymous + kernel socket memory)",
    ),
    (
        "mpi_transport1_kb",
        "MPI + transport after traffic (Anonymous + kernel socket memory - footprint's own buffers)",
    ),
    ("grown", "Anonymous grown by the traffic"),
    ("rss1_kb", "VmRSS after traffic"),
    (
        "pss1_kb",
        "Pss after traffic (VmRSS with each shared page split among the processes that map it)",
    ),
    ("hwm_kb", "VmHWM (peak RSS)"),
];

/// One rank's sample: column → KiB (or count).
type Sample = HashMap<String, f64>;

/// What the tables read.
struct Data {
    /// (transport, ranks) → every rank of every run.
    raw: HashMap<(String, u32), Vec<Sample>>,
    /// (transport, ranks) → the status of every launch that did not end ok.
    fails: BTreeMap<(String, u32), Vec<String>>,
    /// transport → (MPI, wrapper transport, diwarp's mode in words, settings).
    info: HashMap<String, Vec<String>>,
    nranks: Vec<u32>,
    ledger: Ledger,
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn read(out: &Path) -> io::Result<Data> {
    let info = fs::read_to_string(out.join("transports.tsv"))?
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t').map(str::to_owned);
            Some((f.next()?, f.collect()))
        })
        .collect();
    let mut raw: HashMap<(String, u32), Vec<Sample>> = HashMap::new();
    let (head, rows) = csv::rows(&fs::read_to_string(out.join("raw.csv"))?);
    for r in rows {
        let mut s = Sample::new();
        let mut key = (String::new(), 0);
        for (h, v) in head.iter().zip(&r) {
            if h == "transport" {
                key.0 = v.clone();
                continue;
            }
            let x: i64 = v
                .parse()
                .map_err(|_| bad(format!("raw.csv: {h} '{v}' is no number")))?;
            if h == "ranks" {
                key.1 = x as u32;
            }
            s.insert(h.clone(), x as f64);
        }
        let f = |k: &str| s.get(k).copied().unwrap_or(0.0);
        let grown = f("anon1_kb") - f("anon0_kb");
        let user_kernel = f("anon1_kb") + f("kheld1_kb");
        let mpi_transport = user_kernel - f("app_kb");
        s.insert("grown".into(), grown);
        s.insert("user_kernel1_kb".into(), user_kernel);
        s.insert("mpi_transport1_kb".into(), mpi_transport);
        raw.entry(key).or_default().push(s);
    }
    let mut fails: BTreeMap<(String, u32), Vec<String>> = BTreeMap::new();
    let (head, rows) = csv::rows(&fs::read_to_string(out.join("runs.csv"))?);
    let col = |name: &str| {
        head.iter()
            .position(|h| h == name)
            .ok_or_else(|| bad(format!("runs.csv: no column {name}")))
    };
    let (ct, cn, cs) = (col("transport")?, col("ranks")?, col("status")?);
    for r in rows {
        if r[cs] != "ok" {
            let n = r[cn].parse().map_err(|_| bad("runs.csv: ranks".into()))?;
            fails
                .entry((r[ct].clone(), n))
                .or_default()
                .push(r[cs].clone());
        }
    }
    let nranks: BTreeSet<u32> = raw.keys().chain(fails.keys()).map(|k| k.1).collect();
    Ok(Data {
        raw,
        fails,
        info,
        nranks: nranks.into_iter().collect(),
        ledger: report::read(out)?,
    })
}

impl Data {
    fn samples(&self, t: &str, n: u32, k: &str) -> Vec<f64> {
        self.raw
            .get(&(t.to_owned(), n))
            .into_iter()
            .flatten()
            .filter_map(|s| s.get(k).copied())
            .collect()
    }

    /// The median of `k` over every rank of every run, in MiB.
    fn med(&self, t: &str, n: u32, k: &str) -> Option<f64> {
        median(&self.samples(t, n, k)).map(|v| v / MIB)
    }

    fn field(&self, t: &str, i: usize) -> &str {
        self.info
            .get(t)
            .and_then(|f| f.get(i))
            .map_or("", String::as_str)
    }

    fn mpi(&self, t: &str) -> &str {
        self.field(t, 0)
    }

    fn is_diwarp(&self, t: &str) -> bool {
        self.field(t, 1) == "diwarp"
    }

    fn mode(&self, t: &str) -> &str {
        self.field(t, 2)
    }

    fn lmed(&self, t: &str, n: u32, k: &str) -> Option<f64> {
        report::median_of(&self.ledger, t, n, k)
    }
}

fn results_csv(d: &Data, transports: &[String]) -> String {
    let mut out = String::from("transport,ranks,metric,median_mib,samples\n");
    for t in transports {
        for &n in &d.nranks {
            for (key, _) in METRICS {
                if let Some(v) = d.med(t, n, key) {
                    let count = d.raw[&(t.clone(), n)].len();
                    let _ = writeln!(out, "{t},{n},{key},{v:.2},{count}");
                }
            }
        }
    }
    out
}

/// The ratio columns: every diwarp transport (any mode) to every other transport under the
/// same MPI (under an MPI with no other, each of its diwarp transports to its first), then
/// every hybrid transport to its MPI's rc one.
pub fn ratio_cols(
    transports: &[String],
    is_diwarp: impl Fn(&str) -> bool,
    mpi: impl Fn(&str) -> String,
    mode: impl Fn(&str) -> String,
) -> Vec<(String, String)> {
    let diwarps: Vec<&String> = transports.iter().filter(|t| is_diwarp(t)).collect();
    let mut cols = Vec::new();
    for d in &diwarps {
        let mine: Vec<&&String> = diwarps.iter().filter(|t| mpi(t) == mpi(d)).collect();
        let others: Vec<&String> = transports
            .iter()
            .filter(|p| !is_diwarp(p) && mpi(p) == mpi(d))
            .collect();
        if !others.is_empty() {
            cols.extend(others.iter().map(|p| ((*d).clone(), (*p).clone())));
        } else if d != mine[0] {
            cols.push(((*d).clone(), (**mine[0]).clone()));
        }
    }
    for d in &diwarps {
        let rc = diwarps.iter().find(|t| mpi(t) == mpi(d) && mode(t) == "rc");
        if let Some(rc) = rc {
            let c = ((*d).clone(), (*rc).clone());
            if mode(d).starts_with("hybrid") && !cols.contains(&c) {
                cols.push(c);
            }
        }
    }
    cols
}

fn cell(v: Option<f64>) -> String {
    v.map_or("failed".into(), |v| format!("{v:.1}"))
}

fn dash_or(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("–".into(), f)
}

fn row(first: &str, cells: &[String]) -> String {
    format!("| {first} | {} |", cells.join(" | "))
}

fn markdown(d: &Data, out: &Path, cmdline: &str, transports: &[String]) -> Vec<String> {
    let mut lines = vec![
        "# Memory per rank: diwarp and its peers\n".to_owned(),
        format!(
            "Made with `{cmdline}`. MiB per rank, medians over every rank of every run; \
             `failed` = no run finished (see runs.csv). Ratios: every diwarp transport (whatever \
             its mode) ÷ every other transport under the same MPI (with none, ÷ that MPI's first \
             diwarp transport), and every hybrid transport ÷ its MPI's rc one. Kernel socket \
             memory (SO_MEMINFO of every socket of the rank, MPI's and the launcher's too, at the \
             moment of the sample) is in no RSS; the user + kernel table adds it. Every Anonymous \
             figure includes footprint's own buffers (2 MiB + 1 MiB per peer + 128 KiB per \
             rank); the MPI + transport table takes them out.\n"
        ),
    ];
    let words: Vec<String> = transports
        .iter()
        .map(|t| {
            let mut w = format!("{t} = {} over {}", d.mpi(t), d.field(t, 1));
            if !d.mode(t).is_empty() {
                let _ = write!(w, ", {}", d.mode(t));
            }
            w
        })
        .collect();
    lines.push(format!(
        "Transports (scripts/transports.sh; diwarp's mode: FI_DIWARP_MODE and the entry's other \
         settings, hybrid (default) = none set): {}.\n",
        words.join("; ")
    ));
    let cols = ratio_cols(
        transports,
        |t| d.is_diwarp(t),
        |t| d.mpi(t).to_owned(),
        |t| d.mode(t).to_owned(),
    );
    for (key, title) in METRICS {
        lines.push(format!("\n## {title} (MiB)\n"));
        let mut head: Vec<String> = transports.to_vec();
        head.extend(cols.iter().map(|(a, b)| format!("{a} ÷ {b}")));
        lines.push(row("ranks", &head));
        lines.push(format!("|---:|{}", "---:|".repeat(head.len())));
        for &n in &d.nranks {
            let mut cells: Vec<String> =
                transports.iter().map(|t| cell(d.med(t, n, key))).collect();
            cells.extend(
                cols.iter()
                    .map(|(a, b)| match (d.med(a, n, key), d.med(b, n, key)) {
                        (Some(a), Some(b)) if b > 0.0 && a >= 0.0 => format!("{:.2}", a / b),
                        _ => "–".into(),
                    }),
            );
            lines.push(row(&n.to_string(), &cells));
        }
    }

    lines.push(
        "\n## Sockets per rank after traffic, and the kernel memory they hold (KiB, after \
         MPI_Init → after traffic)\n"
            .into(),
    );
    lines.push(
        "Sockets: all of the rank's (footprint, after the traffic: the MPI's and the launcher's \
         too). For diwarp, from its report at finalize: ep = the endpoint's own (its UDP socket \
         and the peers' connected ones, and in rc and hybrid mode the listener and every RC \
         connection open then), RC = the RC connections open at once at most (one TCP socket \
         each).\n"
            .into(),
    );
    lines.push(row("ranks", transports));
    lines.push(format!("|---:|{}", "---:|".repeat(transports.len())));
    for &n in &d.nranks {
        let cells: Vec<String> = transports
            .iter()
            .map(|t| {
                let m = |k: &str| median(&d.samples(t, n, k));
                let (Some(s), Some(k0), Some(k1)) = (m("sock1"), m("kheld0_kb"), m("kheld1_kb"))
                else {
                    return "failed".to_owned();
                };
                let mut c = format!("{} sockets, {} → {} KiB", g(s), g(k0), g(k1));
                if d.is_diwarp(t) {
                    let ep = dash_or(d.lmed(t, n, "ep_sockets"), g);
                    let rc = dash_or(d.lmed(t, n, "rc_open_peak"), g);
                    let _ = write!(c, " (ep {ep}, RC {rc})");
                }
                c
            })
            .collect();
        lines.push(row(&n.to_string(), &cells));
    }

    let l = &d.ledger;
    if !l.rows.is_empty() {
        let mut keys: Vec<&(String, u32)> = l.rows.keys().collect();
        let place = |t: &str| transports.iter().position(|x| x == t).unwrap_or(99);
        keys.sort_by_key(|(t, n)| (place(t), *n));
        lines.push(
            "\n## diwarp's ledger at finalize (FI_DIWARP_MEM_REPORT; KiB per rank, medians over \
             ranks and runs)\n"
                .into(),
        );
        lines.push(
            "Accounts: their peaks. Explained: the share of the provider heap's growth since \
             endpoint enable that the ledger explains. Per peer: each account of scale `peers` \
             over the peers it covers.\n"
                .into(),
        );
        let names: Vec<String> = keys.iter().map(|(t, n)| format!("{t} np{n}")).collect();
        lines.push(format!("| | {} |", names.join(" | ")));
        lines.push(format!("|---|{}", "---:|".repeat(keys.len())));
        let each = |f: &dyn Fn(&str, u32) -> String| -> Vec<String> {
            keys.iter().map(|(t, n)| f(t, *n)).collect()
        };
        let kib = |v: Option<f64>| dash_or(v, |v| format!("{:.1}", v / 1024.0));
        lines.push(row("diwarp's mode", &each(&|t, _| d.mode(t).to_owned())));
        for (a, scale) in &l.accounts {
            let k = format!("{a}_peak");
            lines.push(row(
                &format!("{a} ({scale}), peak"),
                &each(&|t, n| kib(d.lmed(t, n, &k))),
            ));
        }
        for (title, k) in [
            ("**total at finalize**", "total"),
            ("total's peak", "total_peak"),
            ("provider heap", "provider_heap"),
        ] {
            lines.push(row(title, &each(&|t, n| kib(d.lmed(t, n, k)))));
        }
        lines.push(row(
            "heap growth explained",
            &each(&|t, n| dash_or(d.lmed(t, n, "explained"), |x| format!("{:.1}%", 100.0 * x))),
        ));
        lines.push(row(
            "unexplained",
            &each(&|t, n| kib(d.lmed(t, n, "unexplained"))),
        ));
        lines.push(row(
            "kernel held (endpoint's sockets)",
            &each(&|t, n| kib(d.lmed(t, n, "kernel_held"))),
        ));
        lines.push(row(
            "RC connections: most open at once / open at finalize",
            &each(&|t, n| {
                let (peak, now) = (d.lmed(t, n, "rc_open_peak"), d.lmed(t, n, "rc_open"));
                dash_or(peak, |p| format!("{} / {}", g(p), dash_or(now, g)))
            }),
        ));
        lines.push(row(
            "per peer (bytes) × peers",
            &each(&|t, n| {
                let pp = dash_or(d.lmed(t, n, "per_peer"), |x| format!("{x:.0}"));
                format!("{pp} × {}", dash_or(d.lmed(t, n, "peers"), g))
            }),
        ));
        let first = &l.rows[keys[keys.len() - 1]][0];
        let get = |k: &str| first.get(k).map_or(String::new(), report::cell);
        lines.push(format!(
            "\nProjected to more ranks: `scripts/mem-report {}/logs/{}.np{}.{}.mem.jsonl --peers {} \
             --png projection.png` (reports of the other runs beside it).",
            out.display(),
            get("transport"),
            get("ranks"),
            get("run"),
            out.display()
        ));
    }
    for why in &l.problems {
        lines.push(format!("\n- report: {why}"));
    }
    for ((t, n), why) in &d.fails {
        lines.push(format!(
            "\n- {t} on {n} ranks: {} run(s) did not finish: {}",
            why.len(),
            why[0]
        ));
    }
    lines
}

/// Writes ledger.csv, results.csv and results.md into `out` for `transports`, under the
/// command line `cmdline`; returns results.md's text.
pub fn write(out: &Path, cmdline: &str, transports: &[String]) -> io::Result<String> {
    let d = read(out)?;
    fs::write(out.join("ledger.csv"), report::csv_text(&d.ledger))?;
    fs::write(out.join("results.csv"), results_csv(&d, transports))?;
    let text = markdown(&d, out, cmdline, transports).join("\n") + "\n";
    fs::write(out.join("results.md"), &text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_columns() {
        let ts: Vec<String> = [
            "mpich-diwarp-rc",
            "mpich-diwarp-hybrid4",
            "mpich-tcp",
            "ompi-diwarp",
            "ompi-diwarp-rc",
        ]
        .map(String::from)
        .into();
        let entry = |t: &str| crate::transports::find(t).unwrap();
        let cols = ratio_cols(
            &ts,
            |t| entry(t).is_diwarp(),
            |t| entry(t).mpi.name().to_owned(),
            |t| entry(t).mode_words(),
        );
        let cols: Vec<String> = cols.iter().map(|(a, b)| format!("{a}/{b}")).collect();
        assert_eq!(
            cols,
            [
                "mpich-diwarp-rc/mpich-tcp",
                "mpich-diwarp-hybrid4/mpich-tcp",
                "ompi-diwarp-rc/ompi-diwarp",
                "mpich-diwarp-hybrid4/mpich-diwarp-rc",
                "ompi-diwarp/ompi-diwarp-rc",
            ]
        );
    }

    #[test]
    fn the_tables_of_a_small_run() {
        let dir = std::env::temp_dir().join(format!("diwarp-mem-tables-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("transports.tsv"),
            "mpich-diwarp\tmpich\tdiwarp\thybrid (default)\t\nmpich-tcp\tmpich\ttcp\t\t\n",
        )
        .unwrap();
        let head = super::super::footprint::RAW_HEADER;
        fs::write(
            dir.join("raw.csv"),
            format!(
                "{head}\nmpich-diwarp,2,1,0,1,2048,3,1024,2048,5,6,4,8,1024\n\
                 mpich-diwarp,2,1,1,1,4096,3,1024,4096,5,7,4,8,1024\n\
                 mpich-tcp,2,1,0,1,2048,3,1024,8192,5,6,0,0,1024\n"
            ),
        )
        .unwrap();
        fs::write(
            dir.join("runs.csv"),
            "transport,ranks,run,status\nmpich-diwarp,2,1,\"ok\"\nmpich-tcp,2,1,\"ok\"\n\
             mpich-tcp,4,1,\"timeout after 120s\"\nmpich-diwarp,4,1,\"failed: x, y\"\n",
        )
        .unwrap();
        fs::write(dir.join("reports.csv"), "transport,ranks,run,file\n").unwrap();
        let ts = ["mpich-diwarp".to_owned(), "mpich-tcp".to_owned()];
        let md = write(&dir, "diwarp mem-bench --runs 1", &ts).unwrap();
        let csv = fs::read_to_string(dir.join("results.csv")).unwrap();
        let ledger = fs::read_to_string(dir.join("ledger.csv")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert!(md.starts_with(
            "# Memory per rank: diwarp and its peers\n\nMade with `diwarp mem-bench --runs 1`. "
        ));
        assert!(md.contains(
            "\n\n## Anonymous after traffic (MiB)\n\n\
             | ranks | mpich-diwarp | mpich-tcp | mpich-diwarp ÷ mpich-tcp |\n\
             |---:|---:|---:|---:|\n| 2 | 3.0 | 8.0 | 0.38 |\n| 4 | failed | failed | – |\n"
        ));
        assert!(md.contains("| 2 | 6.5 sockets, 4 → 8 KiB (ep –, RC –) | 6 sockets, 0 → 0 KiB |\n"));
        assert!(md.ends_with(
            "\n\n- mpich-diwarp on 4 ranks: 1 run(s) did not finish: failed: x, y\n\n\
             - mpich-tcp on 4 ranks: 1 run(s) did not finish: timeout after 120s\n"
        ));
        assert!(
            !md.contains("diwarp's ledger"),
            "no report, no ledger table"
        );
        assert!(csv.starts_with(
            "transport,ranks,metric,median_mib,samples\nmpich-diwarp,2,anon1_kb,3.00,2\n\
             mpich-diwarp,2,user_kernel1_kb,3.01,2\nmpich-diwarp,2,mpi_transport1_kb,2.01,2\n"
        ));
        assert_eq!(ledger.lines().count(), 1);
    }
}

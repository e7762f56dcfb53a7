//! The results from raw.csv, runs.csv and transports.tsv: results.csv (median, min, max per
//! size) and results.md (the runs, then one table per mode with diwarp's ratio to every peer).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use super::args::PtMode;
use super::plan::ladder;
use crate::harness::csv;

/// What the tables say about the run as a whole.
pub struct Context<'a> {
    pub cmdline: &'a str,
    pub nruns: u32,
    pub transports: &'a [String],
    pub modes: &'a [PtMode],
    pub size_min: u64,
    pub size_max: u64,
    /// Where the ranks ran, e.g. "2 ranks on one host, loopback".
    pub place: &'a str,
    /// "Host: NAME, N cores, kernel K."
    pub host: &'a str,
}

struct RunRow {
    status: String,
    max_size: Option<u64>,
    reason: String,
}

/// Everything read back from the output directory.
struct Data {
    vals: HashMap<(String, String, u64), Vec<f64>>,
    runs: HashMap<(String, String), Vec<RunRow>>,
    /// transport → (MPI, wrapper transport, diwarp's mode in words, settings)
    info: HashMap<String, Vec<String>>,
}

fn col(head: &[String], name: &str) -> io::Result<usize> {
    head.iter()
        .position(|h| h == name)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("no column {name}")))
}

fn read(dir: &Path) -> io::Result<Data> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut vals: HashMap<_, Vec<f64>> = HashMap::new();
    let (head, rows) = csv::rows(&fs::read_to_string(dir.join("raw.csv"))?);
    let (t, m, s, v) = (
        col(&head, "transport")?,
        col(&head, "mode")?,
        col(&head, "size")?,
        col(&head, "value")?,
    );
    for r in rows {
        let size = r[s].parse().map_err(|_| bad("raw.csv: size"))?;
        let value = r[v].parse().map_err(|_| bad("raw.csv: value"))?;
        vals.entry((r[t].clone(), r[m].clone(), size))
            .or_default()
            .push(value);
    }
    let mut runs: HashMap<_, Vec<RunRow>> = HashMap::new();
    let (head, rows) = csv::rows(&fs::read_to_string(dir.join("runs.csv"))?);
    let (t, m, st, mx, why) = (
        col(&head, "transport")?,
        col(&head, "mode")?,
        col(&head, "status")?,
        col(&head, "max_size")?,
        col(&head, "reason")?,
    );
    for r in rows {
        runs.entry((r[t].clone(), r[m].clone()))
            .or_default()
            .push(RunRow {
                status: r[st].clone(),
                max_size: r[mx].parse().ok(),
                reason: r[why].clone(),
            });
    }
    let info = fs::read_to_string(dir.join("transports.tsv"))?
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t').map(str::to_owned);
            Some((f.next()?, f.collect()))
        })
        .collect();
    Ok(Data { vals, runs, info })
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// A median as the tables show it: two decimals for small values, none for large ones.
pub fn fmt_value(x: f64, mode: PtMode) -> String {
    let big = if mode == PtMode::Latency {
        1000.0
    } else {
        10.0
    };
    if x < big {
        format!("{x:.2}")
    } else {
        format!("{x:.0}")
    }
}

/// A ratio as the tables show it.
pub fn fmt_ratio(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

/// The median of `v` from `nruns` runs, with the spread when it is 10 % of the median or more
/// and the count when some runs gave no value.
pub fn fmt_cell(v: &[f64], nruns: u32, mode: PtMode) -> String {
    let med = median(v);
    let mut c = fmt_value(med, mode);
    let (lo, hi) = min_max(v);
    if v.len() > 1 && med > 0.0 && (hi - lo) / med >= 0.10 {
        let _ = write!(c, " ±{:.0}%", 100.0 * (hi - lo) / med);
    }
    if (v.len() as u64) < u64::from(nruns) {
        let _ = write!(c, " ({}/{nruns})", v.len());
    }
    c
}

impl Data {
    fn cell(&self, t: &str, m: PtMode, s: u64, nruns: u32) -> String {
        if let Some(v) = self.vals.get(&(t.to_owned(), m.name().to_owned(), s)) {
            return fmt_cell(v, nruns, m);
        }
        let rows = self.runs_of(t, m);
        if !rows.is_empty() && rows.iter().all(|r| r.status == "ok") {
            return match rows[0].max_size {
                Some(mx) if s > mx => "not run".into(),
                _ => "missing".into(),
            };
        }
        let st: BTreeSet<&str> = rows
            .iter()
            .map(|r| r.status.as_str())
            .filter(|s| !matches!(*s, "ok" | "skipped"))
            .collect();
        let st: Vec<&str> = st.into_iter().collect();
        let st = if st.is_empty() {
            "failed".to_owned()
        } else {
            st.join("/")
        };
        format!("**{st}**")
    }

    fn ratio(&self, a: &str, b: &str, m: PtMode, s: u64) -> String {
        let get = |t: &str| self.vals.get(&(t.to_owned(), m.name().to_owned(), s));
        match (get(a), get(b)) {
            (Some(va), Some(vb)) if median(vb) != 0.0 => fmt_ratio(median(va) / median(vb)),
            _ => "–".into(),
        }
    }

    fn runs_of(&self, t: &str, m: PtMode) -> &[RunRow] {
        self.runs
            .get(&(t.to_owned(), m.name().to_owned()))
            .map_or(&[], Vec::as_slice)
    }

    fn is_diwarp(&self, t: &str) -> bool {
        self.info
            .get(t)
            .and_then(|f| f.get(1))
            .is_some_and(|w| w == "diwarp")
    }

    fn mode_words(&self, t: &str) -> &str {
        self.info
            .get(t)
            .and_then(|f| f.get(2))
            .map_or("", String::as_str)
    }
}

fn unit(m: PtMode) -> &'static str {
    match m {
        PtMode::Latency => "us, one-way (lower is better)",
        PtMode::Bw => "MB/s (higher is better)",
        PtMode::Bibw => "MB/s, both directions (higher is better)",
    }
}

fn results_csv(d: &Data, cx: &Context) -> String {
    let mut out = String::from("transport,mode,size,median,min,max\n");
    for t in cx.transports {
        for &m in cx.modes {
            let mut sizes: Vec<u64> = d
                .vals
                .keys()
                .filter(|(tt, mm, _)| tt == t && mm == m.name())
                .map(|k| k.2)
                .collect();
            sizes.sort_unstable();
            for s in sizes {
                let v = &d.vals[&(t.clone(), m.name().to_owned(), s)];
                let (lo, hi) = min_max(v);
                let _ = writeln!(out, "{t},{},{s},{:.2},{lo:.2},{hi:.2}", m.name(), median(v));
            }
        }
    }
    out
}

/// The Markdown pieces, joined by newlines (a piece ending in "\n" makes a blank line).
fn markdown(d: &Data, cx: &Context) -> Vec<String> {
    let n = cx.nruns;
    let mut md: Vec<String> = vec![
        "# MPI point-to-point: diwarp against its peers\n".into(),
        format!(
            "`{}` — {n} run(s) per transport and mode, interleaved; values are medians; ± marks a \
             max–min spread of 10 % of the median or more; (k/{n}) marks a value from fewer \
             runs. {}, shared memory off. {}\n",
            cx.cmdline, cx.place, cx.host
        ),
        "Ratios are diwarp ÷ peer (every diwarp transport, whatever its mode, to every peer; \
         with no peer, each diwarp transport to the first) for every mode: below 1 is better \
         for latency, above 1 is better for bw and bibw.\n"
            .into(),
        "## Runs\n".into(),
        "diwarp's mode: `FI_DIWARP_MODE` and the other settings of the transport's entry in \
         `diwarp transports` (hybrid (default) = none set, the provider's default).\n"
            .into(),
    ];
    let names: Vec<&str> = cx.modes.iter().map(|m| m.name()).collect();
    md.push(format!(
        "| transport | diwarp's mode | {} |",
        names.join(" | ")
    ));
    md.push(format!("|---|---|{}", "---|".repeat(names.len())));
    for t in cx.transports {
        let cells: Vec<String> = cx
            .modes
            .iter()
            .map(|&m| {
                let rows = d.runs_of(t, m);
                let ok = rows.iter().filter(|r| r.status == "ok").count();
                let mut c = format!("{ok}/{} ok", rows.len());
                if let Some(bad) = rows.iter().find(|r| r.status != "ok") {
                    let why: String = bad.reason.replace('|', "\\|").chars().take(160).collect();
                    let _ = write!(c, "; {}: {why}", bad.status);
                }
                c
            })
            .collect();
        let words = match d.mode_words(t) {
            "" => "–",
            w => w,
        };
        md.push(format!("| {t} | {words} | {} |", cells.join(" | ")));
    }
    md.push(String::new());
    let diwarps: Vec<&String> = cx.transports.iter().filter(|t| d.is_diwarp(t)).collect();
    let peers: Vec<&String> = cx.transports.iter().filter(|t| !d.is_diwarp(t)).collect();
    for &m in cx.modes {
        md.push(format!("## {} ({})\n", m.name(), unit(m)));
        let mut head: Vec<String> = vec!["size".into()];
        head.extend(diwarps.iter().map(|d| d.to_string()));
        for p in &peers {
            head.push(p.to_string());
            head.extend(diwarps.iter().map(|d| format!("{d} ÷ {p}")));
        }
        if peers.is_empty() {
            head.extend(
                diwarps
                    .iter()
                    .skip(1)
                    .map(|d| format!("{d} ÷ {}", diwarps[0])),
            );
        }
        md.push(format!("| {} |", head.join(" | ")));
        md.push(format!("|{}", "---:|".repeat(head.len())));
        let mut sizes: BTreeSet<u64> = ladder(cx.size_min, cx.size_max, m).into_iter().collect();
        sizes.extend(d.vals.keys().filter(|k| k.1 == m.name()).map(|k| k.2));
        for s in sizes {
            let mut row = vec![s.to_string()];
            row.extend(diwarps.iter().map(|t| d.cell(t, m, s, n)));
            for p in &peers {
                row.push(d.cell(p, m, s, n));
                row.extend(diwarps.iter().map(|t| d.ratio(t, p, m, s)));
            }
            if peers.is_empty() {
                row.extend(diwarps.iter().skip(1).map(|t| d.ratio(t, diwarps[0], m, s)));
            }
            md.push(format!("| {} |", row.join(" | ")));
        }
        md.push(String::new());
    }
    md
}

/// Writes results.csv and results.md into `dir` (which holds raw.csv, runs.csv,
/// transports.tsv and launch.txt); returns the tables for the terminal.
pub fn write(dir: &Path, cx: &Context) -> io::Result<String> {
    let d = read(dir)?;
    fs::write(dir.join("results.csv"), results_csv(&d, cx))?;
    let mut md = markdown(&d, cx);
    let tables = md[3..].join("\n");
    let launch = fs::read_to_string(dir.join("launch.txt")).unwrap_or_default();
    let launch = launch.trim().replace("env '' \\\n", "");
    if !launch.is_empty() {
        md.push("## Launch lines\n".into());
        md.push(format!("```\n{launch}\n```\n"));
    }
    fs::write(dir.join("results.md"), md.join("\n"))?;
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_ratios() {
        assert_eq!(fmt_value(2.345_67, PtMode::Latency), "2.35");
        assert_eq!(fmt_value(1234.5, PtMode::Latency), "1234");
        assert_eq!(fmt_value(9.999, PtMode::Bw), "10.00");
        assert_eq!(fmt_value(123.4, PtMode::Bw), "123");
        assert_eq!(fmt_ratio(0.456), "0.46");
        assert_eq!(fmt_ratio(12.34), "12.3");
        assert_eq!(fmt_cell(&[1.0, 2.0, 3.0], 3, PtMode::Latency), "2.00 ±100%");
        assert_eq!(fmt_cell(&[10.0, 10.5, 10.9], 3, PtMode::Latency), "10.50");
        assert_eq!(
            fmt_cell(&[10.0, 12.0], 3, PtMode::Latency),
            "11.00 ±18% (2/3)"
        );
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    const RAW: &str = "transport,mode,run,size,value
mpich-diwarp,latency,1,1,2.0
mpich-diwarp,latency,2,1,2.4
mpich-diwarp,latency,1,2,3.0
mpich-diwarp,latency,2,2,3.0
mpich-tcp,latency,1,1,4.0
mpich-tcp,latency,2,1,4.0
mpich-diwarp,bw,1,1,100
mpich-diwarp,bw,2,1,110
mpich-tcp,bw,1,1,50
";
    const RUNS: &str = "transport,mode,run,status,seconds,max_size,reason
mpich-diwarp,latency,1,ok,1.2,2,\"\"
mpich-diwarp,latency,2,ok,1.1,2,\"\"
mpich-tcp,latency,1,ok,1.0,1,\"\"
mpich-tcp,latency,2,ok,1.0,1,\"\"
mpich-diwarp,bw,1,ok,1.0,2,\"\"
mpich-diwarp,bw,2,ok,1.0,2,\"\"
mpich-tcp,bw,1,hang,20.0,2,\"rank 0 | stuck, at 2\"
mpich-tcp,bw,2,skipped,0,2,\"hung in run 1\"
";
    const TSV: &str = "mpich-diwarp\tmpich\tdiwarp\thybrid (default)\t
mpich-tcp\tmpich\ttcp\t\t
";

    #[test]
    fn the_tables_of_a_small_run() {
        let dir = std::env::temp_dir().join(format!("diwarp-bench-tables-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("raw.csv"), RAW).unwrap();
        fs::write(dir.join("runs.csv"), RUNS).unwrap();
        fs::write(dir.join("transports.tsv"), TSV).unwrap();
        fs::write(
            dir.join("launch.txt"),
            "[mpich-tcp]\n# timeout\nenv '' \\\n   mpiexec x\n",
        )
        .unwrap();
        let transports = ["mpich-diwarp".to_owned(), "mpich-tcp".to_owned()];
        let cx = Context {
            cmdline: "diwarp bench --runs 2",
            nruns: 2,
            transports: &transports,
            modes: &[PtMode::Latency, PtMode::Bw],
            size_min: 0,
            size_max: 2,
            place: "2 ranks on one host, loopback",
            host: "Host: h, 2 cores, kernel k.",
        };
        let tables = write(&dir, &cx).unwrap();
        let md = fs::read_to_string(dir.join("results.md")).unwrap();
        let csv = fs::read_to_string(dir.join("results.csv")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            csv,
            "transport,mode,size,median,min,max
mpich-diwarp,latency,1,2.20,2.00,2.40
mpich-diwarp,latency,2,3.00,3.00,3.00
mpich-diwarp,bw,1,105.00,100.00,110.00
mpich-tcp,latency,1,4.00,4.00,4.00
mpich-tcp,bw,1,50.00,50.00,50.00
"
        );
        let expected_tables = "## Runs

diwarp's mode: `FI_DIWARP_MODE` and the other settings of the transport's entry in `diwarp transports` (hybrid (default) = none set, the provider's default).

| transport | diwarp's mode | latency | bw |
|---|---|---|---|
| mpich-diwarp | hybrid (default) | 2/2 ok | 2/2 ok |
| mpich-tcp | – | 2/2 ok | 0/2 ok; hang: rank 0 \\| stuck, at 2 |

## latency (us, one-way (lower is better))

| size | mpich-diwarp | mpich-tcp | mpich-diwarp ÷ mpich-tcp |
|---:|---:|---:|---:|
| 0 | missing | missing | – |
| 1 | 2.20 ±18% | 4.00 | 0.55 |
| 2 | 3.00 | not run | – |

## bw (MB/s (higher is better))

| size | mpich-diwarp | mpich-tcp | mpich-diwarp ÷ mpich-tcp |
|---:|---:|---:|---:|
| 1 | 105 | 50 (1/2) | 2.10 |
| 2 | missing | **hang** | – |
";
        assert_eq!(tables, expected_tables);
        let head = "# MPI point-to-point: diwarp against its peers

`diwarp bench --runs 2` — 2 run(s) per transport and mode, interleaved; values are medians; ± marks a max–min spread of 10 % of the median or more; (k/2) marks a value from fewer runs. 2 ranks on one host, loopback, shared memory off. Host: h, 2 cores, kernel k.

Ratios are diwarp ÷ peer (every diwarp transport, whatever its mode, to every peer; with no peer, each diwarp transport to the first) for every mode: below 1 is better for latency, above 1 is better for bw and bibw.

";
        let tail = "\n## Launch lines\n\n```\n[mpich-tcp]\n# timeout\n   mpiexec x\n```\n";
        assert_eq!(md, format!("{head}{expected_tables}{tail}"));
    }
}

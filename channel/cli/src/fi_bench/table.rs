//! The Markdown table of a run's CSV: per size, each provider's median one-way latency and
//! diwarp's ratio to each of the others.

use std::collections::{BTreeSet, HashMap};

use super::pingpong::PROVIDERS;
use crate::harness::csv;

/// The CSV's first line.
pub const HEADER: &str = "provider,size,run,latency_us";

/// The median of `v` (not empty): the mean of the middle two for an even count.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The table of `csv_text` (the CSV of a run, [`HEADER`] first), and the line naming `csv_name`.
/// A size without results from a provider says "failed" there, and "–" for the ratio.
pub fn markdown(csv_text: &str, csv_name: &str) -> String {
    let (head, rows) = csv::rows(csv_text);
    let col = |name: &str| head.iter().position(|h| h == name);
    let (Some(p), Some(s), Some(l)) = (col("provider"), col("size"), col("latency_us")) else {
        return format!("no results: {csv_name} is not a fi-bench CSV\n");
    };
    let mut values: HashMap<(&str, u64), Vec<f64>> = HashMap::new();
    let mut sizes = BTreeSet::new();
    for r in &rows {
        let (Some(size), Some(v)) = (
            r.get(s).and_then(|x| x.parse::<u64>().ok()),
            r.get(l).and_then(|x| x.parse::<f64>().ok()),
        ) else {
            continue;
        };
        sizes.insert(size);
        values.entry((r[p].as_str(), size)).or_default().push(v);
    }
    let med: HashMap<(&str, u64), f64> = values.into_iter().map(|(k, v)| (k, median(v))).collect();
    let diwarp = PROVIDERS[0];
    let peers = &PROVIDERS[1..];
    let mut t = String::from("| size (B) |");
    for p in PROVIDERS {
        t += &format!(" {p} (us) |");
    }
    for q in peers {
        t += &format!(" {diwarp} ÷ {q} |");
    }
    t += &format!(
        "\n|---:|{}\n",
        "---:|".repeat(PROVIDERS.len() + peers.len())
    );
    for size in sizes {
        let mut cells: Vec<String> = PROVIDERS
            .iter()
            .map(|p| {
                med.get(&(p, size))
                    .map_or("failed".into(), |m| format!("{m:.2}"))
            })
            .collect();
        for q in peers {
            cells.push(match (med.get(&(diwarp, size)), med.get(&(q, size))) {
                (Some(d), Some(m)) => format!("{:.2}", d / m),
                _ => "–".into(),
            });
        }
        t += &format!("| {size} | {} |\n", cells.join(" | "));
    }
    t + &format!("\nOne-way latency (round trip / 2), medians of the runs; CSV: {csv_name}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_ratios_and_gaps() {
        let csv = "provider,size,run,latency_us\n\
                   diwarp,1,1,5.00\ntcp;ofi_rxm,1,1,10.00\nudp;ofi_rxd,1,1,20.00\n\
                   diwarp,1024,1,6.00\ntcp;ofi_rxm,1024,1,8.00\n\
                   diwarp,1,2,7.00\ntcp;ofi_rxm,1,2,12.00\nudp;ofi_rxd,1,2,20.00\n\
                   diwarp,1,3,5.50\n\
                   udp;ofi_rxd,65536,1,180.64\n";
        assert_eq!(
            markdown(csv, "out.csv"),
            "| size (B) | diwarp (us) | tcp;ofi_rxm (us) | udp;ofi_rxd (us) | \
             diwarp ÷ tcp;ofi_rxm | diwarp ÷ udp;ofi_rxd |\n\
             |---:|---:|---:|---:|---:|---:|\n\
             | 1 | 5.50 | 11.00 | 20.00 | 0.50 | 0.28 |\n\
             | 1024 | 6.00 | 8.00 | failed | 0.75 | – |\n\
             | 65536 | failed | failed | 180.64 | – | – |\n\
             \n\
             One-way latency (round trip / 2), medians of the runs; CSV: out.csv\n"
        );
    }

    #[test]
    fn no_rows_give_the_header_alone() {
        let t = markdown(&format!("{HEADER}\n"), "r.csv");
        assert_eq!(t.lines().count(), 4, "{t}");
        assert!(t.ends_with("|---:|---:|---:|---:|---:|---:|\n\nOne-way latency (round trip / 2), medians of the runs; CSV: r.csv\n"));
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}

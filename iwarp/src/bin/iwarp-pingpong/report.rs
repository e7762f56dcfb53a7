//! Medians over repeated runs, printed as a Markdown table with ratios to raw-udp.

use std::fmt::Write as _;
use std::path::Path;

use crate::args::{Args, Kind};
use crate::link::Result;

pub struct Row {
    pub kind: Kind,
    pub size: usize,
    /// One-way latency of each run, seconds.
    pub latency: Vec<f64>,
    /// Streaming bandwidth of each run, bytes per second.
    pub bandwidth: Vec<f64>,
}

impl Row {
    pub fn new(kind: Kind, size: usize) -> Self {
        Row {
            kind,
            size,
            latency: Vec::new(),
            bandwidth: Vec::new(),
        }
    }

    pub fn latency_us(&self) -> f64 {
        median(&self.latency) * 1e6
    }

    pub fn bandwidth_mbs(&self) -> f64 {
        median(&self.bandwidth) / 1e6
    }

    fn spread_pct(values: &[f64]) -> f64 {
        let (lo, hi) = values
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        100.0 * (hi - lo) / median(values)
    }
}

#[derive(Default)]
pub struct Report {
    pub rows: Vec<Row>,
}

impl Report {
    fn floor(&self, size: usize) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.kind == Kind::RawUdp && r.size == size)
    }

    pub fn print(&self, args: &Args) {
        print!("{}", self.markdown(args));
    }

    pub fn markdown(&self, args: &Args) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "one-way latency = round trip / 2 and streaming bandwidth (window {}), median of {} runs; \
             spread = (max-min)/median; crc {}, markers {}{}\n",
            args.window,
            args.runs,
            match (args.crc.on(), args.crc_same_host) {
                (false, _) => "off",
                (true, false) => "on (RD: between hosts, or under the fault layer)",
                (true, true) => "on",
            },
            if args.markers.on() { "on" } else { "off" },
            if args.verify { ", every byte verified" } else { "" },
        );
        let _ = writeln!(
            out,
            "| qp | size (B) | latency (us) | spread | bandwidth (MB/s) | spread | latency / raw-udp | bandwidth / raw-udp |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by_key(|r| r.size);
        for r in rows {
            let (lat_ratio, bw_ratio) = match self.floor(r.size) {
                Some(f) => (
                    format!("{:.2}x", r.latency_us() / f.latency_us()),
                    format!("{:.2}x", r.bandwidth_mbs() / f.bandwidth_mbs()),
                ),
                None => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} | {:.0}% | {:.1} | {:.0}% | {} | {} |",
                r.kind.name(),
                r.size,
                r.latency_us(),
                Row::spread_pct(&r.latency),
                r.bandwidth_mbs(),
                Row::spread_pct(&r.bandwidth),
                lat_ratio,
                bw_ratio
            );
        }
        out
    }

    pub fn write_csv(&self, path: &Path) -> Result<()> {
        let mut out = String::from("qp,size,run,latency_us,bandwidth_mbs\n");
        for r in &self.rows {
            for (i, (l, b)) in r.latency.iter().zip(&r.bandwidth).enumerate() {
                let _ = writeln!(
                    out,
                    "{},{},{},{:.3},{:.1}",
                    r.kind.name(),
                    r.size,
                    i,
                    l * 1e6,
                    b / 1e6
                );
            }
        }
        std::fs::write(path, out)?;
        Ok(())
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

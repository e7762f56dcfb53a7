//! The per-rank memory report: one JSON object per line (`FI_DIWARP_MEM_REPORT`), at finalize
//! and, with `FI_DIWARP_MEM_REPORT_MS`, while running. Every field is described in
//! `channel/mem-report.schema.json`, which reports are checked against; sizes are bytes.

use serde::Serialize;

use super::kernel::KernelMemory;
use super::proc::ProcMemory;
use policies::Ledger;

/// The report's format; a reader checks it first.
pub const SCHEMA: &str = "diwarp-mem-report/1";

/// The provider's heap and the ledger when the endpoint was enabled.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Baseline {
    pub provider_heap: u64,
    pub ledger: u64,
}

/// The heap as the allocators see it.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Heap {
    /// Bytes the provider's own code holds (every allocation of this library is counted).
    pub provider: u64,
    /// glibc's heap in use and held from the kernel, for the whole process.
    pub process_in_use: u64,
    pub process_held: u64,
}

/// Growth since the baseline, and the share of the provider's growth the ledger explains.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Growth {
    pub provider_heap: i64,
    pub ledger: i64,
    /// `ledger / provider_heap`, when the provider's heap grew.
    pub explained: Option<f64>,
}

/// Every counter the layers keep.
#[derive(Clone, Debug, Serialize)]
pub struct Counters {
    pub data: crate::data::Stats,
    pub peers: crate::peer::PeerStats,
    pub paths: crate::path::Counters,
    pub queue_pair: iwarp::verbs::RdStats,
    /// diwarp's fault layer, when on.
    pub faults: Option<iwarp::verbs::FaultStats>,
    /// Times the progress thread made progress for an application that was not polling.
    pub progress_wakes: u64,
    /// Each rail, the first first (`queue_pair` sums them).
    pub rails: Vec<RailCounters>,
}

/// What one rail carried.
#[derive(Debug, Clone, Serialize)]
pub struct RailCounters {
    /// Its UDP socket's address.
    pub address: String,
    /// Data datagrams sent for the first time and again, and datagrams read.
    pub data_sent: u64,
    pub retransmits: u64,
    pub datagrams_read: u64,
    /// Rendezvous chunks it carried, and its measured rate (chunks per second, 0 until
    /// measured).
    pub chunks: u64,
    pub chunks_per_s: f64,
    /// Times a peer was silent on it with messages outstanding for the rail timeout; times
    /// it was taken as down for a peer, and found answering again; messages it gave back
    /// that went again over another rail, and that failed with no rail left.
    pub stalls: u64,
    pub taken_down: u64,
    pub back_up: u64,
    pub moved: u64,
    pub failed: u64,
}

#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub schema: &'static str,
    pub pid: u32,
    /// The endpoint's name (address, port, queue pair).
    pub endpoint: String,
    /// `running` (periodic) or `finalize`.
    pub at: &'static str,
    /// Since the endpoint was enabled.
    pub elapsed_ms: u64,
    pub ledger: &'a Ledger,
    /// What traffic may grow the pools by (`FI_DIWARP_MEM_BUDGET`).
    pub budget: crate::data::Budget,
    pub baseline: Baseline,
    pub growth: Growth,
    /// Provider heap the ledger does not account for (`heap.provider - ledger.total`).
    pub unexplained: i64,
    pub heap: Heap,
    pub process: ProcMemory,
    pub kernel: KernelMemory,
    pub counters: Counters,
}

impl Report<'_> {
    /// The growth figures from the heap, the ledger and the baseline.
    pub fn growth(heap: &Heap, ledger: &Ledger, base: &Baseline) -> Growth {
        let provider_heap = heap.provider as i64 - base.provider_heap as i64;
        let ledger = ledger.total() as i64 - base.ledger as i64;
        Growth {
            provider_heap,
            ledger,
            explained: (provider_heap > 0).then(|| ledger as f64 / provider_heap as f64),
        }
    }

    /// One line of JSON.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("a report always serialises");
        s.push('\n');
        s
    }
}

/// Appends `line` to `dest`: a path (`%p` becomes the process id) or `-` for stderr.
pub fn write(dest: &str, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    if dest == "-" {
        return std::io::stderr().write_all(line.as_bytes());
    }
    let path = dest.replace("%p", &std::process::id().to_string());
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

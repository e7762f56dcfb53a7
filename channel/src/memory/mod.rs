//! The endpoint's memory ledger and report (`FI_DIWARP_MEM_REPORT`): each layer's typed
//! memory charged to the ledger's accounts ([`charge`]), what the process and the kernel hold
//! ([`proc`], [`kernel`]), and the JSON written per rank ([`report`]).

pub mod kernel;
pub mod proc;
pub mod rc_cost;
pub mod report;

use std::time::{Duration, Instant};

use policies::{Account, Ledger, Sample, Usage};

use crate::data::Memory;

/// An endpoint's ledger, what it started from, and when the next report is due.
#[derive(Debug, Default)]
pub struct Watch {
    pub ledger: Ledger,
    pub baseline: report::Baseline,
    pub enabled_at: Option<Instant>,
    pub next_report: Option<Instant>,
}

impl Watch {
    /// Starts from the first sample, at `now`; reports every `every` from then on, if set.
    pub fn start(
        &mut self,
        s: &Sample,
        provider_heap: usize,
        now: Instant,
        every: Option<Duration>,
    ) {
        self.ledger.record(s);
        self.baseline = report::Baseline {
            provider_heap: provider_heap as u64,
            ledger: self.ledger.total() as u64,
        };
        self.enabled_at = Some(now);
        self.next_report = every.map(|e| now + e);
    }
}

/// What the layers outside the data path hold, read beside it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shared {
    /// The address vector's bytes and the names it holds.
    pub av: (usize, usize),
    /// The completion queues' entries.
    pub cqs: usize,
    /// The domain's memory-region table.
    pub mrs: usize,
}

/// Charges every layer's memory to its account.
pub fn charge(d: &Memory, shared: &Shared) -> Sample {
    let qp = &d.queue_pair;
    // Lent chunks sit in the engine's flight once sent, in the send queue before.
    let lent_in_flight = d.lent.min(qp.retransmit);
    let lent_queued = (d.lent - lent_in_flight).min(qp.send_queue);
    let mut s = Sample::default();
    s.charge(Account::PeerState, Usage::per_peer(qp.peer_state, qp.peers))
        .charge(
            Account::SendQueue,
            Usage::bytes(qp.send_queue - lent_queued),
        )
        .charge(
            Account::Retransmit,
            Usage::bytes(qp.retransmit - lent_in_flight),
        )
        .charge(Account::ReceiveRing, Usage::bytes(qp.receive_ring))
        .charge(Account::Staged, Usage::bytes(qp.staged))
        .charge(
            Account::Unexpected,
            Usage {
                bytes: d.unexpected,
                peak: d.unexpected_peak,
                peers: None,
            },
        )
        .charge(
            Account::HeldPushes,
            Usage {
                bytes: d.held_pushes,
                peak: d.held_pushes_peak,
                peers: None,
            },
        )
        .charge(Account::SendPool, Usage::bytes(d.send_buffers + qp.pool))
        .charge(Account::Rendezvous, Usage::bytes(d.rendezvous))
        .charge(Account::Rma, Usage::bytes(shared.mrs))
        .charge(
            Account::AddressVector,
            Usage::per_peer(shared.av.0, shared.av.1),
        )
        .charge(
            Account::CompletionQueues,
            Usage::bytes(shared.cqs + d.completions),
        )
        .charge(Account::Matching, Usage::bytes(d.matching))
        .charge(Account::Engine, Usage::per_peer(qp.engine, qp.peers))
        .charge(Account::FaultLayer, Usage::bytes(qp.faults));
    s
}

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
    // The rest of the lent bytes are kept by RC connections until acknowledged.
    let lent_on_rc = (d.lent - lent_in_flight - lent_queued).min(d.connections);
    let mut s = Sample::default();
    s.charge(
        Account::PeerState,
        Usage::per_peer(qp.peer_state + d.peers, qp.peers),
    )
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
    .charge(Account::FaultLayer, Usage::bytes(qp.faults))
    .charge(
        Account::Connections,
        Usage::per_peer(d.connections - lent_on_rc, d.connections_open),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use policies::Scale;

    /// Every field of every layer's memory lands in exactly one account: with a distinct
    /// power of two in each field, each account's bytes name the fields charged to it.
    #[test]
    fn every_field_is_charged_once() {
        let qp = iwarp::verbs::RdMemory {
            peers: 3,
            peer_state: 1 << 1,
            send_queue: 1 << 2,
            retransmit: 1 << 3,
            receive_ring: 1 << 4,
            staged: 1 << 5,
            pool: 1 << 6,
            engine: 1 << 7,
            faults: 1 << 8,
            // Counts and a share of `peer_state`, not charged on their own.
            active_peers: 5,
            peer_entries: 1,
        };
        let d = Memory {
            queue_pair: qp,
            unexpected: 1 << 9,
            unexpected_peak: 1 << 20,
            held_pushes: 1 << 10,
            held_pushes_peak: 1 << 21,
            rendezvous: 1 << 11,
            matching: 1 << 12,
            send_buffers: 1 << 13,
            completions: 1 << 14,
            lent: 0,
            peers: 1 << 18,
            connections: 1 << 19,
            connections_open: 2,
        };
        let shared = Shared {
            av: (1 << 15, 4),
            cqs: 1 << 16,
            mrs: 1 << 17,
        };
        let s = charge(&d, &shared);
        let want = [
            (Account::PeerState, (1 << 1) | (1 << 18)),
            (Account::SendQueue, 1 << 2),
            (Account::Retransmit, 1 << 3),
            (Account::ReceiveRing, 1 << 4),
            (Account::Staged, 1 << 5),
            (Account::Unexpected, 1 << 9),
            (Account::HeldPushes, 1 << 10),
            (Account::SendPool, (1 << 13) | (1 << 6)),
            (Account::Rendezvous, 1 << 11),
            (Account::Rma, 1 << 17),
            (Account::AddressVector, 1 << 15),
            (Account::CompletionQueues, (1 << 16) | (1 << 14)),
            (Account::Matching, 1 << 12),
            (Account::Engine, 1 << 7),
            (Account::FaultLayer, 1 << 8),
            (Account::Connections, 1 << 19),
        ];
        assert_eq!(want.len(), Account::ALL.len());
        for (a, bytes) in want {
            assert_eq!(s.get(a).bytes, bytes, "{a:?}");
            let peers = s.get(a).peers;
            let counted = matches!(a.scale(), Scale::Peers | Scale::Connections);
            assert_eq!(peers.is_some(), counted, "{a:?}");
        }
        assert_eq!(s.get(Account::AddressVector).peers, Some(4));
        assert_eq!(s.get(Account::PeerState).peers, Some(3));
        assert_eq!(s.get(Account::Unexpected).peak, 1 << 20);
        assert_eq!(s.get(Account::HeldPushes).peak, 1 << 21);
        assert_eq!(s.get(Account::Connections).peers, Some(2));
        assert_eq!(s.total(), (1 << 20) - 2, "bits 1 to 19, each once");
    }

    /// The application's buffers lent to the queue pair are not charged: taken from the
    /// engine's flight first, then from the send queue.
    #[test]
    fn lent_bytes_are_not_charged() {
        let mut d = Memory::default();
        d.queue_pair.retransmit = 100;
        d.queue_pair.send_queue = 50;
        d.lent = 120;
        let s = charge(&d, &Shared::default());
        assert_eq!(s.get(Account::Retransmit).bytes, 0);
        assert_eq!(s.get(Account::SendQueue).bytes, 30);
    }
}

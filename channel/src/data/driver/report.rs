//! What the data path reports of itself: transport counters per rail, memory by account, and
//! the sockets whose kernel buffers the ledger reads back.

use iwarp::verbs::WorkCompletion;

use super::super::ops::Outgoing;
use super::super::Memory;
use super::{DataPath, RailEvents};
use crate::path;

impl DataPath {
    /// The queue pairs' transport counters (datagrams, retransmissions, drops), summed over
    /// the rails.
    pub fn rd_stats(&self) -> iwarp::verbs::RdStats {
        self.rails.stats()
    }

    /// Each rail's transport counters, what the striping sent over it, and its failures.
    pub fn rail_stats(&self) -> Vec<(iwarp::verbs::RdStats, path::stripe::LaneStats, RailEvents)> {
        self.rails
            .stats_by_rail()
            .into_iter()
            .zip(self.stripe.stats())
            .zip(self.failover.by_rail.iter().copied())
            .map(|((rd, lane), ev)| (rd, lane, ev))
            .collect()
    }

    /// The fault layer's counters, when it is on.
    pub fn fault_stats(&self) -> Option<iwarp::verbs::FaultStats> {
        self.rails.fault_stats()
    }

    pub fn memory(&self) -> Memory {
        use crate::hash::map_bytes;
        let st = &self.st;
        let copies_queued: usize = st
            .tx
            .backlog
            .iter()
            .map(|o| match o {
                Outgoing::Message { bytes, .. } => bytes.len(),
                Outgoing::Again { head, data, .. } => head.len() + data.len(),
                Outgoing::Chunk { .. } | Outgoing::Served { .. } => 0,
            })
            .sum();
        Memory {
            queue_pair: self.rails.memory(),
            unexpected: st.rx.matcher.account().current(),
            unexpected_peak: st.rx.matcher.account().peak(),
            held_pushes: st.rx.parked.memory(),
            held_pushes_peak: st.rx.parked.peak(),
            rendezvous: map_bytes(&st.tx.sends)
                + map_bytes(&st.rx.rndv)
                + map_bytes(&st.tx.roles)
                + st.live.fresh.capacity() * std::mem::size_of::<crate::peer::SlotId>()
                + map_bytes(&st.rx.pushing_into)
                + st.rx.multi.memory_bytes()
                + st.tx.backlog.capacity() * std::mem::size_of::<Outgoing>()
                // Copies not yet posted: the queue pair does not hold them yet.
                + copies_queued,
            matching: st.rx.matcher.structure_bytes(),
            send_buffers: st.tx.bufs.spare_bytes() + st.tx.bufs.slack_bytes(),
            completions: self.wcs.capacity() * std::mem::size_of::<WorkCompletion>()
                + self.rails.work_queue_bytes(),
            lent: st.tx.lent,
            peers: st.peers.memory() + self.paths.policy_memory(),
            connections: self.paths.memory(),
            connections_open: self.paths.connections(),
        }
    }

    /// The sockets the queue pair holds, for reading back the kernel's share.
    pub fn sockets(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        let mut v = self.rails.sockets();
        v.extend(self.paths.sockets());
        v
    }
}

//! The endpoint's RD queue pairs, one per rail (each on its own UDP socket, all with one queue
//! pair number), seen as one where the data path does not care which rail: counters and bytes
//! summed, the earliest deadline, every socket. Which rail a message takes is decided where it
//! is posted (`driver`): the peer's home rail, or for rendezvous data the striping's pick.

use std::net::UdpSocket;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use iwarp::verbs::{FaultStats, QpConfig, QueuePair, RdMemory, RdQp, RdStats};

use crate::diag;
use crate::error::{Errno, Result};
use crate::path::Rail;

pub struct RdRails {
    qps: Vec<RdQp>,
}

impl RdRails {
    /// A queue pair on each socket, rail 0 first; the first one's number is every one's.
    pub fn open(sockets: Vec<UdpSocket>, mut qc: QpConfig) -> Result<RdRails> {
        let mut qps: Vec<RdQp> = Vec::with_capacity(sockets.len());
        for (rail, socket) in sockets.into_iter().enumerate() {
            qc.qpn = qps.first().map(|q| q.qpn());
            let mut qp = RdQp::create(qc.clone()).map_err(|e| {
                diag!(
                    Warn,
                    EpCtrl,
                    "cannot create the RD queue pair of rail {rail}: {e}"
                );
                Errno::INVAL
            })?;
            qp.attach_udp(socket).map_err(|e| {
                diag!(
                    Warn,
                    EpCtrl,
                    "cannot attach the UDP socket of rail {rail}: {e}"
                );
                Errno::OTHER
            })?;
            qps.push(qp);
        }
        if qps.is_empty() {
            return Err(Errno::INVAL);
        }
        Ok(RdRails { qps })
    }

    pub fn len(&self) -> usize {
        self.qps.len()
    }

    pub fn qpn(&self) -> u32 {
        self.qps[0].qpn()
    }

    /// The first rail's queue pair (where every peer starts).
    pub fn first(&self) -> &RdQp {
        &self.qps[0]
    }

    #[cfg(test)]
    pub fn first_mut(&mut self) -> &mut RdQp {
        &mut self.qps[0]
    }

    pub fn qp(&mut self, rail: Rail) -> &mut RdQp {
        &mut self.qps[rail.0 as usize]
    }

    /// Whether `rail`'s queue pair takes another send now.
    pub fn has_room(&self, rail: Rail) -> bool {
        self.qps
            .get(rail.0 as usize)
            .is_some_and(|q| q.send_queue_space() > 0)
    }

    pub fn cork(&mut self) {
        self.qps.iter_mut().for_each(RdQp::cork);
    }

    pub fn uncork(&mut self) {
        self.qps.iter_mut().for_each(RdQp::uncork);
    }

    pub fn flush_acks(&mut self) {
        self.qps.iter_mut().for_each(RdQp::flush_acks);
    }

    pub fn copied_bytes(&self) -> usize {
        self.qps.iter().map(RdQp::copied_bytes).sum()
    }

    pub fn sends_outstanding(&self) -> usize {
        self.qps.iter().map(|q| q.sends_outstanding()).sum()
    }

    pub fn datagrams_read(&self) -> u64 {
        self.qps.iter().map(RdQp::datagrams_read).sum()
    }

    pub fn datagrams_read_of(&self, rail: Rail) -> u64 {
        self.qps
            .get(usize::from(rail.0))
            .map_or(0, RdQp::datagrams_read)
    }

    pub fn work_queue_bytes(&self) -> usize {
        self.qps.iter().map(|q| q.work_queue_bytes()).sum()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.qps.iter().filter_map(|q| q.next_deadline()).min()
    }

    pub fn next_deadline_of(&self, rail: Rail) -> Option<Instant> {
        self.qps.get(usize::from(rail.0))?.next_deadline()
    }

    pub fn stats(&self) -> RdStats {
        self.fold(RdQp::stats)
    }

    /// Each rail's counters, rail 0 first.
    pub fn stats_by_rail(&self) -> Vec<RdStats> {
        self.qps.iter().map(RdQp::stats).collect()
    }

    pub fn memory(&self) -> RdMemory {
        self.fold(RdQp::memory)
    }

    pub fn fault_stats(&self) -> Option<FaultStats> {
        let mut each = self.qps.iter().filter_map(RdQp::fault_stats);
        let mut sum = each.next()?;
        each.for_each(|f| sum += f);
        Some(sum)
    }

    fn fold<T: Default + std::ops::AddAssign>(&self, f: impl Fn(&RdQp) -> T) -> T {
        let mut sum = T::default();
        for q in &self.qps {
            sum += f(q);
        }
        sum
    }

    /// Every rail's sockets, the first rail's first.
    pub fn sockets(&self) -> Vec<BorrowedFd<'_>> {
        self.qps.iter().flat_map(RdQp::sockets).collect()
    }
}

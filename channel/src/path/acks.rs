//! RC's per-peer acknowledgements: what a connection carried is done once the peer's
//! per-peer acknowledgement covers it; a peer that asked for an acknowledgement no message
//! carried gets one alone; a connection waiting too long, or draining after a demotion, asks
//! for one; a drained connection closes.

use std::net::SocketAddr;
use std::time::Instant;

use super::{RcPaths, PROBE_AFTER};
use crate::peer::PeerTable;

impl<R> RcPaths<R> {
    /// After a progress pass: settles what each peer acknowledged (its roles to `done`),
    /// answers the peers in `owed_before` (owed since the last pass) that are still owed,
    /// asks overdue and newly draining peers, and closes what drained. Those owed for this
    /// pass's arrivals wait for the next one (or [`RcPaths::send_owed_acks`], before the
    /// progress thread sleeps): the application's answer, if it sends one, carries them.
    pub fn acknowledge(
        &mut self,
        now: Instant,
        peers: &mut PeerTable,
        owed_before: Vec<SocketAddr>,
        done: &mut Vec<R>,
    ) {
        self.settle(|a| peers.acked(a), done);
        for addr in owed_before {
            if peers.owes(addr) {
                self.post_ack(peers, addr, false);
            }
        }
        for addr in self.overdue(now) {
            self.post_ack(peers, addr, true);
        }
        for addr in self.unasked_drains() {
            self.post_ack(peers, addr, true);
        }
        self.close_drained(now, peers);
    }

    /// Acknowledgements owed to RC peers that no message of ours carried: sent alone.
    pub fn send_owed_acks(&mut self, peers: &mut PeerTable) {
        for addr in peers.take_owing() {
            self.post_ack(peers, addr, false);
        }
    }

    /// The endpoint is closing: every RC peer gets an acknowledgement of all it sent, and is
    /// asked for one of all we sent, so neither end is left holding messages to send again
    /// once the connection closes.
    pub fn closing(&mut self, peers: &mut PeerTable) {
        for addr in self.peers() {
            let ask = self.conns.get(&addr).is_some_and(|c| !c.is_settled());
            self.post_ack(peers, addr, ask);
        }
    }

    /// An acknowledgement alone to `addr` over its connection, if it has one (`ask`: asking
    /// for one back).
    fn post_ack(&mut self, peers: &mut PeerTable, addr: SocketAddr, ask: bool) {
        if let Some(c) = self.conns.get_mut(&addr) {
            c.post_ack(peers.ack_only(addr, ask));
        }
    }

    /// Peers whose draining connections have nothing left unacknowledged: closed now.
    fn close_drained(&mut self, now: Instant, peers: &mut PeerTable) {
        let done: Vec<SocketAddr> = self
            .conns
            .iter()
            .filter(|(_, c)| c.draining && c.is_settled())
            .map(|(&a, _)| a)
            .collect();
        for addr in done {
            self.remove(addr);
            self.stats.demoted += 1;
            let id = peers.slot(addr).0;
            self.policy.closed(now, id);
        }
    }

    /// Takes acknowledged messages off every connection (`acked` gives what each peer
    /// acknowledged); their roles go to `done`.
    fn settle(&mut self, acked: impl Fn(SocketAddr) -> Option<u32>, done: &mut Vec<R>) {
        for (&addr, c) in self.conns.iter_mut() {
            if let Some(a) = acked(addr) {
                c.settle(a, done);
            }
        }
    }

    /// Draining connections whose peers were not yet asked to acknowledge what they carried;
    /// each is listed once.
    fn unasked_drains(&mut self) -> Vec<SocketAddr> {
        let mut v = Vec::new();
        for (&a, c) in self.conns.iter_mut() {
            if c.draining && !c.asked && !c.is_settled() {
                c.asked = true;
                v.push(a);
            }
        }
        v
    }

    /// Peers whose connections have waited `PROBE_AFTER` for an acknowledgement: they are
    /// to be asked again (`Conn::probe_due`).
    fn overdue(&mut self, now: Instant) -> Vec<SocketAddr> {
        let mut v = Vec::new();
        for (&a, c) in self.conns.iter_mut() {
            if c.probe_due(now, PROBE_AFTER) {
                self.stats.probes += 1;
                v.push(a);
            }
        }
        v
    }
}

//! RC's per-peer acknowledgements: what a connection carried is done once the peer's
//! per-peer acknowledgement covers it; a peer that asked for an acknowledgement no message
//! carried gets one alone; a connection waiting too long, or draining after a demotion, asks
//! for one; a drained connection closes.

use std::time::Instant;

use super::{ConnId, RcPaths, PROBE_AFTER};
use crate::diag;
use crate::peer::{PeerTable, SlotId};

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
        owed_before: Vec<SlotId>,
        done: &mut Vec<R>,
    ) {
        self.settle(peers, done);
        for slot in owed_before {
            if peers.owes(slot) {
                self.post_ack(peers, slot, false);
            }
        }
        for slot in self.overdue(now) {
            self.post_ack(peers, slot, true);
        }
        for slot in self.unasked_drains() {
            self.post_ack(peers, slot, true);
        }
        self.close_drained(now, peers);
    }

    /// Acknowledgements owed to RC peers that no message of ours carried: sent alone.
    pub fn send_owed_acks(&mut self, peers: &mut PeerTable) {
        for slot in peers.take_owing() {
            self.post_ack(peers, slot, false);
        }
    }

    /// The endpoint is closing: every RC peer gets an acknowledgement of all it sent, and is
    /// asked for one of all we sent, so neither end is left holding messages to send again
    /// once the connection closes.
    pub fn closing(&mut self, peers: &mut PeerTable) {
        let ask: Vec<(SlotId, bool)> = self
            .conns
            .iter()
            .map(|(_, c)| (c.slot, !c.is_settled()))
            .collect();
        for (slot, ask) in ask {
            self.post_ack(peers, slot, ask);
        }
    }

    /// An acknowledgement alone to slot `slot`'s peer over its connection, if it has one
    /// that still sends (`ask`: asking for one back). A closing connection's peer sends
    /// again over RD what we did not acknowledge, and we drop what we had.
    fn post_ack(&mut self, peers: &mut PeerTable, slot: SlotId, ask: bool) {
        let sends = |id: &ConnId| !self.conns[id.0 as usize].send_closed();
        if let Some(id) = Self::conn_of(peers, slot).filter(sends) {
            let header = peers.ack_only(slot, ask);
            self.conns[id.0 as usize].post_ack(header);
        }
    }

    /// Draining connections with nothing left unacknowledged close their sending side (an
    /// end of stream after our last message, once the kernel took it); the peer, reading
    /// it, closes its own, and that end of stream ends the connection here (`progress`).
    /// One whose peer never answers is dropped after the peer timeout.
    fn close_drained(&mut self, now: Instant, peers: &mut PeerTable) {
        let mut unanswered = Vec::new();
        for (id, c) in self.conns.iter_mut() {
            if !c.draining || !c.is_settled() {
                continue;
            }
            let since = *c.closing.get_or_insert(now);
            if !c.send_closed() {
                // A failure breaks the connection: the next poll finds it.
                let _ = c.qp.close_send();
            } else if now >= since + self.peer_timeout {
                unanswered.push(ConnId(id as u32));
            }
        }
        for id in unanswered {
            let c = self.remove(peers, id);
            diag!(
                Info,
                EpData,
                "RC connection to {}: the peer never closed its end",
                c.name.udp_addr()
            );
            self.stats.demoted += 1;
            self.policy.closed(now, c.slot.0);
        }
    }

    /// Takes acknowledged messages off every connection (what each peer acknowledged is in
    /// `peers`); their roles go to `done`.
    fn settle(&mut self, peers: &PeerTable, done: &mut Vec<R>) {
        for (_, c) in self.conns.iter_mut() {
            c.settle(peers.acked(c.slot), done);
        }
    }

    /// Draining connections whose peers were not yet asked to acknowledge what they carried;
    /// each is listed once.
    fn unasked_drains(&mut self) -> Vec<SlotId> {
        let mut v = Vec::new();
        for (_, c) in self.conns.iter_mut() {
            if c.draining && !c.asked && !c.is_settled() {
                c.asked = true;
                v.push(c.slot);
            }
        }
        v
    }

    /// Peers whose connections have waited `PROBE_AFTER` for an acknowledgement: they are
    /// to be asked again (`Conn::probe_due`).
    fn overdue(&mut self, now: Instant) -> Vec<SlotId> {
        let mut v = Vec::new();
        for (_, c) in self.conns.iter_mut() {
            if c.probe_due(now, PROBE_AFTER) {
                self.stats.probes += 1;
                v.push(c.slot);
            }
        }
        v
    }
}

//! Rails that fail. With several rails, each rail's queue pair reports a peer silent there for
//! `FI_DIWARP_RAIL_TIMEOUT_MS` while messages to it are unacknowledged (a stall), and hands
//! back whole the messages of a session that ends, instead of failing them. A stalled rail is
//! taken as down for that peer (unless it is the last one up) and given up: what it carried
//! goes again over the peer's other rails, first in the backlog and numbered as before, so
//! the peer's sequence puts it in place and drops what it already had. A rail down is greeted
//! every rail timeout until it answers, then used again. A peer silent on every rail keeps
//! its last one, whose session fails at the peer timeout; what comes back from it then fails
//! with FI_EIO, as on one rail.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::RdReturned;

use super::super::ops::{Outgoing, Role};
use super::DataPath;
use crate::diag;
use crate::path::Rail;

/// What happened to one rail, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RailEvents {
    /// Times it was taken as down for a peer, and found answering again.
    pub taken_down: u64,
    pub back_up: u64,
    /// Messages it handed back that went again over another rail (or its new session).
    pub moved: u64,
    /// ... and that failed, no rail being left.
    pub failed: u64,
}

pub(super) struct Failover {
    /// The rail timeout (the queue pairs' `stall_after`).
    timeout: Duration,
    /// When the rails down are greeted next; `None` while none is.
    next_probe: Option<Instant>,
    stalled: Vec<SocketAddr>,
    returned: Vec<RdReturned>,
    pub(super) by_rail: Vec<RailEvents>,
}

impl Failover {
    pub(super) fn new(rails: usize, timeout: Duration) -> Failover {
        Failover {
            timeout,
            next_probe: None,
            stalled: Vec::new(),
            returned: Vec::new(),
            by_rail: vec![RailEvents::default(); rails],
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next_probe
    }

    fn arm(&mut self, now: Instant) {
        self.next_probe.get_or_insert(now + self.timeout);
    }

    fn events(&mut self, rail: Rail) -> &mut RailEvents {
        &mut self.by_rail[usize::from(rail.0)]
    }
}

impl DataPath {
    /// After polling `rail`'s queue pair: takes stalled rails down and sends again what
    /// came back.
    pub(super) fn rail_events(&mut self, rail: Rail, now: Instant) {
        if self.rails.len() == 1 {
            return;
        }
        let mut stalled = std::mem::take(&mut self.failover.stalled);
        self.rails.qp(rail).take_stalled(&mut stalled);
        for addr in stalled.drain(..) {
            let Some(slot) = self.st.peers.find(addr) else {
                continue;
            };
            if self.st.peers.set_rail_down(slot, rail) {
                diag!(
                    Info,
                    EpData,
                    "rail {} to {addr}: silent for {:?} with messages outstanding; they go over the \
                     other rails",
                    rail.0,
                    self.failover.timeout
                );
                self.failover.events(rail).taken_down += 1;
                self.failover.arm(now);
                self.rails.qp(rail).give_up(addr);
            }
        }
        self.failover.stalled = stalled;
        let mut back = std::mem::take(&mut self.failover.returned);
        self.rails.qp(rail).take_returned(&mut back);
        // Oldest first: pushed to the backlog's front last to first, they leave in order and
        // before anything posted since.
        for r in back.drain(..).rev() {
            self.take_back(rail, r, now);
        }
        self.failover.returned = back;
    }

    /// One message `rail` handed back: again over a rail that is up, or failed.
    fn take_back(&mut self, rail: Rail, r: RdReturned, now: Instant) {
        let tracked = r
            .signaled
            .then(|| self.st.tx.roles.remove(&r.wr_id))
            .flatten();
        let role = Role::from_quiet_id(r.wr_id)
            .or(tracked)
            .unwrap_or(Role::Free);
        if matches!(role, Role::Chunk { .. }) {
            self.stripe.lost(rail, now);
        }
        let Some(to) = self.st.peers.find(r.addr) else {
            self.failover.events(rail).failed += 1;
            return self.st.send_part_done(role, false);
        };
        // Its session ended some other way (the peer timeout, a failed greeting): the rail is
        // down for it too, unless the peer greeted us afresh there.
        let open = self.rails.qp(rail).is_open(r.addr);
        if !open && self.st.peers.set_rail_down(to, rail) {
            self.failover.events(rail).taken_down += 1;
            self.failover.arm(now);
        }
        let elsewhere = !self.st.peers.rails_up(to).without(rail).is_empty();
        if !open && !elsewhere {
            self.failover.events(rail).failed += 1;
            return self.st.send_part_done(role, false);
        }
        self.failover.events(rail).moved += 1;
        self.st.tx.backlog.push_front(Outgoing::Again {
            to,
            head: r.head.to_vec(),
            data: r.data,
            role,
        });
    }

    /// Greets every rail down once a rail timeout has passed, and takes back into use those
    /// that answered.
    pub(super) fn probe_rails(&mut self, now: Instant) {
        if self.failover.next_probe.is_none_or(|t| now < t) {
            return;
        }
        self.failover.next_probe = None;
        for (slot, down) in self.st.peers.rails_down() {
            for rail in down.iter() {
                let Some(ah) = self.st.peers.rd_route(slot, rail) else {
                    continue;
                };
                let qp = self.rails.qp(rail);
                if qp.is_open(ah.addr) {
                    self.st.peers.set_rail_up(slot, rail);
                    self.failover.events(rail).back_up += 1;
                    diag!(
                        Info,
                        EpData,
                        "rail {} to {}: answers again",
                        rail.0,
                        ah.addr
                    );
                    continue;
                }
                if let Err(e) = qp.probe(ah) {
                    diag!(
                        Warn,
                        EpData,
                        "rail {} to {}: cannot greet: {e}",
                        rail.0,
                        ah.addr
                    );
                }
                self.failover.arm(now);
            }
        }
    }
}

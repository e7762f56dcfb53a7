//! What tests steer the data path with: forged peers' messages and datagrams, a null link,
//! the per-peer state by layer, connections broken by hand.

use std::time::Instant;

use super::*;

impl DataPath {
    /// Datagrams rail `rail` sends from now on go nowhere, as over a link that is down.
    pub(crate) fn cut_rail(&mut self, rail: Rail) {
        self.rails.qp(rail).null_link();
    }

    /// Rail `rail`'s datagrams go out again.
    pub(crate) fn mend_rail(&mut self, rail: Rail) {
        self.rails.qp(rail).restore_link();
    }

    pub(crate) fn set_stall_limit(&mut self, limit: std::time::Duration) {
        self.st.cfg.stall_limit = limit;
        self.st.live.next_check = Instant::now();
    }

    /// For each rendezvous receive waiting for data: when it last heard of its own, and when
    /// its sender was last heard.
    pub(crate) fn rendezvous_heard(&self) -> Vec<(Instant, Option<Instant>)> {
        self.st
            .rx
            .rndv
            .values()
            .map(|r| (r.last, self.st.peers.heard(r.from)))
            .collect()
    }

    /// Rendezvous receives waiting for their data, and a way to look at them from later.
    pub(crate) fn expire_rendezvous_at(&mut self, now: Instant) -> usize {
        let before = self.st.rx.rndv.len();
        self.st.expire_stalled(now);
        before
    }

    /// Handles `payload` as if a message from `src` had come off the queue pair, behind the
    /// per-peer header `src` would give it next, and posts what it asks for: tests forge
    /// peers' messages with it.
    pub fn feed(&mut self, src: std::net::SocketAddr, payload: &[u8]) {
        self.st.now = Instant::now();
        let bytes = self.forge(src, payload);
        iwarp::verbs::RdReceiver::message(&mut self.st, src, &bytes);
        self.note_heard();
        self.flush_backlog();
    }

    /// `payload` behind the next per-peer header of a forged peer at `src`.
    fn forge(&mut self, src: std::net::SocketAddr, payload: &[u8]) -> Vec<u8> {
        let me = self.forger.slot(src);
        self.forger.know(me, self.st.cfg.name.nonce);
        let mut bytes = self.forger.stamp(me, false).encode().to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    /// [`DataPath::feed`] as the queue pair offers a message cut into datagrams at `cuts`
    /// (offsets in `payload`): segment by segment, the first first, or whole if the first is
    /// not taken.
    pub fn feed_segments(&mut self, src: std::net::SocketAddr, payload: &[u8], cuts: &[usize]) {
        self.st.now = Instant::now();
        use iwarp::verbs::{RdReceiver, SEGMENT_HEAD};
        let payload = self.forge(src, payload);
        let mut at: Vec<usize> = cuts
            .iter()
            .map(|&c| (c + peer::HEADER).min(payload.len()))
            .collect();
        at.extend([0, payload.len()]);
        at.sort_unstable();
        at.dedup();
        let pieces: Vec<_> = at
            .windows(2)
            .map(|w| (w[0], &payload[w[0]..w[1]]))
            .collect();
        let Some(&(_, first)) = pieces.first() else {
            return;
        };
        let head = &first[..first.len().min(SEGMENT_HEAD)];
        if self.st.segment(src, head, 0, first) {
            for &(offset, bytes) in &pieces[1..] {
                self.st.segment(src, head, offset, bytes);
            }
        } else {
            self.st.message(src, &payload);
        }
        self.note_heard();
        self.flush_backlog();
    }

    /// Runs datagram `data` from `src` through the queue pair and the data path as if the
    /// socket had delivered it: tests forge peers with it (with [`DataPath::null_link`]).
    pub fn inject(&mut self, data: &[u8], src: std::net::SocketAddr) {
        self.st.now = Instant::now();
        self.rails
            .first_mut()
            .inject_datagram_with(&mut self.st, data, src);
        self.note_heard();
        self.flush_backlog();
    }

    /// The per-peer state by layer, bytes: the peer table, the promotion policy, the queue
    /// pair's own peer entries, the engine's sessions and tables (the ledger's `peer_state`
    /// is their sum).
    pub fn peer_layers(&self) -> [(&'static str, usize); 4] {
        let qp = self.rails.memory();
        [
            ("peer table", self.st.peers.memory()),
            ("promotion policy", self.paths.policy_memory()),
            ("queue pair", qp.peer_entries),
            ("engine", qp.peer_state - qp.peer_entries),
        ]
    }

    /// From now on what the queue pair sends is kept for [`DataPath::take_sent`] instead.
    pub fn null_link(&mut self) {
        self.rails.first_mut().null_link();
    }

    pub fn take_sent(&mut self) -> Vec<(std::net::SocketAddr, Vec<u8>)> {
        self.rails.first_mut().take_sent()
    }

    /// Breaks every RC connection, as a reset would.
    pub fn break_connections(&mut self) {
        self.paths.break_all();
    }

    /// Entries waiting to be posted.
    pub fn backlog_len(&self) -> usize {
        self.st.tx.backlog.len()
    }

    /// Receives taking pushed chunks, and unexpected messages holding them.
    pub fn push_state(&self) -> (usize, usize) {
        (self.st.rx.pushing_into.len(), self.st.rx.parked.len())
    }
}

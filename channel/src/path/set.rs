//! A peer's paths, kept in its slot of the peer table: the queue pair number its datagrams go
//! to (behind the peer's address on each rail: every rail's queue pair of an endpoint has the
//! same number) and the connections it holds. As quinn-proto keeps a path's state apart from
//! its connection's, the per-peer layer keeps the sequence and this only names the paths; the
//! connections themselves live with the RC side (`RcPaths`), found by [`ConnId`] as libfabric's
//! tcp provider finds its connections by AV index. A peer with no connection costs a few bytes.
//!
//! Which rail a datagram takes is the peer table's and the rails' (`rails`) business: this
//! holds what is per peer.

/// A rail: one of the endpoint's interfaces, with its RD queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rail(pub u8);

/// A set of rails (an endpoint has at most eight).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RailSet(pub u8);

impl RailSet {
    /// The first `n` rails.
    pub fn first(n: usize) -> RailSet {
        RailSet(((1u16 << n.min(8)) - 1) as u8)
    }

    pub fn contains(self, r: Rail) -> bool {
        r.0 < 8 && self.0 & (1 << r.0) != 0
    }

    pub fn with(self, r: Rail) -> RailSet {
        RailSet(self.0 | (1u8.checked_shl(u32::from(r.0)).unwrap_or(0)))
    }

    pub fn without(self, r: Rail) -> RailSet {
        RailSet(self.0 & !(1u8.checked_shl(u32::from(r.0)).unwrap_or(0)))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The rails in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = Rail> {
        (0..8u8).filter(move |&i| self.0 & (1 << i) != 0).map(Rail)
    }
}

/// Rails that hold connections: a promoted peer is connected over the first rail.
pub const CONN_RAILS: usize = 1;

/// A connection's place among the endpoint's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(pub u32);

/// The path a message takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The endpoint's RD queue pair on this rail.
    Rd(Rail),
    /// This connection.
    Rc(ConnId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathSet {
    /// The peer's queue pair number, once known (from its name or its first message), else
    /// [`NONE`]: a queue pair number has 30 bits.
    qpn: u32,
    /// The connection on each rail that holds one, else [`NONE`] (words, not options: half
    /// the bytes in every peer's slot).
    rc: [u32; CONN_RAILS],
}

/// No route or connection.
const NONE: u32 = u32::MAX;

fn some(v: u32) -> Option<u32> {
    (v != NONE).then_some(v)
}

impl Default for PathSet {
    fn default() -> Self {
        PathSet::new()
    }
}

impl PathSet {
    /// A peer first heard of, its routes not yet known.
    pub fn new() -> PathSet {
        PathSet {
            qpn: NONE,
            rc: [NONE; CONN_RAILS],
        }
    }

    /// The peer's queue pairs are number `qpn`.
    pub fn set_qpn(&mut self, qpn: u32) {
        debug_assert_ne!(qpn, NONE, "queue pair numbers have 30 bits");
        self.qpn = qpn;
    }

    /// The peer's queue pair number, if known: with it the peer has an RD route on every
    /// rail it shares with us.
    pub fn qpn(&self) -> Option<u32> {
        some(self.qpn)
    }

    /// The connections, first rail first.
    pub fn conns(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.rc.iter().filter_map(|&c| some(c)).map(ConnId)
    }

    /// Whether the peer holds any connection.
    pub fn connected(&self) -> bool {
        self.rc.iter().any(|&c| c != NONE)
    }

    /// The connection on `rail`.
    pub fn conn(&self, rail: Rail) -> Option<ConnId> {
        some(*self.rc.get(rail.0 as usize)?).map(ConnId)
    }

    pub fn set_conn(&mut self, rail: Rail, c: Option<ConnId>) {
        debug_assert_ne!(c, Some(ConnId(NONE)), "fewer than 2^32 - 1 connections");
        self.rc[rail.0 as usize] = c.map_or(NONE, |c| c.0);
    }

    /// The path for the next message: the first connection `open` says takes messages, else
    /// RD on `rail` if the peer's queue pair is known.
    pub fn route(&self, rail: Rail, open: impl Fn(ConnId) -> bool) -> Option<Route> {
        if let Some(c) = self.conns().find(|&c| open(c)) {
            return Some(Route::Rc(c));
        }
        self.qpn().map(|_| Route::Rd(rail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_connection_is_taken_before_rd() {
        let mut p = PathSet::new();
        assert_eq!(p.route(Rail(0), |_| true), None, "no route known");
        let r = RailSet::first(3);
        assert_eq!(r.iter().collect::<Vec<_>>(), [Rail(0), Rail(1), Rail(2)]);
        assert_eq!(
            r.without(Rail(1)).iter().collect::<Vec<_>>(),
            [Rail(0), Rail(2)]
        );
        assert!(r.without(Rail(1)).with(Rail(1)) == r && !r.contains(Rail(3)));
        assert_eq!(
            (RailSet::first(8).len(), RailSet::first(0).is_empty()),
            (8, true)
        );
        p.set_qpn(5);
        assert_eq!(p.qpn(), Some(5));
        assert_eq!(p.route(Rail(1), |_| true), Some(Route::Rd(Rail(1))));
        assert!(!p.connected());
        p.set_conn(Rail(0), Some(ConnId(7)));
        assert!(p.connected());
        assert_eq!(p.conn(Rail(1)), None, "no connection on the second rail");
        assert_eq!(p.route(Rail(0), |_| true), Some(Route::Rc(ConnId(7))));
        // A connection full or draining: RD carries the message.
        assert_eq!(p.route(Rail(0), |_| false), Some(Route::Rd(Rail(0))));
        p.set_conn(Rail(0), None);
        assert_eq!(p.conns().count(), 0);
        assert_eq!(p.route(Rail(0), |_| true), Some(Route::Rd(Rail(0))));
    }
}

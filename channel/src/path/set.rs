//! A peer's paths, kept in its slot of the peer table: its RD route on each rail (the queue
//! pair number its datagrams go to there, behind the peer's address on that rail; the first
//! rail's is the slot's own address) and the connections it holds. As quinn-proto keeps a path's state apart from its connection's, the
//! per-peer layer keeps the sequence and this only names the paths; the connections
//! themselves live with the RC side (`RcPaths`), found by [`ConnId`] as libfabric's tcp
//! provider finds its connections by AV index. A peer with no connection costs a few bytes.
//!
//! Sized for several rails: a route and a connection per rail. An endpoint has one rail
//! today ([`RAILS`]).

/// A rail: one of the endpoint's interfaces, with its RD queue pair and its listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rail(pub u8);

/// Rails an endpoint may have.
pub const RAILS: usize = 1;

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
    /// The peer's queue pair number on each rail, once known (from its name or its first
    /// message), else [`NONE`]: a queue pair number has 30 bits.
    rd: [u32; RAILS],
    /// The connection on each rail, else [`NONE`] (words, not options: half the bytes in
    /// every peer's slot).
    rc: [u32; RAILS],
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
            rd: [NONE; RAILS],
            rc: [NONE; RAILS],
        }
    }

    /// The peer's queue pair on `rail` is number `qpn`.
    pub fn set_rd(&mut self, rail: Rail, qpn: u32) {
        debug_assert_ne!(qpn, NONE, "queue pair numbers have 30 bits");
        self.rd[rail.0 as usize] = qpn;
    }

    /// The peer's queue pair number on `rail`, if known.
    pub fn rd(&self, rail: Rail) -> Option<u32> {
        some(self.rd[rail.0 as usize])
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
        some(self.rc[rail.0 as usize]).map(ConnId)
    }

    pub fn set_conn(&mut self, rail: Rail, c: Option<ConnId>) {
        debug_assert_ne!(c, Some(ConnId(NONE)), "fewer than 2^32 - 1 connections");
        self.rc[rail.0 as usize] = c.map_or(NONE, |c| c.0);
    }

    /// The rails with an RD route.
    pub fn rd_rails(&self) -> impl Iterator<Item = Rail> + '_ {
        (0..RAILS as u8)
            .filter(|&r| self.rd[r as usize] != NONE)
            .map(Rail)
    }

    /// The path for the next message: the first connection `open` says takes messages, else
    /// RD on the first rail with a route.
    pub fn route(&self, open: impl Fn(ConnId) -> bool) -> Option<Route> {
        if let Some(c) = self.conns().find(|&c| open(c)) {
            return Some(Route::Rc(c));
        }
        self.rd_rails().next().map(Route::Rd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_connection_is_taken_before_rd() {
        let mut p = PathSet::new();
        assert_eq!(p.route(|_| true), None, "no route known");
        p.set_rd(Rail(0), 5);
        assert_eq!(p.rd(Rail(0)), Some(5));
        assert_eq!(p.route(|_| true), Some(Route::Rd(Rail(0))));
        assert!(!p.connected());
        p.set_conn(Rail(0), Some(ConnId(7)));
        assert!(p.connected());
        assert_eq!(p.route(|_| true), Some(Route::Rc(ConnId(7))));
        // A connection full or draining: RD carries the message.
        assert_eq!(p.route(|_| false), Some(Route::Rd(Rail(0))));
        p.set_conn(Rail(0), None);
        assert_eq!(p.conns().count(), 0);
        assert_eq!(p.route(|_| true), Some(Route::Rd(Rail(0))));
    }
}

//! A reference matcher that states the rules literally: plain vectors in posting and arrival
//! order, searched front to back, everything O(n). The property test holds the real matcher
//! to the same outcomes.

use crate::matching::{Header, Kind, MULTI_RECV_ALIGN};

/// A posted receive; its context doubles as its identity.
#[derive(Clone, Debug)]
pub struct Recv {
    pub kind: Kind,
    pub peer: Option<u32>,
    pub tag: u64,
    pub ignore: u64,
    pub cap: usize,
    pub ctx: usize,
    /// Multi-receive buffer: next free offset and release threshold.
    pub multi: Option<(usize, usize)>,
}

/// A message, numbered in arrival order.
#[derive(Clone, Debug)]
pub struct Msg {
    pub kind: Kind,
    pub no: u64,
    pub header: Header,
}

/// One receive taking one message, as the completion would describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Got {
    pub ctx: usize,
    pub no: u64,
    pub header: Header,
    pub offset: usize,
    pub placed: usize,
    pub multi: bool,
    pub released: bool,
}

/// The outcome of one operation, in terms both implementations can produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    Queued,
    Buffered,
    Delivered(Got),
    Multi { got: Vec<Got>, posted: bool },
    Found(Header),
    Claimed(u64, Header),
    Discarded(u64),
    NoMessage,
    NotClaimed,
    Cancelled { ctx: usize, kind: Kind, multi: bool },
    NotCancelled,
}

#[derive(Debug, Default)]
pub struct Model {
    pub posted: Vec<Recv>,
    pub unexpected: Vec<Msg>,
    pub claimed: Vec<(usize, Msg)>,
}

/// The rule, written as libfabric's man page states it: tag bits not ignored must be equal.
pub fn takes(r: &Recv, kind: Kind, h: &Header) -> bool {
    r.kind == kind
        && r.peer.is_none_or(|p| p == h.peer.0)
        && (kind == Kind::Msg || h.tag & !r.ignore == r.tag & !r.ignore)
}

impl Model {
    pub fn arrive(&mut self, kind: Kind, no: u64, mut header: Header) -> Ev {
        if kind == Kind::Msg {
            header.tag = 0;
        }
        match self.posted.iter().position(|r| takes(r, kind, &header)) {
            Some(i) => Ev::Delivered(self.fill(i, no, header)),
            None => {
                self.unexpected.push(Msg { kind, no, header });
                Ev::Buffered
            }
        }
    }

    /// The receive at `i` takes a message; a multi-receive buffer stays unless it is full.
    fn fill(&mut self, i: usize, no: u64, header: Header) -> Got {
        let r = &mut self.posted[i];
        let mut got = Got {
            ctx: r.ctx,
            no,
            header,
            offset: 0,
            placed: header.len.min(r.cap),
            multi: false,
            released: false,
        };
        if let Some((next, min)) = &mut r.multi {
            got.multi = true;
            got.offset = *next;
            got.placed = header.len.min(r.cap - *next);
            let mut end = *next + got.placed;
            while !end.is_multiple_of(MULTI_RECV_ALIGN) {
                end += 1;
            }
            *next = end.min(r.cap);
            let free = r.cap - *next;
            got.released = free < *min || free == 0;
            if !got.released {
                return got;
            }
        }
        self.posted.remove(i);
        got
    }

    fn oldest(&self, probe: &Recv) -> Option<usize> {
        self.unexpected
            .iter()
            .position(|m| takes(probe, m.kind, &m.header))
    }

    pub fn post(&mut self, r: Recv) -> Ev {
        match self.oldest(&r) {
            Some(i) => {
                let m = self.unexpected.remove(i);
                self.posted.push(r);
                Ev::Delivered(self.fill(self.posted.len() - 1, m.no, m.header))
            }
            None => {
                self.posted.push(r);
                Ev::Queued
            }
        }
    }

    pub fn post_multi(&mut self, r: Recv) -> Ev {
        let ctx = r.ctx;
        self.posted.push(r);
        let mut got = vec![];
        loop {
            let last = self.posted.len() - 1;
            let Some(i) = self.oldest(&self.posted[last]) else {
                return Ev::Multi { got, posted: true };
            };
            let m = self.unexpected.remove(i);
            let g = self.fill(last, m.no, m.header);
            let done = g.released;
            got.push(g);
            if done {
                debug_assert!(self.posted.iter().all(|r| r.ctx != ctx));
                return Ev::Multi { got, posted: false };
            }
        }
    }

    pub fn peek(&self, probe: &Recv) -> Ev {
        match self.oldest(probe) {
            Some(i) => Ev::Found(self.unexpected[i].header),
            None => Ev::NoMessage,
        }
    }

    pub fn peek_claim(&mut self, probe: &Recv) -> Ev {
        match self.oldest(probe) {
            Some(i) => {
                let m = self.unexpected.remove(i);
                let ev = Ev::Claimed(m.no, m.header);
                self.claimed.push((probe.ctx, m));
                ev
            }
            None => Ev::NoMessage,
        }
    }

    pub fn peek_discard(&mut self, probe: &Recv) -> Ev {
        match self.oldest(probe) {
            Some(i) => Ev::Discarded(self.unexpected.remove(i).no),
            None => Ev::NoMessage,
        }
    }

    fn unclaim(&mut self, kind: Kind, ctx: usize) -> Option<Msg> {
        let i = self
            .claimed
            .iter()
            .position(|(c, m)| *c == ctx && m.kind == kind)?;
        Some(self.claimed.remove(i).1)
    }

    pub fn claim(&mut self, kind: Kind, ctx: usize, cap: usize) -> Ev {
        match self.unclaim(kind, ctx) {
            Some(m) => Ev::Delivered(Got {
                ctx,
                no: m.no,
                header: m.header,
                offset: 0,
                placed: m.header.len.min(cap),
                multi: false,
                released: false,
            }),
            None => Ev::NotClaimed,
        }
    }

    pub fn claim_discard(&mut self, kind: Kind, ctx: usize) -> Ev {
        match self.unclaim(kind, ctx) {
            Some(m) => Ev::Discarded(m.no),
            None => Ev::NotClaimed,
        }
    }

    pub fn cancel(&mut self, ctx: usize) -> Ev {
        match self.posted.iter().position(|r| r.ctx == ctx) {
            Some(i) => {
                let r = self.posted.remove(i);
                Ev::Cancelled {
                    ctx,
                    kind: r.kind,
                    multi: r.multi.is_some(),
                }
            }
            None => Ev::NotCancelled,
        }
    }
}

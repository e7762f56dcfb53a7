//! The matcher: both kinds' queues, the claimed messages and the memory account.

use super::account::{Account, MemCounter};
use super::multi::MultiBuf;
use super::posted::{Posted, PostedQueue};
use super::types::{
    Arrival, Cancelled, Context, Delivery, Header, Kind, Peek, PeerId, Post, RecvSpec, Stats,
    Taken, Unexpected, UnexpectedId,
};
use super::unexpected::{unexpected_charge, Record, UnexpectedQueue};

#[derive(Clone, Copy, Debug)]
struct Claim {
    kind: Kind,
    context: Context,
    key: u32,
}

/// MPI matching for one endpoint: posted receives against arriving messages, for the untagged
/// and the tagged queue separately.
///
/// `R` is the endpoint's description of a receive buffer, `U` its state for a buffered
/// unexpected message (the eager bytes, or what it needs to answer a rendezvous request).
/// The matcher never looks inside either. `A` is charged for every unexpected message held.
#[derive(Debug)]
pub struct Matcher<R, U, A = MemCounter> {
    posted: [PostedQueue<R>; 2],
    unexpected: [UnexpectedQueue<U>; 2],
    /// In claim order; a handful at most (one per outstanding `MPI_Mprobe`).
    claimed: Vec<Claim>,
    /// One sequence for posts and arrivals alike. Posting order decides between receives,
    /// arrival order between messages, and sequences double as stale-id checks.
    next_seq: u64,
    account: A,
}

impl<R, U, A: Account + Default> Default for Matcher<R, U, A> {
    fn default() -> Self {
        Matcher::new(A::default())
    }
}

impl<R, U, A: Account> Matcher<R, U, A> {
    /// An empty matcher charging `account`.
    pub fn new(account: A) -> Self {
        Matcher {
            posted: Default::default(),
            unexpected: Default::default(),
            claimed: Vec::new(),
            next_seq: 0,
            account,
        }
    }

    /// Gives the queued messages of peer `from` to peer `to`, both kinds: a sender matched
    /// under a stand-in id while the AV did not hold it, once it does. Messages already
    /// claimed keep the stand-in.
    pub fn relabel(&mut self, from: PeerId, to: PeerId) {
        for q in &mut self.unexpected {
            q.relabel(from, to);
        }
    }

    /// Bytes of the matching structures: posted receives with their queues, and what the
    /// unexpected queues hold beyond the account's per-message charge.
    pub fn structure_bytes(&self) -> usize {
        self.posted
            .iter()
            .map(PostedQueue::memory_bytes)
            .sum::<usize>()
            + self
                .unexpected
                .iter()
                .map(UnexpectedQueue::memory_bytes)
                .sum::<usize>()
            + self.claimed.capacity() * std::mem::size_of::<Claim>()
    }

    /// The memory account.
    pub fn account(&self) -> &A {
        &self.account
    }

    /// Queue sizes for one kind.
    pub fn stats(&self, kind: Kind) -> Stats {
        let i = kind.index();
        Stats {
            posted: self.posted[i].len(),
            unexpected: self.unexpected[i].queued(),
            claimed: self.claimed.iter().filter(|c| c.kind == kind).count(),
            lists: self.posted[i].lists() + self.unexpected[i].lists(),
        }
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// A receive is posted: it takes the oldest waiting message it matches, or joins the
    /// posted queue.
    pub fn post(&mut self, kind: Kind, spec: RecvSpec, recv: R) -> Post<R, U> {
        let spec = spec.normalized(kind);
        if let Some(key) = self.unexpected[kind.index()].find(&spec) {
            let message = self.take(kind, key);
            let delivery = Delivery::whole(recv, &spec, message.header);
            return Post::Matched(Taken { delivery, message });
        }
        let seq = self.seq();
        self.posted[kind.index()].push(Posted {
            seq,
            spec,
            recv,
            multi: None,
        });
        Post::Queued
    }

    /// FI_PEEK: the header of the oldest waiting message `spec` matches, left in place.
    pub fn peek(&self, kind: Kind, spec: &RecvSpec) -> Peek<Header> {
        let q = &self.unexpected[kind.index()];
        match q.find(&spec.normalized(kind)) {
            Some(key) => Peek::Found(q.get(key).expect("found a free slot").header),
            None => Peek::NoMessage,
        }
    }

    /// FI_PEEK|FI_CLAIM: as [`peek`](Self::peek), and the message is reserved for the FI_CLAIM
    /// receive with the same context; no other receive or peek sees it meanwhile.
    pub fn peek_claim(&mut self, kind: Kind, spec: &RecvSpec) -> Peek<(Header, UnexpectedId)> {
        let q = &mut self.unexpected[kind.index()];
        let Some(key) = q.find(&spec.normalized(kind)) else {
            return Peek::NoMessage;
        };
        q.detach(key);
        let r = q.get(key).expect("found a free slot");
        let id = UnexpectedId {
            kind,
            key,
            seq: r.seq,
        };
        let header = r.header;
        self.claimed.push(Claim {
            kind,
            context: spec.context,
            key,
        });
        Peek::Found((header, id))
    }

    /// FI_PEEK|FI_DISCARD: the oldest matching message is dropped; the endpoint completes the
    /// peek without data and, for a rendezvous, releases the sender.
    pub fn peek_discard(&mut self, kind: Kind, spec: &RecvSpec) -> Peek<Unexpected<U>> {
        match self.unexpected[kind.index()].find(&spec.normalized(kind)) {
            Some(key) => Peek::Found(self.take(kind, key)),
            None => Peek::NoMessage,
        }
    }

    /// FI_CLAIM: the receive takes the message claimed earlier with `spec.context` (peer and
    /// tag are not consulted). Without such a claim the receive is handed back.
    pub fn claim(&mut self, kind: Kind, spec: RecvSpec, recv: R) -> Result<Taken<R, U>, R> {
        let Some(message) = self.unclaim(kind, spec.context) else {
            return Err(recv);
        };
        let delivery = Delivery::whole(recv, &spec, message.header);
        Ok(Taken { delivery, message })
    }

    /// FI_CLAIM|FI_DISCARD: the message claimed with `context` is dropped.
    pub fn claim_discard(&mut self, kind: Kind, context: Context) -> Option<Unexpected<U>> {
        self.unclaim(kind, context)
    }

    fn unclaim(&mut self, kind: Kind, context: Context) -> Option<Unexpected<U>> {
        let i = self
            .claimed
            .iter()
            .position(|c| c.kind == kind && c.context == context)?;
        let claim = self.claimed.remove(i);
        Some(self.take(kind, claim.key))
    }

    /// `fi_cancel`: removes the oldest posted receive (either kind) with `context`. `None`
    /// when there is none — in particular when it has already matched.
    pub fn cancel(&mut self, context: Context) -> Option<Cancelled<R>> {
        let msg = self.posted[Kind::Msg.index()].find_context(context);
        let tagged = self.posted[Kind::Tagged.index()].find_context(context);
        let (kind, key) = match (msg, tagged) {
            (Some(m), Some(t)) if t < m => (Kind::Tagged, t.1),
            (Some(m), _) => (Kind::Msg, m.1),
            (None, Some(t)) => (Kind::Tagged, t.1),
            (None, None) => return None,
        };
        let e = self.posted[kind.index()].remove(key);
        Some(Cancelled {
            kind,
            context: e.spec.context,
            recv: e.recv,
            multi_recv: e.multi.is_some(),
        })
    }

    /// A buffered message's header and payload, while it is queued or claimed.
    pub fn unexpected(&self, id: UnexpectedId) -> Option<(&Header, &U)> {
        let r = self.unexpected[id.kind.index()].get(id.key)?;
        (r.seq == id.seq).then_some((&r.header, &r.payload))
    }

    /// The payload of a buffered message, to add eager bytes that arrive after its header.
    pub fn payload_mut(&mut self, id: UnexpectedId) -> Option<&mut U> {
        let r = self.unexpected[id.kind.index()].get_mut(id.key)?;
        (r.seq == id.seq).then_some(&mut r.payload)
    }

    /// Removes a message from custody and settles its charge.
    fn take(&mut self, kind: Kind, key: u32) -> Unexpected<U> {
        let r = self.unexpected[kind.index()].remove(key);
        self.account.release(r.charged);
        Unexpected {
            id: UnexpectedId {
                kind,
                key,
                seq: r.seq,
            },
            header: r.header,
            payload: r.payload,
        }
    }
}

/// Multi-receive buffers stay posted across several messages, so each piece but the last
/// carries a clone of the buffer descriptor.
impl<R: Clone, U, A: Account> Matcher<R, U, A> {
    /// A message header arrives, in the per-peer order the transport guarantees. The oldest
    /// posted receive that matches takes it; otherwise `buffer` makes the endpoint's payload
    /// and the message waits, charged to the account.
    pub fn arrive(
        &mut self,
        kind: Kind,
        mut header: Header,
        buffer: impl FnOnce(&Header) -> U,
    ) -> Arrival<R> {
        if kind == Kind::Msg {
            header.tag = 0;
        }
        let posted = &mut self.posted[kind.index()];
        if let Some(key) = posted.find(&header) {
            return Arrival::Matched(posted.deliver(key, header));
        }
        let seq = self.seq();
        let charged = unexpected_charge::<U>(&header);
        self.account.charge(charged);
        let key = self.unexpected[kind.index()].push(Record {
            seq,
            header,
            payload: buffer(&header),
            charged,
            queued: true,
        });
        Arrival::Buffered(UnexpectedId { kind, key, seq })
    }

    /// An untagged FI_MULTI_RECV buffer is posted. It first takes waiting messages, oldest
    /// first, appending them to `taken`; it stays posted (returns true) unless that already
    /// brought its free space below `min_free` (FI_OPT_MIN_MULTI_RECV).
    pub fn post_multi(
        &mut self,
        spec: RecvSpec,
        min_free: usize,
        recv: R,
        taken: &mut impl Extend<Taken<R, U>>,
    ) -> bool {
        let spec = spec.normalized(Kind::Msg);
        let mut buf = MultiBuf::new(min_free);
        while let Some(key) = self.unexpected[Kind::Msg.index()].find(&spec) {
            let message = self.take(Kind::Msg, key);
            let piece = buf.place(spec.capacity, message.header.len);
            if piece.released {
                let delivery = Delivery::piece(recv, &spec, message.header, piece);
                taken.extend([Taken { delivery, message }]);
                return false;
            }
            let delivery = Delivery::piece(recv.clone(), &spec, message.header, piece);
            taken.extend([Taken { delivery, message }]);
        }
        let seq = self.seq();
        self.posted[Kind::Msg.index()].push(Posted {
            seq,
            spec,
            recv,
            multi: Some(buf),
        });
        true
    }
}

//! Receives: posting, peeking, claiming and cancelling, the stand-ins for senders the AV does
//! not hold yet, and the start of a rendezvous once a receive matches.

use super::*;

impl State {
    pub fn recv(&mut self, a: RecvArgs) -> Result<()> {
        let inserted = self.av()?.insertions();
        if inserted != self.strangers.av_seen {
            self.strangers.av_seen = inserted;
            self.name_stand_ins();
        }
        let peer = if self.cfg.directed && a.src != FI_ADDR_UNSPEC {
            PeerId(
                u32::try_from(a.src)
                    .ok()
                    .filter(|&p| p < STAND_IN_BASE)
                    .ok_or(Errno::INVAL)?,
            )
        } else {
            PeerId::ANY
        };
        let ctx = Context(a.context);
        let spec = match a.kind {
            Kind::Msg => RecvSpec::untagged(peer, a.mem.len(), ctx),
            Kind::Tagged => RecvSpec::tagged(peer, a.tag, a.ignore, a.mem.len(), ctx),
        };
        let recv = Recv {
            mem: a.mem,
            flags: a.flags,
            multi: (a.flags & FI_MULTI_RECV != 0).then(|| self.rx.multi.new_id()),
        };
        if a.flags & FI_PEEK != 0 {
            self.peek(a.kind, spec, a.flags);
            return Ok(());
        }
        if a.flags & FI_CLAIM != 0 {
            return self.claim(a.kind, spec, recv, a.flags);
        }
        if a.flags & FI_MULTI_RECV != 0 {
            if a.kind != Kind::Msg {
                return Err(Errno::INVAL);
            }
            let mut taken = Vec::new();
            self.rx
                .matcher
                .post_multi(spec, self.cfg.min_multi_recv, recv, &mut taken);
            for t in taken {
                self.take(Kind::Msg, t);
            }
            return Ok(());
        }
        if let Post::Matched(t) = self.rx.matcher.post(a.kind, spec, recv) {
            self.take(a.kind, t);
        }
        Ok(())
    }

    /// A receive took a buffered message.
    pub(super) fn take(&mut self, kind: Kind, t: Taken<Recv, Held>) {
        match t.message.payload {
            Held::Eager(bytes) => {
                let d = t.delivery;
                d.recv.mem.write_at(d.offset, &bytes[..d.placed]);
                self.finish_recv(kind, &d, false);
            }
            Held::Rndv { handle, from } => {
                let pushes = self
                    .rx
                    .parked
                    .take((from, handle))
                    .map_or(Pushes::None, Pushes::Parked);
                self.start_rndv(kind, t.delivery, handle, from, pushes);
            }
        }
    }

    pub(super) fn peek(&mut self, kind: Kind, spec: RecvSpec, flags: u64) {
        let found = if flags & FI_CLAIM != 0 {
            self.rx
                .matcher
                .peek_claim(kind, &spec)
                .found()
                .map(|(h, _)| h)
        } else if flags & FI_DISCARD != 0 {
            self.rx.matcher.peek_discard(kind, &spec).found().map(|m| {
                self.release(m.payload);
                m.header
            })
        } else {
            match self.rx.matcher.peek(kind, &spec) {
                Peek::Found(h) => Some(h),
                Peek::NoMessage => None,
            }
        };
        match found {
            Some(h) => {
                let c = self.recv_completion(kind, spec.context, &h, h.len, 0);
                self.out.recv_done(c, flags | FI_COMPLETION);
            }
            None => {
                let c = Completion {
                    op_context: spec.context.0,
                    flags: FI_RECV | kind_flag(kind),
                    ..Completion::default()
                };
                self.out.recv_failed(c, Errno::NOMSG, 0);
            }
        }
    }

    pub(super) fn claim(
        &mut self,
        kind: Kind,
        spec: RecvSpec,
        recv: Recv,
        flags: u64,
    ) -> Result<()> {
        if flags & FI_DISCARD != 0 {
            let m = self
                .rx
                .matcher
                .claim_discard(kind, spec.context)
                .ok_or(Errno::INVAL)?;
            let c = self.recv_completion(kind, spec.context, &m.header, 0, 0);
            self.release(m.payload);
            self.out.recv_done(c, flags);
            return Ok(());
        }
        let t = self
            .rx
            .matcher
            .claim(kind, spec, recv)
            .map_err(|_| Errno::INVAL)?;
        self.take(kind, t);
        Ok(())
    }

    /// A buffered message is dropped: a rendezvous sender is told to send nothing.
    pub(super) fn release(&mut self, held: Held) {
        if let Held::Rndv { handle, from } = held {
            self.rx.parked.take((from, handle));
            self.send_cts(from, handle, 0, 0, false);
        }
    }

    pub fn cancel(&mut self, context: usize) -> Result<()> {
        let c = self
            .rx
            .matcher
            .cancel(Context(context))
            .ok_or(Errno::NOENT)?;
        let mut flags = FI_RECV | kind_flag(c.kind);
        if c.multi_recv {
            flags |= FI_MULTI_RECV;
        }
        let comp = Completion {
            op_context: context,
            flags,
            ..Completion::default()
        };
        let now = match c.recv.multi {
            Some(id) => self.rx.multi.cancelled(id, comp),
            None => Some(comp),
        };
        self.report_cancelled(now);
        Ok(())
    }

    pub(super) fn peer_of(&mut self, from: SlotId) -> PeerId {
        self.sync_av();
        if let Some(h) = self.peers.label(from) {
            return PeerId(h);
        }
        let addr = self.peers.addr(from);
        let handle = self.av.as_ref().and_then(|av| av.handle_of(addr));
        match matcher_id(handle) {
            Some(p) => {
                self.peers.set_label(from, p.0);
                self.learn_rails(from, p.0);
                p
            }
            None => UNKNOWN_PEER,
        }
    }

    /// With several rails, a sender's name says where its other rails' datagrams come from;
    /// learning it from the AV the first time it is heard lets our messages say we know it
    /// (`peer::header::NAMED`), so it may use them, even if we never send to it first.
    fn learn_rails(&mut self, from: SlotId, handle: u32) {
        if self.peers.rails() == 1 || self.peers.name(from).is_some() {
            return;
        }
        let Some(Ok(name)) = self.av.as_ref().map(|av| av.lookup(u64::from(handle))) else {
            return;
        };
        if name.udp_addr() == self.peers.addr(from) {
            self.peers.learn(&name);
        }
    }

    /// The matcher's id for the sender of an arriving message: its AV handle, else its
    /// stand-in (a new one the first time).
    pub(super) fn label(&mut self, from: SlotId) -> PeerId {
        let peer = self.peer_of(from);
        if !self.peers.has_stand_ins() && (peer != UNKNOWN_PEER || self.av.is_none()) {
            return peer;
        }
        match self.peers.stand_in(from) {
            Some(s) if peer != UNKNOWN_PEER => {
                // Its earlier messages take the handle first: they are older.
                self.rx.matcher.relabel(s, peer);
                self.peers.set_stand_in(from, None);
                peer
            }
            Some(s) => s,
            None if peer != UNKNOWN_PEER || self.strangers.next == UNKNOWN_PEER.0 => peer,
            None => {
                let s = PeerId(self.strangers.next);
                self.strangers.next += 1;
                self.peers.set_stand_in(from, Some(s));
                s
            }
        }
    }

    /// Passes the queued messages of every stand-in the AV now holds to its handle.
    pub(super) fn name_stand_ins(&mut self) {
        let Some(av) = self.av.as_ref() else {
            return;
        };
        let stand_ins = self.peers.stand_ins();
        let handles = av.handles_of(stand_ins.iter().map(|&(slot, _)| self.peers.addr(slot)));
        let named: Vec<(SlotId, PeerId, PeerId)> = stand_ins
            .into_iter()
            .zip(handles)
            .filter_map(|((slot, s), h)| Some((slot, s, matcher_id(h)?)))
            .collect();
        for (slot, s, peer) in named {
            self.rx.matcher.relabel(s, peer);
            self.peers.set_stand_in(slot, None);
        }
    }

    pub(super) fn recv_completion(
        &self,
        kind: Kind,
        context: Context,
        h: &Header,
        len: usize,
        buf: usize,
    ) -> Completion {
        let mut flags = FI_RECV | kind_flag(kind);
        if h.data.is_some() {
            flags |= FI_REMOTE_CQ_DATA;
        }
        Completion {
            op_context: context.0,
            flags,
            len,
            buf,
            data: h.data.unwrap_or(0),
            tag: if kind == Kind::Tagged { h.tag } else { 0 },
            src: Some(if h.peer.0 >= STAND_IN_BASE {
                ADDR_NOTAVAIL
            } else {
                u64::from(h.peer.0)
            }),
        }
    }

    /// Completes a receive; `rndv`: one started by [`start_rndv`](Self::start_rndv).
    pub(super) fn finish_recv(&mut self, kind: Kind, d: &Delivery<Recv>, rndv: bool) {
        let mut c = self.recv_completion(
            kind,
            d.context,
            &d.header,
            d.placed,
            d.recv.mem.addr_at(d.offset),
        );
        let cancelled = self.piece_done(d, rndv, &mut c);
        self.stats.received += 1;
        match d.truncated() {
            0 => self.out.recv_done(c, d.recv.flags),
            lost => self.out.recv_failed(c, Errno::TRUNC, lost),
        }
        self.report_cancelled(cancelled);
    }

    /// Flags `c` FI_MULTI_RECV if it hands a multi-receive buffer back: not before the last of
    /// its pieces in flight. Returns the buffer's cancellation, if that waited for this piece.
    pub(super) fn piece_done(
        &mut self,
        d: &Delivery<Recv>,
        rndv: bool,
        c: &mut Completion,
    ) -> Option<Completion> {
        let id = d.recv.multi?;
        let done = self.rx.multi.finished(id, rndv, d.released);
        if done.releases {
            c.flags |= FI_MULTI_RECV;
        }
        done.cancelled
    }

    pub(super) fn report_cancelled(&mut self, c: Option<Completion>) {
        if let Some(c) = c {
            self.out.recv_failed(c, Errno::CANCELED, 0);
        }
    }

    pub(super) fn start_rndv(
        &mut self,
        kind: Kind,
        d: Delivery<Recv>,
        handle: u64,
        from: SlotId,
        pushes: Pushes,
    ) {
        if d.placed == 0 {
            self.send_cts(from, handle, 0, 0, false);
            self.finish_recv(kind, &d, false);
            return;
        }
        if let Some(id) = d.recv.multi {
            self.rx.multi.started(id);
        }
        let recv_id = self.id();
        let taken = !matches!(pushes, Pushes::None);
        self.send_cts(from, handle, recv_id, d.placed, taken);
        let key = (from, handle);
        self.rx.rndv.insert(
            recv_id,
            RndvRecv {
                kind,
                delivery: d,
                from,
                got: 0,
                last: self.now,
                push_key: taken.then_some(key),
            },
        );
        // Its RTS is what was just heard from the sender (stamped with its batch).
        self.heard_from(from);
        if taken {
            self.rx.pushing_into.insert(key, recv_id);
        }
        // Held chunks go in as later ones will; the last byte completes the receive.
        if let Pushes::Parked(pieces) = pushes {
            for (offset, bytes) in pieces {
                self.push_into(from, recv_id, offset, &bytes, false);
            }
        }
    }
}

//! Arrivals in their turn: a message from a peer, dispatched by kind, and the rendezvous
//! data and pushed chunks it carries.

use super::*;

impl State {
    pub(super) fn handle_message(&mut self, from: SlotId, bytes: &[u8]) {
        self.heard_from(from);
        if !wire::is_matched(bytes) {
            return self.dispatch(from, UNKNOWN_PEER, bytes);
        }
        // The AV handle, from the peer table (the AV itself, under its lock, once per peer).
        let peer = self.label(from);
        self.dispatch(from, peer, bytes);
    }

    /// Handles a message; `peer` is its sender's matcher id, an AV handle or a stand-in (used
    /// only by matched messages).
    pub(super) fn dispatch(&mut self, from: SlotId, peer: PeerId, bytes: &[u8]) {
        let (qpn, msg) = match wire::parse(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed += 1;
                diag!(
                    Debug,
                    EpData,
                    "message from {} dropped: {e}",
                    self.peers.addr(from)
                );
                return;
            }
        };
        // Where its answers go: the queue pair it came from.
        self.peers.heard_qpn(from, qpn);
        match msg {
            Msg::Eager { m, payload } => {
                let header = Header {
                    peer,
                    tag: m.tag,
                    data: m.data,
                    len: payload.len(),
                    protocol: Protocol::Eager,
                };
                let arrival = self
                    .rx
                    .matcher
                    .arrive(m.kind, header, |_| Held::Eager(payload.into()));
                if let Arrival::Matched(d) = arrival {
                    d.recv.mem.write_at(d.offset, &payload[..d.placed]);
                    self.finish_recv(m.kind, &d, false);
                }
            }
            Msg::Rts { m, handle, pushed } => {
                let Ok(len) = usize::try_from(m.len) else {
                    self.stats.malformed += 1;
                    return;
                };
                let header = Header {
                    peer,
                    tag: m.tag,
                    data: m.data,
                    len,
                    protocol: Protocol::Rendezvous { handle },
                };
                let arrival = self
                    .rx
                    .matcher
                    .arrive(m.kind, header, |_| Held::Rndv { handle, from });
                match arrival {
                    Arrival::Matched(d) => {
                        let pushes = if pushed { Pushes::Coming } else { Pushes::None };
                        self.start_rndv(m.kind, d, handle, from, pushes);
                    }
                    Arrival::Buffered(_) if pushed => self.rx.parked.open((from, handle)),
                    Arrival::Buffered(_) => {}
                }
            }
            Msg::Cts {
                handle,
                recv_id,
                wanted,
                taken,
            } => self.on_cts(from, handle, recv_id, wanted, taken),
            Msg::Push {
                handle,
                offset,
                payload,
            } => self.on_push(from, handle, offset, payload),
            Msg::Data {
                recv_id,
                offset,
                payload,
            } => self.on_data(from, recv_id, offset, payload),
            // Its work was done: the engine acknowledged it, `heard_from` noted the sender.
            Msg::Ping => {}
            Msg::Write {
                key,
                addr,
                id,
                last,
                payload,
            } => self.on_write(from, key, addr, (id, last), payload),
            Msg::Read { id, key, addr, len } => self.on_read(from, id, key, addr, len),
            Msg::ReadData {
                id,
                offset,
                payload,
            } => self.on_read_data(from, id, offset, payload),
            Msg::RmaAnswer { id, errno, last } => self.on_rma_answer(from, id, errno, last),
            Msg::Atomic(r) => self.on_atomic(from, r),
            Msg::AtomicAnswer { id, errno, fetched } => {
                self.on_atomic_answer(from, id, errno, fetched)
            }
        }
    }

    pub(super) fn on_data(&mut self, from: SlotId, recv_id: u64, offset: u64, payload: &[u8]) {
        self.data_arrived(from, recv_id, offset, payload, payload.len());
    }

    /// `len` bytes of rendezvous receive `recv_id` at `offset` arrived: the first of them
    /// (`write`) are copied there, the rest were read in place.
    pub(super) fn data_arrived(
        &mut self,
        from: SlotId,
        recv_id: u64,
        offset: u64,
        write: &[u8],
        len: usize,
    ) {
        if self.place(from, recv_id, offset, write, len) {
            self.count_arrived(recv_id, len);
        }
    }

    /// Copies `write` to `offset` of rendezvous receive `recv_id`, if it is `from`'s and
    /// `len` bytes there fit; counts a stray or malformed chunk otherwise.
    pub(super) fn place(
        &mut self,
        from: SlotId,
        recv_id: u64,
        offset: u64,
        write: &[u8],
        len: usize,
    ) -> bool {
        let Some(r) = self.rx.rndv.get(&recv_id) else {
            self.stats.stray += 1;
            return false;
        };
        let d = &r.delivery;
        if r.from != from || !fits(d, offset, len) {
            self.stats.malformed += 1;
            return false;
        }
        d.recv.mem.write_at(d.offset + offset as usize, write);
        true
    }

    /// `len` more bytes of rendezvous receive `recv_id` are in: it completes once all are.
    pub(super) fn count_arrived(&mut self, recv_id: u64, len: usize) {
        let Some(r) = self.rx.rndv.get_mut(&recv_id) else {
            return;
        };
        r.got += len;
        if r.got >= r.delivery.placed {
            let r = self.end_rndv(recv_id).expect("present");
            self.finish_recv(r.kind, &r.delivery, true);
        }
    }

    /// A pushed chunk, in its turn (its RTS was handled).
    pub(super) fn on_push(&mut self, from: SlotId, handle: u64, offset: u64, payload: &[u8]) {
        let key = (from, handle);
        if let Some(&recv_id) = self.rx.pushing_into.get(&key) {
            self.push_into(from, recv_id, offset, payload, true);
            return;
        }
        match self.rx.parked.park(key, offset, payload) {
            Parking::Held => self.stats.push_parked += 1,
            Parking::Refused | Parking::Unknown => self.stats.push_dropped += 1,
        }
    }

    /// Places pushed bytes into rendezvous receive `recv_id`, less what a short receive has no
    /// room for. `first`: they start a chunk, which the counters count once.
    pub(super) fn push_into(
        &mut self,
        from: SlotId,
        recv_id: u64,
        offset: u64,
        payload: &[u8],
        first: bool,
    ) {
        let fitting = self
            .rx
            .rndv
            .get(&recv_id)
            .and_then(|r| clip(&r.delivery, offset, payload));
        match fitting {
            Some(b) => {
                self.stats.push_placed += u64::from(first);
                self.on_data(from, recv_id, offset, b);
            }
            None => self.stats.push_dropped += u64::from(first),
        }
    }

    /// What rendezvous receive `recv_id` takes of `len` pushed bytes at `offset` (a short
    /// receive takes fewer), if any.
    pub(super) fn push_room(&self, recv_id: u64, offset: u64, len: usize) -> Option<usize> {
        let r = self.rx.rndv.get(&recv_id)?;
        room(&r.delivery, offset).map(|room| len.min(room))
    }
}

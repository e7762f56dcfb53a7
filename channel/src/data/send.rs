//! Sends: eager and rendezvous messages out, their completions, the CTS that a rendezvous
//! waits for, and what fails them.

use super::*;

impl State {
    pub fn send(&mut self, a: SendArgs) -> Result<()> {
        let (slot, name) = self.resolve(a.dest)?;
        self.peers.know(slot, name.nonce);
        let len = a.mem.len();
        self.log_traffic(slot, len, len > self.cfg.eager);
        let inject = a.flags & FI_INJECT != 0;
        if inject && len > INJECT_SIZE {
            return Err(Errno::INVAL);
        }
        let m = Matching {
            kind: a.kind,
            tag: a.tag,
            data: a.data,
            len: len as u64,
        };
        let to = slot;
        self.stats.sent += 1;
        if self.is_self(&name) {
            // To itself: no queue pair involved, and no rendezvous needed.
            let mut bytes = Vec::with_capacity(MATCH_HEADER + len);
            wire::eager(&mut bytes, self.cfg.name.qpn, &m);
            a.mem.read_into(0, len, &mut bytes);
            self.handle_message(slot, &bytes);
            let c = send_completion(a.kind, a.context, len);
            self.out.tx_done(c, a.flags, FI_SEND);
            return Ok(());
        }
        let id = self.id();
        let pending = PendingSend::new(Op::Send, a.kind, a.context, a.flags, a.tag, len, to);
        // An inject is copied whatever the eager size: its buffer is the caller's again at once.
        if len <= self.cfg.eager || inject {
            let mut bytes = self.tx.bufs.take(MATCH_HEADER + len);
            wire::eager(&mut bytes, self.cfg.name.qpn, &m);
            a.mem.read_into(0, len, &mut bytes);
            // A copied send asked for no completion level that needs the peer (Open MPI asks
            // for none; MPICH for FI_DELIVERY_COMPLETE but in its non-contiguous
            // `fi_tsendmsg`) is done once its bytes are ours, as over TCP once they are in
            // the socket: the queue pair keeps them until they are acknowledged. Otherwise,
            // with more ranks than cores, each such send waits for its peer to get the CPU back
            // (channel/BENCHMARKS.md, "NPB per mode").
            let buffered =
                a.flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE) == 0;
            let role = if inject || buffered {
                // The bytes are copied: the send is done as far as the caller goes.
                self.out
                    .tx_done(send_completion(a.kind, a.context, len), a.flags, FI_SEND);
                Role::Copied { kind: a.kind, to }
            } else {
                self.tx.sends.insert(id, pending);
                Role::Part { send: id }
            };
            self.submit(Outgoing::Message {
                to,
                bytes: self.tx.bufs.freeze(bytes),
                role,
            });
        } else {
            let pushed = len.min(self.cfg.push);
            let mut bytes = Vec::with_capacity(MATCH_HEADER);
            wire::rts(&mut bytes, self.cfg.name.qpn, &m, id, pushed > 0);
            self.submit(Outgoing::Message {
                to,
                bytes: bytes.into(),
                role: Role::Rts { send: id },
            });
            let outstanding = self.submit_chunks(id, None, 0..pushed);
            self.tx.sends.insert(
                id,
                PendingSend {
                    mem: Some(a.mem),
                    outstanding,
                    cleared: false,
                    pushed,
                    ..pending
                },
            );
        }
        Ok(())
    }

    /// Queues the chunks of send `send` covering `bytes`, for receive `recv_id` (`None`:
    /// pushed ahead of the answer); returns how many.
    pub(super) fn submit_chunks(
        &mut self,
        send: u64,
        recv_id: Option<u64>,
        bytes: Range<usize>,
    ) -> u32 {
        let mut n = 0;
        for (offset, len) in chunks(bytes) {
            self.submit(Outgoing::Chunk {
                send,
                recv_id,
                offset,
                len,
            });
            n += 1;
        }
        n
    }

    /// Whether `name` is this endpoint's own.
    pub(super) fn is_self(&self, name: &EpName) -> bool {
        name.udp_addr() == self.cfg.name.udp_addr() && name.qpn == self.cfg.name.qpn
    }

    /// Queues a send for the queue pair; the driver posts it as soon as there is room.
    pub(super) fn submit(&mut self, o: Outgoing) {
        self.tx.backlog.push_back(o);
    }

    /// One queue-pair send of `role` completed (or failed).
    pub(super) fn send_part_done(&mut self, role: Role, ok: bool) {
        let send = match role {
            Role::Free => return,
            Role::Copied { kind, to } => {
                if !ok {
                    self.copied_send_failed(kind, to);
                }
                return;
            }
            Role::Rts { send } if ok => {
                let _ = send;
                return;
            }
            Role::Cts { recv } => {
                if !ok {
                    self.fail_rndv(recv, "the sender did not acknowledge the clear-to-send");
                }
                return;
            }
            Role::Ping { peer } => {
                if !ok {
                    self.fail_sends_to(peer);
                }
                return;
            }
            Role::Chunk { send, lent } => {
                self.tx.chunks_inflight -= 1;
                self.tx.lent -= lent as usize;
                send
            }
            Role::Served { id, peer } => {
                self.tx.chunks_inflight -= 1;
                if !ok {
                    self.tx.backlog.retain(|o| {
                        !matches!(o, Outgoing::Served { id: i, to, .. }
                            if *i == id && *to == peer)
                    });
                }
                return;
            }
            Role::Part { send } | Role::Rts { send } => send,
        };
        if !ok {
            if let Some(s) = self.tx.sends.remove(&send) {
                diag!(
                    Warn,
                    EpData,
                    "{} to {} failed: the peer did not acknowledge it",
                    s.op.name(),
                    self.peers.addr(s.to)
                );
                self.report(s, Some(Errno(FI_EIO as u32)));
            }
            return;
        }
        let Some(s) = self.tx.sends.get_mut(&send) else {
            return;
        };
        s.outstanding = s.outstanding.saturating_sub(1);
        if s.outstanding == 0 && s.cleared {
            self.complete_send(send);
        }
    }

    /// A send reported done when it was copied was not acknowledged: the caller hears of it
    /// as an error with no context (its completion, if it had one, is long gone), or a
    /// program that sent only such messages would wait for its peer's answer forever.
    fn copied_send_failed(&mut self, kind: Kind, to: SlotId) {
        diag!(
            Warn,
            EpData,
            "send to {} failed after it was reported done (copied): the peer did not \
             acknowledge it",
            self.peers.addr(to)
        );
        self.stats.failed_sends += 1;
        self.out
            .tx_failed(send_completion(kind, 0, 0), Errno(FI_EIO as u32), FI_SEND);
    }

    pub(super) fn complete_send(&mut self, send: u64) {
        if let Some(s) = self.tx.sends.remove(&send) {
            let refused = matches!(s.op, Op::Write { refused: true, .. });
            if refused {
                diag!(
                    Warn,
                    EpData,
                    "RMA write to {} failed: the target refused it",
                    self.peers.addr(s.to)
                );
            }
            self.report(s, refused.then_some(Errno::ACCES));
        }
    }

    /// Reports a send, write or read that ended: done, or failed with `err`.
    pub(super) fn report(&mut self, s: PendingSend, err: Option<Errno>) {
        let (c, event) = match s.op {
            Op::Send => (
                Completion {
                    tag: if err.is_none() { s.tag } else { 0 },
                    ..send_completion(s.kind, s.context, s.len)
                },
                FI_SEND,
            ),
            Op::Write { .. } => (rma_completion(FI_WRITE, s.context), FI_WRITE),
            Op::Read { .. } => (rma_completion(FI_READ, s.context), FI_READ),
            Op::Atomic { fetch: false } => (atomic_completion(FI_WRITE, s.context), FI_WRITE),
            Op::Atomic { fetch: true } => (atomic_completion(FI_READ, s.context), FI_READ),
        };
        match err {
            None => self.out.tx_done(c, s.flags, event),
            Some(e) => {
                self.stats.failed_sends += 1;
                self.out.tx_failed(c, e, event);
            }
        }
    }

    /// The receiver answered send `handle`: it takes `wanted` bytes, and keeps what was
    /// pushed if `taken`.
    pub(super) fn on_cts(
        &mut self,
        from: SlotId,
        handle: u64,
        recv_id: u64,
        wanted: u64,
        taken: bool,
    ) {
        // Only from the send's receiver: handles are sequential, so another peer could name it.
        let Some(s) = self.tx.sends.get_mut(&handle).filter(|s| s.to == from) else {
            self.stats.stray += 1;
            return;
        };
        if s.cleared || s.mem.is_none() || s.op != Op::Send {
            self.stats.stray += 1;
            return;
        }
        s.cleared = true;
        let n = usize::try_from(wanted).unwrap_or(usize::MAX).min(s.len);
        // The receiver keeps the pushed bytes below `kept`.
        let kept = if taken { s.pushed.min(n) } else { 0 };
        // Pushed chunks still queued from there on need not go.
        let mut unqueued = 0;
        if s.pushed > kept {
            let before = self.tx.backlog.len();
            self.tx.backlog.retain(|o| {
                !matches!(o, Outgoing::Chunk { send, recv_id: None, offset, .. }
                    if *send == handle && *offset >= kept)
            });
            unqueued = (before - self.tx.backlog.len()) as u32;
        }
        let added = self.submit_chunks(handle, Some(recv_id), kept..n);
        let s = self.tx.sends.get_mut(&handle).expect("looked up above");
        s.outstanding = s.outstanding - unqueued + added;
        if s.outstanding == 0 {
            self.complete_send(handle);
        }
    }

    pub(super) fn send_cts(
        &mut self,
        to: SlotId,
        handle: u64,
        recv_id: u64,
        wanted: usize,
        taken: bool,
    ) {
        let mut bytes = Vec::with_capacity(wire::CTS_HEADER);
        wire::cts(
            &mut bytes,
            self.cfg.name.qpn,
            handle,
            recv_id,
            wanted as u64,
            taken,
        );
        let role = if wanted == 0 {
            Role::Free
        } else {
            Role::Cts { recv: recv_id }
        };
        self.submit(Outgoing::Message {
            to,
            bytes: bytes.into(),
            role,
        });
    }

    /// Fails every send to `peer` with FI_EIO: it did not acknowledge a probe.
    pub(super) fn fail_sends_to(&mut self, peer: SlotId) {
        let ids: Vec<u64> = self
            .tx
            .sends
            .iter()
            .filter(|(_, s)| s.to == peer)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(s) = self.tx.sends.remove(&id) {
                diag!(
                    Warn,
                    EpData,
                    "{} to {} failed: the peer is gone",
                    s.op.name(),
                    self.peers.addr(s.to)
                );
                self.report(s, Some(Errno(FI_EIO as u32)));
            }
        }
    }

    /// A rendezvous send waits for a clear-to-send or for its chunks, and the engine hears
    /// nothing of a peer it owes nothing: every so often each peer with such a send gets a
    /// PING, which its engine acknowledges. A peer that is gone fails the PING, and with it
    /// the sends (a receiver that merely has not posted its receive yet acknowledges it). The
    /// PING also tells the peer's receives from us that we are alive.
    pub(super) fn ping_peers(&mut self) {
        let mut peers: Vec<SlotId> = self
            .tx
            .sends
            .values()
            .filter(|s| s.mem.is_some() || !s.cleared)
            .map(|s| s.to)
            .collect();
        peers.sort_unstable();
        peers.dedup();
        for to in peers {
            let mut bytes = Vec::with_capacity(wire::PING_LEN);
            wire::ping(&mut bytes, self.cfg.name.qpn);
            self.submit(Outgoing::Message {
                to,
                bytes: bytes.into(),
                role: Role::Ping { peer: to },
            });
        }
    }

    /// Fails rendezvous receive `recv_id` (its sender is gone) with FI_EIO and length 0 (the
    /// chunks that came need not be the buffer's first bytes). Chunks still arriving for it
    /// are counted as stray.
    pub(super) fn fail_rndv(&mut self, recv_id: u64, why: &str) {
        let Some(r) = self.end_rndv(recv_id) else {
            return;
        };
        self.stats.failed_recvs += 1;
        diag!(
            Warn,
            EpData,
            "receive from {} failed: {why}",
            self.peers.addr(r.from)
        );
        let d = &r.delivery;
        let mut c = self.recv_completion(
            r.kind,
            d.context,
            &d.header,
            0,
            d.recv.mem.addr_at(d.offset),
        );
        let cancelled = self.piece_done(d, true, &mut c);
        self.out.recv_failed(c, Errno(FI_EIO as u32), 0);
        self.report_cancelled(cancelled);
    }

    /// Removes rendezvous receive `recv_id`; chunks still pushed into it will be dropped.
    pub(super) fn end_rndv(&mut self, recv_id: u64) -> Option<RndvRecv> {
        let r = self.rx.rndv.remove(&recv_id)?;
        // Only if the key is still this receive's: a sender restarted on the same address
        // reuses handles, and its new receive may hold the key now.
        if let Some(key) = r
            .push_key
            .filter(|k| self.rx.pushing_into.get(k) == Some(&recv_id))
        {
            self.rx.pushing_into.remove(&key);
            crate::hash::shrink(&mut self.rx.pushing_into);
        }
        Some(r)
    }

    /// Anything from `src` shows it alive: its rendezvous receives here may be waiting behind
    /// its other transfers to us, which it sends first. Kept only while receives wait.
    pub(super) fn heard_from(&mut self, from: SlotId) {
        if !self.rx.rndv.is_empty() && self.live.fresh.last() != Some(&from) {
            self.live.fresh.push(from);
        }
    }

    /// The senders heard since the last call were heard by `now` (the end of the batch
    /// they came in).
    pub(super) fn heard_by(&mut self, now: Instant) {
        for from in self.live.fresh.drain(..) {
            self.peers.hear(from, now);
        }
    }

    /// The rendezvous timers, every quarter of the peer timeout (so a silent sender fails its
    /// receives after 1 to 1.25 peer timeouts): stalled receives expire, waiting sends probe
    /// their peers. Between checks a poll pays one comparison.
    pub(super) fn timers(&mut self, now: Instant) {
        if now < self.live.next_check {
            return;
        }
        self.live.next_check = now + self.cfg.stall_limit / 4;
        self.expire_stalled(now);
        if !self.tx.sends.is_empty() {
            self.ping_peers();
        }
    }

    /// Fails the rendezvous receives that heard nothing from their sender for longer than
    /// the peer timeout.
    pub(super) fn expire_stalled(&mut self, now: Instant) {
        if self.rx.rndv.is_empty() {
            self.live.fresh.clear();
            return;
        }
        let limit = self.cfg.stall_limit;
        let peers = &self.peers;
        let stalled: Vec<u64> = self
            .rx
            .rndv
            .iter()
            .filter(|(_, r)| {
                // A time heard before the receive began is older than its `last`.
                let last = peers.heard(r.from).map_or(r.last, |h| h.max(r.last));
                now.saturating_duration_since(last) > limit
            })
            .map(|(&id, _)| id)
            .collect();
        for id in stalled {
            self.fail_rndv(id, "the sender went silent (FI_DIWARP_PEER_TIMEOUT_MS)");
        }
    }
}

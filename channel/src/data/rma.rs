//! RMA, as iWARP's RDMA Write and Read carried by the reliable-datagram queue pair: a write is
//! WRITE chunks that the target places into the memory region they name; a read is a READ the
//! target answers with READ_DATA chunks, which land in the initiator's buffer at their offset.
//!
//! A write completes once every chunk is acknowledged and the target has answered its last
//! chunk, which it does after placing it (and, in order, all before it): FI_DELIVERY_COMPLETE,
//! and a refusal is never overtaken by an acknowledgement. A read completes once all its bytes
//! came. A target that refuses an access (no such key, out of bounds, not granted) counts it,
//! logs it and answers with FI_EACCES, which fails the operation. A failed write's remaining
//! chunks still go, refused in turn: the caller's buffer they are lent from stays in use until
//! the write is reported.

use super::*;
use crate::mr::Refusal;

impl State {
    /// Starts an RMA write (`write`) or read.
    pub fn rma(&mut self, write: bool, a: RmaArgs) -> Result<()> {
        let (slot, name) = self.resolve(a.dest)?;
        self.peers.know(slot, name.nonce);
        let len = a.mem.len();
        self.log_traffic(slot, len, len > self.cfg.eager);
        let inject = a.flags & FI_INJECT != 0;
        if inject && (!write || len > INJECT_SIZE) {
            return Err(Errno::INVAL);
        }
        let to = slot;
        if a.addr.checked_add(len as u64).is_none() {
            return Err(Errno::INVAL);
        }
        let op = if write {
            Op::Write {
                key: a.key,
                addr: a.addr,
                refused: false,
            }
        } else {
            Op::Read { got: 0 }
        };
        let mut s = PendingSend::new(op, Kind::Msg, a.context, a.flags, 0, len, to);
        if self.is_self(&name) {
            // Our own region: no queue pair involved.
            let done = self.local_rma(write, &a);
            self.report(s, done.err().map(|_| Errno::ACCES));
            return Ok(());
        }
        let id = self.id();
        // A write waits for the target's answer to its last chunk, a read for its bytes.
        s.cleared = !write && len == 0;
        if !write {
            s.mem = Some(a.mem);
            let mut bytes = Vec::with_capacity(wire::READ_LEN);
            wire::read(&mut bytes, self.cfg.name.qpn, id, a.key, a.addr, len as u64);
            self.tx.sends.insert(id, s);
            self.submit(Outgoing::Message {
                to,
                bytes: bytes.into(),
                role: Role::Part { send: id },
            });
        } else if inject || len <= self.cfg.eager {
            // Copied, as an eager send is: an inject's buffer is the caller's again at once.
            let mut bytes = self.tx.bufs.take(wire::WRITE_HEADER + len);
            wire::write(&mut bytes, self.cfg.name.qpn, a.key, a.addr, id, true);
            a.mem.read_into(0, len, &mut bytes);
            self.tx.sends.insert(id, s);
            let bytes = self.tx.bufs.freeze(bytes);
            self.submit(Outgoing::Message {
                to,
                bytes,
                role: Role::Part { send: id },
            });
        } else {
            // Chunks go from the caller's buffer when they are posted (`driver`).
            s.mem = Some(a.mem);
            self.tx.sends.insert(id, s);
            let n = self.submit_chunks(id, None, 0..len);
            self.tx.sends.get_mut(&id).expect("inserted").outstanding = n;
        }
        Ok(())
    }

    fn local_rma(&mut self, write: bool, a: &RmaArgs) -> std::result::Result<(), Refusal> {
        let len = a.mem.len();
        let mut bytes = Vec::with_capacity(len);
        let done = if write {
            a.mem.read_into(0, len, &mut bytes);
            self.mrs.write(a.key, a.addr, &bytes)
        } else {
            self.mrs.read(a.key, a.addr, len, &mut bytes).map(|()| {
                a.mem.write_at(0, &bytes);
            })
        };
        if let Err(r) = done {
            self.stats.rma_refused += 1;
            diag!(Warn, EpData, "RMA to this endpoint refused: {r}");
        }
        done
    }

    /// A peer's WRITE into our region `key`; the last of a write is answered.
    pub(super) fn on_write(
        &mut self,
        from: SlotId,
        key: u64,
        addr: u64,
        (id, last): (u64, bool),
        payload: &[u8],
    ) {
        match self.mrs.write(key, addr, payload) {
            Ok(()) => {
                self.stats.rma_writes_in += 1;
                if last {
                    self.answer(from, id, 0, true);
                }
            }
            Err(r) => self.refuse(from, id, r, last),
        }
    }

    /// A peer's READ of our region `key`: the answer is queued as one entry that posts its
    /// chunks one by one, each copied from the region when it is posted.
    pub(super) fn on_read(&mut self, from: SlotId, id: u64, key: u64, addr: u64, len: u64) {
        let checked = usize::try_from(len)
            .map_err(|_| Refusal::Bounds {
                start: addr,
                end: addr.saturating_add(len),
                len: 0,
            })
            .and_then(|n| self.mrs.readable(key, addr, n).map(|()| n));
        let len = match checked {
            Ok(n) => n,
            Err(r) => return self.refuse(from, id, r, false),
        };
        self.stats.rma_reads_in += 1;
        if len == 0 {
            // The initiator's read completed when its READ was acknowledged.
            return;
        }
        // One entry for the whole answer, which cuts its chunks as it goes: a peer reading a
        // large region does not fill our backlog (and make our own sends wait for room).
        self.submit(Outgoing::Served {
            to: from,
            id,
            key,
            addr,
            offset: 0,
            len,
        });
    }

    /// Bytes for our read `id`.
    pub(super) fn on_read_data(&mut self, from: SlotId, id: u64, offset: u64, payload: &[u8]) {
        let Some(s) = self.tx.sends.get_mut(&id) else {
            self.stats.stray += 1;
            return;
        };
        // READ_DATA comes in order: each chunk starts where the last ended.
        let (Op::Read { got }, Some(mem), true) = (&mut s.op, &s.mem, s.to == from) else {
            self.stats.malformed += 1;
            return;
        };
        if offset != *got as u64 || *got + payload.len() > s.len {
            self.stats.malformed += 1;
            return;
        }
        mem.write_at(*got, payload);
        *got += payload.len();
        if *got >= s.len {
            s.cleared = true;
            if s.outstanding == 0 {
                self.complete_send(id);
            }
        }
    }

    /// The target answered our write or read `id`: `errno` 0 (done) or why it refused; `last`:
    /// it answers a write's last chunk.
    pub(super) fn on_rma_answer(&mut self, from: SlotId, id: u64, errno: u64, last: bool) {
        let Some(s) = self
            .tx
            .sends
            .get_mut(&id)
            .filter(|s| s.op != Op::Send && s.to == from)
        else {
            self.stats.stray += 1;
            return;
        };
        match &mut s.op {
            Op::Write { refused, .. } => {
                *refused |= errno != 0;
                if last {
                    s.cleared = true;
                    if s.outstanding == 0 {
                        self.complete_send(id);
                    }
                }
            }
            Op::Read { .. } if errno != 0 => {
                // Nothing of ours is lent to a read: it can end at once.
                let s = self.tx.sends.remove(&id).expect("looked up above");
                diag!(
                    Warn,
                    EpData,
                    "RMA read from {} failed: the target refused it",
                    self.peers.addr(s.to)
                );
                self.report(s, Some(Errno::ACCES));
            }
            _ => self.stats.malformed += 1,
        }
    }

    /// Counts and logs a refused access, and tells the initiator (`last`: the write's last).
    pub(super) fn refuse(&mut self, to: SlotId, id: u64, why: Refusal, last: bool) {
        self.stats.rma_refused += 1;
        diag!(
            Warn,
            EpData,
            "RMA from {} refused: {why}",
            self.peers.addr(to)
        );
        self.answer(to, id, u64::from(Errno::ACCES.0), last);
    }

    fn answer(&mut self, to: SlotId, id: u64, errno: u64, last: bool) {
        let mut bytes = Vec::with_capacity(wire::RMA_ANSWER_LEN);
        wire::rma_answer(&mut bytes, self.cfg.name.qpn, id, errno, last);
        self.submit(Outgoing::Message {
            to,
            bytes: bytes.into(),
            role: Role::Free,
        });
    }
}

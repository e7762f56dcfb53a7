//! RMA, as iWARP's RDMA Write and Read carried by the reliable-datagram queue pair: a write is
//! WRITE chunks that the target places into the memory region they name; a read is a READ the
//! target answers with READ_DATA chunks, which land in the initiator's buffer at their offset.
//!
//! Completion follows the send rules. A write completes once the target has acknowledged every
//! chunk; the target places a WRITE in the poll that takes it in, before any acknowledgement
//! of it leaves, so this is FI_DELIVERY_COMPLETE. A read completes once all its bytes came.
//! A target that refuses an access (no such key, out of bounds, not granted) counts it, logs
//! it and answers RMA_ERROR, which fails the operation with FI_EACCES if it is still pending.

use super::*;
use crate::mr::Refusal;

impl State {
    /// Starts an RMA write (`write`) or read.
    pub fn rma(&mut self, write: bool, a: RmaArgs) -> Result<()> {
        let name = self.av()?.lookup(a.dest)?;
        let len = a.mem.len();
        let inject = a.flags & FI_INJECT != 0;
        if inject && (!write || len > INJECT_SIZE) {
            return Err(Errno::INVAL);
        }
        let to = AddressHandle::new(name.udp_addr(), name.qpn);
        let op = if write {
            Op::Write {
                key: a.key,
                addr: a.addr,
            }
        } else {
            Op::Read { got: 0 }
        };
        let mut s = PendingSend::new(op, Kind::Msg, a.context, a.flags, 0, len, to);
        if name.udp_addr() == self.name.udp_addr() && name.qpn == self.name.qpn {
            // Our own region: no queue pair involved.
            let done = self.local_rma(write, &a);
            self.report(s, done.err().map(|_| Errno::ACCES));
            return Ok(());
        }
        let id = self.id();
        if !write {
            s.mem = Some(a.mem);
            s.cleared = len == 0;
            let mut bytes = Vec::with_capacity(wire::READ_LEN);
            wire::read(&mut bytes, self.name.qpn, id, a.key, a.addr, len as u64);
            self.sends.insert(id, s);
            self.submit(Outgoing::Message {
                to,
                bytes: bytes.into(),
                role: Role::Part { send: id },
            });
        } else if inject || len <= self.eager {
            // Copied, as an eager send is: an inject's buffer is the caller's again at once.
            let mut bytes = self.bufs.take(wire::WRITE_HEADER + len);
            wire::write(&mut bytes, self.name.qpn, a.key, a.addr, id);
            a.mem.read_into(0, len, &mut bytes);
            self.sends.insert(id, s);
            let bytes = self.bufs.freeze(bytes);
            self.submit(Outgoing::Message {
                to,
                bytes,
                role: Role::Part { send: id },
            });
        } else {
            // Chunks go from the caller's buffer when they are posted (`driver`).
            s.mem = Some(a.mem);
            self.sends.insert(id, s);
            let n = self.submit_chunks(id, None, 0..len);
            self.sends.get_mut(&id).expect("inserted").outstanding = n;
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

    /// A peer's WRITE into our region `key`.
    pub(super) fn on_write(
        &mut self,
        from: AddressHandle,
        key: u64,
        addr: u64,
        id: u64,
        payload: &[u8],
    ) {
        match self.mrs.write(key, addr, payload) {
            Ok(()) => self.stats.rma_writes_in += 1,
            Err(r) => self.refuse(from, id, r),
        }
    }

    /// A peer's READ of our region `key`: the answer is queued as chunks, each copied from
    /// the region when it is posted.
    pub(super) fn on_read(&mut self, from: AddressHandle, id: u64, key: u64, addr: u64, len: u64) {
        let checked = usize::try_from(len)
            .map_err(|_| Refusal::Bounds {
                start: addr,
                end: addr.saturating_add(len),
                len: 0,
            })
            .and_then(|n| self.mrs.readable(key, addr, n).map(|()| n));
        let len = match checked {
            Ok(n) => n,
            Err(r) => return self.refuse(from, id, r),
        };
        self.stats.rma_reads_in += 1;
        let mut offset = 0;
        while offset < len {
            let n = CHUNK.min(len - offset);
            self.submit(Outgoing::Served {
                to: from,
                id,
                key,
                addr,
                offset,
                len: n,
            });
            offset += n;
        }
    }

    /// Bytes for our read `id`.
    pub(super) fn on_read_data(&mut self, src: SocketAddr, id: u64, offset: u64, payload: &[u8]) {
        let Some(s) = self.sends.get_mut(&id) else {
            self.stats.stray += 1;
            return;
        };
        let fits = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(payload.len()))
            .is_some_and(|end| end <= s.len);
        let (Op::Read { got }, Some(mem), true, true) = (&mut s.op, &s.mem, s.to.addr == src, fits)
        else {
            self.stats.malformed += 1;
            return;
        };
        mem.write_at(offset as usize, payload);
        *got += payload.len();
        if *got >= s.len {
            s.cleared = true;
            if s.outstanding == 0 {
                self.complete_send(id);
            }
        }
    }

    /// The target refused our write or read `id`.
    pub(super) fn on_rma_error(&mut self, src: SocketAddr, id: u64, errno: u64) {
        let ours = self
            .sends
            .get(&id)
            .is_some_and(|s| s.op != Op::Send && s.to.addr == src);
        if !ours {
            self.stats.stray += 1;
            return;
        }
        let s = self.sends.remove(&id).expect("looked up above");
        diag!(
            Warn,
            EpData,
            "{} to {src} failed: the target refused it (fi errno {errno})",
            s.op.name()
        );
        self.report(s, Some(Errno::ACCES));
    }

    /// Counts and logs a refused access, and tells the initiator.
    pub(super) fn refuse(&mut self, to: AddressHandle, id: u64, why: Refusal) {
        self.stats.rma_refused += 1;
        diag!(Warn, EpData, "RMA from {} refused: {why}", to.addr);
        let mut bytes = Vec::with_capacity(wire::RMA_ERROR_LEN);
        wire::rma_error(&mut bytes, self.name.qpn, id, u64::from(Errno::ACCES.0));
        self.submit(Outgoing::Message {
            to,
            bytes: bytes.into(),
            role: Role::Free,
        });
    }
}

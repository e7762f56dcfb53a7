//! Atomics (fi_atomic(3)), as RFC 7306's Atomic Request and Response carried by the
//! reliable-datagram queue pair or a connection: the initiator copies its operands into an
//! ATOMIC message; the target applies it to its memory region under the region table's lock
//! (one operation at a time, in arrival order) and answers ATOMIC_ANSWER, with the values from
//! before when they are wanted. The answer completes the operation: FI_DELIVERY_COMPLETE for
//! every atomic, fetching or not. A refused access (no such key, out of bounds, not granted)
//! is counted, logged and answered FI_EACCES; an operation the target does not take, with
//! FI_EOPNOTSUPP.

use super::*;
use crate::atomic::{self, AtomicOp, Call, Datatype};
use crate::mr::Refusal;
use crate::raw::mem::UserMem;
use wire::AtomicRequest;

/// An atomic operation as the caller asked for it.
pub struct AtomicArgs {
    pub dest: u64,
    pub datatype: Datatype,
    pub op: AtomicOp,
    pub count: usize,
    /// The operand (none for ATOMIC_READ), then the compare operand, as many elements each.
    pub operands: Vec<u8>,
    /// Where the values from before go (fetching and compare calls).
    pub result: Option<UserMem>,
    pub addr: u64,
    pub key: u64,
    pub context: usize,
    pub flags: u64,
}

/// The operand bytes an operation of `count` elements carries.
fn operand_len(dt: Datatype, op: AtomicOp, count: usize) -> usize {
    let n = count * dt.size();
    match op {
        AtomicOp::Read => 0,
        op if op.compares() => 2 * n,
        _ => n,
    }
}

/// The access an operation takes of the target's region.
fn access(op: AtomicOp, fetch: bool) -> u64 {
    match (op, fetch) {
        (AtomicOp::Read, _) => FI_REMOTE_READ,
        (_, true) => FI_REMOTE_READ | FI_REMOTE_WRITE,
        (_, false) => FI_REMOTE_WRITE,
    }
}

impl State {
    /// Starts an atomic operation.
    pub fn atomic(&mut self, a: AtomicArgs) -> Result<()> {
        let max = atomic::max_count(Call::of(a.op, a.result.is_some()), a.datatype, a.op)
            .ok_or(Errno::OPNOTSUPP)?;
        let len = a.count * a.datatype.size();
        let fits = a.result.as_ref().is_none_or(|r| r.len() == len);
        if a.count == 0
            || a.count > max
            || a.operands.len() != operand_len(a.datatype, a.op, a.count)
            || !fits
            || a.addr.checked_add(len as u64).is_none()
        {
            return Err(Errno::INVAL);
        }
        let (slot, name) = self.resolve(a.dest)?;
        self.peers.know(slot, name.nonce);
        self.log_traffic(slot, len, false);
        let to = slot;
        let fetch = a.result.is_some();
        let mut s = PendingSend::new(
            Op::Atomic { fetch },
            Kind::Msg,
            a.context,
            a.flags,
            0,
            len,
            to,
        );
        if self.is_self(&name) {
            // Our own region: no queue pair involved.
            let done = self.local_atomic(&a);
            self.report(s, done.err());
            return Ok(());
        }
        let id = self.id();
        let r = AtomicRequest {
            id,
            key: a.key,
            addr: a.addr,
            count: u32::try_from(a.count).map_err(|_| Errno::INVAL)?,
            datatype: a.datatype.code(),
            op: a.op.code(),
            fetch,
            operands: &a.operands,
        };
        let mut bytes = self.tx.bufs.take(wire::ATOMIC_HEADER + a.operands.len());
        wire::atomic(&mut bytes, self.cfg.name.qpn, &r);
        bytes.extend_from_slice(&a.operands);
        // It waits for the target's answer too.
        s.cleared = false;
        s.mem = a.result;
        self.tx.sends.insert(id, s);
        let bytes = self.tx.bufs.freeze(bytes);
        self.submit(Outgoing::Message {
            to,
            bytes,
            role: Role::Part { send: id },
        });
        Ok(())
    }

    /// Applies `op` to `count` elements at `addr` of region `key` with `operands` (checked by
    /// the caller to be as long as the operation takes): the values from before, or why not.
    #[allow(clippy::too_many_arguments)] // the operation's own fields
    fn apply_to_region(
        &self,
        key: u64,
        addr: u64,
        dt: Datatype,
        op: AtomicOp,
        count: usize,
        operands: &[u8],
        fetch: bool,
    ) -> std::result::Result<Vec<u8>, Refusal> {
        let len = count * dt.size();
        let (operand, compare) = operands.split_at(operand_len(dt, op, count).min(len));
        self.mrs.update(key, addr, len, access(op, fetch), |t| {
            atomic::apply(dt, op, t, operand, compare)
        })
    }

    fn local_atomic(&mut self, a: &AtomicArgs) -> std::result::Result<(), Errno> {
        let fetch = a.result.is_some();
        let done =
            self.apply_to_region(a.key, a.addr, a.datatype, a.op, a.count, &a.operands, fetch);
        match done {
            Ok(old) => {
                if let Some(r) = &a.result {
                    r.write_at(0, &old);
                }
                Ok(())
            }
            Err(r) => {
                self.stats.rma_refused += 1;
                diag!(Warn, EpData, "atomic on this endpoint refused: {r}");
                Err(Errno::ACCES)
            }
        }
    }

    /// A peer's ATOMIC on our region: applied, and answered.
    pub(super) fn on_atomic(&mut self, from: SlotId, r: AtomicRequest<'_>) {
        let op = AtomicOp::from_code(r.op);
        let dt = Datatype::from_code(r.datatype);
        let (Some(op), Some(dt)) = (op, dt) else {
            return self.atomic_refused(from, r.id, Errno::OPNOTSUPP, "operation unknown");
        };
        let count = r.count as usize;
        let taken = atomic::max_count(Call::of(op, r.fetch), dt, op)
            .is_some_and(|max| (1..=max).contains(&count));
        if !taken || r.operands.len() != operand_len(dt, op, count) {
            return self.atomic_refused(from, r.id, Errno::OPNOTSUPP, "operation not taken");
        }
        match self.apply_to_region(r.key, r.addr, dt, op, count, r.operands, r.fetch) {
            Ok(old) => {
                self.stats.atomics_in += 1;
                let fetched = if r.fetch { &old[..] } else { &[] };
                self.atomic_answer(from, r.id, 0, fetched);
            }
            Err(why) => self.atomic_refused_access(from, r.id, why),
        }
    }

    fn atomic_refused_access(&mut self, to: SlotId, id: u64, why: Refusal) {
        self.stats.rma_refused += 1;
        diag!(
            Warn,
            EpData,
            "atomic from {} refused: {why}",
            self.peers.addr(to)
        );
        self.atomic_answer(to, id, u64::from(Errno::ACCES.0), &[]);
    }

    fn atomic_refused(&mut self, to: SlotId, id: u64, e: Errno, why: &str) {
        self.stats.malformed += 1;
        diag!(
            Warn,
            EpData,
            "atomic from {} refused: {why}",
            self.peers.addr(to)
        );
        self.atomic_answer(to, id, u64::from(e.0), &[]);
    }

    fn atomic_answer(&mut self, to: SlotId, id: u64, errno: u64, fetched: &[u8]) {
        let mut bytes = Vec::with_capacity(wire::ATOMIC_ANSWER_HEADER + fetched.len());
        wire::atomic_answer(&mut bytes, self.cfg.name.qpn, id, errno);
        bytes.extend_from_slice(fetched);
        self.submit(Outgoing::Message {
            to,
            bytes: bytes.into(),
            role: Role::Free,
        });
    }

    /// The target answered our atomic `id`: `errno` 0 (done, `fetched` the values from
    /// before if we asked for them) or why not.
    pub(super) fn on_atomic_answer(&mut self, from: SlotId, id: u64, errno: u64, fetched: &[u8]) {
        let Some(s) = self
            .tx
            .sends
            .get_mut(&id)
            .filter(|s| matches!(s.op, Op::Atomic { .. }) && s.to == from && !s.cleared)
        else {
            self.stats.stray += 1;
            return;
        };
        let Op::Atomic { fetch } = s.op else {
            unreachable!("filtered above")
        };
        if errno != 0 {
            let s = self.tx.sends.remove(&id).expect("looked up above");
            let e = u32::try_from(errno).map_or(Errno::ACCES, Errno);
            diag!(
                Warn,
                EpData,
                "atomic at {} failed: the target answered {e:?}",
                self.peers.addr(s.to)
            );
            return self.report(s, Some(e));
        }
        if fetch && fetched.len() != s.len {
            self.stats.malformed += 1;
            return;
        }
        if let Some(r) = &s.mem {
            r.write_at(0, fetched);
        }
        s.cleared = true;
        if s.outstanding == 0 {
            self.complete_send(id);
        }
    }
}

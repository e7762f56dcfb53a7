//! `fi_ops_atomic` and the domain's `query_atomic`: atomic operations on a peer's registered
//! memory, converted into the data path's [`AtomicArgs`] (`data/atomic.rs`). Operands are
//! copied at the call; fetched values land in the result buffers when the target answers.
//! One remote ioc per operation, as for RMA.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;

use super::obj;
use super::panic::entries;
use crate::atomic::{max_count, AtomicOp, Call, Datatype};
use crate::data::{AtomicArgs, INJECT_CALL, PROVIDER_BITS};
use crate::endpoint::Endpoint;
use crate::error::{Errno, Result};
use crate::info::IOV_LIMIT;
use crate::raw::mem::UserMem;
use crate::sys::*;

type Ctx = *mut c_void;
type Ep = *mut fid_ep;
type Dt = fi_datatype;
type Op = fi_op;

/// The datatype and operation, if `call` takes them.
fn typed(call: Call, dt: Dt, op: Op) -> Result<(Datatype, AtomicOp, usize)> {
    let (Some(d), Some(o)) = (Datatype::from_fi(dt), AtomicOp::from_fi(op)) else {
        return Err(Errno::OPNOTSUPP);
    };
    let max = max_count(call, d, o).ok_or(Errno::OPNOTSUPP)?;
    Ok((d, o, max))
}

/// What the caller named: the peer, the remote range and the operation.
struct Target {
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: Dt,
    op: Op,
}

/// The local side of a call: elements in, the compare operand, where the results go.
struct Local {
    count: usize,
    operand: Vec<u8>,
    compare: Vec<u8>,
    result: Option<UserMem>,
}

impl Local {
    /// An update that fetches nothing.
    fn write(count: usize, operand: Vec<u8>) -> Local {
        Local {
            count,
            operand,
            compare: Vec::new(),
            result: None,
        }
    }

    /// An update that fetches the values from before into `result`.
    fn fetch(count: usize, operand: Vec<u8>, result: UserMem) -> Local {
        Local {
            result: Some(result),
            ..Local::write(count, operand)
        }
    }
}

/// SAFETY: `ep` is a live fid.
unsafe fn atomic(
    ep: Ep,
    call: Call,
    l: Local,
    t: Target,
    context: Ctx,
    flags: Option<u64>,
) -> Result<isize> {
    let (datatype, op, _) = typed(call, t.dt, t.op)?;
    let e = obj::get::<Endpoint>(ep.cast())?;
    let flags = e.flags_or_default(flags, FI_TRANSMIT)?;
    // ATOMIC_READ takes no operand: a caller's buffer (which may be NULL) is not read.
    let operand = if op == AtomicOp::Read {
        Vec::new()
    } else {
        l.operand
    };
    e.atomic(AtomicArgs {
        dest: t.dest,
        datatype,
        op,
        count: l.count,
        operands: [operand, l.compare].concat(),
        result: l.result,
        addr: t.addr,
        key: t.key,
        context: context as usize,
        flags,
    })?;
    Ok(0)
}

/// The bytes of `count` elements at `buf` (none for a NULL buffer).
///
/// SAFETY: `buf` is null or valid for `count` elements of `dt` (libfabric contract).
unsafe fn elements(buf: *const c_void, count: usize, dt: Dt) -> Result<Vec<u8>> {
    let size = Datatype::from_fi(dt).ok_or(Errno::OPNOTSUPP)?.size();
    let len = count.checked_mul(size).ok_or(Errno::INVAL)?;
    if buf.is_null() {
        return Ok(Vec::new());
    }
    let mem = UserMem::from_raw(buf.cast(), len)?;
    let mut out = Vec::with_capacity(len);
    mem.read_into(0, len, &mut out);
    Ok(out)
}

/// The buffers of `n` iocs as one range, and how many elements they hold.
///
/// SAFETY: `iocs` holds `n` valid iocs (libfabric contract).
unsafe fn iocs(iocs: *const fi_ioc, n: usize, dt: Dt) -> Result<(UserMem, usize)> {
    if n > IOV_LIMIT || (n > 0 && iocs.is_null()) {
        return Err(Errno::INVAL);
    }
    let size = Datatype::from_fi(dt).ok_or(Errno::OPNOTSUPP)?.size();
    let list = if n == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(iocs, n)
    };
    let mut iov = Vec::with_capacity(n);
    let mut count = 0usize;
    for ioc in list {
        count = count.checked_add(ioc.count).ok_or(Errno::INVAL)?;
        iov.push(iovec {
            iov_base: ioc.addr,
            iov_len: ioc.count.checked_mul(size).ok_or(Errno::INVAL)?,
        });
    }
    Ok((UserMem::from_iov(iov.as_ptr(), iov.len())?, count))
}

/// The bytes of `n` iocs, and how many elements they hold.
///
/// SAFETY: as [`iocs`].
unsafe fn ioc_bytes(v: *const fi_ioc, n: usize, dt: Dt) -> Result<(Vec<u8>, usize)> {
    let (mem, count) = iocs(v, n, dt)?;
    let mut out = Vec::with_capacity(mem.len());
    mem.read_into(0, mem.len(), &mut out);
    Ok((out, count))
}

/// The peer and the one remote range of a `*msg` call, which must hold `count` elements.
///
/// SAFETY: `m` is null or a valid `fi_msg_atomic` (libfabric contract).
unsafe fn from_msg(m: *const fi_msg_atomic) -> Result<(&'static fi_msg_atomic, Target)> {
    let m = m.as_ref().ok_or(Errno::INVAL)?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return Err(Errno::INVAL);
    }
    let r = &*m.rma_iov;
    let t = Target {
        dest: m.addr,
        addr: r.addr,
        key: r.key,
        dt: m.datatype,
        op: m.op,
    };
    Ok((m, t))
}

/// The remote range of a `*msg` call holds as many elements as the local side.
///
/// SAFETY: `m.rma_iov` was checked by [`from_msg`].
unsafe fn same_count(m: &fi_msg_atomic, count: usize) -> Result<()> {
    if (*m.rma_iov).count == count {
        Ok(())
    } else {
        Err(Errno::INVAL)
    }
}

fn target(dest: fi_addr_t, addr: u64, key: u64, dt: Dt, op: Op) -> Target {
    Target {
        dest,
        addr,
        key,
        dt,
        op,
    }
}

/// A result buffer of `count` elements.
///
/// SAFETY: `buf` is valid for `count` elements of `dt` until the operation completes.
unsafe fn result(buf: *mut c_void, count: usize, dt: Dt) -> Result<UserMem> {
    let size = Datatype::from_fi(dt).ok_or(Errno::OPNOTSUPP)?.size();
    UserMem::from_raw(buf.cast(), count.checked_mul(size).ok_or(Errno::INVAL)?)
}

/// The three ioc lists of a compare call, which must hold as many elements each.
///
/// SAFETY: each list holds its count of valid iocs (libfabric contract).
unsafe fn compare_local(
    (v, n): (*const fi_ioc, usize),
    (c, cn): (*const fi_ioc, usize),
    (r, rn): (*const fi_ioc, usize),
    dt: Dt,
) -> Result<Local> {
    let (operand, count) = ioc_bytes(v, n, dt)?;
    let (compare, compare_count) = ioc_bytes(c, cn, dt)?;
    let (res, res_count) = iocs(r, rn, dt)?;
    if compare_count != count || res_count != count {
        return Err(Errno::INVAL);
    }
    Ok(Local {
        count,
        operand,
        compare,
        result: Some(res),
    })
}

/// The `*valid` calls and `query_atomic`: the most elements one operation takes, or
/// -FI_EOPNOTSUPP.
///
/// SAFETY: `count` is null or valid for writing.
unsafe fn valid(call: Call, dt: Dt, op: Op, count: *mut usize) -> Result<c_int> {
    let (_, _, max) = typed(call, dt, op)?;
    if let Some(c) = count.as_mut() {
        *c = max;
    }
    Ok(0)
}

// The plain calls take the endpoint's default flags, the `*msg` calls exactly theirs.
entries! {
    fn write(
        ep: Ep, buf: *const c_void, count: usize, _desc: Ctx, dest: fi_addr_t, addr: u64,
        key: u64, dt: Dt, op: Op, context: Ctx,
    ) -> isize as "fi_atomic" {
        let l = Local::write(count, elements(buf, count, dt)?);
        atomic(ep, Call::Write, l, target(dest, addr, key, dt, op), context, None)
    }

    fn writev(
        ep: Ep, v: *const fi_ioc, _desc: *mut Ctx, n: usize, dest: fi_addr_t, addr: u64,
        key: u64, dt: Dt, op: Op, context: Ctx,
    ) -> isize as "fi_atomicv" {
        let (operand, count) = ioc_bytes(v, n, dt)?;
        let l = Local::write(count, operand);
        atomic(ep, Call::Write, l, target(dest, addr, key, dt, op), context, None)
    }

    fn writemsg(ep: Ep, m: *const fi_msg_atomic, flags: u64) -> isize as "fi_atomicmsg" {
        let (m, t) = from_msg(m)?;
        let (operand, count) = ioc_bytes(m.msg_iov, m.iov_count, t.dt)?;
        same_count(m, count)?;
        let l = Local::write(count, operand);
        atomic(ep, Call::Write, l, t, m.context, Some(flags & !PROVIDER_BITS))
    }

    /// `fi_inject_atomic`: the operand is copied before it returns; no completion.
    fn inject(
        ep: Ep, buf: *const c_void, count: usize, dest: fi_addr_t, addr: u64, key: u64, dt: Dt,
        op: Op,
    ) -> isize as "fi_inject_atomic" {
        let l = Local::write(count, elements(buf, count, dt)?);
        let t = target(dest, addr, key, dt, op);
        let flags = Some(FI_INJECT | INJECT_CALL);
        atomic(ep, Call::Write, l, t, std::ptr::null_mut(), flags)
    }

    fn readwrite(
        ep: Ep, buf: *const c_void, count: usize, _desc: Ctx, res: Ctx, _result_desc: Ctx,
        dest: fi_addr_t, addr: u64, key: u64, dt: Dt, op: Op, context: Ctx,
    ) -> isize as "fi_fetch_atomic" {
        let l = Local::fetch(count, elements(buf, count, dt)?, result(res, count, dt)?);
        atomic(ep, Call::Fetch, l, target(dest, addr, key, dt, op), context, None)
    }

    fn readwritev(
        ep: Ep, v: *const fi_ioc, _desc: *mut Ctx, n: usize, resv: *mut fi_ioc,
        _result_desc: *mut Ctx, result_n: usize, dest: fi_addr_t, addr: u64, key: u64, dt: Dt,
        op: Op, context: Ctx,
    ) -> isize as "fi_fetch_atomicv" {
        let (operand, count) = ioc_bytes(v, n, dt)?;
        let (res, res_count) = iocs(resv, result_n, dt)?;
        if res_count != count {
            return Err(Errno::INVAL);
        }
        let l = Local::fetch(count, operand, res);
        atomic(ep, Call::Fetch, l, target(dest, addr, key, dt, op), context, None)
    }

    fn readwritemsg(
        ep: Ep, m: *const fi_msg_atomic, resv: *mut fi_ioc, _result_desc: *mut Ctx,
        result_n: usize, flags: u64,
    ) -> isize as "fi_fetch_atomicmsg" {
        let (m, t) = from_msg(m)?;
        let (res, count) = iocs(resv, result_n, t.dt)?;
        same_count(m, count)?;
        // ATOMIC_READ may come without an operand.
        let (operand, n) = ioc_bytes(m.msg_iov, m.iov_count, t.dt)?;
        if n != count && !(n == 0 && t.op == FI_ATOMIC_READ) {
            return Err(Errno::INVAL);
        }
        let l = Local::fetch(count, operand, res);
        atomic(ep, Call::Fetch, l, t, m.context, Some(flags & !PROVIDER_BITS))
    }

    fn compwrite(
        ep: Ep, buf: *const c_void, count: usize, _desc: Ctx, compare: *const c_void,
        _compare_desc: Ctx, res: Ctx, _result_desc: Ctx, dest: fi_addr_t, addr: u64, key: u64,
        dt: Dt, op: Op, context: Ctx,
    ) -> isize as "fi_compare_atomic" {
        if compare.is_null() {
            return Err(Errno::INVAL);
        }
        let l = Local {
            count,
            operand: elements(buf, count, dt)?,
            compare: elements(compare, count, dt)?,
            result: Some(result(res, count, dt)?),
        };
        atomic(ep, Call::Compare, l, target(dest, addr, key, dt, op), context, None)
    }

    fn compwritev(
        ep: Ep, v: *const fi_ioc, _desc: *mut Ctx, n: usize, comparev: *const fi_ioc,
        _compare_desc: *mut Ctx, compare_n: usize, resv: *mut fi_ioc, _result_desc: *mut Ctx,
        result_n: usize, dest: fi_addr_t, addr: u64, key: u64, dt: Dt, op: Op, context: Ctx,
    ) -> isize as "fi_compare_atomicv" {
        let l = compare_local((v, n), (comparev, compare_n), (resv, result_n), dt)?;
        atomic(ep, Call::Compare, l, target(dest, addr, key, dt, op), context, None)
    }

    fn compwritemsg(
        ep: Ep, m: *const fi_msg_atomic, comparev: *const fi_ioc, _compare_desc: *mut Ctx,
        compare_n: usize, resv: *mut fi_ioc, _result_desc: *mut Ctx, result_n: usize,
        flags: u64,
    ) -> isize as "fi_compare_atomicmsg" {
        let (m, t) = from_msg(m)?;
        let local = (m.msg_iov, m.iov_count);
        let l = compare_local(local, (comparev, compare_n), (resv, result_n), t.dt)?;
        same_count(m, l.count)?;
        atomic(ep, Call::Compare, l, t, m.context, Some(flags & !PROVIDER_BITS))
    }

    fn writevalid(_ep: Ep, dt: Dt, op: Op, count: *mut usize) -> c_int as "fi_atomicvalid" {
        valid(Call::Write, dt, op, count)
    }

    fn readwritevalid(
        _ep: Ep, dt: Dt, op: Op, count: *mut usize,
    ) -> c_int as "fi_fetch_atomicvalid" {
        valid(Call::Fetch, dt, op, count)
    }

    fn compwritevalid(
        _ep: Ep, dt: Dt, op: Op, count: *mut usize,
    ) -> c_int as "fi_compare_atomicvalid" {
        valid(Call::Compare, dt, op, count)
    }

    /// `fi_query_atomic`: the call family is FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC or neither.
    pub(super) fn query_atomic(
        _domain: *mut fid_domain, dt: Dt, op: Op, attr: *mut fi_atomic_attr, flags: u64,
    ) -> c_int as "fi_query_atomic" {
        let call = if flags & FI_COMPARE_ATOMIC != 0 {
            Call::Compare
        } else if flags & FI_FETCH_ATOMIC != 0 {
            Call::Fetch
        } else {
            Call::Write
        };
        let (d, _, max) = typed(call, dt, op)?;
        let a = attr.as_mut().ok_or(Errno::INVAL)?;
        a.count = max;
        a.size = d.size();
        Ok(0)
    }
}

pub(super) static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject),
    readwrite: Some(readwrite),
    readwritev: Some(readwritev),
    readwritemsg: Some(readwritemsg),
    compwrite: Some(compwrite),
    compwritev: Some(compwritev),
    compwritemsg: Some(compwritemsg),
    writevalid: Some(writevalid),
    readwritevalid: Some(readwritevalid),
    compwritevalid: Some(compwritevalid),
};

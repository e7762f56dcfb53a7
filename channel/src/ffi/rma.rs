//! `fi_ops_rma`: reads and writes of a peer's registered memory, converted into the data
//! path's [`RmaArgs`] (`data/rma.rs`). One remote iovec per operation (`rma_iov_limit` 1);
//! remote CQ data (`fi_writedata`) is not offered.

use std::ffi::c_void;
use std::mem::size_of;

use super::obj;
use super::panic::entries;
use super::stubs;
use crate::data::{RmaArgs, INJECT_CALL, PROVIDER_BITS};
use crate::endpoint::Endpoint;
use crate::error::{Errno, Result};
use crate::info::IOV_LIMIT;
use crate::raw::mem::UserMem;
use crate::sys::*;

type Ctx = *mut c_void;
type Ep = *mut fid_ep;

/// What the caller named: the local buffer and the remote range.
struct Target {
    dest: fi_addr_t,
    addr: u64,
    key: u64,
}

/// SAFETY: `ep` is a live fid; `mem` follows the libfabric buffer contract.
unsafe fn rma(
    ep: Ep,
    write: bool,
    mem: UserMem,
    t: Target,
    context: Ctx,
    flags: Option<u64>,
) -> Result<isize> {
    let e = obj::get::<Endpoint>(ep.cast())?;
    let flags = e.flags_or_default(flags, FI_TRANSMIT)?;
    e.rma(
        write,
        RmaArgs {
            dest: t.dest,
            mem,
            addr: t.addr,
            key: t.key,
            context: context as usize,
            flags,
        },
    )?;
    Ok(0)
}

/// SAFETY: `iov` holds `count` valid iovecs (libfabric contract).
unsafe fn iov(iov: *const iovec, count: usize) -> Result<UserMem> {
    if count > IOV_LIMIT {
        return Err(Errno::INVAL);
    }
    UserMem::from_iov(iov, count)
}

/// The `*msg` calls: one local iovec list, one remote range as long as it.
///
/// SAFETY: `m` is null or a valid `fi_msg_rma` (libfabric contract).
unsafe fn from_msg(m: *const fi_msg_rma) -> Result<(UserMem, Target, Ctx)> {
    let m = m.as_ref().ok_or(Errno::INVAL)?;
    let mem = iov(m.msg_iov, m.iov_count)?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return Err(Errno::INVAL);
    }
    let r = &*m.rma_iov;
    if r.len != mem.len() {
        return Err(Errno::INVAL);
    }
    let t = Target {
        dest: m.addr,
        addr: r.addr,
        key: r.key,
    };
    Ok((mem, t, m.context))
}

fn target(dest: fi_addr_t, addr: u64, key: u64) -> Target {
    Target { dest, addr, key }
}

entries! {
    fn read(
        ep: Ep, buf: Ctx, len: usize, _desc: Ctx, src: fi_addr_t, addr: u64, key: u64,
        context: Ctx,
    ) -> isize as "fi_read" {
        let mem = UserMem::from_raw(buf.cast(), len)?;
        rma(ep, false, mem, target(src, addr, key), context, None)
    }

    fn readv(
        ep: Ep, v: *const iovec, _desc: *mut Ctx, count: usize, src: fi_addr_t, addr: u64,
        key: u64, context: Ctx,
    ) -> isize as "fi_readv" {
        rma(ep, false, iov(v, count)?, target(src, addr, key), context, None)
    }

    fn readmsg(ep: Ep, m: *const fi_msg_rma, flags: u64) -> isize as "fi_readmsg" {
        let (mem, t, context) = from_msg(m)?;
        rma(ep, false, mem, t, context, Some(flags & !PROVIDER_BITS))
    }

    fn write(
        ep: Ep, buf: *const c_void, len: usize, _desc: Ctx, dest: fi_addr_t, addr: u64, key: u64,
        context: Ctx,
    ) -> isize as "fi_write" {
        let mem = UserMem::from_raw(buf.cast(), len)?;
        rma(ep, true, mem, target(dest, addr, key), context, None)
    }

    fn writev(
        ep: Ep, v: *const iovec, _desc: *mut Ctx, count: usize, dest: fi_addr_t, addr: u64,
        key: u64, context: Ctx,
    ) -> isize as "fi_writev" {
        rma(ep, true, iov(v, count)?, target(dest, addr, key), context, None)
    }

    fn writemsg(ep: Ep, m: *const fi_msg_rma, flags: u64) -> isize as "fi_writemsg" {
        let (mem, t, context) = from_msg(m)?;
        rma(ep, true, mem, t, context, Some(flags & !PROVIDER_BITS))
    }

    /// `fi_inject_write`: the bytes are copied before it returns; no completion, but the
    /// endpoint's write counter counts it once the target has it.
    fn inject_write(
        ep: Ep, buf: *const c_void, len: usize, dest: fi_addr_t, addr: u64, key: u64,
    ) -> isize as "fi_inject_write" {
        let mem = UserMem::from_raw(buf.cast(), len)?;
        let flags = Some(FI_INJECT | INJECT_CALL);
        rma(ep, true, mem, target(dest, addr, key), std::ptr::null_mut(), flags)
    }
}

pub(super) static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(read),
    readv: Some(readv),
    readmsg: Some(readmsg),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject_write),
    writedata: Some(stubs::rma_writedata),
    injectdata: Some(stubs::rma_injectdata),
};

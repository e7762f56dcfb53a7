//! `fi_ops_msg` and `fi_ops_tagged`: every send and receive call, converted once into the
//! data path's [`SendArgs`]/[`RecvArgs`].

use std::ffi::c_void;
use std::mem::size_of;
use std::ptr::null_mut;

use super::obj;
use super::panic::entries;
use crate::data::{RecvArgs, SendArgs, INJECT_CALL, PROVIDER_BITS};
use crate::endpoint::Endpoint;
use crate::error::{Errno, Result};
use crate::info::IOV_LIMIT;
use crate::matching::Kind;
use crate::raw::mem::UserMem;
use crate::sys::*;

type Ctx = *mut c_void;
type Ep = *mut fid_ep;

/// SAFETY: `buf` is valid for `len` bytes until the operation completes (libfabric contract).
unsafe fn one(buf: *const c_void, len: usize) -> Result<UserMem> {
    UserMem::from_raw(buf.cast(), len)
}

/// SAFETY: `iov` holds `count` valid iovecs (libfabric contract).
unsafe fn iov(iov: *const iovec, count: usize) -> Result<UserMem> {
    if count > IOV_LIMIT {
        return Err(Errno::INVAL);
    }
    UserMem::from_iov(iov, count)
}

/// A send's operation flags.
enum TxFlags {
    /// Plain calls: the endpoint's default flags (FI_COMPLETION and the completion level),
    /// plus FI_REMOTE_CQ_DATA for `*data`; injects take only their own flags.
    Plain(u64),
    /// `*msg` calls: exactly the flags given.
    Given(u64),
}

/// SAFETY: `ep` is a live fid.
#[allow(clippy::too_many_arguments)] // the C calls' own argument lists
unsafe fn send(
    ep: Ep,
    kind: Kind,
    mem: UserMem,
    dest: fi_addr_t,
    tag: u64,
    data: Option<u64>,
    context: Ctx,
    flags: TxFlags,
) -> Result<isize> {
    let e = obj::get::<Endpoint>(ep.cast())?;
    let flags = match flags {
        TxFlags::Plain(extra) if extra & FI_INJECT == 0 => e.op_flags(FI_TRANSMIT)? | extra,
        TxFlags::Plain(f) => f | INJECT_CALL,
        TxFlags::Given(f) => f & !PROVIDER_BITS,
    };
    e.send(SendArgs {
        kind,
        dest,
        mem,
        tag,
        data,
        context: context as usize,
        flags,
    })?;
    Ok(0)
}

/// SAFETY: `ep` is a live fid.
#[allow(clippy::too_many_arguments)] // the C calls' own argument lists
unsafe fn recv(
    ep: Ep,
    kind: Kind,
    mem: UserMem,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: Ctx,
    flags: Option<u64>,
) -> Result<isize> {
    let e = obj::get::<Endpoint>(ep.cast())?;
    let flags = e.flags_or_default(flags, FI_RECV)?;
    e.recv(RecvArgs {
        kind,
        src,
        mem,
        tag,
        ignore,
        context: context as usize,
        flags,
    })?;
    Ok(0)
}

fn cq_data(flags: u64, data: u64) -> Option<u64> {
    (flags & FI_REMOTE_CQ_DATA != 0).then_some(data)
}

// The plain calls take the endpoint's default flags, the `*msg` calls exactly theirs; a
// tagged call is its msg twin with the tag (and for receives the ignore mask) added.
entries! {
    fn msg_recv(ep: Ep, buf: Ctx, len: usize, _desc: Ctx, src: fi_addr_t, context: Ctx) -> isize
    as "fi_recv" {
        recv(ep, Kind::Msg, one(buf, len)?, src, 0, 0, context, None)
    }

    fn msg_recvv(
        ep: Ep, v: *const iovec, _desc: *mut Ctx, count: usize, src: fi_addr_t, context: Ctx,
    ) -> isize as "fi_recvv" {
        recv(ep, Kind::Msg, iov(v, count)?, src, 0, 0, context, None)
    }

    fn msg_recvmsg(ep: Ep, m: *const fi_msg, flags: u64) -> isize as "fi_recvmsg" {
        let m = m.as_ref().ok_or(Errno::INVAL)?;
        let mem = iov(m.msg_iov, m.iov_count)?;
        recv(ep, Kind::Msg, mem, m.addr, 0, 0, m.context, Some(flags))
    }

    fn msg_send(
        ep: Ep, buf: *const c_void, len: usize, _desc: Ctx, dest: fi_addr_t, context: Ctx,
    ) -> isize as "fi_send" {
        send(ep, Kind::Msg, one(buf, len)?, dest, 0, None, context, TxFlags::Plain(0))
    }

    fn msg_sendv(
        ep: Ep, v: *const iovec, _desc: *mut Ctx, count: usize, dest: fi_addr_t, context: Ctx,
    ) -> isize as "fi_sendv" {
        send(ep, Kind::Msg, iov(v, count)?, dest, 0, None, context, TxFlags::Plain(0))
    }

    fn msg_sendmsg(ep: Ep, m: *const fi_msg, flags: u64) -> isize as "fi_sendmsg" {
        let m = m.as_ref().ok_or(Errno::INVAL)?;
        let mem = iov(m.msg_iov, m.iov_count)?;
        let data = cq_data(flags, m.data);
        send(ep, Kind::Msg, mem, m.addr, 0, data, m.context, TxFlags::Given(flags))
    }

    fn msg_inject(ep: Ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize
    as "fi_inject" {
        let flags = TxFlags::Plain(FI_INJECT);
        send(ep, Kind::Msg, one(buf, len)?, dest, 0, None, null_mut(), flags)
    }

    fn msg_senddata(
        ep: Ep, buf: *const c_void, len: usize, _desc: Ctx, data: u64, dest: fi_addr_t,
        context: Ctx,
    ) -> isize as "fi_senddata" {
        let flags = TxFlags::Plain(FI_REMOTE_CQ_DATA);
        send(ep, Kind::Msg, one(buf, len)?, dest, 0, Some(data), context, flags)
    }

    fn msg_injectdata(
        ep: Ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t,
    ) -> isize as "fi_injectdata" {
        let flags = TxFlags::Plain(FI_INJECT | FI_REMOTE_CQ_DATA);
        send(ep, Kind::Msg, one(buf, len)?, dest, 0, Some(data), null_mut(), flags)
    }

    fn tagged_recv(
        ep: Ep, buf: Ctx, len: usize, _desc: Ctx, src: fi_addr_t, tag: u64, ignore: u64,
        context: Ctx,
    ) -> isize as "fi_trecv" {
        recv(ep, Kind::Tagged, one(buf, len)?, src, tag, ignore, context, None)
    }

    fn tagged_recvv(
        ep: Ep, v: *const iovec, _desc: *mut Ctx, count: usize, src: fi_addr_t, tag: u64,
        ignore: u64, context: Ctx,
    ) -> isize as "fi_trecvv" {
        recv(ep, Kind::Tagged, iov(v, count)?, src, tag, ignore, context, None)
    }

    fn tagged_recvmsg(ep: Ep, m: *const fi_msg_tagged, flags: u64) -> isize as "fi_trecvmsg" {
        let m = m.as_ref().ok_or(Errno::INVAL)?;
        // A peek or claim carries no buffer worth checking; a discard none at all.
        let mem = if flags & (FI_PEEK | FI_DISCARD) != 0 && m.msg_iov.is_null() {
            UserMem::from_raw(std::ptr::null(), 0)?
        } else {
            iov(m.msg_iov, m.iov_count)?
        };
        recv(ep, Kind::Tagged, mem, m.addr, m.tag, m.ignore, m.context, Some(flags))
    }

    fn tagged_send(
        ep: Ep, buf: *const c_void, len: usize, _desc: Ctx, dest: fi_addr_t, tag: u64,
        context: Ctx,
    ) -> isize as "fi_tsend" {
        send(ep, Kind::Tagged, one(buf, len)?, dest, tag, None, context, TxFlags::Plain(0))
    }

    fn tagged_sendv(
        ep: Ep, v: *const iovec, _desc: *mut Ctx, count: usize, dest: fi_addr_t, tag: u64,
        context: Ctx,
    ) -> isize as "fi_tsendv" {
        send(ep, Kind::Tagged, iov(v, count)?, dest, tag, None, context, TxFlags::Plain(0))
    }

    fn tagged_sendmsg(ep: Ep, m: *const fi_msg_tagged, flags: u64) -> isize as "fi_tsendmsg" {
        let m = m.as_ref().ok_or(Errno::INVAL)?;
        let mem = iov(m.msg_iov, m.iov_count)?;
        let data = cq_data(flags, m.data);
        send(ep, Kind::Tagged, mem, m.addr, m.tag, data, m.context, TxFlags::Given(flags))
    }

    fn tagged_inject(
        ep: Ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64,
    ) -> isize as "fi_tinject" {
        let flags = TxFlags::Plain(FI_INJECT);
        send(ep, Kind::Tagged, one(buf, len)?, dest, tag, None, null_mut(), flags)
    }

    fn tagged_senddata(
        ep: Ep, buf: *const c_void, len: usize, _desc: Ctx, data: u64, dest: fi_addr_t, tag: u64,
        context: Ctx,
    ) -> isize as "fi_tsenddata" {
        let flags = TxFlags::Plain(FI_REMOTE_CQ_DATA);
        send(ep, Kind::Tagged, one(buf, len)?, dest, tag, Some(data), context, flags)
    }

    fn tagged_injectdata(
        ep: Ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t, tag: u64,
    ) -> isize as "fi_tinjectdata" {
        let flags = TxFlags::Plain(FI_INJECT | FI_REMOTE_CQ_DATA);
        send(ep, Kind::Tagged, one(buf, len)?, dest, tag, Some(data), null_mut(), flags)
    }
}

pub(super) static MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

pub(super) static TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(tagged_recv),
    recvv: Some(tagged_recvv),
    recvmsg: Some(tagged_recvmsg),
    send: Some(tagged_send),
    sendv: Some(tagged_sendv),
    sendmsg: Some(tagged_sendmsg),
    inject: Some(tagged_inject),
    senddata: Some(tagged_senddata),
    injectdata: Some(tagged_injectdata),
};

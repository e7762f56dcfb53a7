//! `fid_ep`: binding, enabling, options and the endpoint name. Every ops pointer is set,
//! since libfabric's inline wrappers dereference them unchecked.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;

use super::obj::{self, Object};
use super::out::copy_out;
use super::panic::entry;
use super::{atomic, info, msg, rma, stubs};
use crate::addr::EpName;
use crate::av::AddressVector;
use crate::cntr::Counter;
use crate::cq::CompletionQueue;
use crate::domain::Domain;
use crate::endpoint::{Bind, Endpoint};
use crate::error::Errno;
use crate::sys;

static FI_OPS: sys::fi_ops = sys::fi_ops {
    bind: Some(bind),
    control: Some(control),
    ..stubs::fi_ops(close)
};

static EP_OPS: sys::fi_ops_ep = sys::fi_ops_ep {
    size: size_of::<sys::fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(stubs::ep_tx_ctx),
    rx_ctx: Some(stubs::ep_rx_ctx),
    rx_size_left: Some(stubs::ep_rx_size_left),
    tx_size_left: Some(stubs::ep_tx_size_left),
};

static CM_OPS: sys::fi_ops_cm = sys::fi_ops_cm {
    size: size_of::<sys::fi_ops_cm>(),
    setname: Some(stubs::cm_setname),
    getname: Some(getname),
    getpeer: Some(stubs::cm_getpeer),
    connect: Some(stubs::cm_connect),
    listen: Some(stubs::cm_listen),
    accept: Some(stubs::cm_accept),
    reject: Some(stubs::cm_reject),
    shutdown: Some(stubs::cm_shutdown),
    join: Some(stubs::cm_join),
};

impl Object for Endpoint {
    type Fid = sys::fid_ep;
    const CLASS: u32 = sys::FI_CLASS_EP;
    const CLOSE: &'static str = "ep close";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_ep {
        sys::fid_ep {
            fid,
            ops: ptr::from_ref(&EP_OPS).cast_mut(),
            cm: ptr::from_ref(&CM_OPS).cast_mut(),
            msg: ptr::from_ref(&msg::MSG_OPS).cast_mut(),
            rma: ptr::from_ref(&rma::RMA_OPS).cast_mut(),
            tagged: ptr::from_ref(&msg::TAGGED_OPS).cast_mut(),
            atomic: ptr::from_ref(&atomic::ATOMIC_OPS).cast_mut(),
            collective: ptr::from_ref(&stubs::COLLECTIVE_OPS).cast_mut(),
        }
    }
}

/// `fi_endpoint`.
pub(super) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    obj::open("fi_endpoint", ep, context, || {
        let d = obj::get::<Domain>(domain.cast())?;
        let info = info::read(info.as_ref().ok_or(Errno::INVAL)?);
        Endpoint::open(d, d.api_version, &info)
    })
}

/// `fi_close`: lingers until the endpoint's sends are acknowledged (bounded), then frees it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    entry(Endpoint::CLOSE, || {
        obj::get::<Endpoint>(fid.cast())?.shutdown();
        obj::close::<Endpoint>(fid).map(|()| 0)
    })
}

/// `fi_cancel`: a posted receive completes with FI_ECANCELED; -FI_ENOENT if none has this
/// context (it matched already, or it is a send, which cannot be cancelled).
unsafe extern "C" fn cancel(fid: sys::fid_t, context: *mut c_void) -> isize {
    entry("fi_cancel", || {
        obj::get::<Endpoint>(fid.cast())?.cancel(context as usize)?;
        Ok(0)
    })
}

/// `fi_ep_bind`: the bound object's class says what it is.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    entry("fi_ep_bind", || {
        let ep = obj::get::<Endpoint>(fid.cast())?;
        let class = bfid.as_ref().ok_or(Errno::INVAL)?.fclass as u32;
        let target = match class {
            sys::FI_CLASS_AV => Bind::Av(obj::get::<AddressVector>(bfid.cast())?.clone()),
            sys::FI_CLASS_CQ => Bind::Cq(obj::get::<CompletionQueue>(bfid.cast())?.clone()),
            sys::FI_CLASS_CNTR => Bind::Cntr(obj::get::<Counter>(bfid.cast())?.clone()),
            _ => return Err(Errno::NOSYS),
        };
        ep.bind(target, flags)?;
        Ok(0)
    })
}

/// `fi_enable` and the default operation flags (`FI_GETOPSFLAG`/`FI_SETOPSFLAG`, whose
/// argument is a `uint64_t *`).
unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, arg: *mut c_void) -> c_int {
    entry("fi_control", || {
        let ep = obj::get::<Endpoint>(fid.cast())?;
        match command as u32 {
            sys::FI_ENABLE => ep.enable()?,
            sys::FI_GETOPSFLAG => {
                let flags = arg.cast::<u64>().as_mut().ok_or(Errno::INVAL)?;
                *flags = ep.op_flags(*flags)?;
            }
            sys::FI_SETOPSFLAG => {
                let flags = arg.cast::<u64>().as_ref().ok_or(Errno::INVAL)?;
                ep.set_op_flags(*flags)?;
            }
            _ => return Err(Errno::NOSYS),
        }
        Ok(0)
    })
}

/// `fi_getopt`: FI_OPT_MIN_MULTI_RECV and FI_OPT_CM_DATA_SIZE (0: no connections), both size_t.
unsafe extern "C" fn getopt(
    fid: sys::fid_t,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    entry("fi_getopt", || {
        let ep = obj::get::<Endpoint>(fid.cast())?;
        if level as u32 != sys::FI_OPT_ENDPOINT {
            return Err(Errno::NOPROTOOPT);
        }
        let value = match optname as u32 {
            sys::FI_OPT_MIN_MULTI_RECV => ep.min_multi_recv(),
            sys::FI_OPT_CM_DATA_SIZE => 0,
            _ => return Err(Errno::NOPROTOOPT),
        };
        let len = optlen.as_mut().ok_or(Errno::INVAL)?;
        if *len < size_of::<usize>() || optval.is_null() {
            *len = size_of::<usize>();
            return Err(Errno::TOOSMALL);
        }
        optval.cast::<usize>().write_unaligned(value);
        *len = size_of::<usize>();
        Ok(0)
    })
}

/// `fi_setopt`: FI_OPT_MIN_MULTI_RECV (MPICH requires it to succeed).
unsafe extern "C" fn setopt(
    fid: sys::fid_t,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> c_int {
    entry("fi_setopt", || {
        let ep = obj::get::<Endpoint>(fid.cast())?;
        if level as u32 != sys::FI_OPT_ENDPOINT || optname as u32 != sys::FI_OPT_MIN_MULTI_RECV {
            return Err(Errno::NOPROTOOPT);
        }
        if optlen != size_of::<usize>() || optval.is_null() {
            return Err(Errno::INVAL);
        }
        ep.set_min_multi_recv(optval.cast::<usize>().read_unaligned());
        Ok(0)
    })
}

/// `fi_getname`, including the size query Open MPI 5 makes first (NULL buffer, length 0):
/// a short buffer gets as much as fits, the real length, and -FI_ETOOSMALL.
unsafe extern "C" fn getname(fid: sys::fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    entry("fi_getname", || {
        let ep = obj::get::<Endpoint>(fid.cast())?;
        let len = addrlen.as_mut().ok_or(Errno::INVAL)?;
        let name = ep.name().encode();
        let fits = *len >= EpName::LEN;
        copy_out(&name, addr, *len);
        *len = EpName::LEN;
        if fits {
            Ok(0)
        } else {
            Err(Errno::TOOSMALL)
        }
    })
}

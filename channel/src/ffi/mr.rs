//! `fi_ops_mr` and `fid_mr`: memory registration for RMA (`crate::mr`). mr_mode 0: the key is
//! the one the application asks for, and `fi_mr_key` returns it.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;
use std::sync::Arc;

use super::obj::{self, Object};
use super::panic::entry;
use super::stubs;
use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::raw::mem::UserMem;
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(close);

pub(super) static MR_OPS: sys::fi_ops_mr = sys::fi_ops_mr {
    size: size_of::<sys::fi_ops_mr>(),
    reg: Some(reg),
    regv: Some(regv),
    regattr: Some(regattr),
};

/// A registration: its key in its domain's table.
pub(super) struct MemoryRegion {
    domain: Arc<Domain>,
    key: u64,
}

impl Object for MemoryRegion {
    type Fid = sys::fid_mr;
    const CLASS: u32 = sys::FI_CLASS_MR;
    const CLOSE: &'static str = "fi_close(mr)";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_mr {
        sys::fid_mr {
            fid,
            mem_desc: std::ptr::null_mut(),
            key: self.key,
        }
    }
}

/// Registers `count` iovecs (at most one: `mr_iov_limit`) under `key`.
///
/// SAFETY: `fid` is a live domain fid, `iov` holds `count` iovecs whose memory stays valid
/// until the registration is closed (fi_mr_reg(3)), `out` is writable.
unsafe fn register(
    fid: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    access: u64,
    key: u64,
    out: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> Result<c_int> {
    let d = obj::get::<Domain>(fid.cast())?;
    if count > 1 {
        return Err(Errno::INVAL);
    }
    // A null base with a length (MPICH's whole-address-space registration for dynamic
    // windows) is refused; MPICH then serves such windows with its own messages.
    let mem = UserMem::from_iov(iov, count)?;
    d.mrs.insert(key, mem, access)?;
    let inner = Arc::new(MemoryRegion {
        domain: Arc::clone(d),
        key,
    });
    if let Err(e) = obj::hand_out(out, inner, context) {
        d.mrs.remove(key);
        return Err(e);
    }
    Ok(0)
}

/// `fi_mr_reg`.
#[allow(clippy::too_many_arguments)] // the C call's own argument list
unsafe extern "C" fn reg(
    fid: *mut sys::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    _flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    entry("fi_mr_reg", || {
        let one = sys::iovec {
            iov_base: buf.cast_mut(),
            iov_len: len,
        };
        register(fid, &one, 1, access, requested_key, mr, context)
    })
}

/// `fi_mr_regv`.
#[allow(clippy::too_many_arguments)] // the C call's own argument list
unsafe extern "C" fn regv(
    fid: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    _flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    entry("fi_mr_regv", || {
        register(fid, iov, count, access, requested_key, mr, context)
    })
}

/// `fi_mr_regattr`: host memory only.
unsafe extern "C" fn regattr(
    fid: *mut sys::fid,
    attr: *const sys::fi_mr_attr,
    _flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    entry("fi_mr_regattr", || {
        let a = attr.as_ref().ok_or(Errno::INVAL)?;
        if a.iface != sys::FI_HMEM_SYSTEM {
            return Err(Errno::NOSYS);
        }
        register(
            fid,
            a.mr_iov,
            a.iov_count,
            a.access,
            a.requested_key,
            mr,
            a.context,
        )
    })
}

/// `fi_close` of a registration: peers' accesses that come later are refused.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    entry(MemoryRegion::CLOSE, || {
        let m = obj::get::<MemoryRegion>(fid.cast())?;
        let (domain, key) = (Arc::clone(&m.domain), m.key);
        obj::close::<MemoryRegion>(fid)?;
        domain.mrs.remove(key);
        Ok(0)
    })
}

//! `fid_fabric`: opened by the core through `provider->fabric`.

use std::ffi::{c_void, CStr};
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;

use super::obj::{self, Object};
use super::{domain, loaded, stubs};
use crate::error::Errno;
use crate::fabric::Fabric;
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(obj::fi_close::<Fabric>);

static OPS: sys::fi_ops_fabric = sys::fi_ops_fabric {
    size: size_of::<sys::fi_ops_fabric>(),
    domain: Some(domain::open),
    passive_ep: Some(stubs::fabric_passive_ep),
    eq_open: Some(stubs::fabric_eq_open),
    wait_open: Some(stubs::fabric_wait_open),
    trywait: Some(stubs::fabric_trywait),
    domain2: Some(stubs::fabric_domain2),
};

impl Object for Fabric {
    type Fid = sys::fid_fabric;
    const CLASS: u32 = sys::FI_CLASS_FABRIC;
    const CLOSE: &'static str = "fabric close";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_fabric {
        sys::fid_fabric {
            fid,
            ops: ptr::from_ref(&OPS).cast_mut(),
            api_version: 0,
        }
    }
}

/// `provider->fabric`. The core sets `api_version` on the new fid after this returns.
pub(super) unsafe extern "C" fn open(
    attr: *mut sys::fi_fabric_attr,
    fabric: *mut *mut sys::fid_fabric,
    context: *mut c_void,
) -> c_int {
    obj::open("fabric", fabric, context, || {
        let attr = attr.as_ref().ok_or(Errno::INVAL)?;
        if attr.name.is_null() {
            return Err(Errno::INVAL);
        }
        let name = CStr::from_ptr(attr.name).to_string_lossy();
        Fabric::open(&name, loaded::config())
    })
}

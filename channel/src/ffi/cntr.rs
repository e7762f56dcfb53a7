//! `fid_cntr`.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;
use std::time::Duration;

use super::obj::{self, Object};
use super::panic::{entries, entry_or};
use super::stubs;
use crate::cntr::Counter;
use crate::domain::Domain;
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(obj::fi_close::<Counter>);

static OPS: sys::fi_ops_cntr = sys::fi_ops_cntr {
    size: size_of::<sys::fi_ops_cntr>(),
    read: Some(read),
    readerr: Some(readerr),
    add: Some(add),
    set: Some(set),
    wait: Some(wait),
    adderr: Some(adderr),
    seterr: Some(seterr),
};

impl Object for Counter {
    type Fid = sys::fid_cntr;
    const CLASS: u32 = sys::FI_CLASS_CNTR;
    const CLOSE: &'static str = "cntr close";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_cntr {
        sys::fid_cntr {
            fid,
            ops: std::ptr::from_ref(&OPS).cast_mut(),
        }
    }
}

/// `fi_cntr_open`; a NULL attr means the defaults (completion events, no wait object).
pub(super) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cntr_attr,
    cntr: *mut *mut sys::fid_cntr,
    context: *mut c_void,
) -> c_int {
    obj::open("fi_cntr_open", cntr, context, || {
        let d = obj::get::<Domain>(domain.cast())?;
        let (events, wait_obj, flags) = attr
            .as_ref()
            .map_or((sys::FI_CNTR_EVENTS_COMP, sys::FI_WAIT_NONE, 0), |a| {
                (a.events, a.wait_obj, a.flags)
            });
        Counter::open(d, events, wait_obj, flags)
    })
}

/// Reads have no error channel; a fid that is not a diwarp counter reads as 0.
unsafe extern "C" fn read(cntr: *mut sys::fid_cntr) -> u64 {
    entry_or("fi_cntr_read", 0, || {
        obj::get::<Counter>(cntr.cast()).map_or(0, |c| c.read())
    })
}

unsafe extern "C" fn readerr(cntr: *mut sys::fid_cntr) -> u64 {
    entry_or("fi_cntr_readerr", 0, || {
        obj::get::<Counter>(cntr.cast()).map_or(0, |c| c.read_err())
    })
}

entries! {
    fn add(cntr: *mut sys::fid_cntr, value: u64) -> c_int as "fi_cntr_add" {
        obj::get::<Counter>(cntr.cast()).map(|c| c.add(value)).map(|()| 0)
    }

    fn set(cntr: *mut sys::fid_cntr, value: u64) -> c_int as "fi_cntr_set" {
        obj::get::<Counter>(cntr.cast()).map(|c| c.set(value)).map(|()| 0)
    }

    fn adderr(cntr: *mut sys::fid_cntr, value: u64) -> c_int as "fi_cntr_adderr" {
        obj::get::<Counter>(cntr.cast()).map(|c| c.add_err(value)).map(|()| 0)
    }

    fn seterr(cntr: *mut sys::fid_cntr, value: u64) -> c_int as "fi_cntr_seterr" {
        obj::get::<Counter>(cntr.cast()).map(|c| c.set_err(value)).map(|()| 0)
    }

    /// `timeout` in milliseconds; negative waits forever.
    fn wait(cntr: *mut sys::fid_cntr, threshold: u64, timeout: c_int) -> c_int as "fi_cntr_wait" {
        let timeout = u64::try_from(timeout).ok().map(Duration::from_millis);
        obj::get::<Counter>(cntr.cast())?.wait(threshold, timeout).map(|()| 0)
    }
}

//! `fid_domain`: opens AVs, CQs, counters and endpoints.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;

use super::obj::{self, Object};
use super::{atomic, av, cntr, cq, ep, info, mr, stubs};
use crate::domain::Domain;
use crate::error::Errno;
use crate::fabric::Fabric;
use crate::info::fi_version;
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(obj::fi_close::<Domain>);

static OPS: sys::fi_ops_domain = sys::fi_ops_domain {
    size: size_of::<sys::fi_ops_domain>(),
    av_open: Some(av::open),
    cq_open: Some(cq::open),
    endpoint: Some(ep::open),
    scalable_ep: Some(stubs::domain_scalable_ep),
    cntr_open: Some(cntr::open),
    poll_open: Some(stubs::domain_poll_open),
    stx_ctx: Some(stubs::domain_stx_ctx),
    srx_ctx: Some(stubs::domain_srx_ctx),
    query_atomic: Some(atomic::query_atomic),
    query_collective: Some(stubs::domain_query_collective),
    endpoint2: Some(stubs::domain_endpoint2),
};

/// The fid holds the `Arc` that AVs, CQs, counters, endpoints and registrations opened from
/// the domain share, so [`obj::close`] finds it busy while any of them is open.
impl Object for Domain {
    type Fid = sys::fid_domain;
    const CLASS: u32 = sys::FI_CLASS_DOMAIN;
    const CLOSE: &'static str = "domain close";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_domain {
        sys::fid_domain {
            fid,
            ops: ptr::from_ref(&OPS).cast_mut(),
            mr: ptr::from_ref(&mr::MR_OPS).cast_mut(),
        }
    }
}

/// `fi_domain`.
pub(super) unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    domain: *mut *mut sys::fid_domain,
    context: *mut c_void,
) -> c_int {
    obj::open("fi_domain", domain, context, || {
        let f = obj::get::<Fabric>(fabric.cast())?;
        let api_version = api_version((*fabric).api_version);
        let info = info::read(info.as_ref().ok_or(Errno::INVAL)?);
        Domain::open(f, api_version, &info)
    })
}

/// The API version the fabric was opened with, for re-checking the info passed to
/// `fi_domain` (and later `fi_endpoint`). Before 1.5 the core does not record it.
fn api_version(fabric_api: u32) -> u32 {
    if fabric_api == 0 {
        fi_version(1, 4)
    } else {
        fabric_api
    }
}

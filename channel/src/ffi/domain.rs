//! `fid_domain`: opens AVs, CQs, counters and endpoints.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;

use super::obj::{self, Object};
use super::panic::entry;
use super::{atomic, av, cntr, cq, ep, fabric, info, mr, stubs};
use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(close);

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

/// The domain remembers the API version of its fabric for checking endpoint infos.
pub(super) struct DomainObj {
    pub(super) domain: Arc<Domain>,
    pub(super) api_version: u32,
}

impl Object for DomainObj {
    type Fid = sys::fid_domain;
    const CLASS: u32 = sys::FI_CLASS_DOMAIN;
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
}

/// `fi_domain`.
pub(super) unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    domain: *mut *mut sys::fid_domain,
    context: *mut c_void,
) -> c_int {
    entry("fi_domain", || {
        let (fabric, api_version) = fabric::get(fabric)?;
        let info = info::read(info.as_ref().ok_or(Errno::INVAL)?);
        let inner = Arc::new(DomainObj {
            domain: Domain::open(fabric, api_version, &info)?,
            api_version,
        });
        let fid = sys::fid_domain {
            fid: obj::header::<DomainObj>(context),
            ops: ptr::from_ref(&OPS).cast_mut(),
            mr: ptr::from_ref(&mr::MR_OPS).cast_mut(),
        };
        obj::hand_out(domain, fid, inner)?;
        Ok(0)
    })
}

/// A domain stays open while anything opened from it is (its `Arc` is shared with them).
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    entry("domain close", || {
        let d = obj::get::<DomainObj>(fid.cast())?;
        if Arc::strong_count(&d.domain) > 1 {
            return Err(Errno::BUSY);
        }
        obj::close::<DomainObj>(fid).map(|()| 0)
    })
}

/// SAFETY: as for [`obj::get`].
pub(super) unsafe fn get<'a>(p: *mut sys::fid_domain) -> Result<&'a Arc<DomainObj>> {
    obj::get::<DomainObj>(p.cast())
}

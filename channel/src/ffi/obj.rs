//! libfabric objects: a C fid struct followed by the safe object it stands for.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;

use super::panic::entry;
use crate::error::{Errno, Result};
use crate::sys;

/// A safe object the application sees through a fid of type `Fid`.
pub(super) trait Object: Sized + 'static {
    type Fid;
    const CLASS: u32;
    /// What a panic in its `fi_close` is reported as.
    const CLOSE: &'static str;
    /// The `fi_ops` table every fid of this class points at: it tells diwarp's fids of this
    /// class apart from anything else the application might pass.
    fn fi_ops() -> &'static sys::fi_ops;
    /// The fid the application holds for this object, around its `struct fid`: the class's
    /// operation tables (and, for a registration, its key).
    fn fid(&self, fid: sys::fid) -> Self::Fid;
}

/// `fid` is first, so a pointer to the object is a pointer to its fid and to its `struct fid`.
#[repr(C)]
struct Obj<T: Object> {
    fid: T::Fid,
    inner: Arc<T>,
}

/// The `struct fid` header for a new object of class `T`.
fn header<T: Object>(context: *mut c_void) -> sys::fid {
    sys::fid {
        fclass: T::CLASS as usize,
        context,
        // Never written through: libfabric treats ops tables as read-only.
        ops: ptr::from_ref(T::fi_ops()).cast_mut(),
    }
}

/// Moves a new object to the heap, behind a new fid of its class, and returns the fid the
/// application will hold.
fn publish<T: Object>(inner: Arc<T>, context: *mut c_void) -> *mut T::Fid {
    let fid = inner.fid(header::<T>(context));
    Box::into_raw(Box::new(Obj { fid, inner })).cast()
}

/// The object behind a fid the application passed, if it is one of diwarp's of class `T`.
///
/// SAFETY: `p` is null or points to a live fid (any provider's), per libfabric's contract
/// that the application passes only open fids; the object outlives the returned borrow
/// because the application may not close it during a call on it.
pub(super) unsafe fn get<'a, T: Object>(p: *const c_void) -> Result<&'a Arc<T>> {
    let f = p.cast::<sys::fid>();
    if f.is_null() || !ptr::eq((*f).ops.cast_const(), T::fi_ops()) {
        return Err(Errno::INVAL);
    }
    Ok(&(*p.cast::<Obj<T>>()).inner)
}

/// `fi_close`: frees the object unless another object still holds it (-FI_EBUSY), e.g. a
/// domain with an open endpoint or a CQ still bound to one.
///
/// SAFETY: as for [`get`]; after success the fid is dangling, as libfabric specifies.
pub(super) unsafe fn close<T: Object>(p: *mut sys::fid) -> Result<()> {
    let inner = get::<T>(p.cast())?;
    if Arc::strong_count(inner) > 1 {
        return Err(Errno::BUSY);
    }
    drop(Box::from_raw(p.cast::<Obj<T>>()));
    Ok(())
}

/// The `fi_close` of the classes whose objects take nothing down with them but [`close`].
///
/// SAFETY: as for [`close`].
pub(super) unsafe extern "C" fn fi_close<T: Object>(fid: *mut sys::fid) -> c_int {
    entry(T::CLOSE, || close::<T>(fid).map(|()| 0))
}

/// Writes a new object's fid to the application's out-pointer.
///
/// SAFETY: `out` is null or writable.
pub(super) unsafe fn hand_out<T: Object>(
    out: *mut *mut T::Fid,
    inner: Arc<T>,
    context: *mut c_void,
) -> Result<()> {
    if out.is_null() {
        return Err(Errno::INVAL);
    }
    *out = publish(inner, context);
    Ok(())
}

/// The `open` entry point of class `T` (`fi_domain`, `fi_endpoint`, `fi_cq_open`, …): `make`
/// checks the arguments and builds the object, which is handed out through `out`. The
/// out-pointer is checked last, so a call wrong in both reports the other argument's error.
///
/// SAFETY: `out` is null or writable; `make` may rely on what its caller's SAFETY says.
pub(super) unsafe fn open<T: Object>(
    what: &str,
    out: *mut *mut T::Fid,
    context: *mut c_void,
    make: impl FnOnce() -> Result<Arc<T>>,
) -> c_int {
    entry(what, || {
        hand_out(out, make()?, context)?;
        Ok(0)
    })
}

//! The panic boundary: a panic must never unwind into libfabric or the MPI library.

use std::any::Any;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::diag;
use crate::error::{Errno, Result};

/// Return types of entry points that report errors as negative fi error numbers.
pub(super) trait ErrRet {
    fn from_errno(e: Errno) -> Self;
}

impl ErrRet for c_int {
    fn from_errno(e: Errno) -> Self {
        e.ret()
    }
}

impl ErrRet for isize {
    fn from_errno(e: Errno) -> Self {
        e.ret() as isize
    }
}

/// Runs an entry point's body; an error becomes its negative number, a panic `-FI_EOTHER`.
pub(super) fn entry<R: ErrRet>(what: &str, body: impl FnOnce() -> Result<R>) -> R {
    // AssertUnwindSafe: after a panic the object may be inconsistent, but the locks it uses
    // (parking_lot) do not poison and the application is told the operation failed.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => R::from_errno(e),
        Err(payload) => {
            report(what, payload.as_ref());
            R::from_errno(Errno::OTHER)
        }
    }
}

/// For entry points with no error channel (pointers, counter values, `void`).
pub(super) fn entry_or<R>(what: &str, on_panic: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        report(what, payload.as_ref());
        on_panic
    })
}

/// `extern "C"` entry points, each a body run inside [`entry`] under the name its panic is
/// reported by, so that no entry point can forget the boundary. The body evaluates to a
/// `Result` of the C return type.
macro_rules! entries {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty as $what:literal
        $body:block
    )*) => {$(
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)] // the C calls' own argument lists
        $vis unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            super::panic::entry($what, || $body)
        }
    )*};
}
pub(super) use entries;

fn report(what: &str, payload: &(dyn Any + Send)) {
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string payload)");
    diag!(Warn, Core, "panic in {what}: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_panics_become_codes() {
        assert_eq!(entry::<c_int>("t", || Ok(3)), 3);
        assert_eq!(entry::<c_int>("t", || Err(Errno::AGAIN)), -11);
        assert_eq!(
            entry::<isize>("t", || panic!("boom")),
            Errno::OTHER.ret() as isize
        );
        assert_eq!(entry_or("t", 7u64, || panic!("boom")), 7);
    }
}

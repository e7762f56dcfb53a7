//! Results written into the application's own buffers.

use std::ffi::c_void;
use std::ptr;

/// Copies as much of `src` as fits into a caller's buffer of `cap` bytes (none if NULL).
///
/// SAFETY: `dst` is null or writable for `cap` bytes.
pub(super) unsafe fn copy_out(src: &[u8], dst: *mut c_void, cap: usize) {
    if !dst.is_null() {
        ptr::copy_nonoverlapping(src.as_ptr(), dst.cast::<u8>(), src.len().min(cap));
    }
}

//! The few pieces of the safe core that rest on raw memory or a C call, each a leaf: the
//! application's buffers named by pointers ([`mem`]), the counting allocator and what glibc
//! and the kernel say of memory ([`heap`]), and libfabric's text for an error number. `ffi`
//! builds on them; they import nothing above [`crate::sys`] and [`crate::error`].
#![allow(unsafe_code)]

pub mod heap;
pub mod mem;

use std::ffi::CStr;
use std::os::raw::c_int;

use crate::sys;

/// libfabric's text for error number `code`.
pub fn strerror(code: u32) -> String {
    // SAFETY: fi_strerror returns a pointer to a static, NUL-terminated string for any input.
    let s = unsafe { CStr::from_ptr(sys::fi_strerror(code as c_int)) };
    s.to_string_lossy().into_owned()
}

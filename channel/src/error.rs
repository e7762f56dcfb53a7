//! libfabric error numbers as the safe layer sees them.

use std::fmt;

use crate::sys;

/// A positive libfabric error number; entry points hand its negation to the caller.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub u32);

impl Errno {
    pub const ACCES: Errno = Errno(sys::FI_EACCES as u32);
    pub const AGAIN: Errno = Errno(sys::FI_EAGAIN as u32);
    pub const BADFLAGS: Errno = Errno(sys::FI_EBADFLAGS);
    pub const BUSY: Errno = Errno(sys::FI_EBUSY as u32);
    pub const CANCELED: Errno = Errno(sys::FI_ECANCELED as u32);
    pub const INVAL: Errno = Errno(sys::FI_EINVAL as u32);
    pub const NOAV: Errno = Errno(sys::FI_ENOAV);
    pub const NODATA: Errno = Errno(sys::FI_ENODATA as u32);
    pub const NOENT: Errno = Errno(sys::FI_ENOENT as u32);
    pub const NOMEM: Errno = Errno(sys::FI_ENOMEM as u32);
    pub const NOMSG: Errno = Errno(sys::FI_ENOMSG as u32);
    pub const NOPROTOOPT: Errno = Errno(sys::FI_ENOPROTOOPT as u32);
    pub const NOSYS: Errno = Errno(sys::FI_ENOSYS as u32);
    pub const OPBADSTATE: Errno = Errno(sys::FI_EOPBADSTATE);
    pub const OPNOTSUPP: Errno = Errno(sys::FI_EOPNOTSUPP as u32);
    pub const OTHER: Errno = Errno(sys::FI_EOTHER);
    pub const TIMEDOUT: Errno = Errno(sys::FI_ETIMEDOUT as u32);
    pub const TOOSMALL: Errno = Errno(sys::FI_ETOOSMALL);
    pub const TRUNC: Errno = Errno(sys::FI_ETRUNC);

    /// The value a C entry point returns for this error.
    pub fn ret(self) -> i32 {
        -(self.0 as i32)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Errno({}: {})", self.0, crate::raw::strerror(self.0))
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::raw::strerror(self.0))
    }
}

pub type Result<T> = std::result::Result<T, Errno>;

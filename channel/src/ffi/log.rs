//! The C side of [`crate::log`]: its [`Sink`] into libfabric's `fi_log`.

use std::ffi::CString;
use std::os::raw::c_int;

use super::loaded;
use crate::log::{Level, Sink, Subsys};
use crate::sys;

fn level(l: Level) -> sys::fi_log_level {
    match l {
        Level::Warn => sys::FI_LOG_WARN,
        Level::Trace => sys::FI_LOG_TRACE,
        Level::Info => sys::FI_LOG_INFO,
        Level::Debug => sys::FI_LOG_DEBUG,
    }
}

fn subsys(s: Subsys) -> sys::fi_log_subsys {
    match s {
        Subsys::Core => sys::FI_LOG_CORE,
        Subsys::Fabric => sys::FI_LOG_FABRIC,
        Subsys::Domain => sys::FI_LOG_DOMAIN,
        Subsys::EpCtrl => sys::FI_LOG_EP_CTRL,
        Subsys::EpData => sys::FI_LOG_EP_DATA,
        Subsys::Av => sys::FI_LOG_AV,
        Subsys::Cq => sys::FI_LOG_CQ,
        Subsys::Eq => sys::FI_LOG_EQ,
        Subsys::Mr => sys::FI_LOG_MR,
        Subsys::Cntr => sys::FI_LOG_CNTR,
    }
}

/// libfabric's logging, which `fi_prov_ini` installs.
pub(super) struct Core;

impl Sink for Core {
    fn enabled(&self, l: Level, s: Subsys) -> bool {
        enabled(l, s)
    }

    fn emit(&self, l: Level, s: Subsys, func: &str, line: u32, msg: &str) {
        emit(l, s, func, line, msg)
    }
}

/// Only a provider the core has loaded may log: the core keys its filters on the provider
/// struct it registered (and unit tests run without a core).
fn enabled(l: Level, s: Subsys) -> bool {
    let Some(prov) = loaded::provider() else {
        return false;
    };
    // SAFETY: the provider struct is static and registered with the core.
    unsafe { sys::fi_log_enabled(prov, level(l), subsys(s)) != 0 }
}

fn emit(l: Level, s: Subsys, func: &str, line: u32, msg: &str) {
    let Some(prov) = loaded::provider() else {
        return;
    };
    let func = CString::new(func.replace('\0', "")).unwrap_or_default();
    let msg = CString::new(msg.replace('\0', "")).unwrap_or_default();
    // SAFETY: all strings are NUL-terminated and outlive the call; "%s" consumes one argument.
    unsafe {
        sys::fi_log(
            prov,
            level(l),
            subsys(s),
            func.as_ptr(),
            line as c_int,
            c"%s".as_ptr(),
            msg.as_ptr(),
        )
    }
}

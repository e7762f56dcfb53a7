//! The provider entry point and the `struct fi_provider` the core registers.

use std::cell::UnsafeCell;
use std::os::raw::{c_char, c_int};
use std::ptr;

use super::panic::{entry, entry_or};
use super::{fabric, info, loaded, param};
use crate::diag;
use crate::error::Errno;
use crate::info::{negotiate, provider_version};
use crate::params::Config;
use crate::sys;

/// The core writes into `context` (`ofi_prov_ctx`: provider type, logging and layering
/// switches), so the struct must be writable memory, never rodata.
struct ProviderCell(UnsafeCell<sys::fi_provider>);

// SAFETY: Rust writes the struct only in fi_prov_ini, before the core has the pointer; from
// then on only the core writes it, under its own lock, and Rust only passes the pointer back.
unsafe impl Sync for ProviderCell {}

static PROVIDER: ProviderCell = ProviderCell(UnsafeCell::new(sys::fi_provider {
    version: 0,
    fi_version: 0,
    context: sys::fi_context {
        internal: [ptr::null_mut(); 4],
    },
    name: c"diwarp".as_ptr(),
    getinfo: Some(getinfo),
    fabric: Some(fabric::open),
    cleanup: Some(cleanup),
}));

pub(super) fn ptr() -> *mut sys::fi_provider {
    PROVIDER.0.get()
}

/// Called by the core's DSO loader once, under its init lock (so no `fi_getinfo` from here).
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut sys::fi_provider {
    entry_or("fi_prov_ini", ptr::null_mut(), || {
        let p = ptr();
        // SAFETY: the core does not have the pointer yet. `fi_version()` is the running core's
        // API version: the core skips providers older than what the application asks for (MPICH
        // 5 asks 2.5, Open MPI 5 1.18), so one build serves the 1.17 and the 2.x cores alike.
        unsafe {
            (*p).version = provider_version();
            (*p).fi_version = sys::fi_version();
        }
        loaded::register(p);
        crate::log::install(&super::log::Core);
        // SAFETY: `p` is the struct the core is loading.
        unsafe { param::define_all(p) };
        let config = loaded::init_config(|| Config::from_source(&param::CoreParams(p)));
        // SAFETY: as above; fi_version has just been written.
        let core = unsafe { (*p).fi_version };
        diag!(
            Info,
            Core,
            "diwarp {} loaded by libfabric API {}.{}; {config:?}",
            env!("CARGO_PKG_VERSION"),
            core >> 16,
            core & 0xffff
        );
        p
    })
}

/// `provider->getinfo`. Names of nodes and services are not used: an endpoint's address is
/// chosen when it is created (FI_DIWARP_IFACE).
unsafe extern "C" fn getinfo(
    version: u32,
    _node: *const c_char,
    _service: *const c_char,
    _flags: u64,
    hints: *const sys::fi_info,
    out: *mut *mut sys::fi_info,
) -> c_int {
    entry("getinfo", || {
        if out.is_null() {
            return Err(Errno::INVAL);
        }
        let hints = hints.as_ref().map(|h| info::read(h));
        let answer = negotiate(version, hints.as_ref()).map_err(|r| {
            // Utility providers (rxm, rxd) probe every core provider for the endpoint types
            // they layer on: refusing those is routine. Any other refusal is an application's
            // request diwarp cannot honour, and says which attribute.
            if r.0 == "ep_attr.type" {
                diag!(Info, Core, "hints refused: {}", r.0);
            } else {
                diag!(
                    Warn,
                    Core,
                    "hints refused: {} (api {}.{}){}",
                    r.0,
                    version >> 16,
                    version & 0xffff,
                    if r.0 == "addr_format" {
                        ": diwarp's addresses are FI_ADDR_STR names (Intel MPI asks for \
                         FI_SOCKADDR_IN unless FI_PROVIDER=diwarp is set too)"
                    } else {
                        ""
                    }
                );
            }
            Errno::NODATA
        })?;
        *out = info::write(&answer)?;
        Ok(0)
    })
}

extern "C" fn cleanup() {
    entry_or("cleanup", (), || {
        diag!(Info, Core, "unloading");
        loaded::unregister();
    })
}

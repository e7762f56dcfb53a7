//! What `fi_prov_ini` leaves for the rest of the boundary: the provider struct the core has
//! registered, and the settings read at that moment.

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use crate::params::Config;
use crate::sys;

/// Null until the core loads the provider and again after its `cleanup`: only a provider the
/// core has registered may log through it (unit tests run without a core).
static REGISTERED: AtomicPtr<sys::fi_provider> = AtomicPtr::new(ptr::null_mut());
static CONFIG: OnceLock<Config> = OnceLock::new();

pub(super) fn register(p: *mut sys::fi_provider) {
    REGISTERED.store(p, Ordering::Release);
}

pub(super) fn unregister() {
    REGISTERED.store(ptr::null_mut(), Ordering::Release);
}

/// The provider struct the core has registered, if it has.
pub(super) fn provider() -> Option<*mut sys::fi_provider> {
    let p = REGISTERED.load(Ordering::Acquire);
    (!p.is_null()).then_some(p)
}

/// The settings read when the provider was loaded (defaults outside a core, as in tests).
pub(super) fn config() -> Config {
    CONFIG.get().cloned().unwrap_or_default()
}

/// Reads the settings the first time the provider is loaded; later loads keep them.
pub(super) fn init_config(read: impl FnOnce() -> Config) -> &'static Config {
    CONFIG.get_or_init(read)
}

//! `fi_param_define` / `fi_param_get` for the parameters listed in [`crate::params`].

use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};
use std::ptr;

use crate::diag;
use crate::params::{ParamKind, ParamSource, ParamSpec, ParamValue, PARAMS};
use crate::sys;

fn kind(k: ParamKind) -> sys::fi_param_type {
    match k {
        ParamKind::Str | ParamKind::Secret => sys::FI_PARAM_STRING,
        ParamKind::Int => sys::FI_PARAM_INT,
        ParamKind::Bool => sys::FI_PARAM_BOOL,
        ParamKind::Size => sys::FI_PARAM_SIZE_T,
    }
}

/// Registers every parameter, so `fi_info -e` lists them and `fi_param_get` finds them.
///
/// SAFETY: `prov` is the provider struct the core is loading.
pub(super) unsafe fn define_all(prov: *mut sys::fi_provider) {
    for p in PARAMS {
        let (Ok(name), Ok(help)) = (CString::new(p.name), CString::new(p.help_with_default()))
        else {
            continue;
        };
        // SAFETY: the core copies both strings; "%s" consumes the one argument.
        let r = unsafe {
            sys::fi_param_define(
                prov,
                name.as_ptr(),
                kind(p.kind),
                c"%s".as_ptr(),
                help.as_ptr(),
            )
        };
        if r != 0 {
            diag!(Warn, Core, "fi_param_define({}) failed: {r}", p.name);
        }
    }
}

/// Reads parameters through the core (environment, or libfabric's configuration file), as
/// set for the provider struct it holds, which must be the one the core is loading.
pub(super) struct CoreParams(pub(super) *mut sys::fi_provider);

impl CoreParams {
    /// SAFETY: `T` must be the C type `fi_param_get` writes for `spec.kind`.
    unsafe fn get<T: Copy>(&self, spec: &ParamSpec, mut value: T) -> Option<T> {
        let name = CString::new(spec.name).ok()?;
        let r = sys::fi_param_get(
            self.0,
            name.as_ptr(),
            ptr::from_mut(&mut value).cast::<c_void>(),
        );
        (r == 0).then_some(value)
    }
}

impl ParamSource for CoreParams {
    fn get(&self, spec: &ParamSpec) -> Option<ParamValue> {
        // SAFETY: each arm passes the type libfabric documents for that parameter type; a
        // string result points into the environment, copied before returning.
        if spec.kind == ParamKind::Secret {
            return crate::params::EnvParams.get(spec);
        }
        unsafe {
            match spec.kind {
                ParamKind::Secret => None,
                ParamKind::Str => {
                    let p = self.get::<*const c_char>(spec, ptr::null())?;
                    (!p.is_null())
                        .then(|| ParamValue::Str(CStr::from_ptr(p).to_string_lossy().into_owned()))
                }
                ParamKind::Int => self
                    .get::<c_int>(spec, 0)
                    .map(|v| ParamValue::Int(v.into())),
                ParamKind::Bool => self.get::<c_int>(spec, 0).map(|v| ParamValue::Bool(v != 0)),
                ParamKind::Size => self.get::<usize>(spec, 0).map(ParamValue::Size),
            }
        }
    }
}

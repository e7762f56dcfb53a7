//! The domain object: the negotiated attributes every endpoint, CQ, AV and counter inherits.

use std::sync::Arc;

use iwarp::auth::JobKey;

use crate::diag;
use crate::error::{Errno, Result};
use crate::fabric::Fabric;
use crate::info::{negotiate, Info};
use crate::mr::SharedMrs;

#[derive(Debug)]
pub struct Domain {
    pub fabric: Arc<Fabric>,
    /// The libfabric API version the application was built for: older ones have smaller
    /// structs (`fi_cq_err_entry` before 1.5).
    pub api_version: u32,
    pub info: Info,
    /// Registered memory, which RMA from any endpoint of the domain may name.
    pub mrs: SharedMrs,
    /// Authenticated mode's key for the domain's endpoints: the `auth_key` the application
    /// handed it, else the fabric's (`None`: the mode is off).
    pub job_key: Option<Arc<JobKey>>,
}

impl Domain {
    /// Opens a domain for an info diwarp returned (possibly narrowed by the application);
    /// anything diwarp would have refused as hints is refused here too.
    pub fn open(fabric: &Arc<Fabric>, api_version: u32, info: &Info) -> Result<Arc<Domain>> {
        let info = negotiate(api_version, Some(info)).map_err(|r| {
            diag!(Warn, Domain, "fi_domain: unsupported attribute {}", r.0);
            Errno::NODATA
        })?;
        let job_key = job_key(fabric, &info)?;
        Ok(Arc::new(Domain {
            fabric: Arc::clone(fabric),
            api_version,
            info,
            mrs: SharedMrs::default(),
            job_key,
        }))
    }
}

/// The domain's key: an application's `auth_key` comes before the environment's key, unless
/// `FI_DIWARP_AUTH=off` turned the mode off.
fn job_key(fabric: &Fabric, info: &Info) -> Result<Option<Arc<JobKey>>> {
    let given = info.domain.auth_key.as_ref();
    match given {
        Some(k) if fabric.config.auth.mode != Some(false) => {
            JobKey::new(&k.0).map(|k| Some(Arc::new(k))).map_err(|e| {
                diag!(Warn, Domain, "fi_domain: domain_attr.auth_key: {e}");
                Errno::INVAL
            })
        }
        _ if fabric.needs_key && fabric.config.job_key.is_none() => {
            crate::log::misconfigured(
                crate::log::Subsys::Core,
                module_path!(),
                line!(),
                format_args!("authenticated mode: {}", crate::auth::AuthError::NoKey),
            );
            Err(Errno::INVAL)
        }
        _ => Ok(fabric.config.job_key.clone()),
    }
}

//! The domain object: the negotiated attributes every endpoint, CQ, AV and counter inherits.

use std::sync::Arc;

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
}

impl Domain {
    /// Opens a domain for an info diwarp returned (possibly narrowed by the application);
    /// anything diwarp would have refused as hints is refused here too.
    pub fn open(fabric: &Arc<Fabric>, api_version: u32, info: &Info) -> Result<Arc<Domain>> {
        let info = negotiate(api_version, Some(info)).map_err(|r| {
            diag!(Warn, Domain, "fi_domain: unsupported attribute {}", r.0);
            Errno::NODATA
        })?;
        Ok(Arc::new(Domain {
            fabric: Arc::clone(fabric),
            api_version,
            info,
            mrs: SharedMrs::default(),
        }))
    }
}

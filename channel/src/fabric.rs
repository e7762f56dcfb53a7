//! The fabric object: the provider's settings for everything opened beneath it.

use std::sync::Arc;

use crate::error::{Errno, Result};
use crate::info::FABRIC_NAME;
use crate::params::Config;

#[derive(Debug)]
pub struct Fabric {
    pub config: Config,
}

impl Fabric {
    pub fn open(name: &str, mut config: Config) -> Result<Arc<Fabric>> {
        if name != FABRIC_NAME {
            return Err(Errno::NODATA);
        }
        config.job_key = config.auth.job_key().map_err(|e| {
            // Said even with logging off: the MPI stops with a message that does not say why.
            crate::log::misconfigured(
                crate::log::Subsys::Core,
                module_path!(),
                line!(),
                format_args!("authenticated mode: {e}"),
            );
            Errno::INVAL
        })?;
        Ok(Arc::new(Fabric { config }))
    }
}

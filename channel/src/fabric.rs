//! The fabric object: the provider's settings for everything opened beneath it.

use std::sync::Arc;

use crate::auth::AuthError;
use crate::error::{Errno, Result};
use crate::info::FABRIC_NAME;
use crate::params::Config;

#[derive(Debug)]
pub struct Fabric {
    pub config: Config,
    /// `FI_DIWARP_AUTH=on` without a key in the environment: each domain needs an `auth_key`.
    pub needs_key: bool,
}

impl Fabric {
    pub fn open(name: &str, mut config: Config) -> Result<Arc<Fabric>> {
        if name != FABRIC_NAME {
            return Err(Errno::NODATA);
        }
        // Without a key here the domain may still be handed one (its `auth_key`).
        let needs_key = match config.auth.job_key() {
            Ok(key) => {
                config.job_key = key;
                false
            }
            Err(AuthError::NoKey) => true,
            Err(e) => {
                // Said even with logging off: the MPI stops with a message that does not say
                // why.
                crate::log::misconfigured(
                    crate::log::Subsys::Core,
                    module_path!(),
                    line!(),
                    format_args!("authenticated mode: {e}"),
                );
                return Err(Errno::INVAL);
            }
        };
        Ok(Arc::new(Fabric { config, needs_key }))
    }
}

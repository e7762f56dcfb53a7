//! The fabric object: the provider's settings for everything opened beneath it.

use std::sync::Arc;

use crate::diag;
use crate::error::{Errno, Result};
use crate::info::FABRIC_NAME;
use crate::params::Config;
use policies::promote::Mode;

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
        if config.job_key.is_some() && config.promote.mode != Mode::Ud {
            // An RC connection does not prove the key yet: only datagrams carry the tag.
            diag!(
                Info,
                Core,
                "authenticated mode: every peer over datagrams (FI_DIWARP_MODE={} not used)",
                config.promote.mode.name()
            );
            config.promote.mode = Mode::Ud;
        }
        Ok(Arc::new(Fabric { config }))
    }
}

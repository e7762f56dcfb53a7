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
    pub fn open(name: &str, config: Config) -> Result<Arc<Fabric>> {
        if name != FABRIC_NAME {
            return Err(Errno::NODATA);
        }
        Ok(Arc::new(Fabric { config }))
    }
}

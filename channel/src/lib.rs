//! diwarp's libfabric provider, built as `libdiwarp-fi.so`.
//!
//! MPICH (ch4:ofi) and Open MPI (mtl:ofi) reach diwarp through the libfabric core, which loads
//! this library from `FI_PROVIDER_PATH` and calls `fi_prov_ini`. The [`ffi`] module is the C
//! boundary and the only place with `unsafe` code; the modules beside it are safe Rust:
//! [`info`] decides what `fi_getinfo` answers, [`params`] and [`log`] connect to libfabric's
//! parameters and logging, and the object modules ([`fabric`], [`domain`], [`endpoint`], [`cq`],
//! [`av`], [`cntr`]) hold the state behind each fid.
//!
//! [`data`] is the data path: tag matching ([`matching`]) and the eager and rendezvous
//! protocols over one reliable-datagram queue pair, with progress in CQ reads and a timer
//! thread.

pub mod addr;
pub mod atomic;
pub mod auth;
pub mod av;
pub mod cntr;
pub mod cq;
pub mod data;
pub mod domain;
pub mod endpoint;
pub mod error;
pub mod fabric;
mod ffi;
#[doc(hidden)]
pub mod fuzzing;
mod hash;
pub mod iface;
pub mod info;
pub mod log;
pub mod matching;
pub mod memory;
pub mod mr;
pub mod params;
pub mod path;
pub mod peer;
pub mod ports;
pub mod progress;
mod raw;
mod sys;
pub mod waiter;

#[cfg(test)]
mod testutil {
    use std::sync::Arc;

    use crate::domain::Domain;
    use crate::fabric::Fabric;
    use crate::info::{fi_version, offer, FABRIC_NAME};
    use crate::params::Config;

    /// A domain whose endpoints bind to loopback.
    pub fn domain() -> Arc<Domain> {
        domain_with(Config::default())
    }

    /// As [`domain`], with the rest of `config`.
    pub fn domain_with(config: Config) -> Arc<Domain> {
        let iface = config.iface.clone().or_else(|| Some("127.0.0.1".into()));
        let config = Config { iface, ..config };
        let fabric = Fabric::open(FABRIC_NAME, config).unwrap();
        let v = fi_version(1, 17);
        Domain::open(&fabric, v, &offer(v)).unwrap()
    }

    /// A memory report, parsed, once it is found to follow `channel/mem-report.schema.json`
    /// (as `scripts/mem-report --check` would find it).
    pub fn valid_report(line: &str) -> serde_json::Value {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../mem-report.schema.json")).unwrap();
        let report: serde_json::Value = serde_json::from_str(line).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        report
    }
}

//! Policies for diwarp, sans-IO: the memory ledger that accounts for every byte of transport
//! state ([`ledger`]), and (with the hybrid channel) which peers use UD and which are promoted
//! to RC.
//!
//! Nothing here reads a clock, a socket or `/proc`: callers hand in what they measured.

pub mod ledger;

pub use ledger::{Account, Entry, Ledger, Sample, Scale, Usage};

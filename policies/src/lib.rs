//! Policies for diwarp, sans-IO: the memory ledger that accounts for every byte of transport
//! state ([`ledger`]), and which peers use the datagram path and which are promoted to RC
//! connections ([`promote`]).
//!
//! Nothing here reads a clock, a socket or `/proc`: callers hand in what they measured.

pub mod ledger;
pub mod promote;

pub use ledger::{Account, Entry, Ledger, Sample, Scale, Usage};

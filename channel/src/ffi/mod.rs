//! The C boundary, and the only module with `unsafe` code in diwarp.
//!
//! libfabric's core loads `libdiwarp-fi.so`, calls [`provider::fi_prov_ini`] and from then on
//! reaches diwarp through function tables hung off each object's `fid`. Every function here:
//! - catches panics and returns an fi error code instead (see [`panic`]);
//! - converts raw pointers to references or slices once, on entry, and calls the safe layer.
//!
//! Objects (`obj`) are `#[repr(C)]` pairs of the C-visible fid struct and an `Arc` of the safe
//! object, so a fid pointer is also a pointer to its object; the `fi_ops` table a fid points at
//! identifies its class, which is how a fid handed back by the application is checked.
//!
//! Files call only downwards. An ops table names the functions it holds, so it sits above
//! them: `provider` names `fabric::open`, `fabric` names `domain::open`, `domain` names the
//! opens of AVs, CQs, counters and endpoints, `ep` names the msg, rma and atomic tables. A
//! fid coming back up (the domain passed to `fi_av_open`, the endpoint of an `fi_send`) is
//! resolved by its type through [`obj::get`], which needs no call into the file that made it.
//! Below them all, the leaves: `obj`, `panic`, `out`, `info`, `stubs`, and `loaded`, where
//! `fi_prov_ini` leaves the registered provider for `log`.
#![allow(unsafe_code)]

mod log;

mod atomic;
mod av;
mod cntr;
mod cq;
mod domain;
mod ep;
mod fabric;
mod info;
mod loaded;
mod mr;
mod msg;
mod obj;
mod out;
mod panic;
mod param;
mod provider;
mod rma;
mod stubs;
#[cfg(test)]
mod tests;

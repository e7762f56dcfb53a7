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
mod mr;
mod msg;
mod obj;
mod panic;
mod param;
mod provider;
mod rma;
mod stubs;
#[cfg(test)]
mod tests;

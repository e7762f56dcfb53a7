//! diwarp's libfabric provider (`libdiwarp-fi.so`): endpoints, tag matching, eager and rendezvous
//! protocols, completion queues, address vectors and progress. Its `ffi` module will be the only
//! place with `unsafe` code in the project.
//!
//! Empty until the channel issue; it exists so the workspace has its final shape.

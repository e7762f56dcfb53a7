//! Path policy for diwarp: which peers use UD and which are promoted to RC, the RC cap and
//! eviction, and the memory ledger that accounts for every byte of transport state.
//!
//! Empty until the hybrid-policy issue; it exists so the workspace has its final shape.

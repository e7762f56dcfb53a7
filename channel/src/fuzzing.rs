//! What the workspace's fuzz targets (`channel/fuzz/`) need of this crate and cannot reach otherwise:
//! the data path's message header, which the crate keeps to itself, and the heap's counter,
//! which is every program's that links the provider (a second global allocator cannot be).
//! Not an interface: nothing outside `channel/fuzz/` uses it.

pub use crate::data::wire::{parse, AtomicRequest, Matching, Msg, Packet, Repr, WireError};
pub use crate::matching::Kind;

/// Starts keeping the heap's high-water mark; returns the bytes held now.
pub fn watch_heap() -> usize {
    crate::raw::heap::watch_peak()
}

/// The most the heap held since [`watch_heap`], which stops keeping it.
pub fn heap_peak() -> usize {
    crate::raw::heap::peak()
}

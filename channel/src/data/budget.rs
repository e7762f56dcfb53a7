//! How far traffic may grow an endpoint's memory (`FI_DIWARP_MEM_BUDGET`), split among the
//! pools that grow with it. Past each share a send waits (FI_EAGAIN) or pushed chunks are
//! refused (the sender sends them again after the answer), so nothing is lost.

/// The default budget: the shares below are the bounds the endpoint had before they could
/// be set (64 MiB of copies, 16 MiB of held chunks, 8 MiB of spare buffers).
pub const DEFAULT: usize = 64 << 20;

/// The smallest budget taken: a window of sends at the largest eager size and a few chunks.
pub const MIN: usize = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Budget {
    /// Copied sends held for the peers (queued or unacknowledged); past it, FI_EAGAIN.
    pub copies: usize,
    /// Pushed chunks held for unexpected messages; past it, a message's pushes are refused.
    pub held_pushes: usize,
    /// Send buffers kept spare for reuse.
    pub spare: usize,
}

impl Budget {
    pub fn new(total: usize) -> Budget {
        let total = total.max(MIN);
        Budget {
            copies: total,
            held_pushes: total / 4,
            spare: total / 8,
        }
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(DEFAULT)
    }
}

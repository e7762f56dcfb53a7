//! Moments at which something is due. A leaf below the session and its sender, which both
//! merge optional deadlines, so that neither has to import the other for it.

use std::time::Instant;

/// The earlier of two optional moments.
#[inline]
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

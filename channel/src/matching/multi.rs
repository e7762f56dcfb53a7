//! Packing messages into an FI_MULTI_RECV buffer.

/// Each message in a multi-receive buffer starts at a multiple of this, so that the
/// application can read a header struct in place (MPICH casts `wc->buf` to its AM header).
pub const MULTI_RECV_ALIGN: usize = 8;

/// Where one message lands in a multi-receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Piece {
    pub offset: usize,
    pub placed: usize,
    /// The free space left is below the threshold: the buffer goes back to the application.
    pub released: bool,
}

/// The fill state of one posted multi-receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MultiBuf {
    next: usize,
    /// FI_OPT_MIN_MULTI_RECV as it was when the buffer was posted: fi_endpoint(3) only
    /// promises a new value for buffers posted after the change.
    min_free: usize,
}

impl MultiBuf {
    pub(super) fn new(min_free: usize) -> MultiBuf {
        MultiBuf { next: 0, min_free }
    }

    /// Places a `len`-byte message. One that does not fit in what is left is truncated, as
    /// any receive would truncate it; with FI_OPT_MIN_MULTI_RECV at least the largest eager
    /// message (MPICH's setting) that never happens.
    pub(super) fn place(&mut self, capacity: usize, len: usize) -> Piece {
        let offset = self.next;
        let placed = len.min(capacity.saturating_sub(offset));
        let end = offset + placed;
        self.next = end
            .checked_next_multiple_of(MULTI_RECV_ALIGN)
            .map_or(capacity, |n| n.min(capacity));
        let free = capacity - self.next;
        // With a threshold of 0 a full buffer would otherwise stay posted, absorbing every
        // later message as a zero-byte truncation.
        let released = free < self.min_free || free == 0;
        Piece {
            offset,
            placed,
            released,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_aligned_and_releases_below_threshold() {
        let mut b = MultiBuf::new(16);
        let p = |offset, placed, released| Piece {
            offset,
            placed,
            released,
        };
        assert_eq!(b.place(64, 5), p(0, 5, false));
        assert_eq!(b.place(64, 0), p(8, 0, false));
        assert_eq!(b.place(64, 16), p(8, 16, false));
        // 24 + 20 = 44, next start 48: 16 free is not below 16.
        assert_eq!(b.place(64, 20), p(24, 20, false));
        assert_eq!(b.place(64, 9), p(48, 9, true));
    }

    #[test]
    fn truncates_what_does_not_fit() {
        let mut b = MultiBuf::new(4);
        assert_eq!(b.place(20, 10).placed, 10);
        let last = b.place(20, 10);
        assert_eq!((last.offset, last.placed, last.released), (16, 4, true));
    }

    #[test]
    fn zero_threshold_releases_when_full() {
        let mut b = MultiBuf::new(0);
        assert!(!b.place(16, 8).released);
        assert!(b.place(16, 8).released);
        let mut unaligned_end = MultiBuf::new(0);
        assert!(
            unaligned_end.place(13, 9).released,
            "aligned next start passes the end"
        );
    }
}

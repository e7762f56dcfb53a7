//! Multi-receive buffers with rendezvous pieces still arriving.
//!
//! A multi-receive buffer goes back to the application with the completion that carries
//! FI_MULTI_RECV (or with its cancellation), and the application may then repost or free it.
//! The matcher decides when the buffer is full enough to release, but a rendezvous message
//! placed in it earlier may still be receiving chunks then. So the release waits for the
//! buffer's last piece in flight: that piece's completion carries FI_MULTI_RECV, and a
//! cancellation is reported after it.

use crate::cq::Completion;
use crate::hash::Map;

/// Until the application sets FI_OPT_MIN_MULTI_RECV, a multi-receive buffer is released once
/// less than this much of it is left (MPICH sets the same value itself).
pub const DEFAULT_MIN_MULTI_RECV: usize = 16 * 1024;

/// What happens once a buffer's last piece in flight completes.
#[derive(Debug)]
enum Release {
    /// The buffer is still posted.
    Open,
    /// The buffer was released while pieces were in flight: the last one's completion
    /// carries FI_MULTI_RECV.
    OnLast,
    /// The buffer was cancelled while pieces were in flight: this is reported after the last.
    Cancelled(Completion),
}

#[derive(Debug)]
struct Track {
    pieces: usize,
    release: Release,
}

/// Buffers by the id their [`Recv`](super::ops::Recv) descriptors share; only those with
/// rendezvous pieces in flight are listed.
#[derive(Debug, Default)]
pub(super) struct MultiInFlight {
    bufs: Map<u64, Track>,
    next_id: u64,
}

/// How to report a completed piece of a multi-receive buffer.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PieceDone {
    /// Its completion carries FI_MULTI_RECV: the buffer goes back to the application.
    pub releases: bool,
    /// The buffer's cancellation, to report right after this completion.
    pub cancelled: Option<Completion>,
}

impl MultiInFlight {
    /// An id for a newly posted buffer.
    pub(super) fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A rendezvous message was placed in buffer `id` and its chunks are to come.
    pub(super) fn started(&mut self, id: u64) {
        self.bufs
            .entry(id)
            .or_insert(Track {
                pieces: 0,
                release: Release::Open,
            })
            .pieces += 1;
    }

    /// A piece of buffer `id` completes (or fails). `rndv`: it was counted by
    /// [`started`](Self::started). `last_placed`: placing it left too little room, so the
    /// matcher released the buffer with it.
    pub(super) fn finished(&mut self, id: u64, rndv: bool, last_placed: bool) -> PieceDone {
        let Some(t) = self.bufs.get_mut(&id) else {
            return PieceDone {
                releases: last_placed,
                cancelled: None,
            };
        };
        if rndv {
            t.pieces -= 1;
        }
        if last_placed {
            t.release = Release::OnLast;
        }
        if t.pieces > 0 {
            return PieceDone {
                releases: false,
                cancelled: None,
            };
        }
        let t = self.bufs.remove(&id).expect("present");
        crate::hash::shrink(&mut self.bufs);
        match t.release {
            Release::Open => PieceDone {
                releases: false,
                cancelled: None,
            },
            Release::OnLast => PieceDone {
                releases: true,
                cancelled: None,
            },
            Release::Cancelled(c) => PieceDone {
                releases: false,
                cancelled: Some(c),
            },
        }
    }

    /// Buffer `id` was cancelled (it takes no more messages). Returns the cancellation if it
    /// can be reported now; otherwise it is kept until the last piece in flight completes.
    pub(super) fn cancelled(&mut self, id: u64, c: Completion) -> Option<Completion> {
        match self.bufs.get_mut(&id) {
            Some(t) => {
                t.release = Release::Cancelled(c);
                None
            }
            None => Some(c),
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.bufs.capacity() * std::mem::size_of::<(u64, Track)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(releases: bool, cancelled: Option<Completion>) -> PieceDone {
        PieceDone {
            releases,
            cancelled,
        }
    }

    #[test]
    fn without_pieces_in_flight_the_releasing_piece_releases() {
        let mut m = MultiInFlight::default();
        let id = m.new_id();
        assert_eq!(m.finished(id, false, false), done(false, None));
        assert_eq!(m.finished(id, false, true), done(true, None));
        let c = Completion {
            op_context: 7,
            ..Completion::default()
        };
        assert_eq!(m.cancelled(id, c), Some(c));
    }

    #[test]
    fn the_release_waits_for_the_last_piece_in_flight() {
        let mut m = MultiInFlight::default();
        let id = m.new_id();
        m.started(id);
        m.started(id);
        // An eager piece releases the buffer while two rendezvous pieces are still arriving.
        assert_eq!(m.finished(id, false, true), done(false, None));
        assert_eq!(m.finished(id, true, false), done(false, None));
        assert_eq!(m.finished(id, true, false), done(true, None));
        assert!(m.bufs.is_empty(), "nothing kept once released");
        // A releasing rendezvous piece that completes before an earlier one.
        m.started(id);
        m.started(id);
        assert_eq!(m.finished(id, true, true), done(false, None));
        assert_eq!(m.finished(id, true, false), done(true, None));
    }

    #[test]
    fn a_cancellation_waits_for_the_last_piece_in_flight() {
        let mut m = MultiInFlight::default();
        let id = m.new_id();
        let other = m.new_id();
        m.started(id);
        let c = Completion {
            op_context: 9,
            ..Completion::default()
        };
        assert_eq!(m.cancelled(id, c), None);
        assert_eq!(m.finished(other, false, true), done(true, None));
        assert_eq!(m.finished(id, true, false), done(false, Some(c)));
        assert_eq!(m.cancelled(id, c), Some(c), "nothing left in flight");
    }
}

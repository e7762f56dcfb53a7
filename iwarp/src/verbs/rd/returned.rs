//! What the queue pair hands back to a caller with another way to its peers (hand-back): the
//! sends of sessions that ended, and the peers reported stalled, until taken.

use std::net::SocketAddr;

use bytes::Bytes;

use super::rx::DDP_HEADER;

/// A send handed back: the caller's message (without the queue pair's DDP header) in at most
/// two pieces, `head` then `data`, and the work request it was posted as. No completion was
/// or will be reported for it, and its send slot is free.
#[derive(Debug, Clone)]
pub struct Returned {
    /// The peer it was for.
    pub addr: SocketAddr,
    pub wr_id: u64,
    pub signaled: bool,
    pub head: Bytes,
    pub data: Bytes,
}

impl Returned {
    /// The message was `head` ++ `data` with the DDP header in front.
    pub(super) fn new(
        addr: SocketAddr,
        wr_id: u64,
        signaled: bool,
        head: Bytes,
        data: Bytes,
    ) -> Returned {
        let (head, data) = match head.len() {
            0 => (Bytes::new(), data.slice(DDP_HEADER.min(data.len())..)),
            n => (head.slice(DDP_HEADER.min(n)..), data),
        };
        Returned {
            addr,
            wr_id,
            signaled,
            head,
            data,
        }
    }

    /// The caller's message, `head` and `data` joined.
    pub fn len(&self) -> usize {
        self.head.len() + self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What waits for the caller to take it.
#[derive(Default)]
pub(super) struct Handback {
    pub(super) returned: Vec<Returned>,
    /// Peers reported stalled, each once per silence.
    pub(super) stalled: Vec<SocketAddr>,
}

//! The pieces of an RC connection's state that the send, receive and RDMA paths share.

use std::collections::VecDeque;
use std::io::IoSlice;

use super::super::WcOpcode;
use crate::wire::rdmap::{Opcode, SegmentRepr};

/// Bytes asked of one `read`. The decoder gives back storage above twice the largest FPDU when
/// it drains; reads of 64 KiB keep it below that, so a busy connection does not free and
/// reallocate its buffer on every message.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// What the MPA exchange settled for this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcSettings {
    /// This side inserts markers into what it sends.
    pub markers_tx: bool,
    /// The peer inserts markers into what it sends.
    pub markers_rx: bool,
    /// CRC32c in both directions.
    pub crc: bool,
    /// MPA revision in use.
    pub revision: u8,
    /// Payload bytes per outgoing segment.
    pub segment_payload: usize,
}

/// The message being placed into the receive at the head of the receive queue.
pub(super) struct RxProgress {
    pub(super) placed: usize,
    pub(super) overflow: bool,
    pub(super) solicited: bool,
}

/// A send WR whose bytes are (partly) still in the send buffer.
pub(super) struct PendingSend {
    /// Stream byte count (`TxBuffer::queued`) at which its last byte is written.
    pub(super) end: u64,
    pub(super) wr_id: u64,
    pub(super) len: usize,
    pub(super) signaled: bool,
    /// Send or RdmaWrite.
    pub(super) opcode: WcOpcode,
}

/// An RDMA Read whose Read Request went out and whose data has not all come back.
pub(super) struct PendingRead {
    pub(super) wr_id: u64,
    pub(super) sink_stag: u32,
    pub(super) sink_to: u64,
    pub(super) len: usize,
    pub(super) received: usize,
}

/// RDMA state beside the Send stream: queue 1's MSNs and the reads in flight, oldest first
/// (the peer answers Read Requests in order, so responses come back in order).
pub(super) struct Rdma {
    pub(super) tx_read_msn: u32,
    pub(super) rx_read_msn: u32,
    pub(super) reads: VecDeque<PendingRead>,
    /// Source bytes of the Read Response segment being encoded.
    pub(super) scratch: Vec<u8>,
}

/// Bytes for the kernel that it has not taken yet, oldest first.
#[derive(Default)]
pub(super) struct TxBuffer {
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    /// Bytes ever appended to `buf`.
    pub(super) queued: u64,
    /// Bytes ever written from `buf`.
    pub(super) written: u64,
    pub(super) pending: VecDeque<PendingSend>,
}

impl TxBuffer {
    pub(super) fn unsent(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pos == self.buf.len() && self.pending.is_empty()
    }

    /// Appends what of `iov` the kernel did not take (past its first `written` bytes).
    pub(super) fn keep_unwritten(&mut self, iov: &[IoSlice<'_>], written: usize) {
        let mut skip = written;
        for s in iov {
            if skip >= s.len() {
                skip -= s.len();
                continue;
            }
            self.buf.extend_from_slice(&s[skip..]);
            skip = 0;
        }
    }

    /// Whether earlier sends wait in the buffer or in the list (the last entry of `pending`
    /// being the send about to go).
    pub(super) fn is_queued(&self) -> bool {
        self.pos != self.buf.len() || self.pending.len() > 1
    }
}

/// How the segments of a message are addressed.
#[derive(Clone, Copy)]
pub(super) enum Addr {
    /// A Send: MSN per message, MO = offset.
    Untagged { opcode: Opcode, msn: u32 },
    /// An RDMA Write: TO = `to` + offset.
    Tagged { opcode: Opcode, stag: u32, to: u64 },
}

/// The segments of one message.
pub(super) struct Segments<'a> {
    pub(super) data: &'a [u8],
    pub(super) off: usize,
    pub(super) max: usize,
    pub(super) addr: Addr,
    pub(super) done: bool,
}

impl<'a> Iterator for Segments<'a> {
    type Item = (SegmentRepr, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let end = self.data.len().min(self.off + self.max);
        let last = end == self.data.len();
        let seg = match self.addr {
            // Messages are limited to u32::MAX bytes, so the offset fits MO.
            Addr::Untagged { opcode, msn } => {
                SegmentRepr::untagged(opcode, last, 0, msn, self.off as u32)
            }
            // The poster checked that the last TO does not wrap.
            Addr::Tagged { opcode, stag, to } => {
                SegmentRepr::tagged(opcode, last, stag, to + self.off as u64)
            }
        };
        let payload = &self.data[self.off..end];
        self.off = end;
        self.done = last;
        Some((seg, payload))
    }
}

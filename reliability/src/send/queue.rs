//! Messages waiting to be sent: segmentation and coalescing, message ids, and the send-buffer
//! charge that back-pressure is measured by.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::config::Config;
use crate::header::{push_entry, Body, ENTRY_LEN_LEN};
use crate::seq::MsgId;
use crate::stats::Stats;

/// What a queued message costs beyond its bytes, so that a flood of empty messages still meets
/// the send-buffer bound.
const MSG_OVERHEAD: usize = 64;

/// Appends one COALESCED entry made of `head` then `data`.
fn push_entry_parts(out: &mut Vec<u8>, head: &[u8], data: &[u8]) {
    if head.is_empty() {
        return push_entry(out, data);
    }
    let len = u16::try_from(head.len() + data.len()).expect("entries are at most u16::MAX bytes");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(head);
    out.extend_from_slice(data);
}

/// A message waiting to be (fully) sent: `head` then `data` (a small header the caller puts in
/// front of a large buffer it handed over, so the buffer need not be copied to make room for it;
/// `head` is empty for messages that travel whole).
#[derive(Debug)]
pub(super) struct Outgoing {
    id: MsgId,
    head: Bytes,
    data: Bytes,
    /// Bytes already cut into segments.
    sent: usize,
}

impl Outgoing {
    fn len(&self) -> usize {
        self.head.len() + self.data.len()
    }

    /// Bytes `at..at + len` of the message, in at most two shared pieces.
    fn slice(&self, at: usize, len: usize) -> (Bytes, Bytes) {
        let h = self.head.len();
        let end = at + len;
        if at >= h {
            return (self.data.slice(at - h..end - h), Bytes::new());
        }
        let first = self.head.slice(at..end.min(h));
        let second = if end > h {
            self.data.slice(..end - h)
        } else {
            Bytes::new()
        };
        (first, second)
    }
}

/// The payload of one datagram, kept for retransmission; the `Bytes` share the caller's buffer.
/// On the wire it is `data` then `tail` (`tail` is empty unless a segment spans a message's
/// head and body).
#[derive(Debug, Clone)]
pub(crate) struct Payload {
    pub(crate) body: Body,
    pub(crate) data: Bytes,
    pub(crate) tail: Bytes,
}

impl Payload {
    pub(crate) fn len(&self) -> usize {
        self.data.len() + self.tail.len()
    }
}

/// The messages not yet cut into datagrams, and the ids of those not yet acknowledged.
#[derive(Debug)]
pub(super) struct SendQueue {
    messages: VecDeque<Outgoing>,
    queued_bytes: usize,
    /// Bytes charged against `max_send_buffer`: queued, in flight, and `MSG_OVERHEAD` per
    /// unacknowledged message.
    charged: usize,
    next_msg: MsgId,
    /// Oldest message not yet acknowledged.
    unacked_msg: MsgId,
    /// One past the newest message whose sender waits for its acknowledgement: while any
    /// such message is unacknowledged, the last datagram queued carries ACK_SOON.
    awaited_end: MsgId,
    /// `send` refused a message and no `Writable` was issued since.
    blocked: bool,
}

impl SendQueue {
    pub(super) fn new(config: &Config) -> SendQueue {
        SendQueue {
            messages: VecDeque::new(),
            queued_bytes: 0,
            charged: 0,
            next_msg: MsgId(config.initial_seq),
            unacked_msg: MsgId(config.initial_seq),
            awaited_end: MsgId(config.initial_seq),
            blocked: false,
        }
    }

    /// An empty queue whose next message is `next`, every earlier one acknowledged.
    pub(super) fn resume(config: &Config, next: MsgId) -> SendQueue {
        SendQueue {
            next_msg: next,
            unacked_msg: next,
            awaited_end: next,
            ..SendQueue::new(config)
        }
    }

    pub(super) fn next_msg(&self) -> MsgId {
        self.next_msg
    }

    /// `send` refused a message and no `Writable` was issued since.
    pub(super) fn is_blocked(&self) -> bool {
        self.blocked
    }

    /// Whether a message of `len` bytes may be queued now.
    pub(super) fn has_room(&self, config: &Config, len: usize) -> bool {
        self.charged == 0 || self.charged + len + MSG_OVERHEAD <= config.max_send_buffer
    }

    /// A message was refused for want of room.
    pub(super) fn block(&mut self) {
        self.blocked = true;
    }

    /// Whether the queue was blocked and has room again; it is no longer blocked then.
    pub(super) fn unblock(&mut self, config: &Config) -> bool {
        let writable = self.blocked && self.charged < config.max_send_buffer;
        if writable {
            self.blocked = false;
        }
        writable
    }

    /// Queues the message `head` then `data`.
    pub(super) fn push(&mut self, head: Bytes, data: Bytes, awaited: bool) -> MsgId {
        let id = self.next_msg;
        self.next_msg = id.next();
        if awaited {
            self.awaited_end = self.next_msg;
        } else if !self.awaits_ack() {
            // Kept at the window's edge, so it cannot drift 2^31 messages behind and wrap, nor
            // (set past an unacknowledged message) make unawaited messages look awaited.
            self.awaited_end = self.unacked_msg;
        }
        let m = Outgoing {
            id,
            head,
            data,
            sent: 0,
        };
        self.queued_bytes += m.len();
        self.charged += m.len() + MSG_OVERHEAD;
        self.messages.push_back(m);
        id
    }

    /// Whether a message whose sender waits for its acknowledgement is unacknowledged.
    pub(super) fn awaits_ack(&self) -> bool {
        self.awaited_end.since(self.unacked_msg) as i32 > 0
    }

    pub(super) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub(super) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    pub(super) fn capacity(&self) -> usize {
        self.messages.capacity()
    }

    /// Gives the queue's memory back.
    pub(super) fn release(&mut self) {
        self.messages = VecDeque::new();
    }

    /// Messages not yet acknowledged: `(oldest, count)`.
    pub(super) fn pending_msgs(&self) -> (MsgId, u32) {
        (self.unacked_msg, self.next_msg.since(self.unacked_msg))
    }

    /// The peer acknowledged a datagram of `len` payload bytes: its bytes are no longer charged.
    pub(super) fn discharge(&mut self, len: usize) {
        self.charged -= len;
    }

    /// Every message up to `last` is acknowledged; `acked` hears of each, in order.
    pub(super) fn complete(
        &mut self,
        last: MsgId,
        stats: &mut Stats,
        acked: &mut impl FnMut(MsgId),
    ) {
        while self.unacked_msg.since(last) as i32 <= 0 {
            let m = self.unacked_msg;
            self.unacked_msg = m.next();
            self.charged -= MSG_OVERHEAD;
            stats.messages_acked += 1;
            acked(m);
        }
    }

    /// Drops every message (the session failed); returns those that will never be acked.
    pub(super) fn abandon(&mut self) -> (MsgId, u32) {
        let pending = self.pending_msgs();
        self.messages = VecDeque::new();
        self.queued_bytes = 0;
        self.charged = 0;
        self.unacked_msg = self.next_msg;
        pending
    }

    /// Takes the next datagram's worth of data off the queue, and the last message it
    /// completes, if any.
    pub(super) fn cut(&mut self, config: &Config) -> (Payload, Option<MsgId>) {
        let inline = config.effective_inline_limit();
        let front = self.messages.front_mut().expect("cut on an empty queue");
        let len = front.len();
        if len > inline {
            let take = config.segment_payload().min(len - front.sent);
            let (data, tail) = front.slice(front.sent, take);
            let body = Body::Segment {
                msg: front.id,
                offset: front.sent as u32,
                total_len: len as u32,
            };
            front.sent += take;
            self.queued_bytes -= take;
            let last = front.sent == len;
            let msg = front.id;
            if last {
                self.messages.pop_front();
            }
            return (Payload { body, data, tail }, last.then_some(msg));
        }
        let room = config.coalesced_room();
        let mut count = 0usize;
        let mut used = 0usize;
        for m in &self.messages {
            let l = m.len();
            if l > inline || used + ENTRY_LEN_LEN + l > room || count == usize::from(u16::MAX) {
                break;
            }
            used += ENTRY_LEN_LEN + l;
            count += 1;
        }
        if count <= 1 {
            let m = self.messages.pop_front().expect("front exists");
            self.queued_bytes -= m.len();
            let body = Body::Single { msg: m.id };
            let data = if m.head.is_empty() {
                m.data
            } else {
                // Only reachable with a head on a message short enough to travel whole, which
                // `Session::send_parts` joins up front; kept correct all the same.
                let mut v = Vec::with_capacity(m.len());
                v.extend_from_slice(&m.head);
                v.extend_from_slice(&m.data);
                Bytes::from(v)
            };
            let tail = Bytes::new();
            return (Payload { body, data, tail }, Some(m.id));
        }
        let mut buf = Vec::with_capacity(used);
        let first = self.messages.front().expect("front exists").id;
        for _ in 0..count {
            let m = self.messages.pop_front().expect("counted above");
            self.queued_bytes -= m.len();
            push_entry_parts(&mut buf, &m.head, &m.data);
        }
        // The entries gained length prefixes; charge them, as the ACK releases the whole body.
        self.charged += ENTRY_LEN_LEN * count;
        let body = Body::Coalesced {
            msg: first,
            count: count as u16,
        };
        let data = Bytes::from(buf);
        let tail = Bytes::new();
        (
            Payload { body, data, tail },
            Some(first.add(count as u32 - 1)),
        )
    }
}

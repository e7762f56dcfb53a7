//! Seed 004's richer operations on a switched stream socket: receives posted ahead into the
//! program's buffers, sends that complete later, RDMA Write and Read to and from registered
//! buffers, and the completions the program polls for.
//!
//! A socket that posts a receive is in message mode from then on: each arriving Send fills
//! the oldest posted receive whole (cut to its length, `EMSGSIZE`), or waits for the next
//! one, instead of joining the byte stream; both ends then speak in messages.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use iwarp::verbs::{Region, WcOpcode, WcStatus, WorkCompletion};

/// A completion, as `struct diwarp_wc` carries it (`include/diwarp_sockets.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub opcode: Op,
    /// 0, or the errno of why it failed.
    pub status: i32,
    pub byte_len: u64,
}

/// What a completion completes (the header's `DIWARP_WC_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    Send = 0,
    Recv = 1,
    RdmaWrite = 2,
    RdmaRead = 3,
}

/// Work request ids of the program's requests, as the queue pair sees them: above every id
/// of the byte stream's own sends.
pub const USER: u64 = 1 << 63;

/// A receive the program posted: where the message goes.
pub struct Posted {
    pub buf: Arc<dyn Region>,
    pub wr_id: u64,
}

#[derive(Default)]
pub struct Extensions {
    /// A receive was posted once: arriving messages are the program's, not the stream's.
    pub message_mode: bool,
    posted: VecDeque<Posted>,
    /// Messages that came before a receive was posted for them.
    waiting: VecDeque<Vec<u8>>,
    done: VecDeque<Completion>,
    /// The program's requests in flight: the queue pair's id -> the program's id.
    in_flight: HashMap<u64, u64>,
    next: u64,
}

fn status(s: WcStatus) -> i32 {
    match s {
        WcStatus::Success => 0,
        WcStatus::LocalLengthError => libc::EMSGSIZE,
        WcStatus::FlushError | WcStatus::TransportError => libc::ECONNRESET,
    }
}

impl Extensions {
    /// The queue pair's id for the program's request `wr_id`.
    pub fn issue(&mut self, wr_id: u64) -> u64 {
        self.next += 1;
        let id = USER | self.next;
        self.in_flight.insert(id, wr_id);
        id
    }

    /// A request that was never posted after all.
    pub fn withdraw(&mut self, id: u64) {
        self.in_flight.remove(&id);
    }

    /// The queue pair completed one of the program's requests.
    pub fn completed(&mut self, wc: &WorkCompletion) {
        let Some(wr_id) = self.in_flight.remove(&wc.wr_id) else {
            return;
        };
        let opcode = match wc.opcode {
            WcOpcode::Send => Op::Send,
            WcOpcode::Recv => Op::Recv,
            WcOpcode::RdmaWrite => Op::RdmaWrite,
            WcOpcode::RdmaRead => Op::RdmaRead,
        };
        self.done.push_back(Completion {
            wr_id,
            opcode,
            status: status(wc.status),
            byte_len: wc.byte_len as u64,
        });
    }

    /// A message arrived in message mode.
    pub fn deliver(&mut self, payload: &[u8]) {
        match self.posted.pop_front() {
            Some(p) => self.fill(p, payload),
            None => self.waiting.push_back(payload.to_vec()),
        }
    }

    fn fill(&mut self, p: Posted, payload: &[u8]) {
        let n = payload.len().min(p.buf.len());
        p.buf.write_at(0, &payload[..n]);
        self.done.push_back(Completion {
            wr_id: p.wr_id,
            opcode: Op::Recv,
            status: if n < payload.len() { libc::EMSGSIZE } else { 0 },
            byte_len: payload.len() as u64,
        });
    }

    /// The program posts a receive: a message already waiting fills it at once.
    pub fn post_recv(&mut self, p: Posted) {
        self.message_mode = true;
        match self.waiting.pop_front() {
            Some(m) => self.fill(p, &m),
            None => self.posted.push_back(p),
        }
    }

    /// Up to `max` completions, oldest first.
    pub fn take(&mut self, max: usize) -> Vec<Completion> {
        let n = max.min(self.done.len());
        self.done.drain(..n).collect()
    }

    pub fn has_completions(&self) -> bool {
        !self.done.is_empty()
    }

    /// The connection broke: every posted receive completes in error.
    pub fn flush(&mut self) {
        for p in self.posted.drain(..) {
            self.done.push_back(Completion {
                wr_id: p.wr_id,
                opcode: Op::Recv,
                status: libc::ECONNRESET,
                byte_len: 0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp::verbs::VecRegion;

    fn posted(len: usize, wr_id: u64) -> (Arc<VecRegion>, Posted) {
        let r = Arc::new(VecRegion::new(len));
        let buf: Arc<dyn Region> = r.clone();
        (r, Posted { buf, wr_id })
    }

    #[test]
    fn messages_fill_posted_receives_in_order_and_wait_for_later_ones() {
        let mut e = Extensions::default();
        let (a, pa) = posted(8, 1);
        e.post_recv(pa);
        assert!(e.message_mode);
        e.deliver(b"first");
        e.deliver(b"second!");
        assert_eq!(&a.to_vec()[..5], b"first");
        let (b, pb) = posted(4, 2);
        e.post_recv(pb);
        assert_eq!(b.to_vec(), b"seco", "cut to the buffer");
        let got = e.take(8);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].wr_id, got[0].status, got[0].byte_len), (1, 0, 5));
        assert_eq!(
            (got[1].wr_id, got[1].status, got[1].byte_len),
            (2, libc::EMSGSIZE, 7)
        );
        assert!(!e.has_completions());
    }

    #[test]
    fn completions_carry_the_programs_ids_and_others_are_not_the_programs() {
        let mut e = Extensions::default();
        let id = e.issue(77);
        assert!(id & USER != 0);
        let wc = |wr_id, status| WorkCompletion {
            wr_id,
            status,
            opcode: WcOpcode::RdmaRead,
            byte_len: 9,
            src: None,
            solicited: false,
            buf: None,
        };
        e.completed(&wc(3, WcStatus::Success));
        assert!(!e.has_completions(), "the stream's own send");
        e.completed(&wc(id, WcStatus::TransportError));
        assert_eq!(
            e.take(1),
            vec![Completion {
                wr_id: 77,
                opcode: Op::RdmaRead,
                status: libc::ECONNRESET,
                byte_len: 9
            }]
        );
        let (_, p) = posted(4, 5);
        e.post_recv(p);
        e.flush();
        assert_eq!(e.take(4)[0].status, libc::ECONNRESET);
    }
}

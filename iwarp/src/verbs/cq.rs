//! The receive queue and the completion queue of one queue pair, with the slot accounting that
//! keeps both bounded: a send WR holds a slot until it is handed to the kernel (UD, RC) or
//! acknowledged (RD) when unsignaled, or until its completion is polled; a receive WR holds one
//! until its completion is polled, also while an RD queue pair has it bound to a message. The completion
//! queue therefore never holds more than `max_send_wr + max_recv_wr` entries and never grows.

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::{RecvWr, VerbsError, WcOpcode, WcStatus, WorkCompletion};

pub(crate) struct WorkQueues {
    /// Posted receives, consumed from the front in arrival order.
    pub(crate) rq: VecDeque<RecvWr>,
    cq: VecDeque<WorkCompletion>,
    max_send: usize,
    max_recv: usize,
    send_slots: usize,
    recv_cqes: usize,
    /// Receives taken off `rq` and not yet completed (RD binds them to messages).
    recv_held: usize,
}

impl WorkQueues {
    pub(crate) fn new(max_send: usize, max_recv: usize) -> Self {
        WorkQueues {
            // Grown as used: queues sized for the worst case (an MPI endpoint allows thousands
            // of sends) would mostly stay empty.
            rq: VecDeque::new(),
            cq: VecDeque::new(),
            max_send,
            max_recv,
            send_slots: 0,
            recv_cqes: 0,
            recv_held: 0,
        }
    }

    /// Bytes of the receive and completion queues.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.rq.capacity() * std::mem::size_of::<RecvWr>()
            + self.cq.capacity() * std::mem::size_of::<WorkCompletion>()
    }

    /// Takes a send slot for a new WR.
    pub(crate) fn reserve_send(&mut self) -> Result<(), VerbsError> {
        if self.send_slots >= self.max_send {
            return Err(VerbsError::QueueFull);
        }
        self.send_slots += 1;
        Ok(())
    }

    /// Gives back a slot taken for a WR that was refused after all.
    pub(crate) fn unreserve_send(&mut self) {
        self.send_slots -= 1;
    }

    /// A send WR was handed to the kernel whole.
    pub(crate) fn send_done(&mut self, wr_id: u64, len: usize, signaled: bool) {
        self.sq_done(WcOpcode::Send, wr_id, len, signaled);
    }

    /// A send WR ended in error; errors complete even when unsignaled.
    pub(crate) fn send_failed(&mut self, wr_id: u64, len: usize, status: WcStatus) {
        self.sq_failed(WcOpcode::Send, wr_id, len, status);
    }

    /// A send-queue WR of any kind (Send, RDMA Write, RDMA Read) succeeded.
    pub(crate) fn sq_done(&mut self, opcode: WcOpcode, wr_id: u64, len: usize, signaled: bool) {
        if signaled {
            self.push_send(opcode, wr_id, len, WcStatus::Success);
        } else {
            self.send_slots -= 1;
        }
    }

    /// A send-queue WR of any kind ended in error.
    pub(crate) fn sq_failed(&mut self, opcode: WcOpcode, wr_id: u64, len: usize, status: WcStatus) {
        self.push_send(opcode, wr_id, len, status);
    }

    fn push_send(&mut self, opcode: WcOpcode, wr_id: u64, byte_len: usize, status: WcStatus) {
        self.cq.push_back(WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len,
            src: None,
            solicited: false,
            buf: None,
        });
    }

    pub(crate) fn recv_space(&self) -> bool {
        self.rq.len() + self.recv_held + self.recv_cqes < self.max_recv
    }

    /// Takes the oldest posted receive for a message that will complete later.
    pub(crate) fn take_recv(&mut self) -> Option<RecvWr> {
        let wr = self.rq.pop_front()?;
        self.recv_held += 1;
        Some(wr)
    }

    /// Puts a receive taken with `take_recv` back at the head of the queue: it was posted
    /// before everything still queued.
    pub(crate) fn return_recv(&mut self, wr: RecvWr) {
        self.recv_held -= 1;
        self.rq.push_front(wr);
    }

    /// Completes a receive taken with `take_recv`.
    pub(crate) fn complete_held(
        &mut self,
        wr: RecvWr,
        status: WcStatus,
        byte_len: usize,
        src: Option<SocketAddr>,
        solicited: bool,
    ) {
        self.recv_held -= 1;
        self.complete_recv(wr, status, byte_len, src, solicited);
    }

    /// Completes a receive WR already taken off `rq`.
    pub(crate) fn complete_recv(
        &mut self,
        wr: RecvWr,
        status: WcStatus,
        byte_len: usize,
        src: Option<SocketAddr>,
        solicited: bool,
    ) {
        self.recv_cqes += 1;
        self.cq.push_back(WorkCompletion {
            wr_id: wr.wr_id,
            status,
            opcode: WcOpcode::Recv,
            byte_len,
            src,
            solicited,
            buf: Some(wr.buf),
        });
    }

    /// Completes every posted receive with `FlushError`.
    pub(crate) fn flush_recvs(&mut self) {
        while let Some(wr) = self.rq.pop_front() {
            self.complete_recv(wr, WcStatus::FlushError, 0, None, false);
        }
    }

    pub(crate) fn cq_len(&self) -> usize {
        self.cq.len()
    }

    /// Moves up to `max` completions into `out`, freeing their slots.
    pub(crate) fn pop_into(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> usize {
        let n = max.min(self.cq.len());
        if n == 0 {
            return 0;
        }
        for wc in self.cq.drain(..n) {
            match wc.opcode {
                WcOpcode::Send | WcOpcode::RdmaWrite | WcOpcode::RdmaRead => self.send_slots -= 1,
                WcOpcode::Recv => self.recv_cqes -= 1,
            }
            out.push(wc);
        }
        n
    }

    /// Sends posted and not yet completed (or whose completion is not yet polled).
    pub(crate) fn sends_outstanding(&self) -> usize {
        self.send_slots
    }

    pub(crate) fn send_slots_free(&self) -> usize {
        self.max_send - self.send_slots
    }
}

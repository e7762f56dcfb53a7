//! Links over iWARP queue pairs: UD (datagrams, split into chunks like seed 000's benchmark), RD
//! (whole messages of any size) and RC.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use iwarp::verbs::{
    AddressHandle, QueuePair, RcQp, RdQp, RecvWr, SendOpcode, SendWrOwned, UdQp, VerbsError,
    WcOpcode, WcStatus, WorkCompletion,
};

use crate::link::{check_bytes, Deadline, Link, Result};

/// Receives kept posted on a UD QP: enough for a bandwidth window of 64 KiB datagrams.
const UD_RECV_DEPTH: usize = 64;

pub struct VerbsLink<Q> {
    qp: Q,
    ah: Option<AddressHandle>,
    /// Largest message one send may carry (UD: a datagram's payload; RC: no limit).
    chunk: usize,
    completions: Vec<WorkCompletion>,
    /// Receive completions that belong to the next message.
    early: VecDeque<WorkCompletion>,
    spare: Vec<Vec<u8>>,
    timeout: Duration,
    /// Hand message buffers over (`post_send_owned`) rather than lend them (`post_send`).
    owned: bool,
}

impl VerbsLink<UdQp> {
    pub fn ud(mut qp: UdQp, ah: AddressHandle, timeout: Duration) -> Result<Self> {
        let chunk = qp.max_message();
        for i in 0..UD_RECV_DEPTH {
            qp.post_recv(RecvWr {
                wr_id: i as u64,
                buf: vec![0; chunk],
            })?;
        }
        Ok(Self::new(qp, Some(ah), chunk, timeout))
    }
}

impl VerbsLink<RdQp> {
    /// RD: whole messages; `depth` receives of `largest` bytes stay posted (their pages are
    /// only touched as far as messages reach).
    pub fn rd(
        mut qp: RdQp,
        ah: AddressHandle,
        timeout: Duration,
        largest: usize,
        depth: usize,
    ) -> Result<Self> {
        for i in 0..depth {
            qp.post_recv(RecvWr {
                wr_id: i as u64,
                buf: vec![0; largest],
            })?;
        }
        Ok(Self::new(qp, Some(ah), usize::MAX, timeout))
    }
}

impl VerbsLink<RcQp> {
    pub fn rc(qp: RcQp, timeout: Duration) -> Self {
        Self::new(qp, None, usize::MAX, timeout)
    }
}

impl<Q: QueuePair> VerbsLink<Q> {
    fn new(qp: Q, ah: Option<AddressHandle>, chunk: usize, timeout: Duration) -> Self {
        VerbsLink {
            qp,
            ah,
            chunk,
            completions: Vec::with_capacity(64),
            early: VecDeque::new(),
            spare: Vec::new(),
            timeout,
            owned: false,
        }
    }

    /// Posts sends with `post_send_owned` (no copy on RD) instead of `post_send`.
    pub fn owned_sends(mut self, owned: bool) -> Self {
        self.owned = owned;
        self
    }

    /// UD and RD keep receives posted; RC posts one per message.
    fn is_ud(&self) -> bool {
        self.ah.is_some()
    }

    fn post_one(&mut self, data: Bytes) -> Result<()> {
        let mut deadline = Deadline::new(self.timeout, "room in the send queue");
        let wr = SendWrOwned {
            wr_id: 0,
            opcode: SendOpcode::Send,
            data,
            ah: self.ah,
            signaled: false,
        };
        loop {
            let r = if self.owned {
                self.qp.post_send_owned(wr.clone())
            } else {
                self.qp.post_send(wr.borrowed())
            };
            match r {
                Ok(()) => return Ok(()),
                Err(VerbsError::QueueFull) => {}
                Err(VerbsError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
            self.completions.clear();
            self.qp.poll_cq(&mut self.completions, 64)?;
            self.keep_receives();
            deadline.check()?;
        }
    }

    /// Moves receive completions found while sending aside for the next `recv`.
    fn keep_receives(&mut self) {
        for wc in self.completions.drain(..) {
            if wc.opcode == WcOpcode::Recv {
                self.early.push_back(wc);
            }
        }
    }

    fn next_recv(&mut self, deadline: &mut Deadline) -> Result<WorkCompletion> {
        loop {
            if let Some(wc) = self.early.pop_front() {
                return Ok(wc);
            }
            self.completions.clear();
            self.qp.poll_cq(&mut self.completions, 1)?;
            self.keep_receives();
            if self.early.is_empty() {
                deadline.check()?;
            }
        }
    }
}

/// What a link reports beyond its timings: only RD has transport counters worth a line.
pub trait Counters {
    fn counters(&self) -> Option<String> {
        None
    }
}

impl Counters for UdQp {}

impl Counters for RcQp {}

impl Counters for RdQp {
    fn counters(&self) -> Option<String> {
        let s = self.stats();
        let mut line = format!(
            "datagrams sent {} received {}, retransmits {} (spurious {}, lost acks {}, timeouts {}, probes {}), \
             duplicates {}, out-of-order {}, dropped {} (crc {}), acks {}, window full {}, \
             srtt {:?}, \
             parked {}, refused {}, datagram size {}, gso sends {}, gro runs {}, send errors {}, \
             sessions with CRC32c {}",
            s.datagrams_sent,
            s.datagrams_received,
            s.retransmits,
            s.spurious_retransmits,
            s.lost_acks,
            s.timeouts,
            s.tail_probes,
            s.duplicates,
            s.out_of_order,
            s.dropped,
            s.dropped_checksum,
            s.acks_sent,
            s.window_full,
            s.srtt.unwrap_or_default(),
            s.parked,
            s.refused,
            s.max_datagram_size,
            s.gso_sends,
            s.gro_runs,
            s.send_errors,
            s.crc_peers,
        );
        if let Some(f) = self.fault_stats() {
            line += &format!(
                "; faults: dropped {} duplicated {} reordered {} delayed {} corrupted {}",
                f.dropped, f.duplicated, f.reordered, f.delayed, f.corrupted
            );
        }
        Some(line)
    }
}

impl<Q: QueuePair + Counters> Link for VerbsLink<Q> {
    fn send(&mut self, data: &Bytes) -> Result<()> {
        if data.len() <= self.chunk {
            return self.post_one(data.clone());
        }
        let mut at = 0;
        while at < data.len() {
            let end = (at + self.chunk).min(data.len());
            self.post_one(data.slice(at..end))?;
            at = end;
        }
        Ok(())
    }

    fn recv(&mut self, len: usize, expect: Option<&[u8]>) -> Result<()> {
        if !self.is_ud() {
            // RC carries the whole message in one receive, posted just before it is awaited:
            // bytes that arrive earlier wait in the TCP stream.
            let mut buf = self.spare.pop().unwrap_or_default();
            buf.resize(len, 0);
            self.qp.post_recv(RecvWr { wr_id: 0, buf })?;
        }
        let mut deadline = Deadline::new(self.timeout, "a receive completion");
        let mut got = 0;
        loop {
            let wc = self.next_recv(&mut deadline)?;
            if wc.status != WcStatus::Success {
                return Err(format!("receive completed with {:?}", wc.status).into());
            }
            let buf = wc.buf.ok_or("receive completion without its buffer")?;
            check_bytes(&buf[..wc.byte_len], expect, got)?;
            got += wc.byte_len;
            if self.is_ud() {
                self.qp.post_recv(RecvWr { wr_id: 0, buf })?;
            } else {
                self.spare.push(buf);
            }
            if got >= len {
                return if got == len {
                    Ok(())
                } else {
                    Err(format!("message of {got} bytes, expected {len}").into())
                };
            }
        }
    }

    fn flush(&mut self) -> Result<()> {
        let all = self.qp.config().max_send_wr;
        let mut deadline = Deadline::new(self.timeout, "sends to complete");
        while self.qp.send_queue_space() < all {
            self.completions.clear();
            self.qp.poll_cq(&mut self.completions, 64)?;
            self.keep_receives();
            deadline.check()?;
        }
        Ok(())
    }

    fn poll(&mut self) -> Result<()> {
        self.completions.clear();
        self.qp.poll_cq(&mut self.completions, 64)?;
        self.keep_receives();
        Ok(())
    }

    fn counters(&self) -> Option<String> {
        self.qp.counters()
    }
}

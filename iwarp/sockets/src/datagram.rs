//! Datagrams over an RD queue pair: each `send` is one message to the socket's peer,
//! acknowledged and delivered in order, each `recv` takes one message whole (cut to the
//! buffer, the rest dropped, as UDP does). Unlike UDP nothing is lost or reordered.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use iwarp::verbs::{
    AddressHandle, QpState, QueuePair, RdQp, RdReceiver, SendOpcode, SendWr, VerbsError, WcStatus,
    WorkCompletion,
};

use crate::conduit::{Conduit, Got};
use crate::handshake::{self, HELLO_LEN};
use crate::readiness::Ready;

/// The longest datagram: as for a stream's write, a larger one is refused (`EMSGSIZE`).
pub const MAX_DATAGRAM: usize = 1 << 20;

/// Arriving messages, whole; and the peer's hellos, which the switch's exchange may still
/// send when our answer was lost.
struct Messages {
    queue: VecDeque<Vec<u8>>,
    bytes: usize,
    arrivals: u64,
    /// Our and the peer's QP numbers.
    qpns: (u32, u32),
    answer: Option<[u8; HELLO_LEN]>,
}

impl RdReceiver for Messages {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        // In order only: the socket promises the peer's order.
        false
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        self.bytes += payload.len();
        self.queue.push_back(payload.to_vec());
        self.arrivals += 1;
    }
    fn max_message(&self) -> usize {
        MAX_DATAGRAM
    }
    fn stray(&mut self, _: Option<SocketAddr>, datagram: &[u8]) -> bool {
        let (ours, peers) = self.qpns;
        self.answer = handshake::answer(ours, peers, datagram).or(self.answer);
        self.answer.is_some()
    }
}

pub struct Datagram {
    qp: RdQp,
    peer: AddressHandle,
    /// The program's socket, for answers to the peer's hellos (the queue pair sends only its
    /// own datagrams).
    answers: UdpSocket,
    inbox: Messages,
    wcs: Vec<WorkCompletion>,
    next_wr: u64,
    /// Sends completed so far (RD completes them in order, once acknowledged).
    done: u64,
    failed: Option<i32>,
    error_taken: bool,
    drains: u64,
    shut_read: bool,
    shut_write: bool,
}

impl Datagram {
    /// `qp` (QP number `qpn`) is attached to the program's socket, connected to `peer`;
    /// `answers` is the same socket.
    pub fn new(qp: RdQp, peer: AddressHandle, qpn: u32, answers: UdpSocket) -> Datagram {
        Datagram {
            qp,
            peer,
            answers,
            inbox: Messages {
                queue: VecDeque::new(),
                bytes: 0,
                arrivals: 0,
                qpns: (qpn, peer.qpn),
                answer: None,
            },
            wcs: Vec::new(),
            next_wr: 1,
            done: 0,
            failed: None,
            error_taken: false,
            drains: 1,
            shut_read: false,
            shut_write: false,
        }
    }

    fn pending(&self) -> bool {
        self.done + 1 < self.next_wr
    }

    /// Moves what came and what waits; whether the queue pair still works.
    fn progress(&mut self) -> bool {
        let was_pending = self.pending();
        loop {
            self.wcs.clear();
            let n = self.qp.poll_cq_with(&mut self.inbox, &mut self.wcs, 64);
            for wc in &self.wcs {
                if wc.status == WcStatus::Success {
                    self.done = self.done.max(wc.wr_id);
                } else if self.failed.is_none() {
                    // The peer never acknowledged: gone, or not running the library.
                    self.failed = Some(libc::ECONNREFUSED);
                }
            }
            if !matches!(n, Ok(64)) {
                break;
            }
        }
        if let Some(a) = self.inbox.answer.take() {
            // Lost as any datagram may be: the peer asks again.
            let _ = self.answers.send(&a);
        }
        if was_pending && !self.pending() {
            self.drains += 1;
        }
        self.failed.is_none() && self.qp.state() == QpState::Rts
    }

    fn broken(&self) -> io::Error {
        io::Error::from_raw_os_error(self.failed.unwrap_or(libc::ECONNREFUSED))
    }
}

impl Conduit for Datagram {
    fn try_read(&mut self, buf: &mut [u8], peek: bool) -> io::Result<Got> {
        if self.shut_read {
            return Ok(Got { copied: 0, len: 0 });
        }
        let live = self.progress();
        if let Some(m) = self.inbox.queue.front() {
            let n = buf.len().min(m.len());
            buf[..n].copy_from_slice(&m[..n]);
            let len = m.len();
            if !peek {
                self.inbox.bytes -= len;
                self.inbox.queue.pop_front();
            }
            return Ok(Got { copied: n, len });
        }
        if !live {
            return Err(self.broken());
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    fn try_write(&mut self, buf: &[u8]) -> io::Result<(usize, u64)> {
        if self.shut_write {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if buf.len() > MAX_DATAGRAM {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        if !self.progress() {
            return Err(self.broken());
        }
        if self.qp.send_queue_space() == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let wr_id = self.next_wr;
        self.next_wr += 1;
        self.qp
            .post_send(SendWr {
                wr_id,
                opcode: SendOpcode::Send,
                data: buf,
                ah: Some(self.peer),
                signaled: true,
            })
            .map_err(|e| match e {
                VerbsError::QueueFull => io::ErrorKind::WouldBlock.into(),
                _ => io::Error::from_raw_os_error(libc::EIO),
            })?;
        self.progress();
        Ok((buf.len(), wr_id))
    }

    /// A datagram has left once the queue pair holds it: as UDP's `send`, it does not wait
    /// for the peer.
    fn sent(&mut self, _: u64) -> io::Result<bool> {
        Ok(true)
    }

    fn flush(&mut self, until: Instant, wait_fd: &mut dyn FnMut(i16, Duration) -> bool) {
        while self.progress() && self.pending() {
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                return;
            };
            let wait = self.next_wakeup().map_or(left, |t| {
                t.saturating_duration_since(Instant::now()).min(left)
            });
            let wait = wait.min(Duration::from_millis(100));
            if !wait_fd(libc::POLLIN, wait) {
                return;
            }
        }
    }

    fn shutdown(&mut self, read: bool, write: bool) -> io::Result<()> {
        self.shut_read |= read;
        self.shut_write |= write;
        Ok(())
    }

    fn ready(&mut self) -> Ready {
        let live = self.progress();
        let room = self.qp.send_queue_space() > 0;
        Ready {
            readable: !self.inbox.queue.is_empty() || self.shut_read || !live,
            arrivals: self.inbox.arrivals + u64::from(!live),
            writable: room || !live,
            drains: self.drains,
            rdhup: false,
            hup: false,
            error: !live && !self.error_taken,
            pending: self.pending(),
        }
    }

    fn take_error(&mut self) -> i32 {
        if self.error_taken || self.progress() {
            return 0;
        }
        self.error_taken = true;
        self.failed.unwrap_or(libc::ECONNREFUSED)
    }

    fn readable_bytes(&mut self) -> usize {
        self.progress();
        // As UDP's FIONREAD: the next datagram's length.
        self.inbox.queue.front().map_or(0, Vec::len)
    }

    fn also_wait_for(&self) -> i16 {
        0
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.qp.next_deadline()
    }

    fn tick(&mut self) {
        self.progress();
    }
}

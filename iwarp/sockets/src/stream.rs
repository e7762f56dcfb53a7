//! A byte stream over an RC queue pair: each `write` is one Send (at most [`MAX_SEND`] bytes
//! of it), and the bytes of arriving messages queue up for `read` in order. Message
//! boundaries do not show, as over TCP.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use iwarp::verbs::{
    QpState, QueuePair, RcQp, RdReceiver, SendOpcode, SendWr, VerbsError, WcStatus, WorkCompletion,
};

/// Most bytes one `write` sends: a larger write returns a short count, as a socket's does.
pub const MAX_SEND: usize = 1 << 20;

/// Longest a blocked call waits between looks at the connection.
const WAIT: Duration = Duration::from_millis(100);

/// Arriving messages, appended to the byte queue.
struct Append<'a>(&'a mut VecDeque<u8>);

impl RdReceiver for Append<'_> {
    fn early(&mut self, _: SocketAddr, payload: &[u8], _: bool) -> bool {
        self.0.extend(payload);
        true
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        self.0.extend(payload);
    }
    fn max_message(&self) -> usize {
        u32::MAX as usize
    }
}

pub struct Stream {
    /// The caller's descriptor was in non-blocking mode when it switched (the queue pair's
    /// duplicate shares its file, which the queue pair sets non-blocking).
    pub nonblock: bool,
    qp: RcQp,
    rx: VecDeque<u8>,
    wcs: Vec<WorkCompletion>,
    next_wr: u64,
    /// The last send that completed (sends complete in order).
    sent: u64,
}

fn verbs_err(e: &VerbsError) -> io::Error {
    match e {
        VerbsError::PeerClosed => io::Error::from(io::ErrorKind::BrokenPipe),
        _ => io::Error::from(io::ErrorKind::ConnectionReset),
    }
}

impl Stream {
    pub fn new(qp: RcQp) -> Stream {
        Stream {
            nonblock: false,
            qp,
            rx: VecDeque::new(),
            wcs: Vec::new(),
            next_wr: 1,
            sent: 0,
        }
    }

    /// Reads what has come off the connection into the byte queue; whether the connection
    /// still works.
    fn progress(&mut self) -> bool {
        loop {
            self.wcs.clear();
            let n = self
                .qp
                .poll_cq_with(&mut Append(&mut self.rx), &mut self.wcs, 64);
            for wc in &self.wcs {
                if wc.status == WcStatus::Success {
                    self.sent = self.sent.max(wc.wr_id);
                }
            }
            if !matches!(n, Ok(64)) {
                return self.qp.state() == QpState::Rts;
            }
        }
    }

    /// Waits until the connection's socket is ready for `events`, at most [`WAIT`].
    fn wait(&self, events: i16) {
        if let Some(fd) = self.qp.socket() {
            let mut p = libc_pollfd(fd.as_raw_fd(), events);
            crate::ffi::poll_one(&mut p, WAIT);
        }
    }

    /// Why a write cannot go: the connection's failure, or its end.
    fn broken(&self) -> io::Error {
        self.qp
            .last_error()
            .map_or(io::ErrorKind::BrokenPipe.into(), verbs_err)
    }

    /// Bytes into `buf`: 0 at the end of the stream; `WouldBlock` if `nonblock` and none have
    /// come.
    pub fn read(&mut self, buf: &mut [u8], nonblock: bool) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let live = self.progress();
            if !self.rx.is_empty() {
                let n = buf.len().min(self.rx.len());
                for (d, s) in buf.iter_mut().zip(self.rx.drain(..n)) {
                    *d = s;
                }
                return Ok(n);
            }
            if !live {
                return match self.qp.last_error() {
                    None | Some(VerbsError::PeerClosed) => Ok(0),
                    Some(e) => Err(verbs_err(e)),
                };
            }
            if nonblock {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.wait(POLLIN);
        }
    }

    /// Sends the first [`MAX_SEND`] bytes of `buf` at most, as one message; returns once they
    /// are in the kernel.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if !self.progress() {
            return Err(self.broken());
        }
        let n = buf.len().min(MAX_SEND);
        let wr_id = self.next_wr;
        self.next_wr += 1;
        self.qp
            .post_send(SendWr {
                wr_id,
                opcode: SendOpcode::Send,
                data: &buf[..n],
                ah: None,
                signaled: true,
            })
            .map_err(|e| verbs_err(&e))?;
        // An RC send completes once its last byte is in the kernel: done then, even if the
        // peer's end of stream came meanwhile.
        loop {
            if self.sent >= wr_id {
                return Ok(n);
            }
            if !self.progress() && self.sent < wr_id {
                return Err(self.broken());
            }
            if self.sent < wr_id {
                self.wait(POLLOUT);
            }
        }
    }
}

const POLLIN: i16 = libc::POLLIN;
const POLLOUT: i16 = libc::POLLOUT;

fn libc_pollfd(fd: i32, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

//! A byte stream over an RC queue pair: each `write` (at most [`MAX_SEND`] bytes of it) goes
//! as Sends of one FPDU each, and the bytes of arriving messages go to a waiting `read`, or
//! queue up for the next, in order. Message boundaries do not show, as over TCP.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{
    Access, QpState, QueuePair, RcQp, RdmaReadWr, RdmaWriteWr, Region, SendOpcode, SendWr, Stag,
    VerbsError, WcStatus, WorkCompletion,
};

use crate::conduit::{Conduit, Got};
use crate::extensions::{Completion, Extensions, Posted, USER};
use crate::inbox::{Filling, Inbox};
use crate::readiness::Ready;

/// Unread bytes past which the stream stops reading the socket.
const INBOX_MAX: usize = 1 << 20;

/// Most bytes one `write` sends: a larger write returns a short count, as a socket's does.
pub const MAX_SEND: usize = 1 << 20;

/// What the program shut down on its end.
#[derive(Debug, Default, Clone, Copy)]
struct Shut {
    read: bool,
    write: bool,
}

/// The sends posted and how far they have gone.
struct Sends {
    wcs: Vec<WorkCompletion>,
    next_wr: u64,
    /// The last send that completed (sends complete in order).
    done: u64,
    /// How many times the last waiting send completed.
    drains: u64,
}

impl Sends {
    fn pending(&self) -> bool {
        self.done + 1 < self.next_wr
    }
}

pub struct Stream {
    qp: RcQp,
    inbox: Inbox,
    sends: Sends,
    shut: Shut,
    ext: Extensions,
    /// Regions registered on the queue pair.
    regions: usize,
    /// `SO_ERROR` reported the failure already.
    error_taken: bool,
    /// The connection's end was counted as an arrival.
    end_noted: bool,
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
            qp,
            inbox: Inbox::default(),
            sends: Sends {
                wcs: Vec::new(),
                next_wr: 1,
                done: 0,
                drains: 1,
            },
            shut: Shut::default(),
            ext: Extensions::default(),
            regions: 0,
            error_taken: false,
            end_noted: false,
        }
    }

    /// Moves what the connection has for us: arriving messages into the inbox, waiting bytes
    /// of sends into the kernel. Whether the connection still works.
    fn progress(&mut self) -> bool {
        self.progress_into(&mut []).0
    }

    /// As [`Stream::progress`], with what arrives going into `target` first while the inbox
    /// is empty; also how many bytes went there.
    fn progress_into(&mut self, target: &mut [u8]) -> (bool, usize) {
        let was_pending = self.sends.pending();
        // Bytes the program has not read yet stay in the kernel, so that TCP holds the peer
        // back as it would for a plain socket. With memory registered the socket must be
        // read (RDMA traffic needs no read call to land).
        let hold_back = target.is_empty() && self.inbox.len() >= INBOX_MAX && self.regions == 0;
        let mut fill = Filling {
            inbox: &mut self.inbox,
            target,
            filled: 0,
            ext: Some(&mut self.ext),
        };
        loop {
            self.sends.wcs.clear();
            let n = if hold_back {
                // No receive is posted: sends move, nothing is read.
                self.qp.poll_cq(&mut self.sends.wcs, 64)
            } else {
                self.qp.poll_cq_with(&mut fill, &mut self.sends.wcs, 64)
            };
            for wc in &self.sends.wcs {
                if wc.wr_id & USER != 0 {
                    if let Some(ext) = fill.ext.as_deref_mut() {
                        ext.completed(wc);
                    }
                } else if wc.status == WcStatus::Success {
                    self.sends.done = self.sends.done.max(wc.wr_id);
                }
            }
            if !matches!(n, Ok(64)) {
                break;
            }
        }
        let filled = fill.filled;
        if was_pending && !self.sends.pending() {
            self.sends.drains += 1;
        }
        let live = self.qp.state() == QpState::Rts;
        if !live && !self.end_noted {
            self.end_noted = true;
            self.inbox.note_arrival();
            self.ext.flush();
        }
        (live, filled)
    }

    /// Why a write cannot go: the connection's failure, or its end.
    fn broken(&self) -> io::Error {
        self.qp
            .last_error()
            .map_or(io::ErrorKind::BrokenPipe.into(), verbs_err)
    }

    fn post(&mut self, data: &[u8]) -> io::Result<u64> {
        let wr_id = self.sends.next_wr;
        self.sends.next_wr += 1;
        self.qp
            .post_send(SendWr {
                wr_id,
                opcode: SendOpcode::Send,
                data,
                ah: None,
                signaled: true,
            })
            .map_err(|e| verbs_err(&e))?;
        self.progress();
        Ok(wr_id)
    }
}

/// A refused request's errno.
fn post_errno(e: &VerbsError) -> io::Error {
    io::Error::from_raw_os_error(match e {
        VerbsError::QueueFull => libc::EAGAIN,
        VerbsError::InvalidArgument(_) | VerbsError::MessageTooLarge { .. } => libc::EINVAL,
        _ => libc::ECONNRESET,
    })
}

fn stag(raw: u32) -> io::Result<Stag> {
    Stag::from_raw(raw).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The extensions (`extensions`): each posts and returns; what it started completes later,
/// in [`Stream::completions`].
impl Stream {
    pub fn register(&mut self, region: Arc<dyn Region>, access: Access) -> io::Result<u32> {
        let stag = self
            .qp
            .register(region, access)
            .map_err(|e| post_errno(&e))?;
        self.regions += 1;
        Ok(stag.into())
    }

    pub fn deregister(&mut self, raw: u32) -> io::Result<()> {
        self.qp.deregister(stag(raw)?).map_err(|e| post_errno(&e))?;
        self.regions -= 1;
        Ok(())
    }

    /// A Send of `data` (copied before this returns), completed once in the kernel.
    pub fn post_send(&mut self, data: &[u8], wr_id: u64) -> io::Result<()> {
        let id = self.ext.issue(wr_id);
        let r = self.qp.post_send(SendWr {
            wr_id: id,
            opcode: SendOpcode::Send,
            data,
            ah: None,
            signaled: true,
        });
        self.posted(id, r.map_err(|e| post_errno(&e)))
    }

    /// A receive into `buf`, completed when a message fills it.
    pub fn post_recv(&mut self, buf: Arc<dyn Region>, wr_id: u64) {
        self.ext.post_recv(Posted { buf, wr_id });
    }

    /// An RDMA Write of `data` (copied before this returns) to the peer's region.
    pub fn rdma_write(
        &mut self,
        data: &[u8],
        remote: u32,
        offset: u64,
        wr_id: u64,
    ) -> io::Result<()> {
        let id = self.ext.issue(wr_id);
        let r = stag(remote).and_then(|remote_stag| {
            let wr = RdmaWriteWr {
                wr_id: id,
                data,
                remote_stag,
                remote_offset: offset,
                signaled: true,
            };
            self.qp.post_rdma_write(wr).map_err(|e| post_errno(&e))
        });
        self.posted(id, r)
    }

    /// An RDMA Read of `len` bytes of the peer's region into this end's region `local`.
    pub fn rdma_read(
        &mut self,
        (local, local_offset): (u32, u64),
        len: usize,
        (remote, remote_offset): (u32, u64),
        wr_id: u64,
    ) -> io::Result<()> {
        let id = self.ext.issue(wr_id);
        let r = stag(local).and_then(|local_stag| {
            let wr = RdmaReadWr {
                wr_id: id,
                local_stag,
                local_offset,
                len,
                remote_stag: stag(remote)?,
                remote_offset,
            };
            self.qp.post_rdma_read(wr).map_err(|e| post_errno(&e))
        });
        self.posted(id, r)
    }

    fn posted(&mut self, id: u64, r: io::Result<()>) -> io::Result<()> {
        match r {
            Ok(()) => {
                self.progress();
                Ok(())
            }
            Err(e) => {
                self.ext.withdraw(id);
                Err(e)
            }
        }
    }

    /// Up to `max` completions, after moving what the connection has.
    pub fn completions(&mut self, max: usize) -> Vec<Completion> {
        self.progress();
        self.ext.take(max)
    }
}

impl Conduit for Stream {
    /// Bytes into `buf` (left in the stream if `peek`): 0 at the end of the stream,
    /// `WouldBlock` if none have come.
    fn try_read(&mut self, buf: &mut [u8], peek: bool) -> io::Result<Got> {
        let nothing = Got { copied: 0, len: 0 };
        if buf.is_empty() || self.shut.read {
            return Ok(nothing);
        }
        let live = if self.inbox.is_empty() && !peek {
            let (live, n) = self.progress_into(buf);
            if n > 0 {
                return Ok(Got { copied: n, len: n });
            }
            live
        } else {
            self.progress()
        };
        if !self.inbox.is_empty() {
            let n = self.inbox.take(buf, peek);
            return Ok(Got { copied: n, len: n });
        }
        if self.inbox.ended() {
            return Ok(nothing);
        }
        if !live {
            return match self.qp.last_error() {
                None | Some(VerbsError::PeerClosed) => Ok(nothing),
                Some(e) => Err(verbs_err(e)),
            };
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// Posts the first [`MAX_SEND`] bytes of `buf` at most, or `WouldBlock`
    /// while an earlier one still waits to go; returns how many. The bytes are the stream's
    /// once posted: a blocking caller then waits for [`Stream::sent`].
    fn try_write(&mut self, buf: &[u8]) -> io::Result<(usize, u64)> {
        if self.shut.write {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if !self.progress() {
            return Err(self.broken());
        }
        if self.sends.pending() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(MAX_SEND);
        if n == 0 {
            return Ok((0, self.sends.done));
        }
        // One message per FPDU: the peer then hands each over from where it lies in its
        // decoder, without joining segments first.
        let seg = self.qp.settings().map_or(n, |s| s.segment_payload).max(1);
        let mut wr_id = 0;
        for piece in buf[..n].chunks(seg) {
            wr_id = self.post(piece)?;
        }
        Ok((n, wr_id))
    }

    /// Whether send `wr_id` is in the kernel: `Ok(true)`, or not yet, or the connection
    /// failed first. A send that completed is done even if the peer's end came meanwhile.
    fn sent(&mut self, wr_id: u64) -> io::Result<bool> {
        if self.sends.done >= wr_id {
            return Ok(true);
        }
        if !self.progress() && self.sends.done < wr_id {
            return Err(self.broken());
        }
        Ok(self.sends.done >= wr_id)
    }

    /// Waits (blocking, as a kernel socket's close does not) until what was written is in the
    /// kernel, the connection fails, or `until`.
    fn flush(&mut self, until: Instant, wait: &mut dyn FnMut(i16, Duration) -> bool) {
        while self.progress() && self.sends.pending() {
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                return;
            };
            // A signal ends the wait, as it ends a lingering close.
            if !wait(libc::POLLOUT, left.min(Duration::from_millis(100))) {
                return;
            }
        }
    }

    /// `shutdown(2)` on the program's end. The end of this direction is an empty message, so
    /// the other direction goes on (a TCP FIN would end the MPA connection for both).
    fn shutdown(&mut self, read: bool, write: bool) -> io::Result<()> {
        if read {
            self.shut.read = true;
        }
        if write && !self.shut.write {
            if !self.progress() {
                return Err(io::Error::from_raw_os_error(libc::ENOTCONN));
            }
            self.post(&[])?;
            self.shut.write = true;
        }
        Ok(())
    }

    /// The state `poll`, `select` and `epoll` report, after moving what the connection has.
    fn ready(&mut self) -> Ready {
        let live = self.progress();
        let failed = !live && !matches!(self.qp.last_error(), None | Some(VerbsError::PeerClosed));
        let pending = live && self.sends.pending();
        Ready {
            readable: !self.inbox.is_empty()
                || self.inbox.ended()
                || self.shut.read
                || !live
                || self.ext.has_completions(),
            arrivals: self.inbox.arrivals(),
            writable: !pending,
            drains: self.sends.drains,
            rdhup: self.inbox.ended() || !live,
            hup: !live,
            error: failed && !self.error_taken,
            pending,
        }
    }

    /// `SO_ERROR`: the connection's failure as an errno, once; 0 if none (or told already).
    fn take_error(&mut self) -> i32 {
        if self.error_taken || self.progress() {
            return 0;
        }
        match self.qp.last_error() {
            None | Some(VerbsError::PeerClosed) => 0,
            Some(_) => {
                self.error_taken = true;
                libc::ECONNRESET
            }
        }
    }

    /// Bytes a read would return now (`FIONREAD`).
    fn readable_bytes(&mut self) -> usize {
        self.progress();
        self.inbox.len()
    }

    /// The poll events a blocked call waits for besides its own: sends that wait to go need
    /// the socket writable.
    fn also_wait_for(&self) -> i16 {
        if self.sends.pending() {
            libc::POLLOUT
        } else {
            0
        }
    }
}

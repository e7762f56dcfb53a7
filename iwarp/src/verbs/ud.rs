//! UD queue pairs: datagram-iWARP over one UDP socket (seed 000 §III).
//!
//! A send is one untagged DDP Send segment per datagram (L = 1, MO = 0, the QP's own MSN, the
//! destination QP number in the queue number), gathered as `[header, payload, CRC]` with one
//! `sendmsg`: the payload is never copied.
//!
//! A receive scatters one datagram with one `recvmsg` into `[header scratch | posted buffer |
//! tail]`. The header lands in the scratch, the payload in the posted buffer; the 4-byte CRC
//! trailer lands right after the payload, inside the posted buffer when it has room, otherwise
//! in the tail. The tail is as large as a datagram can be, so even a datagram too long for the
//! posted buffer arrives whole and its CRC is checked before it is reported as a length error;
//! nothing is written past the posted buffer's length. A datagram that fails any check goes to
//! the error queue and leaves the posted receive in place.

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::socket::SockaddrStorage;

use super::cq::WorkQueues;
use super::dgram::DatagramSocket;
use super::fault::{FaultConfig, FaultStats};
use super::io::{self, Scattered};
use super::{SendOpcode, SendWr, VerbsError, WcStatus};
use crate::crc;
use crate::wire::datagram::{self, CRC_LEN, MAX_DATAGRAM, MAX_QPN, MIN_DATAGRAM};
use crate::wire::ddp::{header_len_for, Placement, UNTAGGED_HEADER_LEN};
use crate::wire::rdmap::{Opcode, SegmentRepr};
use crate::wire::Error as WireError;

/// Largest UD message: a datagram holds the untagged header, the payload and the CRC.
pub const UD_MAX_PAYLOAD: usize = MAX_DATAGRAM - UNTAGGED_HEADER_LEN - CRC_LEN;

/// Largest UDP payload at all (IPv6 without jumbograms); the scatter always has room for it.
const MAX_UDP_PAYLOAD: usize = 65527;

/// Error queue entries kept; later ones are only counted.
const ERROR_QUEUE_DEPTH: usize = 256;

/// Datagrams looked at per poll that complete nothing (errors), so garbage cannot stall a poll.
const ERROR_BUDGET: usize = 64;

/// What was wrong with a datagram that was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UdErrorKind {
    /// Shorter than its header plus the CRC, or longer than any datagram can be.
    BadLength,
    /// The CRC trailer does not match.
    BadCrc { computed: u32, received: u32 },
    /// The header does not decode.
    Decode(WireError),
    /// A well-formed segment this queue pair does not take: tagged, not a Send, or not a whole
    /// message (L = 0 or MO ≠ 0).
    Unsupported(Opcode),
    /// Addressed to another queue pair (or another RDMAP queue than Send).
    WrongQpn { qpn: u32, queue: u32 },
}

/// One UD error queue entry (seed 000 §III-C: an error queue replaces the terminate queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorEvent {
    pub kind: UdErrorKind,
    /// Who sent the datagram.
    pub src: Option<SocketAddr>,
    /// The message sequence number, when the header decoded.
    pub msn: Option<u32>,
    /// The datagram's length.
    pub len: usize,
}

/// A datagram the kernel would not take yet, copied so the caller's buffer is free.
struct Pending {
    dst: SockaddrStorage,
    datagram: Vec<u8>,
    wr_id: u64,
    len: usize,
    signaled: bool,
}

pub(crate) struct UdPath {
    sock: DatagramSocket,
    local: SocketAddr,
    crc: bool,
    next_msn: u32,
    scratch: [u8; UNTAGGED_HEADER_LEN],
    tail: Box<[u8]>,
    errors: VecDeque<ErrorEvent>,
    error_count: u64,
    backlog: VecDeque<Pending>,
}

impl UdPath {
    pub(crate) fn new(
        socket: UdpSocket,
        crc: bool,
        faults: Option<&FaultConfig>,
    ) -> Result<Self, VerbsError> {
        let sock = DatagramSocket::new(socket, faults)?;
        let local = sock.socket().local_addr()?;
        Ok(UdPath {
            sock,
            local,
            crc,
            next_msn: 1,
            scratch: [0; UNTAGGED_HEADER_LEN],
            tail: vec![0; MAX_UDP_PAYLOAD].into_boxed_slice(),
            errors: VecDeque::with_capacity(ERROR_QUEUE_DEPTH),
            error_count: 0,
            backlog: VecDeque::new(),
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub(crate) fn pop_error(&mut self) -> Option<ErrorEvent> {
        self.errors.pop_front()
    }

    pub(crate) fn fault_stats(&self) -> Option<FaultStats> {
        self.sock.fault_stats()
    }

    pub(crate) fn next_fault_release(&self) -> Option<Instant> {
        self.sock.next_fault_release()
    }

    /// Bytes of buffer storage held (scatter tail, send backlog, datagrams the fault layer
    /// holds).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.tail.len()
            + self.sock.held_bytes()
            + self
                .backlog
                .iter()
                .map(|p| p.datagram.capacity())
                .sum::<usize>()
    }

    pub(crate) fn error_count(&self) -> u64 {
        self.error_count
    }

    pub(crate) fn post_send(
        &mut self,
        q: &mut WorkQueues,
        wr: &SendWr<'_>,
    ) -> Result<(), VerbsError> {
        let ah = wr.ah.ok_or(VerbsError::MissingAddressHandle)?;
        if ah.qpn > MAX_QPN {
            return Err(VerbsError::InvalidArgument(
                "address handle QPN above 2^30 - 1".into(),
            ));
        }
        if wr.data.len() > UD_MAX_PAYLOAD {
            return Err(VerbsError::MessageTooLarge {
                len: wr.data.len(),
                max: UD_MAX_PAYLOAD,
            });
        }
        q.reserve_send()?;
        let opcode = match wr.opcode {
            SendOpcode::Send => Opcode::Send,
            SendOpcode::SendSolicited => Opcode::SendSolicited,
        };
        let qn = datagram::qn_for(ah.qpn, opcode.queue());
        let seg = SegmentRepr::untagged(opcode, true, qn, self.next_msn, 0);
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        let hl = match seg.emit(&mut header) {
            Ok(hl) => hl,
            Err(e) => {
                q.unreserve_send();
                return Err(e.into());
            }
        };
        self.next_msn = self.next_msn.wrapping_add(1);
        let header = &header[..hl];
        let trailer = datagram::trailer(self.crc, &[header, wr.data]);
        let dst = SockaddrStorage::from(ah.addr);
        if self.backlog.is_empty() {
            let iov = [
                IoSlice::new(header),
                IoSlice::new(wr.data),
                IoSlice::new(&trailer),
            ];
            match self.sock.send(&iov, &dst) {
                Ok(_) => {
                    q.send_done(wr.wr_id, wr.data.len(), wr.signaled);
                    return Ok(());
                }
                Err(Errno::EAGAIN | Errno::ENOBUFS) => {}
                Err(e) => {
                    q.unreserve_send();
                    return Err(e.into());
                }
            }
        }
        self.backlog.push_back(Pending {
            dst,
            datagram: [header, wr.data, &trailer].concat(),
            wr_id: wr.wr_id,
            len: wr.data.len(),
            signaled: wr.signaled,
        });
        Ok(())
    }

    /// Sends what the kernel refused earlier, in order, until it refuses again.
    fn flush_backlog(&mut self, q: &mut WorkQueues) {
        while let Some(p) = self.backlog.front() {
            let iov = [IoSlice::new(&p.datagram)];
            match self.sock.send(&iov, &p.dst) {
                Ok(_) => q.send_done(p.wr_id, p.len, p.signaled),
                Err(Errno::EAGAIN | Errno::ENOBUFS) => return,
                // A datagram the network refuses is lost like any other UD datagram; its WR
                // fails so the caller hears of it.
                Err(_) => q.send_failed(p.wr_id, p.len, WcStatus::TransportError),
            }
            self.backlog.pop_front();
        }
    }

    /// Completes every WR still waiting for the kernel with `FlushError`.
    pub(crate) fn flush_sends(&mut self, q: &mut WorkQueues) {
        for p in self.backlog.drain(..) {
            q.send_failed(p.wr_id, p.len, WcStatus::FlushError);
        }
    }

    /// Sends any backlog, then receives until one receive completes, the socket is empty, no
    /// receive is posted, or the error budget is spent. Stopping after one completion saves the
    /// `recvmsg` that would only say "empty" on the latency-critical path.
    pub(crate) fn progress(&mut self, q: &mut WorkQueues, qpn: u32) -> Result<(), VerbsError> {
        if self.sock.faulty() {
            self.sock.release_faults(Instant::now());
        }
        if !self.backlog.is_empty() {
            self.flush_backlog(q);
        }
        let fd = self.sock.fd();
        for _ in 0..ERROR_BUDGET {
            let Some(wr) = q.rq.front_mut() else {
                return Ok(());
            };
            let posted = wr.buf.len();
            let tail_len = (MAX_UDP_PAYLOAD - UNTAGGED_HEADER_LEN)
                .saturating_sub(posted)
                .max(CRC_LEN);
            let mut iov = [
                IoSliceMut::new(&mut self.scratch),
                IoSliceMut::new(&mut wr.buf[..]),
                IoSliceMut::new(&mut self.tail[..tail_len]),
            ];
            let got = match io::recv_scatter(fd, &mut iov) {
                Ok(got) => got,
                Err(Errno::EAGAIN) => return Ok(()),
                // ICMP errors reported on the socket (with IP_RECVERR, or after a connect by
                // the caller) concern earlier sends to somebody; UD does not care.
                Err(Errno::ECONNREFUSED | Errno::EHOSTUNREACH | Errno::ENETUNREACH) => continue,
                Err(e) => return Err(e.into()),
            };
            let stored = got.len.min(UNTAGGED_HEADER_LEN + posted + tail_len);
            let view = Scattered::new([&self.scratch, &wr.buf, &self.tail[..tail_len]], stored);
            match check(&view, got.len, self.crc, qpn) {
                Ok((payload_len, solicited)) => {
                    let status = if payload_len <= posted {
                        WcStatus::Success
                    } else {
                        WcStatus::LocalLengthError
                    };
                    if let Some(wr) = q.rq.pop_front() {
                        q.complete_recv(wr, status, payload_len, got.src, solicited);
                    }
                    return Ok(());
                }
                Err((kind, msn)) => {
                    self.error_count += 1;
                    if self.errors.len() < ERROR_QUEUE_DEPTH {
                        self.errors.push_back(ErrorEvent {
                            kind,
                            src: got.src,
                            msn,
                            len: got.len,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// Validates a received datagram of `len` bytes, as [`datagram::parse`] does but over the
/// scattered pieces: length, then CRC (before any header field is trusted), then the header,
/// then what a UD queue pair accepts. Returns the payload length and the solicited flag, or the
/// error and the MSN if the header decoded.
fn check(
    view: &Scattered<'_>,
    len: usize,
    crc_enabled: bool,
    qpn: u32,
) -> Result<(usize, bool), (UdErrorKind, Option<u32>)> {
    let need = match view.pieces(0..len.min(1))[0].first() {
        Some(&control) => header_len_for(control) + CRC_LEN,
        None => MIN_DATAGRAM,
    };
    if len < need || len > view.len() {
        return Err((UdErrorKind::BadLength, None));
    }
    let body = len - CRC_LEN;
    if crc_enabled {
        let mut received = [0u8; CRC_LEN];
        view.copy_out(body..len, &mut received);
        let received = crc::from_wire(received);
        let computed = crc::crc32c_parts(&view.pieces(0..body));
        if computed != received {
            let msn = header_msn(view, body);
            return Err((UdErrorKind::BadCrc { computed, received }, msn));
        }
    }
    // The scratch holds exactly the first 18 bytes, so the header is in one piece.
    let header = view.pieces(0..body.min(UNTAGGED_HEADER_LEN))[0];
    let seg = match SegmentRepr::parse(header) {
        Ok((seg, _)) => seg,
        Err(e) => return Err((UdErrorKind::Decode(e), None)),
    };
    let Placement::Untagged { qn, msn, mo, .. } = seg.placement else {
        return Err((UdErrorKind::Unsupported(seg.opcode), None));
    };
    if !matches!(seg.opcode, Opcode::Send | Opcode::SendSolicited) || !seg.last || mo != 0 {
        return Err((UdErrorKind::Unsupported(seg.opcode), Some(msn)));
    }
    let (dst_qpn, queue) = datagram::split_qn(qn);
    if dst_qpn != qpn || queue != 0 {
        return Err((
            UdErrorKind::WrongQpn {
                qpn: dst_qpn,
                queue,
            },
            Some(msn),
        ));
    }
    Ok((body - UNTAGGED_HEADER_LEN, seg.opcode.solicited()))
}

/// The MSN of a datagram that failed a check, if its header decodes anyway: the error queue
/// names the message when it can (seed 000 §III-C).
fn header_msn(view: &Scattered<'_>, body: usize) -> Option<u32> {
    let header = view.pieces(0..body.min(UNTAGGED_HEADER_LEN))[0];
    match SegmentRepr::parse(header) {
        Ok((
            SegmentRepr {
                placement: Placement::Untagged { msn, .. },
                ..
            },
            _,
        )) => Some(msn),
        _ => None,
    }
}

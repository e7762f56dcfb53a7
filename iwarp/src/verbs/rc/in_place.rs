//! RC receiver mode, placement in place: a message that one FPDU carries, whose receiver knows
//! where its bytes belong (a rendezvous chunk, for the channel), is read from the socket
//! straight there instead of into the decoder's buffer and copied from it.
//!
//! The bytes that came with the FPDU's head are copied; the rest bypasses the decoder
//! ([`Bypass`]), which checks the FPDU's CRC once its trailer arrives. Only then is the
//! message handed over ([`RdReceiver::placed`]): a failed CRC breaks the connection as for
//! any FPDU, and the message never counts as received.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};

use super::super::{RdReceiver, VerbsError, SEGMENT_HEAD};
use super::state::READ_CHUNK;
use crate::wire::ddp::Placement;
use crate::wire::ddp::UNTAGGED_HEADER_LEN;
use crate::wire::mpa::{Bypass, FpduDecoder};
use crate::wire::rdmap::{Opcode, SegmentRepr};

/// Bytes still to come below which a message goes through the decoder: placing a short rest
/// in place saves less than its extra `read` costs.
pub(super) const MIN_REST: usize = 4096;

/// What became of a look at the front of the decoder.
pub(super) enum Start {
    /// The message is being read in place.
    Taken(InPlace),
    /// It will not be: the receiver said no, or the message is not one FPDU long enough.
    /// (The front being another kind of segment is `NotYet`: the Send comes after it.)
    /// Nothing more that arrives of it changes that.
    Declined,
    /// Too little of it is here to tell.
    NotYet,
}

/// A message being read in place.
pub(super) struct InPlace {
    /// While the ULPDU's rest is in the socket; `None` once it is all in place.
    bypass: Option<Bypass>,
    head: [u8; SEGMENT_HEAD],
    head_len: usize,
    /// The message's length, and how much of it is in place (the head included).
    len: usize,
    at: usize,
}

impl InPlace {
    /// The incomplete FPDU at the front of `decoder`, if it carries the whole of message
    /// `msn` (an untagged Send) and `recv` takes it in place: the bytes already here are
    /// placed, and the rest is left in the socket for [`InPlace::read`].
    pub(super) fn start(
        decoder: &mut FpduDecoder,
        msn: u32,
        peer: SocketAddr,
        recv: &mut dyn RdReceiver,
    ) -> Result<Start, VerbsError> {
        let Some((ulpdu_len, so_far)) = decoder.partial() else {
            return Ok(Start::NotYet);
        };
        // Whatever is wrong with the segment is found when the decoder hands it out whole.
        let Ok((seg, here)) = SegmentRepr::parse(so_far) else {
            return Ok(Start::NotYet);
        };
        // RDMA Writes, Read Requests and Read Responses go through the decoder to their
        // regions. Declining here would mark Send `msn`, which comes after them, as declined.
        if !matches!(seg.opcode, Opcode::Send | Opcode::SendSolicited) {
            return Ok(Start::NotYet);
        }
        // The rest only shrinks as bytes come.
        if ulpdu_len - so_far.len() < MIN_REST {
            return Ok(Start::Declined);
        }
        let whole_send = seg.last
            && matches!(seg.placement, Placement::Untagged { qn: 0, msn: m, mo: 0, .. } if m == msn);
        let len = ulpdu_len.saturating_sub(UNTAGGED_HEADER_LEN);
        let head_len = len.min(SEGMENT_HEAD);
        if !whole_send || len > recv.max_message() {
            return Ok(Start::Declined);
        }
        if here.len() < head_len {
            return Ok(Start::NotYet);
        }
        let mut head = [0; SEGMENT_HEAD];
        head[..head_len].copy_from_slice(&here[..head_len]);
        if !recv.in_place(peer, &head[..head_len], len) {
            return Ok(Start::Declined);
        }
        let mut at = head_len;
        while at < here.len() {
            let mut rest = &here[at..];
            let n = recv
                .read_in_place(peer, &head[..head_len], at, rest.len(), &mut |dst| {
                    rest.read(dst)
                })
                .map_err(VerbsError::from)?;
            if n == 0 {
                return Err(VerbsError::Protocol("receiver placed nothing"));
            }
            at += n;
        }
        Ok(Start::Taken(InPlace {
            bypass: Some(decoder.bypass()),
            head,
            head_len,
            len,
            at,
        }))
    }

    /// Whether bytes of the message are still in the socket.
    pub(super) fn reading(&self) -> bool {
        self.bypass.is_some()
    }

    /// Reads what the socket has of the message into place: true once it is all there (the
    /// decoder then has the FPDU's trailer to check), false when the socket ran dry first.
    pub(super) fn read(
        &mut self,
        stream: &mut TcpStream,
        decoder: &mut FpduDecoder,
        peer: SocketAddr,
        recv: &mut dyn RdReceiver,
    ) -> Result<bool, VerbsError> {
        let Some(bypass) = &mut self.bypass else {
            return Ok(true);
        };
        while bypass.rest() > 0 {
            let head = &self.head[..self.head_len];
            let got = recv.read_in_place(peer, head, self.at, bypass.rest(), &mut |dst| {
                // A place that takes the whole rest takes it with what follows it (the FPDU's
                // trailer, the next FPDUs) into the decoder, in the same system call.
                let n = if dst.len() == bypass.rest() {
                    decoder.read_after(stream, dst, READ_CHUNK)?.0
                } else {
                    stream.read(dst)?
                };
                bypass.took(&dst[..n]);
                Ok(n)
            });
            match got {
                Ok(0) => return Err(VerbsError::PeerClosed),
                Ok(n) => self.at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        decoder.resume(self.bypass.take().expect("reading"));
        Ok(true)
    }

    /// Hands the message over once the decoder checked its trailer: true if it did.
    pub(super) fn finish(
        &self,
        decoder: &mut FpduDecoder,
        peer: SocketAddr,
        recv: &mut dyn RdReceiver,
    ) -> Result<bool, VerbsError> {
        if self.reading() || !decoder.check_bypassed()? {
            return Ok(false);
        }
        debug_assert_eq!(self.at, self.len);
        recv.placed(peer, &self.head[..self.head_len], self.len);
        Ok(true)
    }
}

//! The receive path: progress reads the socket into the decoder and places each segment,
//! into the posted receive at the head of the queue or (receiver mode) lent to the receiver.

use std::io::ErrorKind;

use super::super::cq::WorkQueues;
use super::super::mr::MrTable;
use super::super::{RdReceiver, VerbsError, WcStatus};
use super::in_place::{InPlace, Start};
use super::path::RcPath;
use super::rdma::{rdma_segment, Out};
use super::state::{RxProgress, READ_CHUNK};
use crate::wire::ddp::Placement;
use crate::wire::rdmap::{Opcode, SegmentRepr};

/// Reads per poll at most, so one poll stays short while a large message streams in.
const READS_PER_POLL: usize = 64;

impl RcPath {
    /// Writes queued sends, then reads and places whatever the posted receives can take, or
    /// (receiver mode, `lend`) hands every message that arrived to the receiver.
    pub(crate) fn progress(
        &mut self,
        q: &mut WorkQueues,
        lend: Option<&mut dyn RdReceiver>,
        mrs: &MrTable,
    ) {
        let result = if self.tx.unsent() > 0 {
            self.flush(q).map(|_| ())
        } else {
            Ok(())
        };
        let queued = self.tx.queued;
        let result = result.and_then(|()| match lend {
            Some(recv) => self.receive_lending(recv, q, mrs),
            None => self.receive(q, mrs),
        });
        // Read Responses were queued while receiving: start them on their way now.
        let result = result.and_then(|()| {
            if self.tx.queued != queued {
                self.flush(q).map(|_| ())
            } else {
                Ok(())
            }
        });
        if let Err(e) = result {
            self.fail(q, Some(e));
        }
    }

    /// Receiver mode: reads what has come and lends each message to `recv` through
    /// [`RdReceiver::message`], in order, where it lies in the decoder's buffer when one FPDU
    /// carried it (joined first otherwise), or reads it in place. The peer's address is the TCP
    /// one; the owner that knows the peer by another name wraps `recv`.
    fn receive_lending(
        &mut self,
        recv: &mut dyn RdReceiver,
        q: &mut WorkQueues,
        mrs: &MrTable,
    ) -> Result<(), VerbsError> {
        for _ in 0..READS_PER_POLL {
            if let Some(ip) = &mut self.in_place {
                if !ip.read(&mut self.stream, &mut self.decoder, self.peer, recv)? {
                    return Ok(());
                }
            }
            self.lend_decoded(recv, q, mrs)?;
            if self.reading_in_place() {
                continue;
            }
            match self.read_more()? {
                None => return Ok(()),
                Some(n) if n < READ_CHUNK => {
                    self.lend_decoded(recv, q, mrs)?;
                    if !self.reading_in_place() {
                        return Ok(());
                    }
                }
                Some(_) => {}
            }
        }
        self.lend_decoded(recv, q, mrs)
    }

    fn reading_in_place(&self) -> bool {
        self.in_place.as_ref().is_some_and(InPlace::reading)
    }

    /// Reads what the socket holds into the decoder: how many bytes, `None` if nothing.
    fn read_more(&mut self) -> Result<Option<usize>, VerbsError> {
        loop {
            match self.decoder.read_from(&mut self.stream, READ_CHUNK) {
                Ok(0) => return Err(VerbsError::PeerClosed),
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn lend_decoded(
        &mut self,
        recv: &mut dyn RdReceiver,
        q: &mut WorkQueues,
        mrs: &MrTable,
    ) -> Result<(), VerbsError> {
        if let Some(ip) = &self.in_place {
            if !ip.finish(&mut self.decoder, self.peer, recv)? {
                return Ok(());
            }
            self.in_place = None;
            self.rx_msn = self.rx_msn.wrapping_add(1);
        }
        while let Some(ulpdu) = self.decoder.next_ulpdu()? {
            let (seg, payload) = SegmentRepr::parse(ulpdu)?;
            let out = Out {
                sender: &mut self.sender,
                tx: &mut self.tx,
                max: self.settings.segment_payload,
            };
            if rdma_segment(&seg, payload, &mut self.rdma, mrs, q, out)? {
                continue;
            }
            let mo = check_untagged_send(&seg, self.rx_msn)?;
            if mo as usize != self.assembly.len() {
                return Err(VerbsError::Protocol("MO out of sequence"));
            }
            if self.assembly.len() + payload.len() > recv.max_message() {
                return Err(VerbsError::Protocol(
                    "message longer than the receiver takes",
                ));
            }
            if seg.last {
                self.rx_msn = self.rx_msn.wrapping_add(1);
                if self.assembly.is_empty() {
                    recv.message(self.peer, payload);
                } else {
                    self.assembly.extend_from_slice(payload);
                    recv.message(self.peer, &self.assembly);
                    self.assembly.clear();
                }
            } else {
                self.assembly.extend_from_slice(payload);
            }
        }
        if self.assembly.is_empty() && self.declined != Some(self.rx_msn) {
            match InPlace::start(&mut self.decoder, self.rx_msn, self.peer, recv)? {
                Start::Taken(ip) => self.in_place = Some(ip),
                Start::Declined => self.declined = Some(self.rx_msn),
                Start::NotYet => {}
            }
        }
        Ok(())
    }

    fn receive(&mut self, q: &mut WorkQueues, mrs: &MrTable) -> Result<(), VerbsError> {
        for _ in 0..READS_PER_POLL {
            self.place_decoded(q, mrs)?;
            if !self.wants_segments(q, mrs) {
                return Ok(());
            }
            let Some(n) = self.read_more()? else {
                return Ok(());
            };
            if n < READ_CHUNK {
                // The socket is most likely empty: skip the read that would say so.
                return self.place_decoded(q, mrs);
            }
        }
        self.place_decoded(q, mrs)
    }

    /// Whether reading on could lead anywhere: not while a Send waits for a receive; with
    /// none posted, only when the peer may send RDMA traffic (some memory is registered, or
    /// reads are in flight). Otherwise the socket stays unread and TCP holds the peer back.
    fn wants_segments(&self, q: &WorkQueues, mrs: &MrTable) -> bool {
        self.held.is_none()
            && (self.rx.is_some()
                || !q.rq.is_empty()
                || !mrs.is_empty()
                || !self.rdma.reads.is_empty())
    }

    /// Handles decoded segments: RDMA ones always, Sends while some receive can take them.
    fn place_decoded(&mut self, q: &mut WorkQueues, mrs: &MrTable) -> Result<(), VerbsError> {
        if let Some(held) = self.held.take() {
            if self.rx.is_none() && q.rq.is_empty() {
                self.held = Some(held);
                return Ok(());
            }
            let (seg, payload) = SegmentRepr::parse(&held)?;
            place(&seg, payload, &mut self.rx, &mut self.rx_msn, q)?;
        }
        while let Some(ulpdu) = self.decoder.next_ulpdu()? {
            let (seg, payload) = SegmentRepr::parse(ulpdu)?;
            let out = Out {
                sender: &mut self.sender,
                tx: &mut self.tx,
                max: self.settings.segment_payload,
            };
            if rdma_segment(&seg, payload, &mut self.rdma, mrs, q, out)? {
                continue;
            }
            if self.rx.is_none() && q.rq.is_empty() {
                self.held = Some(ulpdu.to_vec());
                return Ok(());
            }
            place(&seg, payload, &mut self.rx, &mut self.rx_msn, q)?;
        }
        Ok(())
    }
}

/// A segment's MO, if it is an untagged Send segment of message `rx_msn` on queue 0.
fn check_untagged_send(seg: &SegmentRepr, rx_msn: u32) -> Result<u32, VerbsError> {
    let Placement::Untagged { qn, msn, mo, .. } = seg.placement else {
        return Err(VerbsError::Protocol("tagged segment where a Send belongs"));
    };
    if !matches!(seg.opcode, Opcode::Send | Opcode::SendSolicited) {
        return Err(VerbsError::Protocol("RDMAP opcode other than Send"));
    }
    if qn != 0 {
        return Err(VerbsError::Protocol("Send segment on a queue other than 0"));
    }
    if msn != rx_msn {
        return Err(VerbsError::Protocol("MSN out of sequence"));
    }
    Ok(mo)
}

/// Checks one received segment against the stream's state and copies its payload into the
/// receive at the head of the queue.
fn place(
    seg: &SegmentRepr,
    payload: &[u8],
    rx: &mut Option<RxProgress>,
    rx_msn: &mut u32,
    q: &mut WorkQueues,
) -> Result<(), VerbsError> {
    let mo = check_untagged_send(seg, *rx_msn)?;
    let progress = match rx {
        Some(p) => p,
        None => rx.insert(RxProgress {
            placed: 0,
            overflow: false,
            solicited: seg.opcode.solicited(),
        }),
    };
    if mo as usize != progress.placed {
        return Err(VerbsError::Protocol("MO out of sequence"));
    }
    let Some(wr) = q.rq.front_mut() else {
        return Err(VerbsError::Protocol("segment without a receive"));
    };
    let end = progress.placed + payload.len();
    if !progress.overflow {
        match wr.buf.get_mut(progress.placed..end) {
            Some(dst) => dst.copy_from_slice(payload),
            None => progress.overflow = true,
        }
    }
    progress.placed = end;
    if seg.last {
        let status = if progress.overflow {
            WcStatus::LocalLengthError
        } else {
            WcStatus::Success
        };
        let (placed, solicited) = (progress.placed, progress.solicited);
        *rx = None;
        *rx_msn = rx_msn.wrapping_add(1);
        if let Some(wr) = q.rq.pop_front() {
            q.complete_recv(wr, status, placed, None, solicited);
        }
    }
    Ok(())
}

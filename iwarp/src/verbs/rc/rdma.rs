//! RDMA Write and Read (RFC 5040 §4, RFC 5041), both ends: posting them, and handling the
//! tagged segments and Read Requests the peer sends.

use super::super::cq::WorkQueues;
use super::super::mr::{Fault, MrTable, Use};
use super::super::{RdmaReadWr, RdmaWriteWr, VerbsError, WcOpcode};
use super::path::RcPath;
use super::state::{Addr, PendingRead, PendingSend, Rdma, Segments, TxBuffer};
use crate::wire::ddp::{Placement, UNTAGGED_HEADER_LEN};
use crate::wire::mpa::FpduSender;
use crate::wire::rdmap::{Opcode, ReadRequestRepr, SegmentRepr, QUEUE_READ_REQUEST};

impl RcPath {
    /// Posts an RDMA Write: tagged segments through the send buffer (the copying path; the
    /// zero-copy one frames untagged headers only). The caller checked the queue pair's state.
    pub(crate) fn post_rdma_write(
        &mut self,
        q: &mut WorkQueues,
        wr: &RdmaWriteWr<'_>,
    ) -> Result<(), VerbsError> {
        if wr.remote_offset.checked_add(wr.data.len() as u64).is_none() {
            return Err(VerbsError::InvalidArgument(
                "remote_offset + data length wraps".into(),
            ));
        }
        q.reserve_send()?;
        let segs = Segments {
            data: wr.data,
            off: 0,
            max: self.settings.segment_payload,
            addr: Addr::Tagged {
                opcode: Opcode::RdmaWrite,
                stag: wr.remote_stag.raw(),
                to: wr.remote_offset,
            },
            done: false,
        };
        let pending = PendingSend {
            end: u64::MAX,
            wr_id: wr.wr_id,
            len: wr.data.len(),
            signaled: wr.signaled,
            opcode: WcOpcode::RdmaWrite,
        };
        if let Err(e) = self.send_buffered(q, segs, pending) {
            self.fail(q, Some(e));
        }
        Ok(())
    }

    /// Posts an RDMA Read: one Read Request on queue 1. It completes when the last Read
    /// Response segment is placed. The caller checked the state and the local region.
    pub(crate) fn post_rdma_read(
        &mut self,
        q: &mut WorkQueues,
        wr: &RdmaReadWr,
    ) -> Result<(), VerbsError> {
        let len = u32::try_from(wr.len).map_err(|_| VerbsError::MessageTooLarge {
            len: wr.len,
            max: u32::MAX as usize,
        })?;
        if wr.remote_offset.checked_add(wr.len as u64).is_none() {
            return Err(VerbsError::InvalidArgument(
                "remote_offset + len wraps".into(),
            ));
        }
        q.reserve_send()?;
        let req = ReadRequestRepr {
            sink_stag: wr.local_stag.raw(),
            sink_to: wr.local_offset,
            len,
            src_stag: wr.remote_stag.raw(),
            src_to: wr.remote_offset,
        };
        let seg = SegmentRepr::untagged(
            Opcode::ReadRequest,
            true,
            QUEUE_READ_REQUEST,
            self.rdma.tx_read_msn,
            0,
        );
        self.rdma.tx_read_msn = self.rdma.tx_read_msn.wrapping_add(1);
        self.rdma.reads.push_back(PendingRead {
            wr_id: wr.wr_id,
            sink_stag: req.sink_stag,
            sink_to: req.sink_to,
            len: wr.len,
            received: 0,
        });
        let result = encode_read_request(&mut self.sender, &mut self.tx, seg, &req)
            .and_then(|()| self.flush(q).map(|_| ()));
        if let Err(e) = result {
            self.fail(q, Some(e));
        }
        Ok(())
    }
}

/// Where Read Responses are encoded: the send path's framing and buffer.
pub(super) struct Out<'a> {
    pub(super) sender: &'a mut FpduSender,
    pub(super) tx: &'a mut TxBuffer,
    /// Payload bytes per segment.
    pub(super) max: usize,
}

impl Out<'_> {
    /// Appends one FPDU to the send buffer, after everything already queued.
    fn encode(&mut self, seg: SegmentRepr, payload: &[u8]) -> Result<(), VerbsError> {
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        let hl = seg.emit(&mut header)?;
        let before = self.tx.buf.len();
        self.sender
            .encode(&[&header[..hl], payload], &mut self.tx.buf)?;
        self.tx.queued += (self.tx.buf.len() - before) as u64;
        Ok(())
    }
}

fn encode_read_request(
    sender: &mut FpduSender,
    tx: &mut TxBuffer,
    seg: SegmentRepr,
    req: &ReadRequestRepr,
) -> Result<(), VerbsError> {
    let mut payload = [0u8; ReadRequestRepr::LEN];
    req.emit(&mut payload)?;
    // The request is tiny: its segment size does not matter.
    Out { sender, tx, max: 0 }.encode(seg, &payload)
}

/// A region lookup's refusal as the protocol error that breaks the connection, in the words
/// of the operation: for an unknown STag, missing access, and out of bounds.
fn refused(f: Fault, why: [&'static str; 3]) -> VerbsError {
    VerbsError::Protocol(match f {
        Fault::UnknownStag => why[0],
        Fault::Access => why[1],
        Fault::Bounds => why[2],
    })
}

/// Handles a segment that is not part of a Send: places an RDMA Write, answers a Read
/// Request, places a Read Response. Returns false, touching nothing, for anything else (the
/// Send path judges it).
pub(super) fn rdma_segment(
    seg: &SegmentRepr,
    payload: &[u8],
    rdma: &mut Rdma,
    mrs: &MrTable,
    q: &mut WorkQueues,
    mut out: Out<'_>,
) -> Result<bool, VerbsError> {
    match (seg.opcode, seg.placement) {
        (Opcode::RdmaWrite, Placement::Tagged { stag, offset }) => {
            let (region, at) = mrs
                .lookup(stag, offset, payload.len(), Use::RemoteWrite)
                .map_err(|f| {
                    refused(
                        f,
                        [
                            "RDMA Write to an unknown STag",
                            "RDMA Write to a region without remote write access",
                            "RDMA Write beyond the region's bounds",
                        ],
                    )
                })?;
            region.write_at(at, payload);
            Ok(true)
        }
        (Opcode::ReadResponse, Placement::Tagged { stag, offset }) => {
            let Some(read) = rdma.reads.front_mut() else {
                return Err(VerbsError::Protocol(
                    "Read Response with no RDMA Read outstanding",
                ));
            };
            // TCP keeps the responder's segments in order: each continues where the last
            // ended, in the sink the request named.
            if stag != read.sink_stag
                || Some(offset) != read.sink_to.checked_add(read.received as u64)
            {
                return Err(VerbsError::Protocol(
                    "Read Response not where the oldest RDMA Read's data goes next",
                ));
            }
            if payload.len() > read.len - read.received {
                return Err(VerbsError::Protocol(
                    "Read Response longer than the RDMA Read",
                ));
            }
            let (region, at) = mrs
                .lookup(stag, offset, payload.len(), Use::LocalWrite)
                .map_err(|f| {
                    refused(
                        f,
                        [
                            "Read Response to an STag no longer registered",
                            "Read Response to a region without local write access",
                            "Read Response beyond the region's bounds",
                        ],
                    )
                })?;
            region.write_at(at, payload);
            read.received += payload.len();
            if seg.last {
                if read.received != read.len {
                    return Err(VerbsError::Protocol(
                        "Read Response shorter than the RDMA Read",
                    ));
                }
                let (wr_id, len) = (read.wr_id, read.len);
                rdma.reads.pop_front();
                q.sq_done(WcOpcode::RdmaRead, wr_id, len, true);
            }
            Ok(true)
        }
        (Opcode::ReadRequest, Placement::Untagged { qn, msn, mo, .. }) => {
            if qn != QUEUE_READ_REQUEST {
                return Err(VerbsError::Protocol("Read Request on a queue other than 1"));
            }
            if msn != rdma.rx_read_msn {
                return Err(VerbsError::Protocol("Read Request MSN out of sequence"));
            }
            if mo != 0 || !seg.last {
                return Err(VerbsError::Protocol(
                    "Read Request in more than one segment",
                ));
            }
            let (req, rest) = ReadRequestRepr::parse(payload)?;
            if !rest.is_empty() {
                return Err(VerbsError::Protocol("Read Request longer than its header"));
            }
            rdma.rx_read_msn = rdma.rx_read_msn.wrapping_add(1);
            respond(&req, rdma, mrs, &mut out)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Queues the Read Response to `req` on the send path, whole: tagged segments into the
/// requester's sink, read from the source region segment by segment.
fn respond(
    req: &ReadRequestRepr,
    rdma: &mut Rdma,
    mrs: &MrTable,
    out: &mut Out<'_>,
) -> Result<(), VerbsError> {
    let len = req.len as usize;
    let (region, at) = mrs
        .lookup(req.src_stag, req.src_to, len, Use::RemoteRead)
        .map_err(|f| {
            refused(
                f,
                [
                    "RDMA Read of an unknown STag",
                    "RDMA Read of a region without remote read access",
                    "RDMA Read beyond the region's bounds",
                ],
            )
        })?;
    if req.sink_to.checked_add(len as u64).is_none() {
        return Err(VerbsError::Protocol("RDMA Read sink offset wraps"));
    }
    let max = out.max.max(1);
    rdma.scratch.resize(len.min(max), 0);
    let mut off = 0;
    loop {
        let n = (len - off).min(max);
        let last = off + n == len;
        let chunk = &mut rdma.scratch[..n];
        region.read_at(at + off, chunk);
        let seg = SegmentRepr::tagged(
            Opcode::ReadResponse,
            last,
            req.sink_stag,
            req.sink_to + off as u64,
        );
        out.encode(seg, chunk)?;
        off += n;
        if last {
            return Ok(());
        }
    }
}

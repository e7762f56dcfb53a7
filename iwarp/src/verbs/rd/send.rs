//! The send path: a message gets its DDP header and goes to its peer's session, or waits
//! behind the handshake or a full window.

use std::time::Instant;

use bytes::Bytes;
use reliability::SendError;

use super::super::cq::WorkQueues;
use super::super::{AddressHandle, SendOpcode, SendWr, SendWrOwned, VerbsError};
use super::path::RdPath;
use super::peer::OutMsg;
use super::pool::{self};
use super::rx::{DDP_HEADER, RD_MAX_MESSAGE};
use crate::wire::datagram::{self, MAX_QPN};
use crate::wire::rdmap::{Opcode, SegmentRepr};

/// Owned sends up to this size are copied after all: a small message travels whole in one
/// datagram, and one buffer with the header in front is cheaper than keeping two pieces.
pub const RD_OWNED_MIN: usize = 8 << 10;

impl RdPath {
    /// Queues one message for `wr.ah`. It leaves at once as far as the window allows (unless
    /// corked, then at [`RdPath::uncork`]); the rest goes from `poll_cq`. The caller's data is only borrowed and must outlive the
    /// acknowledgement: it is copied once, header in front.
    pub(crate) fn post_send(
        &mut self,
        q: &mut WorkQueues,
        wr: &SendWr<'_>,
    ) -> Result<(), VerbsError> {
        self.post_copied(q, wr.wr_id, wr.opcode, wr.ah, wr.signaled, &[wr.data])
    }

    /// Posts the message `parts` joined, copied once behind its header.
    fn post_copied(
        &mut self,
        q: &mut WorkQueues,
        wr_id: u64,
        opcode: SendOpcode,
        ah: Option<AddressHandle>,
        signaled: bool,
        parts: &[&[u8]],
    ) -> Result<(), VerbsError> {
        let len = parts.iter().map(|p| p.len()).sum();
        let (ah, header) = self.prepare(q, opcode, ah, len)?;
        let mut msg = self.pool.take(DDP_HEADER + len);
        msg.extend_from_slice(&header);
        for p in parts {
            msg.extend_from_slice(p);
        }
        // Large copies go back to the pool once acknowledged; short ones are counted while
        // held, for the owner's bound on what it holds for its peers.
        let data = if pool::worth_pooling(msg.len()) {
            Bytes::from(msg)
        } else {
            self.copies.freeze(msg)
        };
        let out = OutMsg {
            wr_id,
            len,
            signaled,
            head: Bytes::new(),
            data,
            pooled: true,
        };
        self.enqueue(q, ah, out)
    }

    /// As [`RdPath::post_send`], keeping the caller's buffer instead of a copy: the header
    /// travels as a separate piece in front of it.
    pub(crate) fn post_send_owned(
        &mut self,
        q: &mut WorkQueues,
        wr: SendWrOwned,
    ) -> Result<(), VerbsError> {
        if wr.data.len() <= RD_OWNED_MIN {
            // Small: one buffer with the header in front costs less than two pieces.
            return self.post_copied(q, wr.wr_id, wr.opcode, wr.ah, wr.signaled, &[&wr.data]);
        }
        let (ah, header) = self.prepare(q, wr.opcode, wr.ah, wr.data.len())?;
        let out = OutMsg {
            wr_id: wr.wr_id,
            len: wr.data.len(),
            signaled: wr.signaled,
            head: Bytes::copy_from_slice(&header),
            data: wr.data,
            pooled: false,
        };
        self.enqueue(q, ah, out)
    }

    /// As [`post_send_owned`](Self::post_send_owned) for the message `prefix` ++ `wr.data`:
    /// the prefix (a small header of the caller's) joins the DDP header, the data is kept as
    /// it is.
    pub(crate) fn post_send_prefixed(
        &mut self,
        q: &mut WorkQueues,
        wr: SendWrOwned,
        prefix: &[u8],
    ) -> Result<(), VerbsError> {
        let len = prefix.len() + wr.data.len();
        if len <= RD_OWNED_MIN {
            let parts: [&[u8]; 2] = [prefix, &wr.data];
            return self.post_copied(q, wr.wr_id, wr.opcode, wr.ah, wr.signaled, &parts);
        }
        let (ah, header) = self.prepare(q, wr.opcode, wr.ah, len)?;
        let mut head = Vec::with_capacity(DDP_HEADER + prefix.len());
        head.extend_from_slice(&header);
        head.extend_from_slice(prefix);
        let out = OutMsg {
            wr_id: wr.wr_id,
            len,
            signaled: wr.signaled,
            head: head.into(),
            data: wr.data,
            pooled: false,
        };
        self.enqueue(q, ah, out)
    }

    /// Checks a send, takes a send slot and a message sequence number, and returns the
    /// destination and the message's DDP header.
    fn prepare(
        &mut self,
        q: &mut WorkQueues,
        opcode: SendOpcode,
        ah: Option<AddressHandle>,
        len: usize,
    ) -> Result<(AddressHandle, [u8; DDP_HEADER]), VerbsError> {
        let ah = ah.ok_or(VerbsError::MissingAddressHandle)?;
        if ah.qpn > MAX_QPN {
            return Err(VerbsError::InvalidArgument(
                "address handle QPN above 2^30 - 1".into(),
            ));
        }
        if len > RD_MAX_MESSAGE {
            return Err(VerbsError::MessageTooLarge {
                len,
                max: RD_MAX_MESSAGE,
            });
        }
        q.reserve_send()?;
        let opcode = match opcode {
            SendOpcode::Send => Opcode::Send,
            SendOpcode::SendSolicited => Opcode::SendSolicited,
        };
        let qn = datagram::qn_for(ah.qpn, opcode.queue());
        let seg = SegmentRepr::untagged(opcode, true, qn, self.next_msn, 0);
        let mut header = [0u8; DDP_HEADER];
        if let Err(e) = seg.emit(&mut header) {
            q.unreserve_send();
            return Err(e.into());
        }
        self.next_msn = self.next_msn.wrapping_add(1);
        Ok((ah, header))
    }

    /// Hands a prepared message to the peer's session, or queues it behind the handshake or a
    /// full send buffer, and sends what the window allows unless corked.
    fn enqueue(
        &mut self,
        q: &mut WorkQueues,
        ah: AddressHandle,
        out: OutMsg,
    ) -> Result<(), VerbsError> {
        let now = Instant::now();
        let i = self.peer_for_send(q, ah, now);
        // The engine has no session for a dormant peer: resumed, the message leaves at once.
        self.wake(i, now);
        let p = self.peers.get_mut(i).expect("just ensured");
        let (local_id, open) = (p.local_id, p.remote().is_some());
        let a = p.active();
        match open {
            true if a.waiting.is_empty() => {
                match out.offer(&mut self.endpoint, local_id, now, self.handback.is_some()) {
                    Ok(f) => a.inflight.push_back(f),
                    Err((SendError::WouldBlock | SendError::PeerFailed, out)) => {
                        a.waiting.push_back(out)
                    }
                    Err((SendError::TooLarge, out)) => {
                        q.unreserve_send();
                        // The active part just allocated may have nothing to do.
                        self.note_idle(i, now);
                        return Err(VerbsError::MessageTooLarge {
                            len: out.len,
                            max: RD_MAX_MESSAGE,
                        });
                    }
                }
            }
            _ => a.waiting.push_back(out),
        }
        if !self.corked {
            self.transmit(now);
        }
        Ok(())
    }

    /// Holds posted sends back until [`RdPath::uncork`].
    pub(crate) fn cork(&mut self) {
        self.corked = true;
    }

    /// Sends what [`RdPath::cork`] held back.
    pub(crate) fn uncork(&mut self) {
        if std::mem::take(&mut self.corked) {
            self.transmit(Instant::now());
        }
    }
}

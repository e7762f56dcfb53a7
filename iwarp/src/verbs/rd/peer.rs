//! One peer of an RD queue pair: its session ids, its sends waiting and in flight, and its
//! receive state.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reliability::{Dormant, MsgId, SendError, SessionIds};

use super::rx::{compact, PeerRx};
use crate::verbs::cq::WorkQueues;
use crate::verbs::{AddressHandle, WcStatus};

/// A send not yet taken by the engine (handshake under way, or the send buffer full).
pub(super) struct OutMsg {
    pub(super) wr_id: u64,
    pub(super) len: usize,
    pub(super) signaled: bool,
    /// The message is `head` then `data` (the DDP header and the payload, or, when the data was
    /// copied, an empty head and both in `data`).
    pub(super) head: Bytes,
    pub(super) data: Bytes,
    /// `data` is the queue pair's own copy, to be reused once acknowledged.
    pub(super) pooled: bool,
}

/// A send the engine took, waiting for its acknowledgement.
pub(super) struct Inflight {
    pub(super) msg: MsgId,
    pub(super) wr_id: u64,
    pub(super) len: usize,
    pub(super) signaled: bool,
    /// The queue pair's copy of the message, shared with the engine, to be reused once
    /// acknowledged (none when the caller handed its buffer over).
    pub(super) pooled: Option<Bytes>,
    /// The message as offered (head, data), kept while the queue pair hands back the sends of
    /// a session that ends (hand-back, for a caller with another way to the peer).
    pub(super) kept: Option<Box<(Bytes, Bytes)>>,
}

impl OutMsg {
    /// Hands the message to the engine; a refused one comes back whole, with the reason.
    /// `keep`: the message is kept whole until acknowledged, to be handed back.
    pub(super) fn offer(
        self,
        engine: &mut reliability::Endpoint,
        local_id: u32,
        now: Instant,
        keep: bool,
    ) -> Result<Inflight, (SendError, OutMsg)> {
        // Only a buffer worth reusing is kept: the first clone of a fresh `Bytes` allocates.
        let pool =
            (self.pooled && super::pool::worth_pooling(self.data.len())).then(|| self.data.clone());
        let kept = keep.then(|| Box::new((self.head.clone(), self.data.clone())));
        let OutMsg {
            wr_id,
            len,
            signaled,
            head,
            data,
            pooled,
        } = self;
        // An unsignaled send is one nobody waits on: its ACK need not hurry.
        match engine.send_parts(local_id, now, head, data, signaled) {
            Ok(msg) => Ok(Inflight {
                msg,
                wr_id,
                len,
                signaled,
                pooled: pool,
                kept,
            }),
            Err(r) => Err((
                r.error,
                OutMsg {
                    wr_id,
                    len,
                    signaled,
                    head: r.head,
                    data: r.body,
                    pooled,
                },
            )),
        }
    }
}

/// The peer's half of the session ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Remote {
    pub(super) id: u32,
    pub(super) epoch: u32,
}

pub(super) struct HelloTimer {
    pub(super) started: Instant,
    pub(super) next: Instant,
    pub(super) interval: Duration,
}

/// What only a peer with work needs: its handshake timer, its sends waiting and in flight, its
/// receive state. Allocated when work comes, dropped a while after the peer fell idle, so that
/// a peer met once costs only its [`Peer`] entry.
pub(super) struct PeerActive {
    pub(super) hello: Option<HelloTimer>,
    pub(super) waiting: VecDeque<OutMsg>,
    pub(super) inflight: VecDeque<Inflight>,
    pub(super) rx: PeerRx,
    /// In the queue pair's FIFO of peers that may have fallen idle.
    pub(super) listed: bool,
}

impl PeerActive {
    /// Whether nothing would be lost by dropping it: no handshake, no send, no receive bound
    /// or message staged.
    pub(super) fn idle(&self) -> bool {
        self.hello.is_none()
            && self.waiting.is_empty()
            && self.inflight.is_empty()
            && self.rx.idle()
    }

    /// Gives back the room of drained send queues.
    pub(super) fn compact(&mut self) {
        compact(&mut self.inflight);
        compact(&mut self.waiting);
    }
}

/// Where a peer's session stands while its active part is away.
#[derive(Clone, Copy)]
enum Rest {
    /// The engine holds the session, if one is open; the receive state resumes at this
    /// message.
    Awake(MsgId),
    /// The engine froze the idle session and handed it over ([`reliability::Endpoint::poll_dormant`]):
    /// these words are all that is left of it until it is resumed. Its next message to
    /// deliver is where the receive state resumes.
    Dormant(Dormant),
}

/// One peer, as every peer is known, busy or not: kept small, since a queue pair may know a
/// million of them (the goal: an idle peer costs at most 256 bytes over every layer).
pub(super) struct Peer {
    pub(super) ah: AddressHandle,
    pub(super) local_id: u32,
    pub(super) local_epoch: u32,
    /// The peer's session id, 0 until known (0 is reserved, never chosen): the engine session
    /// exists exactly when it is known (handshake done, or ids pre-seeded) and the peer is not
    /// dormant.
    remote_id: u32,
    remote_epoch: u32,
    /// Dormant only without an active part: a peer with work has its session in the engine.
    rest: Rest,
    pub(super) active: Option<Box<PeerActive>>,
}

impl Peer {
    pub(super) fn new(ah: AddressHandle, local_id: u32, local_epoch: u32, first: MsgId) -> Peer {
        Peer {
            ah,
            local_id,
            local_epoch,
            remote_id: 0,
            remote_epoch: 0,
            rest: Rest::Awake(first),
            active: None,
        }
    }

    pub(super) fn remote(&self) -> Option<Remote> {
        (self.remote_id != 0).then_some(Remote {
            id: self.remote_id,
            epoch: self.remote_epoch,
        })
    }

    /// The caller keeps `remote.id` non-zero (the handshake and `set_peer` refuse id 0).
    pub(super) fn set_remote(&mut self, remote: Option<Remote>) {
        let r = remote.unwrap_or(Remote { id: 0, epoch: 0 });
        debug_assert!(remote.is_none() || r.id != 0);
        (self.remote_id, self.remote_epoch) = (r.id, r.epoch);
    }

    /// The session's ids, once the peer's half is known.
    pub(super) fn ids(&self) -> Option<SessionIds> {
        let r = self.remote()?;
        Some(SessionIds {
            local_id: self.local_id,
            local_epoch: self.local_epoch,
            remote_id: r.id,
            remote_epoch: r.epoch,
        })
    }

    /// The frozen session, while the peer is dormant.
    pub(super) fn dormant(&self) -> Option<&Dormant> {
        match &self.rest {
            Rest::Dormant(d) => Some(d),
            Rest::Awake(_) => None,
        }
    }

    /// Takes the frozen session out, to resume it: the peer is awake from now on.
    pub(super) fn wake(&mut self) -> Option<Dormant> {
        let Rest::Dormant(d) = self.rest else {
            return None;
        };
        self.rest = Rest::Awake(d.expected_msg());
        Some(d)
    }

    /// Keeps the frozen session `d` instead of an engine session, if the peer is idle: no
    /// active part is left once idle ones are dropped, and the receive state resumes at the
    /// message the engine delivers next (otherwise something is under way after all). A
    /// refused `d` comes back, for the caller to resume at once.
    pub(super) fn sleep(&mut self, d: Dormant) -> Result<(), Dormant> {
        self.retire();
        match self.rest {
            Rest::Awake(next) if self.active.is_none() && next == d.expected_msg() => {
                self.rest = Rest::Dormant(d);
                Ok(())
            }
            _ => Err(d),
        }
    }

    fn rx_next(&self) -> MsgId {
        match &self.rest {
            Rest::Awake(next) => *next,
            Rest::Dormant(d) => d.expected_msg(),
        }
    }

    /// The active part, allocated if the peer had none. A dormant peer is woken first: work
    /// needs the engine session.
    pub(super) fn active(&mut self) -> &mut PeerActive {
        debug_assert!(self.dormant().is_none(), "a dormant peer is woken first");
        let next = self.rx_next();
        self.active.get_or_insert_with(|| {
            Box::new(PeerActive {
                hello: None,
                waiting: VecDeque::new(),
                inflight: VecDeque::new(),
                rx: PeerRx::new(next),
                listed: false,
            })
        })
    }

    /// Receive state starts again at message `first` (a new session); a frozen session is
    /// dropped with the old one.
    pub(super) fn reset_rx(&mut self, first: MsgId) {
        self.rest = Rest::Awake(first);
        if let Some(a) = &mut self.active {
            a.rx = PeerRx::new(first);
        }
    }

    /// Drops the active part if it is idle; keeps where the receive state resumes.
    pub(super) fn retire(&mut self) {
        if let Some(a) = self.active.take_if(|a| a.idle()) {
            self.rest = Rest::Awake(a.rx.next());
        }
    }

    /// Completes every send to this peer with `status`, taken by the engine or not, and drops
    /// what they lend.
    pub(super) fn fail_sends(&mut self, q: &mut WorkQueues, status: WcStatus) {
        let Some(a) = &mut self.active else { return };
        for f in a.inflight.drain(..) {
            q.send_failed(f.wr_id, f.len, status);
        }
        for m in a.waiting.drain(..) {
            q.send_failed(m.wr_id, m.len, status);
        }
    }

    /// Hands every send to this peer back whole, oldest first, without a completion (their
    /// send slots are free again); one the engine took without a kept copy fails as in
    /// [`Peer::fail_sends`].
    pub(super) fn give_back_sends(
        &mut self,
        q: &mut WorkQueues,
        out: &mut Vec<super::returned::Returned>,
    ) {
        let Some(a) = &mut self.active else { return };
        let addr = self.ah.addr;
        for f in a.inflight.drain(..) {
            match f.kept {
                Some(k) => {
                    q.unreserve_send();
                    let (head, data) = *k;
                    out.push(super::returned::Returned::new(
                        addr, f.wr_id, f.signaled, head, data,
                    ));
                }
                None => q.send_failed(f.wr_id, f.len, WcStatus::TransportError),
            }
        }
        for m in a.waiting.drain(..) {
            q.unreserve_send();
            out.push(super::returned::Returned::new(
                addr, m.wr_id, m.signaled, m.head, m.data,
            ));
        }
    }
}

/// Whether datagrams from `local` to `peer` stay on this host: a loopback address, or the one
/// the socket is bound to (the kernel routes a host's own addresses through loopback). Other
/// addresses of the host are not known here and count as remote.
pub fn same_host(local: SocketAddr, peer: SocketAddr) -> bool {
    // A dual-stack socket sees IPv4 peers as IPv4-mapped IPv6 addresses.
    let (ip, local) = (peer.ip().to_canonical(), local.ip().to_canonical());
    ip.is_loopback() || (!local.is_unspecified() && ip == local)
}

#[cfg(test)]
mod tests {
    use super::same_host;

    #[test]
    fn only_loopback_and_the_bound_address_are_this_host() {
        let at = |s: &str| s.parse().unwrap();
        assert!(same_host(at("10.0.0.5:1"), at("127.0.0.1:2")));
        assert!(same_host(at("10.0.0.5:1"), at("127.8.0.1:2")));
        assert!(same_host(at("10.0.0.5:1"), at("10.0.0.5:2")));
        assert!(same_host(at("[::1]:1"), at("[::1]:2")));
        assert!(same_host(at("[::]:1"), at("[::ffff:127.0.0.1]:2")));
        assert!(same_host(at("10.0.0.5:1"), at("[::ffff:10.0.0.5]:2")));
        assert!(!same_host(at("10.0.0.5:1"), at("10.0.0.6:2")));
        assert!(!same_host(at("0.0.0.0:1"), at("0.0.0.0:2")));
        assert!(!same_host(at("0.0.0.0:1"), at("10.0.0.6:2")));
    }
}

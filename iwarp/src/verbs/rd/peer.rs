//! One peer of an RD queue pair: its session ids, its sends waiting and in flight, and its
//! receive state.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use nix::sys::socket::SockaddrStorage;
use reliability::{MsgId, SendError};

use super::conn::PeerSocket;
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
}

impl OutMsg {
    /// Hands the message to the engine; a refused one comes back whole, with the reason.
    pub(super) fn offer(
        self,
        engine: &mut reliability::Endpoint,
        local_id: u32,
        now: Instant,
    ) -> Result<Inflight, (SendError, OutMsg)> {
        // Only a buffer worth reusing is kept: the first clone of a fresh `Bytes` allocates.
        let keep =
            (self.pooled && super::pool::worth_pooling(self.data.len())).then(|| self.data.clone());
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
                pooled: keep,
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

pub(super) struct Peer {
    pub(super) ah: AddressHandle,
    pub(super) dst: SockaddrStorage,
    pub(super) local_id: u32,
    pub(super) local_epoch: u32,
    /// Known once the handshake is done (or the ids were pre-seeded); the engine session
    /// exists exactly then.
    pub(super) remote: Option<Remote>,
    pub(super) hello: Option<HelloTimer>,
    pub(super) waiting: VecDeque<OutMsg>,
    pub(super) inflight: VecDeque<Inflight>,
    pub(super) rx: PeerRx,
    /// The socket connected to the peer that its datagrams leave from, once its session is
    /// open and if one was to be had ([`super::conn`]).
    pub(super) via: Option<Arc<PeerSocket>>,
}

impl Peer {
    /// Gives back the room of drained send queues.
    pub(super) fn compact(&mut self) {
        compact(&mut self.inflight);
        compact(&mut self.waiting);
    }

    /// Completes every send to this peer with `status`, taken by the engine or not, and drops
    /// what they lend.
    pub(super) fn fail_sends(&mut self, q: &mut WorkQueues, status: WcStatus) {
        for f in self.inflight.drain(..) {
            q.send_failed(f.wr_id, f.len, status);
        }
        for m in self.waiting.drain(..) {
            q.send_failed(m.wr_id, m.len, status);
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

//! Queue pairs, one type per service: [`UdQp`], [`RdQp`] and [`RcQp`]. Each has only the verbs
//! its transport gives a meaning to (an RC queue pair has no UDP socket to bind, a UD one no
//! connection to accept), so asking the wrong type is a compile error rather than a runtime
//! one. What they all do is the [`QueuePair`] trait, for callers that drive any of them.

mod common;
mod rc;
mod rd;
mod ud;

use std::net::SocketAddr;
use std::time::Instant;

pub use rc::RcQp;
pub use rd::RdQp;
pub use ud::UdQp;

use self::common::QpCore;
use super::{
    QpConfig, QpState, QpType, RdReceiver, RecvWr, SendWr, SendWrOwned, VerbsError, WorkCompletion,
};

mod sealed {
    /// Gives the shared verbs their state. Not nameable outside the crate, so only this
    /// crate's queue pairs implement [`QueuePair`](super::QueuePair).
    pub trait HasCore {
        fn core(&self) -> &super::QpCore;
        fn core_mut(&mut self) -> &mut super::QpCore;
    }

    /// Implements [`HasCore`] for queue pairs that keep their core in a `core` field.
    macro_rules! has_core {
        ($($t:ty),*) => {$(
            impl HasCore for $t {
                fn core(&self) -> &super::QpCore {
                    &self.core
                }
                fn core_mut(&mut self) -> &mut super::QpCore {
                    &mut self.core
                }
            }
        )*};
    }
    has_core!(super::RcQp, super::RdQp, super::UdQp);
}

/// What every queue pair does, whatever carries its messages.
///
/// Not thread-safe by design (`&mut self` everywhere): the caller's progress loop owns the
/// queue pair, so the data path takes no lock.
pub trait QueuePair: sealed::HasCore {
    /// The QP number; UD and RD peers put it in their address handles.
    fn qpn(&self) -> u32 {
        self.core().qpn
    }

    /// The current state.
    fn state(&self) -> QpState {
        self.core().state
    }

    /// UD, RD or RC, for reports.
    fn qp_type(&self) -> QpType;

    /// The attributes the queue pair was created with.
    fn config(&self) -> &QpConfig {
        &self.core().config
    }

    /// Why the queue pair went to the error state, if it did.
    fn last_error(&self) -> Option<&VerbsError> {
        self.core().last_error.as_ref()
    }

    /// The local socket address once bound or connected.
    fn local_addr(&self) -> Option<SocketAddr>;

    /// Largest message one send may carry: UD one datagram's payload
    /// ([`UD_MAX_PAYLOAD`](super::UD_MAX_PAYLOAD)), RD [`RD_MAX_MESSAGE`](super::RD_MAX_MESSAGE),
    /// RC just below 4 GiB.
    fn max_message(&self) -> usize;

    /// Sends posted, signaled or not, that have not completed or whose completion is not yet
    /// polled: zero once every RD message is acknowledged.
    fn sends_outstanding(&self) -> usize {
        self.core().queues.sends_outstanding()
    }

    /// Send slots free (see [`QpConfig::max_send_wr`]).
    fn send_queue_space(&self) -> usize {
        self.core().queues.send_slots_free()
    }

    /// Bytes of the queue pair's own receive and completion queues.
    fn work_queue_bytes(&self) -> usize {
        self.core().queues.memory_bytes()
    }

    /// Posts a send. UD: one datagram, handed to the kernel now (copied only if the kernel
    /// would block); completes as soon as the kernel has it. RD: the message is copied, sent
    /// as far as the window allows (the rest from [`QueuePair::poll_cq`]; a session handshake
    /// first with a new peer), and completes when the peer has acknowledged all of it; a peer
    /// silent for `rd.idle_timeout` fails it with `TransportError`. RC: the message's FPDUs are
    /// handed to the kernel now as far as it takes them; the rest is copied and written from
    /// [`QueuePair::poll_cq`]; completes when the last byte is in the kernel.
    ///
    /// Refused (nothing posted) with `InvalidState` outside RTS, `QueueFull`,
    /// `MessageTooLarge`, `MissingAddressHandle` (UD, RD), or an I/O error the UD socket
    /// reported at once. A broken RC connection is reported through completions and the Error
    /// state.
    fn post_send(&mut self, wr: SendWr<'_>) -> Result<(), VerbsError>;

    /// Posts a send that hands its data over ([`SendWrOwned`]): RD keeps the buffer itself
    /// until the peer acknowledges the message instead of copying it; UD and RC behave as
    /// [`QueuePair::post_send`]. Refused in the same cases.
    fn post_send_owned(&mut self, wr: SendWrOwned) -> Result<(), VerbsError> {
        self.post_send(wr.borrowed())
    }

    /// Posts the message `prefix` followed by `wr.data`: RD joins the prefix to its own header
    /// and keeps the data without copying it (as [`QueuePair::post_send_owned`], which an empty
    /// prefix amounts to); RC frames the two together in place when they fit one segment; UD,
    /// and RC above a segment, send the two joined.
    fn post_send_prefixed(&mut self, wr: SendWrOwned, prefix: &[u8]) -> Result<(), VerbsError> {
        if prefix.is_empty() {
            return self.post_send_owned(wr);
        }
        post_joined(self, wr, prefix)
    }

    /// Posts a receive buffer (allowed in Init, before the queue pair is bound or connected).
    /// In the Error state it completes at once with `FlushError`, which hands the buffer back.
    /// `QueueFull` drops the buffer; [`QueuePair::try_post_recv`] returns it instead.
    fn post_recv(&mut self, wr: RecvWr) -> Result<(), VerbsError> {
        self.try_post_recv(wr).map_err(|(e, _)| e)
    }

    /// As [`QueuePair::post_recv`], giving the work request back when it is refused.
    fn try_post_recv(&mut self, wr: RecvWr) -> Result<(), (VerbsError, RecvWr)> {
        self.core_mut().try_post_recv(wr)
    }

    /// Makes progress without blocking (sends anything the kernel refused earlier, receives
    /// what the posted receives can take), then moves up to `max` completions into `out`.
    /// Returns how many it moved. `out` is only appended to; with enough capacity this does
    /// not allocate.
    ///
    /// The socket is not touched when `max` completions are already waiting; `max == 0` only
    /// makes progress.
    fn poll_cq(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize, VerbsError>;

    /// As [`QueuePair::poll_cq`], with RD and RC messages handed to `recv` where they lie
    /// instead of into posted receives (receiver mode; UD ignores `recv`; RC hands over only
    /// whole messages, through [`RdReceiver::message`], naming the peer by its TCP address).
    /// A queue pair polled this way should always be: receives posted meanwhile are not used.
    fn poll_cq_with(
        &mut self,
        recv: &mut dyn RdReceiver,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError>;

    /// When [`QueuePair::poll_cq`] next has timed work to do (RD: an ACK, a retransmission,
    /// a handshake resend or a peer failure; UD and RD: a datagram the fault layer holds).
    /// A progress thread can sleep until then. `None`: nothing is timed.
    fn next_deadline(&self) -> Option<Instant>;

    /// Bytes of buffer storage the queue pair holds for itself, for the memory ledger: UD's
    /// scatter tail and send backlog, RD's [`RdMemory`](super::RdMemory), RC's decoder and
    /// send backlog. Posted receive buffers (the caller's) and kernel socket buffers are not
    /// included.
    fn memory_bytes(&self) -> usize;

    /// Moves the queue pair to the Error state: an RC connection is closed, and every
    /// outstanding work request completes with `FlushError`.
    fn set_error(&mut self);
}

/// Sends `prefix` and `wr.data` as one message from a joined copy: what a path that cannot
/// frame the two apart does.
fn post_joined<Q: QueuePair + ?Sized>(
    qp: &mut Q,
    wr: SendWrOwned,
    prefix: &[u8],
) -> Result<(), VerbsError> {
    let mut joined = Vec::with_capacity(prefix.len() + wr.data.len());
    joined.extend_from_slice(prefix);
    joined.extend_from_slice(&wr.data);
    let wr = SendWrOwned {
        data: joined.into(),
        ..wr
    };
    qp.post_send(wr.borrowed())
}

//! Queue pairs, one type per service: [`UdQp`], [`RdQp`] and [`RcQp`]. Each has only the verbs
//! its transport gives a meaning to (an RC queue pair has no UDP socket to bind, a UD one no
//! connection to accept), so asking the wrong type is a compile error rather than a runtime
//! one. What they all do is the [`QueuePair`] trait, for callers that drive any of them.
//!
//! The three are one generic [`Qp`]: the state every queue pair keeps (`QpCore`) beside its
//! service's own part ([`UdCore`], [`RdCore`], [`RcCore`]), which implements the sealed
//! service trait. The verbs they share (polling, posting, the error state) are written once,
//! here; each service's file adds only what that service does differently.

mod common;
mod rc;
mod rd;
mod ud;

use std::net::SocketAddr;
use std::time::Instant;

pub use rc::{RcCore, RcQp};
pub use rd::{RdCore, RdQp};
pub use ud::{UdCore, UdQp};

use self::common::QpCore;
use super::{
    QpConfig, QpState, QpType, RdReceiver, RecvWr, SendWr, SendWrOwned, VerbsError, WorkCompletion,
};

/// A queue pair of service `S`: the state every queue pair keeps, and the service's own part.
/// Named by its aliases, [`UdQp`], [`RdQp`] and [`RcQp`].
pub struct Qp<S> {
    core: QpCore,
    service: S,
}

impl<S: sealed::Service> std::fmt::Debug for Qp<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(S::NAME)
            .field("qpn", &self.core.qpn)
            .field("state", &self.core.state)
            .field("local_addr", &self.local_addr())
            .finish_non_exhaustive()
    }
}

impl<S> Qp<S> {
    fn new(config: QpConfig, service: S) -> Qp<S> {
        Qp {
            core: QpCore::new(config),
            service,
        }
    }
}

impl<S: sealed::Service> Qp<S> {
    fn poll(
        &mut self,
        out: &mut Vec<WorkCompletion>,
        max: usize,
        recv: Option<&mut dyn RdReceiver>,
    ) -> Result<usize, VerbsError> {
        if self.core.wants_progress(max) {
            self.service.progress(&mut self.core, recv);
        }
        Ok(self.core.queues.pop_into(out, max))
    }
}

mod sealed {
    use std::net::SocketAddr;
    use std::time::Instant;

    use super::super::{QpType, RdReceiver, SendWr, SendWrOwned, VerbsError};
    use super::common::QpCore;

    /// Gives the shared verbs their state. Not nameable outside the crate, so only this
    /// crate's queue pairs implement [`QueuePair`](super::QueuePair).
    pub trait HasCore {
        fn core(&self) -> &QpCore;
        fn core_mut(&mut self) -> &mut QpCore;
    }

    impl<S> HasCore for super::Qp<S> {
        fn core(&self) -> &QpCore {
            &self.core
        }
        fn core_mut(&mut self) -> &mut QpCore {
            &mut self.core
        }
    }

    /// What a service adds to the state every queue pair keeps: the [`QueuePair`] verbs
    /// that depend on its transport, each given that state beside its own.
    ///
    /// [`QueuePair`]: super::QueuePair
    pub trait Service {
        const TYPE: QpType;
        /// The type's name in `Debug` output.
        const NAME: &'static str;

        fn local_addr(&self) -> Option<SocketAddr>;

        fn max_message(&self) -> usize;

        fn post_send(&mut self, core: &mut QpCore, wr: SendWr<'_>) -> Result<(), VerbsError>;

        fn post_send_owned(
            &mut self,
            core: &mut QpCore,
            wr: SendWrOwned,
        ) -> Result<(), VerbsError> {
            self.post_send(core, wr.borrowed())
        }

        /// Only with a non-empty `prefix`.
        fn post_send_prefixed(
            &mut self,
            core: &mut QpCore,
            wr: SendWrOwned,
            prefix: &[u8],
        ) -> Result<(), VerbsError> {
            post_joined(self, core, wr, prefix)
        }

        /// One round of progress in RTS; a failure moves `core` to the error state.
        fn progress(&mut self, core: &mut QpCore, recv: Option<&mut dyn RdReceiver>);

        fn next_deadline(&self, core: &QpCore) -> Option<Instant>;

        fn memory_bytes(&self) -> usize;

        /// The queue pair goes to the error state: complete the outstanding sends (and
        /// close what must be closed) before `core` flushes the receives.
        fn fail(&mut self, core: &mut QpCore);
    }

    /// Sends `prefix` and `wr.data` as one message from a joined copy: what a path that
    /// cannot frame the two apart does.
    pub fn post_joined<S: Service + ?Sized>(
        service: &mut S,
        core: &mut QpCore,
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
        service.post_send(core, wr.borrowed())
    }
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
    fn post_send_owned(&mut self, wr: SendWrOwned) -> Result<(), VerbsError>;

    /// Posts the message `prefix` followed by `wr.data`: RD joins the prefix to its own header
    /// and keeps the data without copying it (as [`QueuePair::post_send_owned`], which an empty
    /// prefix amounts to); RC frames the two together in place when they fit one segment; UD,
    /// and RC above a segment, send the two joined.
    fn post_send_prefixed(&mut self, wr: SendWrOwned, prefix: &[u8]) -> Result<(), VerbsError>;

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

impl<S: sealed::Service> QueuePair for Qp<S> {
    fn qp_type(&self) -> QpType {
        S::TYPE
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.service.local_addr()
    }

    fn max_message(&self) -> usize {
        self.service.max_message()
    }

    fn post_send(&mut self, wr: SendWr<'_>) -> Result<(), VerbsError> {
        self.service.post_send(&mut self.core, wr)
    }

    fn post_send_owned(&mut self, wr: SendWrOwned) -> Result<(), VerbsError> {
        self.service.post_send_owned(&mut self.core, wr)
    }

    fn post_send_prefixed(&mut self, wr: SendWrOwned, prefix: &[u8]) -> Result<(), VerbsError> {
        if prefix.is_empty() {
            return self.post_send_owned(wr);
        }
        self.service.post_send_prefixed(&mut self.core, wr, prefix)
    }

    fn poll_cq(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize, VerbsError> {
        self.poll(out, max, None)
    }

    fn poll_cq_with(
        &mut self,
        recv: &mut dyn RdReceiver,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        self.poll(out, max, Some(recv))
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.service.next_deadline(&self.core)
    }

    fn memory_bytes(&self) -> usize {
        self.service.memory_bytes()
    }

    fn set_error(&mut self) {
        if self.core.state == QpState::Error {
            return;
        }
        self.service.fail(&mut self.core);
        self.core.enter_error(None);
    }
}

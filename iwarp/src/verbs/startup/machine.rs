//! The MPA start-up exchange as a sans-IO state machine: the caller moves the bytes and the
//! time, so a connection can be set up inside a progress loop without blocking it (and tested
//! without sockets). The initiator queues its Request at once and waits for the Reply; the
//! responder waits for the Request and queues its Reply (or a rejecting one). Bytes that follow
//! the peer's frame are the start of its FPDU stream and are handed over with the result.

use std::time::{Duration, Instant};

use super::{ird_ord, Established};
use crate::verbs::{QpConfig, VerbsError};
use crate::wire::mpa::{self, FrameKind, StartupRepr};
use crate::wire::Error as WireError;

/// Which end of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Initiator,
    Responder,
}

enum State {
    /// Waiting for the peer's frame.
    Waiting,
    /// A deciding responder has the Request and waits for the owner's answer.
    Asked {
        request: StartupRepr,
        leftover: Vec<u8>,
    },
    /// The exchange settled; the result waits for our frame to be written out.
    Settled(Result<Established, VerbsError>),
    /// Handed over, or failed before anything was settled.
    Done,
}

/// One end's start-up exchange.
pub struct Startup {
    role: Role,
    markers: bool,
    crc: bool,
    revision: u8,
    private_data: Vec<u8>,
    /// Our Request, kept to negotiate against the Reply.
    request: Option<StartupRepr>,
    state: State,
    input: Vec<u8>,
    output: Vec<u8>,
    deadline: Instant,
    failure: Option<VerbsError>,
    /// A responder that leaves accepting or rejecting a Request to its owner.
    decides: bool,
}

/// What the exchange has come to.
pub enum Outcome {
    /// Still exchanging: write [`Startup::pending_output`], read, or wait for the deadline.
    Pending,
    Established(Established),
    Failed(VerbsError),
}

impl Startup {
    fn new(
        role: Role,
        config: &QpConfig,
        private_data: &[u8],
        now: Instant,
        timeout: Duration,
    ) -> Startup {
        Startup {
            role,
            markers: config.markers,
            crc: config.crc,
            revision: config.mpa_revision,
            private_data: private_data.to_vec(),
            request: None,
            state: State::Waiting,
            input: Vec::new(),
            output: Vec::new(),
            deadline: now + timeout,
            failure: None,
            decides: false,
        }
    }

    /// The active end: its Request is queued at once.
    pub fn initiator(
        config: &QpConfig,
        private_data: &[u8],
        now: Instant,
        timeout: Duration,
    ) -> Result<Startup, VerbsError> {
        let mut s = Startup::new(Role::Initiator, config, private_data, now, timeout);
        let request = StartupRepr {
            kind: FrameKind::Request,
            markers: s.markers,
            crc: s.crc,
            reject: false,
            revision: s.revision,
            ird_ord: (s.revision == 2).then(ird_ord),
            private_data: s.private_data.clone(),
        };
        s.output = request.emit()?;
        s.request = Some(request);
        Ok(s)
    }

    /// The passive end: it waits for the Request.
    pub fn responder(
        config: &QpConfig,
        private_data: &[u8],
        now: Instant,
        timeout: Duration,
    ) -> Startup {
        Startup::new(Role::Responder, config, private_data, now, timeout)
    }

    /// A passive end whose owner decides on the Request: once it has come,
    /// [`Startup::request_private_data`] shows what the initiator sent, and the exchange waits
    /// for [`Startup::accept`] or [`Startup::reject`] (the deadline still holds).
    pub fn deciding_responder(config: &QpConfig, now: Instant, timeout: Duration) -> Startup {
        Startup {
            decides: true,
            ..Startup::new(Role::Responder, config, &[], now, timeout)
        }
    }

    /// The initiator's private data, while a deciding responder waits for its owner's answer.
    pub fn request_private_data(&self) -> Option<&[u8]> {
        match &self.state {
            State::Asked { request, .. } => Some(&request.private_data),
            _ => None,
        }
    }

    /// Accepts the Request, answering with `private_data` (if it is still asked).
    pub fn accept(&mut self, private_data: &[u8]) {
        if let State::Asked { request, leftover } = std::mem::replace(&mut self.state, State::Done)
        {
            self.private_data = private_data.to_vec();
            self.state = State::Settled(self.on_request(request, leftover));
        }
    }

    /// Rejects the Request with a rejecting Reply carrying `private_data` (the reason, for the
    /// initiator's [`VerbsError::Rejected`]); this end fails with the same error.
    pub fn reject(&mut self, private_data: &[u8]) {
        if let State::Asked { request, .. } = std::mem::replace(&mut self.state, State::Done) {
            let reply = StartupRepr {
                kind: FrameKind::Reply,
                markers: self.markers,
                crc: self.crc,
                reject: true,
                revision: request.revision.min(self.revision),
                ird_ord: None,
                private_data: private_data.to_vec(),
            };
            self.output = reply.emit().unwrap_or_default();
            self.state = State::Settled(Err(VerbsError::Rejected {
                private_data: private_data.to_vec(),
            }));
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Bytes to write to the peer now.
    pub fn pending_output(&self) -> &[u8] {
        &self.output
    }

    /// Drops what was not written (the connection failed): [`Startup::poll`] then gives the
    /// settled result, or the failure.
    pub fn abandon_output(&mut self) {
        self.output.clear();
    }

    /// Time left before the deadline.
    pub fn time_left(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }

    /// The caller wrote the first `n` bytes of [`Startup::pending_output`].
    pub fn written(&mut self, n: usize) {
        self.output.drain(..n.min(self.output.len()));
    }

    /// Bytes read from the peer.
    pub fn handle_input(&mut self, bytes: &[u8]) {
        match self.state {
            State::Waiting => {}
            // Past the peer's frame: the FPDU stream, kept for the connection.
            State::Settled(Ok(ref mut est)) => return est.leftover.extend_from_slice(bytes),
            State::Asked {
                ref mut leftover, ..
            } => return leftover.extend_from_slice(bytes),
            State::Settled(Err(_)) | State::Done => return,
        }
        self.input.extend_from_slice(bytes);
        match StartupRepr::parse(&self.input) {
            Ok(None) => {}
            Ok(Some((frame, used))) => {
                let leftover = self.input.split_off(used);
                self.input = Vec::new();
                self.settle(frame, leftover);
            }
            Err(e) => self.fail(e.into()),
        }
    }

    /// The peer closed its end (a read returned 0).
    pub fn handle_closed(&mut self) {
        if matches!(self.state, State::Waiting | State::Asked { .. }) {
            self.fail(VerbsError::PeerClosed);
        }
    }

    /// When [`Startup::handle_timeout`] must run, while the exchange is under way.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Done => None,
            _ => Some(self.deadline),
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.deadline {
            return;
        }
        match self.state {
            State::Done => {}
            // Settled and written out: the result stands, whenever it is taken.
            State::Settled(_) if self.output.is_empty() => {}
            // Waiting, or settled with our frame not yet out (the peer is not reading).
            _ => {
                self.state = State::Done;
                self.output.clear();
                self.failure = Some(VerbsError::Timeout);
            }
        }
    }

    /// Whether the peer's frame is still awaited (past it, what the peer sends is its FPDU
    /// stream, for the connection to read).
    pub fn wants_input(&self) -> bool {
        matches!(self.state, State::Waiting)
    }

    /// Where the exchange stands. Established or failed comes once our own frame is written.
    pub fn poll(&mut self) -> Outcome {
        if let Some(e) = self.failure.take() {
            self.state = State::Done;
            return Outcome::Failed(e);
        }
        if !self.output.is_empty() {
            return Outcome::Pending;
        }
        match std::mem::replace(&mut self.state, State::Done) {
            State::Settled(Ok(est)) => Outcome::Established(est),
            State::Settled(Err(e)) => Outcome::Failed(e),
            s @ (State::Waiting | State::Asked { .. }) => {
                self.state = s;
                Outcome::Pending
            }
            State::Done => Outcome::Failed(VerbsError::Startup("the exchange is over")),
        }
    }

    fn fail(&mut self, e: VerbsError) {
        self.state = State::Done;
        self.failure = Some(e);
    }

    fn settle(&mut self, frame: StartupRepr, leftover: Vec<u8>) {
        if self.decides && frame.kind == FrameKind::Request {
            self.state = State::Asked {
                request: frame,
                leftover,
            };
            return;
        }
        let r = match self.role {
            Role::Initiator => self.on_reply(frame, leftover),
            Role::Responder => self.on_request(frame, leftover),
        };
        self.state = State::Settled(r);
    }

    fn on_reply(
        &mut self,
        reply: StartupRepr,
        leftover: Vec<u8>,
    ) -> Result<Established, VerbsError> {
        if reply.kind != FrameKind::Reply {
            return Err(VerbsError::Startup("expected an MPA Reply, got a Request"));
        }
        let request = self
            .request
            .as_ref()
            .expect("an initiator sent its Request");
        let negotiated = match mpa::negotiate(request, &reply) {
            Ok(n) => n,
            Err(WireError::MpaRejected) => {
                return Err(VerbsError::Rejected {
                    private_data: reply.private_data,
                })
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Established {
            negotiated,
            revision: reply.revision,
            peer_private_data: reply.private_data,
            leftover,
        })
    }

    /// Answers with a Reply carrying this side's marker and CRC wishes, the lower of the two
    /// revisions, and IRD/ORD when the Request had them; a Request it cannot take is answered
    /// with a rejecting Reply rather than left to the initiator's timeout.
    fn on_request(
        &mut self,
        request: StartupRepr,
        leftover: Vec<u8>,
    ) -> Result<Established, VerbsError> {
        if request.kind != FrameKind::Request {
            return Err(VerbsError::Startup("expected an MPA Request, got a Reply"));
        }
        let revision = request.revision.min(self.revision);
        let mut reply = StartupRepr {
            kind: FrameKind::Reply,
            markers: self.markers,
            crc: self.crc,
            reject: false,
            revision,
            ird_ord: (revision == 2 && request.ird_ord.is_some()).then(ird_ord),
            private_data: self.private_data.clone(),
        };
        match mpa::negotiate(&reply, &request) {
            Ok(negotiated) => {
                self.output = reply.emit()?;
                Ok(Established {
                    negotiated,
                    revision,
                    peer_private_data: request.private_data,
                    leftover,
                })
            }
            Err(e) => {
                reply.reject = true;
                reply.private_data.clear();
                self.output = reply.emit().unwrap_or_default();
                Err(e.into())
            }
        }
    }
}

//! The MPA start-up exchange as a sans-IO state machine: the caller moves the bytes and the
//! time, so a connection can be set up inside a progress loop without blocking it (and tested
//! without sockets). The initiator queues its Request at once and waits for the Reply; the
//! responder waits for the Request and queues its Reply (or a rejecting one). Bytes that follow
//! the peer's frame are the start of its FPDU stream and are handed over with the result.
//!
//! In authenticated mode ([`QpConfig::auth`]) both ends also prove the job's key over both
//! ends' nonces ([`proof`]): the responder settles only once the initiator's proof FPDU has
//! come and checked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::proof::{self, Transcript, NONCE_LEN};
use super::{ird_ord, Established};
use crate::auth::JobKey;
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
    /// An authenticated responder answered and waits for the initiator's proof.
    Proving {
        est: Established,
        transcript: Transcript,
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
    /// Authenticated mode: the job's key, this end's nonce and (responder) the initiator's.
    auth: Option<Auth>,
}

struct Auth {
    key: Arc<JobKey>,
    nonce: [u8; NONCE_LEN],
    peer_nonce: [u8; NONCE_LEN],
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
            auth: config.auth.clone().map(|key| Auth {
                key,
                nonce: proof::fresh_nonce(),
                peer_nonce: [0; NONCE_LEN],
            }),
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
        let mut wire = request.clone();
        if let Some(a) = &s.auth {
            wire.private_data.extend_from_slice(&a.nonce);
        }
        s.output = wire.emit()?;
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
            self.answer(request, leftover);
        }
    }

    /// Rejects the Request with a rejecting Reply carrying `private_data` (the reason, for the
    /// initiator's [`VerbsError::Rejected`]); this end fails with the same error.
    pub fn reject(&mut self, private_data: &[u8]) {
        if let State::Asked { request, .. } = std::mem::replace(&mut self.state, State::Done) {
            self.refuse(
                &request,
                private_data,
                VerbsError::Rejected {
                    private_data: private_data.to_vec(),
                },
            );
        }
    }

    /// Answers `request` with a rejecting Reply carrying `private_data`; this end fails with
    /// `e`.
    fn refuse(&mut self, request: &StartupRepr, private_data: &[u8], e: VerbsError) {
        self.output = self.rejecting_reply(request, private_data);
        self.state = State::Settled(Err(e));
    }

    fn rejecting_reply(&self, request: &StartupRepr, private_data: &[u8]) -> Vec<u8> {
        StartupRepr {
            kind: FrameKind::Reply,
            markers: self.markers,
            crc: self.crc,
            reject: true,
            revision: request.revision.min(self.revision),
            ird_ord: None,
            private_data: private_data.to_vec(),
        }
        .emit()
        .unwrap_or_default()
    }

    /// Makes this end's nonce `nonce` (before anything is sent), so that an exchange can be
    /// repeated byte for byte.
    #[cfg(test)]
    pub(super) fn fix_nonce(&mut self, nonce: [u8; NONCE_LEN]) {
        if let Some(a) = self.auth.as_mut() {
            a.nonce = nonce;
            if let Some(r) = &self.request {
                let mut wire = r.clone();
                wire.private_data.extend_from_slice(&nonce);
                self.output = wire.emit().expect("it was emitted before");
            }
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
            State::Proving { .. } => {
                self.input.extend_from_slice(bytes);
                return self.check_proof();
            }
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
        if matches!(
            self.state,
            State::Waiting | State::Asked { .. } | State::Proving { .. }
        ) {
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
        matches!(self.state, State::Waiting | State::Proving { .. })
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
            s @ (State::Waiting | State::Asked { .. } | State::Proving { .. }) => {
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

    fn settle(&mut self, mut frame: StartupRepr, leftover: Vec<u8>) {
        if self.role == Role::Responder && frame.kind == FrameKind::Request {
            // The owner sees the ULP's private data only; the nonce is the exchange's.
            if let Some(a) = self.auth.as_mut() {
                match proof::split_nonce(&mut frame.private_data) {
                    Some(n) => a.peer_nonce = n,
                    None => {
                        let e = VerbsError::Unauthenticated(proof::NO_NONCE);
                        return self.refuse(&frame, &[], e);
                    }
                }
            }
            if self.decides {
                self.state = State::Asked {
                    request: frame,
                    leftover,
                };
                return;
            }
            return self.answer(frame, leftover);
        }
        let r = match self.role {
            Role::Initiator => self.on_reply(frame, leftover),
            Role::Responder => self.on_request(frame, leftover).map(|(est, _)| est),
        };
        self.state = State::Settled(r);
    }

    /// Answers a Request: settled at once, or (authenticated) once the initiator's proof has
    /// come, which may already be among the bytes that followed the Request.
    fn answer(&mut self, request: StartupRepr, leftover: Vec<u8>) {
        match self.on_request(request, leftover) {
            Ok((mut est, Some(transcript))) => {
                self.input = std::mem::take(&mut est.leftover);
                self.state = State::Proving { est, transcript };
                self.check_proof();
            }
            r => self.state = State::Settled(r.map(|(est, _)| est)),
        }
    }

    /// Settles an authenticated responder once the proof FPDU is all here.
    fn check_proof(&mut self) {
        if self.input.len() < proof::PROOF_FRAME_LEN {
            return;
        }
        let State::Proving {
            mut est,
            transcript,
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return;
        };
        let key = &self.auth.as_ref().expect("proving needs a key").key;
        let proven = proof::parse_proof_frame(&self.input, est.negotiated.crc)
            .is_some_and(|p| transcript.proves(key, false, &p));
        if !proven {
            return self.fail(VerbsError::Unauthenticated(proof::BAD_PROOF));
        }
        est.leftover = self.input.split_off(proof::PROOF_FRAME_LEN);
        self.input = Vec::new();
        self.state = State::Settled(Ok(est));
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
        let mut reply = reply;
        if let Some(a) = &self.auth {
            let (nonce, theirs) = proof::split_reply(&mut reply.private_data)
                .ok_or(VerbsError::Unauthenticated(proof::BAD_REPLY))?;
            if negotiated.markers_tx || negotiated.markers_rx {
                return Err(VerbsError::Unauthenticated(proof::MARKERS));
            }
            let t = Transcript::new(request, &reply, &a.nonce, &nonce);
            if !t.proves(&a.key, true, &theirs) {
                return Err(VerbsError::Unauthenticated(proof::BAD_REPLY));
            }
            self.output = proof::proof_frame(&t.proof(&a.key, false), negotiated.crc);
        }
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
    /// In authenticated mode, also the transcript the initiator's proof must cover.
    fn on_request(
        &mut self,
        request: StartupRepr,
        leftover: Vec<u8>,
    ) -> Result<(Established, Option<Transcript>), VerbsError> {
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
            Ok(n) if self.auth.is_some() && (n.markers_tx || n.markers_rx) => {
                self.output = self.rejecting_reply(&request, &[]);
                Err(VerbsError::Unauthenticated(proof::MARKERS))
            }
            Ok(negotiated) => {
                let transcript = self.auth.as_ref().map(|a| {
                    let t = Transcript::new(&request, &reply, &a.peer_nonce, &a.nonce);
                    reply.private_data.extend_from_slice(&a.nonce);
                    reply.private_data.extend_from_slice(&t.proof(&a.key, true));
                    t
                });
                self.output = reply.emit()?;
                Ok((
                    Established {
                        negotiated,
                        revision,
                        peer_private_data: request.private_data,
                        leftover,
                    },
                    transcript,
                ))
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

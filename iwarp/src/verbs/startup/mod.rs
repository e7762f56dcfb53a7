//! The MPA start-up exchange on a fresh TCP connection (RFC 5044 §7.1, RFC 6581): the initiator
//! sends a Request, the responder answers with a Reply, both settle markers and CRC with
//! [`mpa::negotiate`]. The exchange itself is a sans-IO state machine ([`machine`]); the
//! blocking drivers here bound every read and write by one deadline, so a silent or slow peer
//! costs at most the connect timeout.

#[cfg(test)]
mod auth_tests;
mod machine;
mod proof;
#[cfg(test)]
mod tests;

pub use machine::{Outcome, Role, Startup};
pub use proof::proof_frame;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use super::{QpConfig, VerbsError};
use crate::wire::mpa::{IrdOrd, Negotiated};

/// Read size during the exchange; anything read past the frame is kept as stream data.
const READ_CHUNK: usize = 1024;

/// The outcome of a successful exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Established {
    /// Markers each way and the CRC, as settled.
    pub negotiated: Negotiated,
    pub revision: u8,
    /// The ULP private data the peer sent.
    pub peer_private_data: Vec<u8>,
    /// Octets that followed the peer's frame: the start of its FPDU stream.
    pub leftover: Vec<u8>,
}

/// RFC 6581 IRD/ORD: 0/0 and no ready-to-receive message. RC queue pairs serve and issue
/// RDMA Reads without negotiating limits (a responder's backlog is bounded by the requester's
/// send queue), so the fields stay as they were before reads existed.
pub(crate) fn ird_ord() -> IrdOrd {
    IrdOrd {
        ird: 0,
        ord: 0,
        peer_to_peer: false,
        zero_length_rtr: false,
        write_rtr: false,
        read_rtr: false,
    }
}

/// Active side, blocking until `deadline`: send the Request, wait for the Reply.
pub(crate) fn initiate(
    stream: &mut TcpStream,
    config: &QpConfig,
    private_data: &[u8],
    deadline: Instant,
) -> Result<Established, VerbsError> {
    let now = Instant::now();
    let m = Startup::initiator(
        config,
        private_data,
        now,
        deadline.saturating_duration_since(now),
    )?;
    drive(stream, m)
}

/// Passive side, blocking until `deadline`: wait for the Request, answer (see
/// [`Startup::responder`]).
pub(crate) fn respond(
    stream: &mut TcpStream,
    config: &QpConfig,
    private_data: &[u8],
    deadline: Instant,
) -> Result<Established, VerbsError> {
    let now = Instant::now();
    drive(
        stream,
        Startup::responder(
            config,
            private_data,
            now,
            deadline.saturating_duration_since(now),
        ),
    )
}

fn io_error(e: std::io::Error) -> VerbsError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => VerbsError::Timeout,
        ErrorKind::UnexpectedEof => VerbsError::PeerClosed,
        _ => VerbsError::Io(e),
    }
}

/// Runs the exchange over a blocking socket, every read and write bounded by its deadline.
fn drive(stream: &mut TcpStream, mut m: Startup) -> Result<Established, VerbsError> {
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        while !m.pending_output().is_empty() {
            let left = m.time_left(Instant::now());
            let written = if left.is_zero() {
                Err(VerbsError::Timeout)
            } else {
                stream.set_write_timeout(Some(left))?;
                stream.write(m.pending_output()).map_err(io_error)
            };
            match written {
                Ok(0) => return Err(VerbsError::PeerClosed),
                Ok(n) => m.written(n),
                Err(e) => {
                    // A rejection the peer did not read is still the reason.
                    m.abandon_output();
                    return Err(match m.poll() {
                        Outcome::Failed(settled) => settled,
                        _ => e,
                    });
                }
            }
        }
        match m.poll() {
            Outcome::Pending => {}
            Outcome::Established(est) => return Ok(est),
            Outcome::Failed(e) => return Err(e),
        }
        let left = m.time_left(Instant::now());
        if left.is_zero() {
            m.handle_timeout(Instant::now());
            continue;
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => m.handle_closed(),
            Ok(n) => m.handle_input(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => match io_error(e) {
                VerbsError::Timeout => m.handle_timeout(Instant::now()),
                e => return Err(e),
            },
        }
    }
}

//! The MPA start-up exchange on a fresh TCP connection (RFC 5044 §7.1, RFC 6581): the initiator
//! sends a Request, the responder answers with a Reply, both settle markers and CRC with
//! [`mpa::negotiate`]. Every read and write is bounded by one deadline, so a silent or slow peer
//! costs at most the connect timeout.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use super::{QpConfig, VerbsError};
use crate::wire::mpa::{self, FrameKind, IrdOrd, Negotiated, StartupRepr};
use crate::wire::Error as WireError;

/// Read size during the exchange; anything read past the frame is kept as stream data.
const READ_CHUNK: usize = 1024;

/// The outcome of a successful exchange.
pub(crate) struct Established {
    pub(crate) negotiated: Negotiated,
    pub(crate) revision: u8,
    /// The ULP private data the peer sent.
    pub(crate) peer_private_data: Vec<u8>,
    /// Octets that followed the peer's frame: the start of its FPDU stream.
    pub(crate) leftover: Vec<u8>,
}

/// RFC 6581 IRD/ORD for a side that does not serve RDMA Reads and needs no ready-to-receive
/// message.
fn ird_ord() -> IrdOrd {
    IrdOrd {
        ird: 0,
        ord: 0,
        peer_to_peer: false,
        zero_length_rtr: false,
        write_rtr: false,
        read_rtr: false,
    }
}

/// Active side: send the Request, wait for the Reply.
pub(crate) fn initiate(
    stream: &mut TcpStream,
    config: &QpConfig,
    private_data: &[u8],
    deadline: Instant,
) -> Result<Established, VerbsError> {
    let request = StartupRepr {
        kind: FrameKind::Request,
        markers: config.markers,
        crc: config.crc,
        reject: false,
        revision: config.mpa_revision,
        ird_ord: (config.mpa_revision == 2).then(ird_ord),
        private_data: private_data.to_vec(),
    };
    write_frame(stream, &request, deadline)?;
    let (reply, leftover) = read_frame(stream, deadline)?;
    if reply.kind != FrameKind::Reply {
        return Err(VerbsError::Startup("expected an MPA Reply, got a Request"));
    }
    let negotiated = match mpa::negotiate(&request, &reply) {
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

/// Passive side: wait for the Request, answer with a Reply carrying this side's marker and CRC
/// wishes, the lower of the two revisions, and IRD/ORD when the Request had them.
pub(crate) fn respond(
    stream: &mut TcpStream,
    config: &QpConfig,
    private_data: &[u8],
    deadline: Instant,
) -> Result<Established, VerbsError> {
    let (request, leftover) = read_frame(stream, deadline)?;
    if request.kind != FrameKind::Request {
        return Err(VerbsError::Startup("expected an MPA Request, got a Reply"));
    }
    let revision = request.revision.min(config.mpa_revision);
    let mut reply = StartupRepr {
        kind: FrameKind::Reply,
        markers: config.markers,
        crc: config.crc,
        reject: false,
        revision,
        ird_ord: (revision == 2 && request.ird_ord.is_some()).then(ird_ord),
        private_data: private_data.to_vec(),
    };
    let negotiated = match mpa::negotiate(&reply, &request) {
        Ok(n) => n,
        Err(e) => {
            // Tell the initiator rather than leave it waiting for its timeout.
            reply.reject = true;
            reply.private_data.clear();
            let _ = write_frame(stream, &reply, deadline);
            return Err(e.into());
        }
    };
    write_frame(stream, &reply, deadline)?;
    Ok(Established {
        negotiated,
        revision,
        peer_private_data: request.private_data,
        leftover,
    })
}

fn remaining(deadline: Instant) -> Result<std::time::Duration, VerbsError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(VerbsError::Timeout);
    }
    Ok(left)
}

fn io_error(e: std::io::Error) -> VerbsError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => VerbsError::Timeout,
        ErrorKind::UnexpectedEof => VerbsError::PeerClosed,
        _ => VerbsError::Io(e),
    }
}

fn write_frame(
    stream: &mut TcpStream,
    frame: &StartupRepr,
    deadline: Instant,
) -> Result<(), VerbsError> {
    let bytes = frame.emit()?;
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    stream.write_all(&bytes).map_err(io_error)
}

/// Reads until one start-up frame has arrived; returns it and whatever followed it.
fn read_frame(
    stream: &mut TcpStream,
    deadline: Instant,
) -> Result<(StartupRepr, Vec<u8>), VerbsError> {
    let mut buf = Vec::with_capacity(mpa::STARTUP_HEADER_LEN + mpa::MAX_PRIVATE_DATA);
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        if !buf.is_empty() {
            if let Some((frame, used)) = StartupRepr::parse(&buf)? {
                return Ok((frame, buf.split_off(used)));
            }
        }
        stream.set_read_timeout(Some(remaining(deadline)?))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Err(VerbsError::PeerClosed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
}

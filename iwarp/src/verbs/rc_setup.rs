//! Setting up an RC connection without blocking: a non-blocking TCP connect (or an accepted
//! stream) and the MPA start-up machine ([`Startup`]), driven by whoever owns the progress
//! loop. The owner waits on [`RcSetup::socket`] (writable while [`RcSetup::wants_write`],
//! readable otherwise) and on [`RcSetup::deadline`], calls [`RcSetup::progress`] when either
//! comes, and hands the result to [`RcQp::finish`](super::RcQp::finish).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::startup::{Established, Outcome, Startup};
use super::{QpConfig, VerbsError};

/// Bytes read per call while the exchange runs; what follows the peer's frame is kept.
const READ_CHUNK: usize = 4096;

/// A connection being set up.
pub struct RcSetup {
    stream: TcpStream,
    machine: Startup,
    tcp: Tcp,
}

/// Where the TCP connection under the start-up stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tcp {
    /// Our connect has not completed yet.
    Connecting,
    /// Connected: the MPA start-up exchange runs over it.
    Up,
}

fn in_progress(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock
        || e.raw_os_error() == Some(nix::errno::Errno::EINPROGRESS as i32)
}

impl RcSetup {
    /// Starts connecting to `addr`; the MPA Request goes once the connection is up. Fails at
    /// once only if the connect cannot even start.
    pub fn connect(
        addr: SocketAddr,
        config: &QpConfig,
        private_data: &[u8],
        now: Instant,
    ) -> Result<RcSetup, VerbsError> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        // Before the connect: the window scale is settled in the handshake.
        if let Some(size) = config.socket_buffer {
            sock.set_send_buffer_size(size)?;
            sock.set_recv_buffer_size(size)?;
        }
        let tcp = match sock.connect(&addr.into()) {
            Ok(()) => Tcp::Up,
            Err(e) if in_progress(&e) => Tcp::Connecting,
            Err(e) => return Err(e.into()),
        };
        let machine = Startup::initiator(config, private_data, now, config.connect_timeout)?;
        Ok(RcSetup {
            stream: sock.into(),
            machine,
            tcp,
        })
    }

    /// Takes a stream the owner accepted; the peer's Request is awaited.
    pub fn accept(
        stream: TcpStream,
        config: &QpConfig,
        private_data: &[u8],
        now: Instant,
    ) -> Result<RcSetup, VerbsError> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        if let Some(size) = config.socket_buffer {
            let s = SockRef::from(&stream);
            s.set_send_buffer_size(size)?;
            s.set_recv_buffer_size(size)?;
        }
        let machine = Startup::responder(config, private_data, now, config.connect_timeout);
        Ok(RcSetup {
            stream,
            machine,
            tcp: Tcp::Up,
        })
    }

    /// Takes a stream the owner accepted, and leaves the answer to the peer's Request to the
    /// owner: once [`RcSetup::asked`] shows the initiator's private data, call
    /// [`RcSetup::accept_with`] or [`RcSetup::reject_with`], then progress again.
    pub fn accept_deciding(
        stream: TcpStream,
        config: &QpConfig,
        now: Instant,
    ) -> Result<RcSetup, VerbsError> {
        let mut setup = RcSetup::accept(stream, config, &[], now)?;
        setup.machine = Startup::deciding_responder(config, now, config.connect_timeout);
        Ok(setup)
    }

    /// The initiator's private data, while the owner's answer is awaited.
    pub fn asked(&self) -> Option<&[u8]> {
        self.machine.request_private_data()
    }

    /// Accepts the peer's Request, answering with `private_data`.
    pub fn accept_with(&mut self, private_data: &[u8]) {
        self.machine.accept(private_data);
    }

    /// Rejects the peer's Request with `private_data` as the reason.
    pub fn reject_with(&mut self, private_data: &[u8]) {
        self.machine.reject(private_data);
    }

    /// The socket to wait on.
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// Wait for the socket to become writable (connecting, or start-up bytes to send); else
    /// for it to become readable.
    pub fn wants_write(&self) -> bool {
        self.tcp == Tcp::Connecting || !self.machine.pending_output().is_empty()
    }

    /// When the set-up fails if it has not finished.
    pub fn deadline(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }

    /// Does what can be done now without blocking. `Ok(Some(_))`: established (hand it to
    /// [`RcQp::finish`](super::RcQp::finish)); `Ok(None)`: not yet; `Err`: the
    /// set-up failed (refused, reset, rejected, garbage, or the deadline passed).
    pub fn progress(&mut self, now: Instant) -> Result<Option<Established>, VerbsError> {
        if self.tcp == Tcp::Connecting {
            if let Some(e) = self.stream.take_error()? {
                return Err(e.into());
            }
            match self.stream.peer_addr() {
                Ok(_) => self.tcp = Tcp::Up,
                Err(e) if e.kind() == ErrorKind::NotConnected => {}
                Err(e) => return Err(e.into()),
            }
        }
        if self.tcp == Tcp::Up {
            if let Err(e) = self.exchange() {
                // A rejection settled before the socket failed is the reason to give.
                self.machine.abandon_output();
                return Err(match self.machine.poll() {
                    Outcome::Failed(settled) => settled,
                    _ => e,
                });
            }
        }
        self.machine.handle_timeout(now);
        match self.machine.poll() {
            Outcome::Pending => Ok(None),
            Outcome::Established(est) => Ok(Some(est)),
            Outcome::Failed(e) => Err(e),
        }
    }

    /// Writes what the machine has to send and reads what has come, as far as the socket
    /// lets it now.
    fn exchange(&mut self) -> Result<(), VerbsError> {
        while !self.machine.pending_output().is_empty() {
            match self.stream.write(self.machine.pending_output()) {
                Ok(0) => return Err(VerbsError::PeerClosed),
                Ok(n) => self.machine.written(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut chunk = [0u8; READ_CHUNK];
        // Past the peer's frame the bytes are the connection's: they stay in the socket, under
        // TCP's flow control, for the queue pair to read.
        while self.machine.wants_input() {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.machine.handle_closed();
                    return Ok(());
                }
                Ok(n) => self.machine.handle_input(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The stream, for the queue pair that takes the connection over.
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
    }
}

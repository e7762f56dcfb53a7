//! The physical floors: plain sockets with no iWARP framing, receivers busy-polling.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use crate::link::{check_bytes, Deadline, Link, Result};

/// Largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65507;

pub struct RawUdp {
    socket: UdpSocket,
    buf: Vec<u8>,
    timeout: Duration,
}

impl RawUdp {
    /// `socket` must already be connected to the peer.
    pub fn new(socket: UdpSocket, timeout: Duration) -> Result<Self> {
        socket.set_nonblocking(true)?;
        Ok(RawUdp {
            socket,
            buf: vec![0; MAX_DATAGRAM],
            timeout,
        })
    }
}

impl Link for RawUdp {
    fn send(&mut self, data: &[u8]) -> Result<()> {
        let mut chunks = data.chunks(MAX_DATAGRAM).peekable();
        if chunks.peek().is_none() {
            return send_datagram(&self.socket, &[], self.timeout);
        }
        for chunk in chunks {
            send_datagram(&self.socket, chunk, self.timeout)?;
        }
        Ok(())
    }

    fn recv(&mut self, len: usize, expect: Option<&[u8]>) -> Result<()> {
        let mut got = 0;
        let mut deadline = Deadline::new(self.timeout, "a raw-udp datagram");
        loop {
            match self.socket.recv(&mut self.buf) {
                Ok(n) => {
                    check_bytes(&self.buf[..n], expect, got)?;
                    got += n;
                    if got >= len {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => deadline.check()?,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn send_datagram(socket: &UdpSocket, chunk: &[u8], timeout: Duration) -> Result<()> {
    let mut deadline = Deadline::new(timeout, "room in the UDP send buffer");
    loop {
        match socket.send(chunk) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => deadline.check()?,
            Err(e) => return Err(e.into()),
        }
    }
}

pub struct RawTcp {
    stream: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl RawTcp {
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(RawTcp {
            stream,
            buf: vec![0; 1 << 20],
            timeout,
        })
    }
}

impl Link for RawTcp {
    fn send(&mut self, data: &[u8]) -> Result<()> {
        let mut sent = 0;
        let mut deadline = Deadline::new(self.timeout, "room in the TCP send buffer");
        while sent < data.len() {
            match self.stream.write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => deadline.check()?,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn recv(&mut self, len: usize, expect: Option<&[u8]>) -> Result<()> {
        let mut got = 0;
        let mut deadline = Deadline::new(self.timeout, "raw-tcp bytes");
        while got < len {
            let want = (len - got).min(self.buf.len());
            match self.stream.read(&mut self.buf[..want]) {
                Ok(0) => return Err("peer closed the TCP connection".into()),
                Ok(n) => {
                    check_bytes(&self.buf[..n], expect, got)?;
                    got += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => deadline.check()?,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

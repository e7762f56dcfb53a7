//! The physical floors: plain sockets with no iWARP framing, receivers busy-polling.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use bytes::Bytes;

use crate::link::{check_bytes, Deadline, Link, Result};

/// Message-sized receive buffers used in turn (`--raw-dest`).
pub struct Dest {
    bufs: Vec<Vec<u8>>,
    next: usize,
}

impl Dest {
    pub fn new(count: usize, size: usize) -> Self {
        Dest {
            bufs: (0..count).map(|_| vec![0; size]).collect(),
            next: 0,
        }
    }

    /// The buffer for the next message.
    fn next(&mut self) -> &mut Vec<u8> {
        let i = self.next;
        self.next = (i + 1) % self.bufs.len();
        &mut self.bufs[i]
    }
}

/// Largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65507;

pub struct RawUdp {
    socket: UdpSocket,
    peer: SocketAddr,
    /// `send`/`recv` on a socket connected to `peer`; else `sendto`/`recvfrom`, and datagrams
    /// from anyone but `peer` are ignored (as a connected socket would filter them).
    connected: bool,
    buf: Vec<u8>,
    dest: Option<Dest>,
    timeout: Duration,
}

impl RawUdp {
    /// With `connected`, `socket` must already be connected to `peer`.
    pub fn new(
        socket: UdpSocket,
        peer: SocketAddr,
        connected: bool,
        timeout: Duration,
    ) -> Result<Self> {
        socket.set_nonblocking(true)?;
        Ok(RawUdp {
            socket,
            peer,
            connected,
            buf: vec![0; MAX_DATAGRAM],
            dest: None,
            timeout,
        })
    }

    pub fn with_dest(mut self, dest: Option<Dest>) -> Self {
        self.dest = dest;
        self
    }

    /// Receives one datagram into `buf`.
    fn recv_one(
        socket: &UdpSocket,
        peer: SocketAddr,
        connected: bool,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        if connected {
            return socket.recv(buf);
        }
        loop {
            let (n, from) = socket.recv_from(buf)?;
            if from == peer {
                return Ok(n);
            }
        }
    }
}

impl Link for RawUdp {
    fn send(&mut self, data: &Bytes) -> Result<()> {
        let to = (!self.connected).then_some(self.peer);
        let mut chunks = data.chunks(MAX_DATAGRAM).peekable();
        if chunks.peek().is_none() {
            return send_datagram(&self.socket, to, &[], self.timeout);
        }
        for chunk in chunks {
            send_datagram(&self.socket, to, chunk, self.timeout)?;
        }
        Ok(())
    }

    fn recv(&mut self, len: usize, expect: Option<&[u8]>) -> Result<()> {
        let mut got = 0;
        let mut deadline = Deadline::new(self.timeout, "a raw-udp datagram");
        let mut dest = self.dest.as_mut().map(|d| std::mem::take(d.next()));
        let r = loop {
            let buf = match &mut dest {
                // Each datagram at its place in the message, as far as it fits.
                Some(d) if d.len() >= got + MAX_DATAGRAM.min(len - got).max(1) => &mut d[got..],
                _ => &mut self.buf[..],
            };
            match Self::recv_one(&self.socket, self.peer, self.connected, buf) {
                Ok(n) => {
                    if let Err(e) = check_bytes(&buf[..n], expect, got) {
                        break Err(e);
                    }
                    got += n;
                    if got >= len {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if let Err(e) = deadline.check() {
                        break Err(e);
                    }
                }
                Err(e) => break Err(e.into()),
            }
        };
        if let (Some(d), Some(slot)) = (dest, self.dest.as_mut()) {
            let i = (slot.next + slot.bufs.len() - 1) % slot.bufs.len();
            slot.bufs[i] = d;
        }
        r
    }
}

/// Sends one datagram: to `to` (`sendto`), or on the connected socket (`send`).
fn send_datagram(
    socket: &UdpSocket,
    to: Option<SocketAddr>,
    chunk: &[u8],
    timeout: Duration,
) -> Result<()> {
    let mut deadline = Deadline::new(timeout, "room in the UDP send buffer");
    loop {
        let r = match to {
            Some(to) => socket.send_to(chunk, to),
            None => socket.send(chunk),
        };
        match r {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => deadline.check()?,
            Err(e) => return Err(e.into()),
        }
    }
}

pub struct RawTcp {
    stream: TcpStream,
    buf: Vec<u8>,
    dest: Option<Dest>,
    timeout: Duration,
}

impl RawTcp {
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(RawTcp {
            stream,
            buf: vec![0; 1 << 20],
            dest: None,
            timeout,
        })
    }

    pub fn with_dest(mut self, dest: Option<Dest>) -> Self {
        self.dest = dest;
        self
    }
}

impl Link for RawTcp {
    fn send(&mut self, data: &Bytes) -> Result<()> {
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
        let mut dest = match &mut self.dest {
            Some(d) if d.bufs[d.next].len() >= len => Some(d.next()),
            _ => None,
        };
        while got < len {
            let buf = match dest {
                Some(ref mut d) => &mut d[got..len],
                None => {
                    let want = (len - got).min(self.buf.len());
                    &mut self.buf[..want]
                }
            };
            match self.stream.read(buf) {
                Ok(0) => return Err("peer closed the TCP connection".into()),
                Ok(n) => {
                    check_bytes(&buf[..n], expect, got)?;
                    got += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => deadline.check()?,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

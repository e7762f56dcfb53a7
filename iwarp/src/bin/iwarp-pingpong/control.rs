//! The control connection between the two processes: setup data and barriers, one line each.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::link::Result;

pub struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    timeout: Duration,
}

impl Control {
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        let writer = stream.try_clone()?;
        Ok(Control {
            reader: BufReader::new(stream),
            writer,
            timeout,
        })
    }

    pub fn send(&mut self, line: &str) -> Result<()> {
        self.writer.write_all(line.as_bytes())?;
        self.writer.write_all(b"\n")?;
        Ok(())
    }

    pub fn recv(&mut self) -> Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err("control connection closed by the other process".into());
        }
        Ok(line.trim_end().to_owned())
    }

    /// Both sides reach this point before either goes on (outside any timed region). `idle`
    /// runs while the peer has not arrived: a transport that moves data only when polled
    /// (RD's ACKs, RC's backlog) keeps serving the peer meanwhile.
    pub fn barrier_while(&mut self, tag: &str, mut idle: impl FnMut() -> Result<()>) -> Result<()> {
        self.send(tag)?;
        let deadline = Instant::now() + self.timeout;
        while self.reader.buffer().is_empty() && !self.readable()? {
            idle()?;
            if Instant::now() > deadline {
                return Err(format!("timed out in barrier {tag:?}").into());
            }
        }
        let got = self.recv()?;
        if got != tag {
            return Err(format!("out of step: expected {tag:?}, peer said {got:?}").into());
        }
        Ok(())
    }

    fn readable(&self) -> Result<bool> {
        let mut fds = [PollFd::new(
            self.reader.get_ref().as_fd(),
            PollFlags::POLLIN,
        )];
        Ok(nix::poll::poll(&mut fds, PollTimeout::ZERO)? > 0)
    }
}

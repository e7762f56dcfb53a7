//! The control connection between the two processes: setup data and barriers, one line each.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::link::Result;

pub struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Control {
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        let writer = stream.try_clone()?;
        Ok(Control {
            reader: BufReader::new(stream),
            writer,
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

    /// Both sides reach this point before either goes on (outside any timed region).
    pub fn barrier(&mut self, tag: &str) -> Result<()> {
        self.send(tag)?;
        let got = self.recv()?;
        if got != tag {
            return Err(format!("out of step: expected {tag:?}, peer said {got:?}").into());
        }
        Ok(())
    }
}

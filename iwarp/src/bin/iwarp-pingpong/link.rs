use std::time::{Duration, Instant};

use bytes::Bytes;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

/// One end of a connection under test, moving whole messages.
pub trait Link {
    /// Sends one message (split into datagrams where the link has a size limit). The message
    /// is shared, so a link whose API takes buffers over (RD's `post_send_owned`) need not
    /// copy it; the others send from the bytes as from any slice.
    fn send(&mut self, data: &Bytes) -> Result<()>;
    /// Receives one message of `len` bytes; with `expect`, checks every byte against it.
    fn recv(&mut self, len: usize, expect: Option<&[u8]>) -> Result<()>;
    /// Drives the link until every send has left (RD: is acknowledged), so the peer is not
    /// left waiting for bytes while this side sits in a control barrier.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    /// Makes progress without waiting for anything (sends ACKs, retransmits).
    fn poll(&mut self) -> Result<()> {
        Ok(())
    }
    /// Transport counters worth printing after a run, if the link has any.
    fn counters(&self) -> Option<String> {
        None
    }
}

/// A deadline for busy-polling loops, read from the clock only every few thousand spins.
pub struct Deadline {
    at: Instant,
    what: &'static str,
    spins: u32,
}

impl Deadline {
    pub fn new(timeout: Duration, what: &'static str) -> Self {
        Deadline {
            at: Instant::now() + timeout,
            what,
            spins: 0,
        }
    }

    pub fn check(&mut self) -> Result<()> {
        self.spins = self.spins.wrapping_add(1);
        if self.spins & 4095 == 0 && Instant::now() > self.at {
            return Err(format!("timed out waiting for {}", self.what).into());
        }
        Ok(())
    }
}

/// Compares a received chunk with what the sender put at `offset`.
pub fn check_bytes(got: &[u8], expect: Option<&[u8]>, offset: usize) -> Result<()> {
    let Some(expect) = expect else { return Ok(()) };
    let want = expect
        .get(offset..offset + got.len())
        .ok_or_else(|| format!("received {} bytes past the message end", got.len()))?;
    if got != want {
        let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "payload mismatch at byte {}: got {:#04x}, want {:#04x}",
            offset + i,
            got[i],
            want[i]
        )
        .into());
    }
    Ok(())
}

/// Deterministic payload for message `seq` of `len` bytes, different for every message.
pub fn pattern(len: usize, seq: u64) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

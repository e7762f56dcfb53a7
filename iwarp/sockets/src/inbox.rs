//! The bytes that have come off a switched connection and wait for the program's reads.

use std::collections::VecDeque;
use std::net::SocketAddr;

use iwarp::verbs::RdReceiver;

use crate::extensions::Extensions;

/// Arriving messages (through [`Filling`]) become one queue of bytes; an empty message is
/// the peer's end of stream
/// (`shutdown(SHUT_WR)`), which a byte stream cannot otherwise say while the connection stays
/// up for the other direction.
#[derive(Default)]
pub struct Inbox {
    bytes: VecDeque<u8>,
    /// The peer's end of stream came.
    ended: bool,
    /// How many times something arrived that makes a read return: an edge-triggered waiter
    /// reports each one once.
    arrivals: u64,
}

impl Inbox {
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn ended(&self) -> bool {
        self.ended
    }

    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    /// Counts an arrival that is not a message (the connection's end).
    pub fn note_arrival(&mut self) {
        self.arrivals += 1;
    }

    /// Copies the first bytes into `buf`, taking them unless `peek`; how many.
    pub fn take(&mut self, buf: &mut [u8], peek: bool) -> usize {
        let n = buf.len().min(self.bytes.len());
        let (a, b) = self.bytes.as_slices();
        let from_a = n.min(a.len());
        buf[..from_a].copy_from_slice(&a[..from_a]);
        buf[from_a..n].copy_from_slice(&b[..n - from_a]);
        if !peek {
            self.bytes.drain(..n);
        }
        n
    }

    fn push(&mut self, payload: &[u8]) {
        if payload.is_empty() {
            self.ended = true;
        } else if !self.ended {
            self.bytes.extend(payload);
        }
        self.arrivals += 1;
    }
}

/// A read waiting on an empty inbox: what arrives goes straight into the reader's buffer as
/// far as it has room (one copy less), the rest into the inbox behind it.
pub struct Filling<'a> {
    pub inbox: &'a mut Inbox,
    pub target: &'a mut [u8],
    pub filled: usize,
    /// In message mode arriving messages are the program's posted receives'.
    pub ext: Option<&'a mut Extensions>,
}

impl Filling<'_> {
    fn push(&mut self, payload: &[u8]) {
        if let Some(ext) = self.ext.as_deref_mut().filter(|e| e.message_mode) {
            if !payload.is_empty() {
                ext.deliver(payload);
                self.inbox.arrivals += 1;
                return;
            }
        }
        let room = self.target.len() - self.filled;
        let n = if self.inbox.is_empty() && !self.inbox.ended {
            room.min(payload.len())
        } else {
            0
        };
        self.target[self.filled..self.filled + n].copy_from_slice(&payload[..n]);
        self.filled += n;
        if n == payload.len() && n > 0 {
            self.inbox.arrivals += 1;
        } else {
            self.inbox.push(&payload[n..]);
        }
    }
}

impl RdReceiver for Filling<'_> {
    fn early(&mut self, _: SocketAddr, payload: &[u8], _: bool) -> bool {
        self.push(payload);
        true
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        self.push(payload);
    }
    fn max_message(&self) -> usize {
        u32::MAX as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    /// What arrives while no read waits.
    fn queued(i: &mut Inbox) -> Filling<'_> {
        Filling {
            inbox: i,
            target: &mut [],
            filled: 0,
            ext: None,
        }
    }

    #[test]
    fn messages_read_as_one_stream_in_order_whatever_the_read_sizes() {
        let mut i = Inbox::default();
        queued(&mut i).message(from(), b"hello ");
        queued(&mut i).early(from(), b"world", true);
        let mut got = Vec::new();
        let mut buf = [0u8; 4];
        loop {
            let n = i.take(&mut buf, false);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"hello world");
        assert_eq!(i.arrivals(), 2);
        assert!(!i.ended());
    }

    #[test]
    fn a_peek_leaves_the_bytes_and_an_empty_message_ends_the_stream() {
        let mut i = Inbox::default();
        queued(&mut i).message(from(), b"abc");
        let mut buf = [0u8; 8];
        assert_eq!(i.take(&mut buf, true), 3);
        assert_eq!(i.len(), 3);
        queued(&mut i).message(from(), b"");
        assert!(i.ended());
        assert_eq!(i.take(&mut buf, false), 3);
        assert_eq!(&buf[..3], b"abc");
        // Nothing after the end is taken.
        queued(&mut i).message(from(), b"late");
        assert!(i.is_empty());
    }

    #[test]
    fn a_waiting_read_takes_what_fits_and_the_rest_queues_in_order() {
        let mut i = Inbox::default();
        let mut buf = [0u8; 5];
        let mut f = Filling {
            inbox: &mut i,
            target: &mut buf,
            filled: 0,
            ext: None,
        };
        f.message(from(), b"abc");
        f.message(from(), b"defg");
        f.message(from(), b"hi");
        assert_eq!(f.filled, 5);
        assert_eq!(&buf, b"abcde");
        let mut rest = [0u8; 8];
        assert_eq!(i.take(&mut rest, false), 4);
        assert_eq!(&rest[..4], b"fghi");
        // An end of stream that comes with the bytes still counts.
        let mut buf = [0u8; 8];
        let mut f = Filling {
            inbox: &mut i,
            target: &mut buf,
            filled: 0,
            ext: None,
        };
        f.message(from(), b"xy");
        f.message(from(), b"");
        assert_eq!(f.filled, 2);
        assert!(i.ended());
    }
}

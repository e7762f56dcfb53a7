//! Pushed chunks (`wire` PUSH): a rendezvous message's first bytes, sent right behind its RTS
//! instead of after the receiver's CTS, which saves a round trip. They are handled in turn,
//! after their RTS, which decides where they go:
//! - the RTS matched a posted receive: straight into it (`State::pushing_into`);
//! - the RTS is unexpected: held here until a receive takes the message, then copied into it;
//!   a message whose chunks would take the endpoint past its budget is refused instead, and
//!   its CTS asks for everything;
//! - anything else (a truncated receive is full, the message was discarded): dropped.
//!
//! The CTS tells the sender whether the receiver keeps what was pushed (`F_TAKEN`), so the
//! sender knows where to go on from.

use crate::peer::SlotId;

use crate::hash::Map;

/// Bytes of pushed chunks held for unexpected messages, per endpoint, by default
/// (`Budget::held_pushes`).
#[cfg(test)]
pub const PARK_MAX: usize = 16 << 20;

/// A pushed message: its sender and the sender's handle for it.
pub type PushKey = (SlotId, u64);

/// Pushed chunks of one message: (offset in the message, bytes).
pub type Pieces = Vec<(u64, Box<[u8]>)>;

/// What became of a pushed chunk offered to [`Parked::park`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parking {
    Held,
    /// Its message was refused (past the budget): dropped.
    Refused,
    /// No unexpected message waits for it.
    Unknown,
}

#[derive(Debug, Default)]
struct Entry {
    pieces: Pieces,
    refused: bool,
}

/// The pushed chunks of unexpected messages.
#[derive(Debug)]
pub struct Parked {
    held: Map<PushKey, Entry>,
    bytes: usize,
    peak: usize,
    /// Most chunk bytes held at once.
    max: usize,
}

#[cfg(test)]
impl Default for Parked {
    fn default() -> Parked {
        Parked::new(PARK_MAX)
    }
}

impl Parked {
    /// Holding at most `max` bytes of chunks.
    pub fn new(max: usize) -> Parked {
        Parked {
            held: Map::default(),
            bytes: 0,
            peak: 0,
            max,
        }
    }

    /// An unexpected RTS announced pushed chunks: they are kept from now on.
    pub fn open(&mut self, key: PushKey) {
        // A stale entry (a sender that restarted with the same address and handle) is replaced.
        if let Some(old) = self.held.insert(key, Entry::default()) {
            self.bytes -= bytes_of(&old.pieces);
        }
    }

    pub fn park(&mut self, key: PushKey, offset: u64, payload: &[u8]) -> Parking {
        let Some(e) = self.held.get_mut(&key) else {
            return Parking::Unknown;
        };
        if e.refused {
            return Parking::Refused;
        }
        if self.bytes + payload.len() > self.max {
            self.bytes -= bytes_of(&e.pieces);
            e.pieces = Vec::new();
            e.refused = true;
            return Parking::Refused;
        }
        self.bytes += payload.len();
        self.peak = self.peak.max(self.bytes);
        e.pieces.push((offset, payload.into()));
        Parking::Held
    }

    /// A receive took (or discarded) the message: its chunks so far, or `None` if nothing was
    /// announced for it or it was refused (the sender must send everything after the CTS).
    pub fn take(&mut self, key: PushKey) -> Option<Pieces> {
        let e = self.held.remove(&key)?;
        self.bytes -= bytes_of(&e.pieces);
        crate::hash::shrink(&mut self.held);
        (!e.refused).then_some(e.pieces)
    }

    /// Bytes held, with the table's.
    pub fn memory(&self) -> usize {
        self.bytes + self.held.capacity() * std::mem::size_of::<(PushKey, Entry)>()
    }

    /// The most chunk bytes held at once.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Messages waiting for a receive.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.held.len()
    }
}

fn bytes_of(p: &Pieces) -> usize {
    p.iter().map(|(_, b)| b.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(h: u64) -> PushKey {
        (SlotId(9), h)
    }

    #[test]
    fn chunks_are_held_for_announced_messages_only() {
        let mut p = Parked::default();
        assert_eq!(p.park(key(1), 0, b"abc"), Parking::Unknown);
        p.open(key(1));
        assert_eq!(p.park(key(1), 0, b"abc"), Parking::Held);
        assert_eq!(p.park(key(1), 3, b"de"), Parking::Held);
        assert!(p.memory() >= 5);
        let got = p.take(key(1)).unwrap();
        assert_eq!(got, vec![(0, b"abc"[..].into()), (3, b"de"[..].into())]);
        assert_eq!(p.take(key(1)), None);
        assert_eq!(p.bytes, 0);
        assert_eq!(
            p.park(key(1), 5, b"f"),
            Parking::Unknown,
            "taken: later chunks go elsewhere"
        );
    }

    #[test]
    fn a_message_past_the_budget_is_refused_whole() {
        let mut p = Parked::default();
        p.open(key(1));
        p.open(key(2));
        let big = vec![7u8; PARK_MAX / 2];
        assert_eq!(p.park(key(1), 0, &big), Parking::Held);
        assert_eq!(p.park(key(2), 0, b"x"), Parking::Held);
        assert_eq!(p.park(key(2), 1, &big), Parking::Refused);
        assert_eq!(
            p.bytes,
            PARK_MAX / 2,
            "the refused message's bytes are freed"
        );
        assert_eq!(
            p.park(key(2), 0, b"y"),
            Parking::Refused,
            "and stays refused"
        );
        assert_eq!(p.take(key(2)), None);
        assert_eq!(p.take(key(1)).map(|v| v.len()), Some(1));
        assert_eq!(p.bytes, 0);
    }

    #[test]
    fn reopening_a_key_frees_the_old_bytes() {
        let mut p = Parked::default();
        p.open(key(1));
        assert_eq!(p.park(key(1), 0, b"abc"), Parking::Held);
        p.open(key(1));
        assert_eq!(p.bytes, 0);
        assert_eq!(p.take(key(1)), Some(vec![]));
    }
}

//! The receive side of one peer's message sequence: messages are handed over strictly in
//! sequence, whichever path carried them. A path delivers its own messages in order, so
//! messages wait here only while two paths overlap (a promotion or a demotion in the middle of
//! a stream), or when the handler took one ahead of its turn because its handling does not
//! depend on order (a rendezvous chunk, placed by offset).

use crate::hash::Map;

/// Where a message stands against the sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The next one to hand over.
    Now,
    /// Later messages are missing before it.
    Ahead,
    /// Handed over already: a duplicate.
    Past,
}

enum Early {
    /// Handled ahead of its turn; its number is skipped when the turn comes.
    Done,
    /// Copied, to be handed over in its turn.
    Held(Box<[u8]>),
}

/// One peer's arrivals against the sequence.
pub struct Reorder {
    /// The next number to hand over.
    next: u32,
    /// What came ahead of its turn; allocated only while something did, so a peer whose
    /// messages come in order (every peer, nearly always) keeps a word and a null pointer.
    ahead: Option<Box<Ahead>>,
}

#[derive(Default)]
struct Ahead {
    early: Map<u32, Early>,
    held_bytes: usize,
}

impl Default for Reorder {
    fn default() -> Self {
        Reorder {
            next: FIRST,
            ahead: None,
        }
    }
}

/// The first number of a sequence.
pub const FIRST: u32 = 1;

/// Numbers farther ahead than this are older than the sequence (it wrapped past them), not
/// newer: no path holds that many messages of one peer in flight.
pub(crate) const WINDOW: u32 = 1 << 30;

impl Reorder {
    pub fn turn(&self, seq: u32) -> Turn {
        let d = seq.wrapping_sub(self.next);
        if d == 0 {
            Turn::Now
        } else if d < WINDOW
            && !self
                .ahead
                .as_ref()
                .is_some_and(|a| a.early.contains_key(&seq))
        {
            Turn::Ahead
        } else {
            Turn::Past
        }
    }

    /// The message whose turn it was has been handed over.
    pub fn advance(&mut self) {
        self.next = self.next.wrapping_add(1);
    }

    fn ahead(&mut self) -> &mut Ahead {
        self.ahead.get_or_insert_with(Box::default)
    }

    /// Message `seq`, ahead of its turn, was handled.
    pub fn done_ahead(&mut self, seq: u32) {
        self.ahead().early.insert(seq, Early::Done);
    }

    /// Message `seq`, ahead of its turn, waits for it.
    pub fn hold(&mut self, seq: u32, bytes: &[u8]) {
        let a = self.ahead();
        a.held_bytes += bytes.len();
        a.early.insert(seq, Early::Held(bytes.into()));
    }

    /// The next message to hand over now that its turn came, skipping those handled ahead.
    pub fn ready(&mut self) -> Option<Box<[u8]>> {
        let a = self.ahead.as_mut()?;
        let mut got = None;
        while let Some(early) = a.early.remove(&self.next) {
            self.next = self.next.wrapping_add(1);
            if let Early::Held(b) = early {
                a.held_bytes -= b.len();
                got = Some(b);
                break;
            }
        }
        if a.early.is_empty() {
            self.ahead = None;
        }
        got
    }

    /// The last number handed over in order.
    pub fn last(&self) -> u32 {
        self.next.wrapping_sub(1)
    }

    /// Bytes of messages held for their turn.
    pub fn held_bytes(&self) -> usize {
        self.ahead.as_ref().map_or(0, |a| a.held_bytes)
    }

    /// Heap bytes: the table and the held messages.
    pub fn memory(&self) -> usize {
        self.ahead.as_ref().map_or(0, |a| {
            std::mem::size_of::<Ahead>() + crate::hash::map_bytes(&a.early) + a.held_bytes
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Hands `arrivals` (sequence numbers, some taken ahead of their turn when `early`) to a
    /// reorder stage as the data path does, and returns what was handed over, in order.
    fn run(arrivals: &[(u32, bool)]) -> Vec<u32> {
        let mut r = Reorder::default();
        let mut out = Vec::new();
        for &(seq, early) in arrivals {
            match r.turn(seq) {
                Turn::Now => {
                    out.push(seq);
                    r.advance();
                    while let Some(b) = r.ready() {
                        out.push(u32::from_le_bytes(b[..4].try_into().unwrap()));
                    }
                }
                Turn::Ahead if early => {
                    out.push(seq);
                    r.done_ahead(seq)
                }
                Turn::Ahead => r.hold(seq, &seq.to_le_bytes()),
                Turn::Past => {}
            }
        }
        assert_eq!(r.held_bytes(), 0, "everything held was handed over");
        assert_eq!(r.memory(), 0, "and the table went with it");
        out
    }

    #[test]
    fn holds_what_comes_before_its_turn() {
        assert_eq!(run(&[(2, false), (3, false), (1, false)]), [1, 2, 3]);
    }

    #[test]
    fn skips_what_was_taken_ahead_and_drops_duplicates() {
        let out = run(&[
            (3, true),
            (2, false),
            (3, false),
            (1, false),
            (2, false),
            (4, false),
        ]);
        assert_eq!(out, [3, 1, 2, 4]);
    }

    #[test]
    fn wraps_around() {
        let mut r = Reorder {
            next: u32::MAX,
            ..Reorder::default()
        };
        assert_eq!(r.turn(0), Turn::Ahead);
        r.hold(0, b"zero");
        assert_eq!(r.turn(u32::MAX), Turn::Now);
        r.advance();
        assert_eq!(r.ready().as_deref(), Some(&b"zero"[..]));
        assert_eq!(r.turn(u32::MAX), Turn::Past);
        assert_eq!(r.last(), 0);
    }

    proptest! {
        /// Two paths, each in order, interleaved any way, some messages order-free: every
        /// message is handed over once, and the ordered ones in sequence.
        #[test]
        fn two_in_order_paths_merge_into_one_sequence(
            n in 1u32..200,
            split in proptest::collection::vec(any::<bool>(), 200),
            free in proptest::collection::vec(any::<bool>(), 200),
            interleave in proptest::collection::vec(any::<bool>(), 400),
            duplicate_every in 3usize..20,
        ) {
            let seqs: Vec<u32> = (FIRST..FIRST + n).collect();
            let (a, b): (Vec<u32>, Vec<u32>) = seqs.iter().partition(|&&s| split[s as usize % 200]);
            let (mut ia, mut ib) = (a.into_iter(), b.into_iter());
            let mut arrivals = Vec::new();
            let mut k = 0;
            loop {
                let pick_a = interleave[k % 400];
                k += 1;
                let next = if pick_a { ia.next().or_else(|| ib.next()) } else { ib.next().or_else(|| ia.next()) };
                let Some(s) = next else { break };
                arrivals.push((s, free[s as usize % 200]));
                if k % duplicate_every == 0 {
                    // A resend of something already delivered.
                    arrivals.push((s, free[s as usize % 200]));
                }
            }
            let out = run(&arrivals);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            prop_assert_eq!(&sorted, &seqs, "each message handed over exactly once");
            let ordered: Vec<u32> = out.iter().copied().filter(|&s| !free[s as usize % 200]).collect();
            let mut in_seq = ordered.clone();
            in_seq.sort_unstable();
            prop_assert_eq!(ordered, in_seq, "ordered messages in sequence");
        }
    }
}

//! The peers that want nothing of the promotion policy but a score: on the datagram path, no
//! slot held or awaited, no back-off in force. That is nearly every peer of a large job, so each
//! takes one 16-byte entry in pages indexed by its id (ids are dense from 0) rather than a full
//! entry in a map, and a peer past the last page costs nothing.

use std::time::{Duration, Instant};

use super::score::Score;

/// A peer: its index in the address vector.
pub type PeerId = u32;

/// Entries per page (4 KiB): a small job allocates little, and growing never copies entries.
const PAGE: usize = 256;

/// Stamps count nanoseconds in 56 bits (2.28 years), beside the refusals in the low 8.
const MAX_NANOS: u64 = (1 << 56) - 1;

/// One peer's score and refusals; all zero for a peer never seen.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Entry {
    /// The counts, rounded to f32 between messages (a relative 6e-8): a decision compares the
    /// value just computed, in f64.
    messages: f32,
    bytes: f32,
    /// When the counts were decayed, in nanoseconds since the epoch (the high 56 bits), and the
    /// refusals in a row (the low 8): the next back-off doubles with each refusal, until a
    /// connection comes up. The stamp is exact: messages at one instant add up as in a full
    /// entry, and two peers' heats compare as if neither had been here.
    at: u64,
}

pub(super) struct Table {
    pages: Vec<Box<[Entry]>>,
    /// The first instant seen (`Policy::new` is not given a clock).
    epoch: Option<Instant>,
}

impl Table {
    pub(super) fn new() -> Table {
        Table {
            pages: Vec::new(),
            epoch: None,
        }
    }

    /// `t` in nanoseconds since the epoch. The clock stops 2.28 years after it (scores kept
    /// here stop decaying): longer than a job runs.
    fn nanos(&mut self, t: Instant) -> u64 {
        let epoch = *self.epoch.get_or_insert(t);
        let n = t.saturating_duration_since(epoch).as_nanos();
        u64::try_from(n).unwrap_or(MAX_NANOS).min(MAX_NANOS)
    }

    /// Takes `id`'s score and refusals out, leaving its entry zero.
    pub(super) fn take(&mut self, now: Instant, id: PeerId) -> (Score, u8) {
        self.epoch.get_or_insert(now);
        let (page, i) = (id as usize / PAGE, id as usize % PAGE);
        let e = self
            .pages
            .get_mut(page)
            .map_or(Entry::default(), |p| std::mem::take(&mut p[i]));
        let epoch = self.epoch.expect("set above");
        let score = Score {
            messages: e.messages.into(),
            bytes: e.bytes.into(),
            at: epoch + Duration::from_nanos(e.at >> 8),
        };
        (score, e.at as u8)
    }

    /// Keeps `id`'s score and refusals. A zero entry past the last page is not kept: a peer
    /// never seen, or seen and cold, costs nothing there.
    pub(super) fn put(&mut self, id: PeerId, score: &Score, refusals: u8) {
        let e = Entry {
            messages: score.messages as f32,
            bytes: score.bytes as f32,
            at: self.nanos(score.at) << 8 | u64::from(refusals),
        };
        let (page, i) = (id as usize / PAGE, id as usize % PAGE);
        if page >= self.pages.len() {
            if e.messages == 0.0 && e.bytes == 0.0 && refusals == 0 {
                return;
            }
            self.pages
                .resize_with(page + 1, || vec![Entry::default(); PAGE].into_boxed_slice());
        }
        self.pages[page][i] = e;
    }

    /// Heap bytes: the pages and the vector of them.
    pub(super) fn memory(&self) -> usize {
        self.pages.len() * PAGE * size_of::<Entry>()
            + self.pages.capacity() * size_of::<Box<[Entry]>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_16_bytes_and_an_unseen_peer_costs_nothing() {
        assert_eq!(size_of::<Entry>(), 16);
        let t = Instant::now();
        let mut table = Table::new();
        let (s, r) = table.take(t, 1_000_000);
        assert_eq!((s.messages, s.bytes, r), (0.0, 0.0, 0));
        table.put(1_000_000, &s, 0);
        assert_eq!(table.memory(), 0);
    }

    #[test]
    fn what_is_put_is_taken_back_rounded_to_f32() {
        let t = Instant::now();
        let mut table = Table::new();
        let at = t + Duration::from_nanos(3 * 86_400 * 1_000_000_000 + 1);
        let s = Score {
            messages: 3.0,
            bytes: 1.0 / 3.0,
            at,
        };
        table.put(7, &s, 5);
        // One page, and the vector's room for a few page pointers.
        assert!((PAGE * 16..PAGE * 16 + 16 * 8).contains(&table.memory()));
        let (back, refusals) = table.take(t, 7);
        assert_eq!(refusals, 5);
        assert_eq!(back.messages, 3.0);
        assert_eq!(back.bytes, f64::from((1.0f64 / 3.0) as f32));
        assert_eq!(back.at, at);
        let (zero, refusals) = table.take(t, 7);
        assert_eq!((zero.messages, zero.bytes, refusals), (0.0, 0.0, 0));
    }
}

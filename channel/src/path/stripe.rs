//! Rendezvous data across rails. Each chunk goes to the rail that would finish it first: the
//! one with the fewest chunks on the way for its measured rate (chunks its peers acknowledged
//! per second while it had some on the way), as UCX weighs its lanes by bandwidth. A rail
//! slower than a quarter of the fastest is left out (as UCX drops such a lane), save for one
//! chunk in [`PROBE_EVERY`], which keeps its rate current should it recover. The rest of a
//! peer's messages keep to its home rail (`peer::PeerTable::home_rail`), so their order on
//! the wire is their order in the sequence; chunks are placed by offset wherever they land.

use std::time::{Duration, Instant};

use super::set::{Rail, RailSet};

/// A slow rail gets one chunk in this many, to measure it again.
const PROBE_EVERY: u32 = 64;

/// Chunks acknowledged per rate sample, and the least busy time a sample spans.
const SAMPLE_CHUNKS: u32 = 16;
const SAMPLE_MIN: Duration = Duration::from_micros(200);

/// One rail as the striping sees it.
#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    /// Chunks posted on it and not yet acknowledged.
    on_the_way: u32,
    /// Chunks per second, smoothed; 0 until measured.
    rate: f64,
    /// The sample being taken: chunks acknowledged, and time with chunks on the way.
    done: u32,
    busy: Duration,
    /// Since when `busy` has not been counted (while chunks are on the way).
    mark: Option<Instant>,
    /// Chunks it carried, for the report.
    carried: u64,
}

/// The endpoint's rails, for rendezvous data.
#[derive(Debug)]
pub struct Striping {
    lanes: Vec<Lane>,
    picks: u32,
}

/// What the striping did on one rail, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LaneStats {
    /// Rendezvous chunks sent over the rail.
    pub chunks: u64,
    /// Its measured rate, chunks per second (0 until measured).
    pub chunks_per_s: f64,
}

impl Striping {
    pub fn new(rails: usize) -> Striping {
        Striping {
            lanes: vec![Lane::default(); rails.max(1)],
            picks: 0,
        }
    }

    /// The rail for the next chunk to a peer reached over the rails `usable`, among those
    /// `room` says can take one now; `None` if none can. Rails outside `usable` (down for this
    /// peer, or not shared) do not count, nor does their rate.
    pub fn pick(&mut self, usable: RailSet, room: impl Fn(Rail) -> bool) -> Option<Rail> {
        let usable = RailSet(usable.0 & RailSet::first(self.lanes.len()).0);
        if usable.len() <= 1 {
            let only = usable.iter().next().unwrap_or(Rail(0));
            return room(only).then_some(only);
        }
        self.picks = self.picks.wrapping_add(1);
        let lanes = &self.lanes;
        let fastest = usable
            .iter()
            .map(|r| lanes[r.0 as usize].rate)
            .fold(0.0, f64::max);
        let probe = self.picks.is_multiple_of(PROBE_EVERY);
        let slow = |l: &Lane| l.rate > 0.0 && l.rate * 4.0 < fastest;
        let finish = |l: &Lane| {
            // Unmeasured: taken as fast as the fastest, so it gets its share and a rate.
            let rate = if l.rate > 0.0 {
                l.rate
            } else {
                fastest.max(1.0)
            };
            f64::from(l.on_the_way + 1) / rate
        };
        let mut best: Option<(Rail, f64)> = None;
        for r in usable.iter() {
            let l = &lanes[r.0 as usize];
            if !room(r) || (slow(l) && !probe) {
                continue;
            }
            // A probe goes to the slow rail itself.
            let f = if probe && slow(l) { 0.0 } else { finish(l) };
            if best.is_none_or(|(_, b)| f < b) {
                best = Some((r, f));
            }
        }
        best.map(|(r, _)| r)
    }

    /// A chunk was posted on `rail` at `now`.
    pub fn sent(&mut self, rail: Rail, now: Instant) {
        let Some(l) = self.lanes.get_mut(rail.0 as usize) else {
            return;
        };
        if l.on_the_way == 0 {
            l.mark = Some(now);
        }
        l.on_the_way += 1;
        l.carried += 1;
    }

    /// A chunk posted on `rail` was acknowledged (or failed) at `now`.
    pub fn done(&mut self, rail: Rail, now: Instant) {
        let Some(l) = self.lanes.get_mut(rail.0 as usize) else {
            return;
        };
        if l.on_the_way == 0 {
            return;
        }
        if let Some(m) = l.mark {
            l.busy += now.saturating_duration_since(m);
        }
        l.on_the_way -= 1;
        l.mark = (l.on_the_way > 0).then_some(now);
        l.done += 1;
        if l.done >= SAMPLE_CHUNKS && l.busy >= SAMPLE_MIN {
            let sample = f64::from(l.done) / l.busy.as_secs_f64();
            l.rate = if l.rate == 0.0 {
                sample
            } else {
                0.75 * l.rate + 0.25 * sample
            };
            (l.done, l.busy) = (0, Duration::ZERO);
        }
    }

    /// A chunk posted on `rail` was taken off it unacknowledged (the rail went down for its
    /// peer): it no longer counts as on the way, nor towards the rail's rate.
    pub fn lost(&mut self, rail: Rail, now: Instant) {
        let Some(l) = self.lanes.get_mut(rail.0 as usize) else {
            return;
        };
        if l.on_the_way == 0 {
            return;
        }
        l.on_the_way -= 1;
        if l.on_the_way == 0 {
            if let Some(m) = l.mark.take() {
                l.busy += now.saturating_duration_since(m);
            }
        }
    }

    pub fn stats(&self) -> Vec<LaneStats> {
        self.lanes
            .iter()
            .map(|l| LaneStats {
                chunks: l.carried,
                chunks_per_s: l.rate,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two rails, one carrying `ratio` times as fast: chunks are acknowledged at each rail's
    /// rate, and the striping sends each its share.
    fn shares(ratio: u32, total: u32) -> [u64; 2] {
        let mut s = Striping::new(2);
        let t0 = Instant::now();
        let per_chunk = [Duration::from_micros(50), Duration::from_micros(50) * ratio];
        // When each rail's next chunk is acknowledged, and what it holds.
        let mut queue: [std::collections::VecDeque<Instant>; 2] = Default::default();
        let mut now = t0;
        let mut sent = 0;
        while sent < total || queue.iter().any(|q| !q.is_empty()) {
            // Keep 8 chunks on the way in all, as the endpoint's chunk window does.
            while sent < total && queue[0].len() + queue[1].len() < 8 {
                let r = s.pick(RailSet::first(2), |_| true).expect("room").0 as usize;
                let last = queue[r].back().copied().unwrap_or(now).max(now);
                queue[r].push_back(last + per_chunk[r]);
                s.sent(Rail(r as u8), now);
                sent += 1;
            }
            // The next acknowledgement, on whichever rail it comes.
            let r = (0..2)
                .filter(|&r| !queue[r].is_empty())
                .min_by_key(|&r| queue[r][0])
                .expect("on the way");
            now = queue[r].pop_front().expect("on the way");
            s.done(Rail(r as u8), now);
        }
        let st = s.stats();
        [st[0].chunks, st[1].chunks]
    }

    #[test]
    fn chunks_follow_the_rails_rates() {
        let [a, b] = shares(1, 2000);
        assert!(a.abs_diff(b) <= 100, "equal rails: {a} and {b}");
        let [a, b] = shares(2, 3000);
        let ratio = a as f64 / b as f64;
        assert!(
            (1.6..=2.5).contains(&ratio),
            "a rail twice as fast: {a} and {b}"
        );
        // Ten times slower: below a quarter of the fastest, probed only.
        let [a, b] = shares(10, 4000);
        assert!(b * 30 < a, "a slow rail left out: {a} and {b}");
        assert!(b >= 4000 / PROBE_EVERY as u64 / 2, "but probed: {b}");
    }

    #[test]
    fn one_rail_or_no_room() {
        let mut s = Striping::new(3);
        let (one, three) = (RailSet::first(1), RailSet::first(3));
        assert_eq!(s.pick(one, |_| true), Some(Rail(0)));
        assert_eq!(s.pick(one, |_| false), None);
        assert_eq!(s.pick(three, |r| r == Rail(2)), Some(Rail(2)));
        assert_eq!(s.pick(three, |_| false), None);
        // Rails down for the peer are not picked, nor is a lone one left over them.
        assert_eq!(
            s.pick(three.without(Rail(0)).without(Rail(1)), |_| true),
            Some(Rail(2))
        );
        for _ in 0..10 {
            assert_ne!(s.pick(three.without(Rail(1)), |_| true), Some(Rail(1)));
        }
        // A rail slow beside one that is down is the fastest there is.
        let mut s = Striping::new(3);
        s.lanes[1].rate = 1e6;
        s.lanes[0].rate = 1.0;
        for _ in 0..2 * PROBE_EVERY {
            assert_eq!(
                s.pick(three.without(Rail(1)).without(Rail(2)), |_| true),
                Some(Rail(0))
            );
            assert_eq!(
                s.pick(RailSet::first(2).without(Rail(1)).with(Rail(2)), |_| true)
                    .map(|r| r.0 != 1),
                Some(true)
            );
        }
        // Acknowledgements for what was never sent change nothing.
        let mut s = Striping::new(3);
        s.done(Rail(1), Instant::now());
        s.done(Rail(7), Instant::now());
        assert_eq!(s.stats()[1], LaneStats::default());
    }
}

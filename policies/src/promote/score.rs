//! A peer's recent traffic: message and byte counts that halve every half-life.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub(super) struct Score {
    pub(super) messages: f64,
    pub(super) bytes: f64,
    /// When the counts were last decayed.
    pub(super) at: Instant,
}

impl Score {
    #[cfg(test)]
    pub(super) fn new(now: Instant) -> Score {
        Score {
            messages: 0.0,
            bytes: 0.0,
            at: now,
        }
    }

    /// Decays the counts to `now` (a `now` before the last update decays nothing).
    fn decay(&mut self, now: Instant, half_life: Duration) {
        let dt = now.saturating_duration_since(self.at);
        if dt.is_zero() {
            return;
        }
        let f = 0.5f64.powf(dt.as_secs_f64() / half_life.as_secs_f64().max(1e-9));
        self.messages *= f;
        self.bytes *= f;
        self.at = now;
    }

    pub(super) fn add(&mut self, now: Instant, half_life: Duration, messages: f64, bytes: f64) {
        self.decay(now, half_life);
        self.messages += messages;
        self.bytes += bytes;
    }

    /// How hot the peer is at `now`: its counts as shares of the thresholds (1 or more: hot).
    pub(super) fn heat(&self, now: Instant, c: &super::Config) -> f64 {
        let mut s = *self;
        s.decay(now, c.half_life);
        (s.messages / c.promote_messages.max(f64::MIN_POSITIVE))
            .max(s.bytes / c.promote_bytes.max(f64::MIN_POSITIVE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promote::Config;

    #[test]
    fn counts_halve_every_half_life() {
        let c = Config {
            promote_messages: 10.0,
            promote_bytes: 1e12,
            ..Config::default()
        };
        let t = Instant::now();
        let mut s = Score::new(t);
        s.add(t, c.half_life, 10.0, 0.0);
        assert!((s.heat(t, &c) - 1.0).abs() < 1e-9);
        assert!((s.heat(t + c.half_life, &c) - 0.5).abs() < 1e-9);
        assert!((s.heat(t + 3 * c.half_life, &c) - 0.125).abs() < 1e-9);
        // Decaying is not doing: looking later changes nothing.
        assert!((s.heat(t, &c) - 1.0).abs() < 1e-9);
    }
}

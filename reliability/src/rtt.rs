//! Round-trip time estimation and the retransmission timeout (RFC 6298).
//!
//! Samples come only from datagrams sent once (Karn's rule: an ACK for a retransmitted datagram
//! cannot say which copy it answers). The samples include the receiver's ACK delay; that is
//! deliberate, since the timeout must cover it too.

use core::time::Duration;

use crate::config::Config;

/// Smoothed RTT and its variation. The timeout bounds come from the [`Config`], so that a
/// session does not carry copies of them.
///
/// Kept in nanoseconds: the probe timeout is asked for every datagram sent, and `Duration`
/// arithmetic checks and normalises each step.
#[derive(Debug, Clone, Copy, Default)]
pub struct RttEstimator {
    /// Smoothed RTT; `None` before the first sample.
    srtt: Option<u64>,
    rttvar: u64,
    latest: u64,
}

impl RttEstimator {
    /// An estimator with no sample yet; its timeout is `initial_rto` until the first sample.
    pub fn new() -> Self {
        RttEstimator::default()
    }

    /// Feeds one RTT sample.
    pub fn update(&mut self, sample: Duration) {
        let sample = ns(sample);
        self.latest = sample;
        let srtt = match self.srtt {
            None => {
                self.rttvar = sample / 2;
                sample
            }
            Some(srtt) => {
                let err = srtt.abs_diff(sample);
                self.rttvar = (self.rttvar.saturating_mul(3).saturating_add(err)) / 4;
                srtt.saturating_mul(7).saturating_add(sample) / 8
            }
        };
        self.srtt = Some(srtt);
    }

    /// Smoothed RTT, if any sample was taken.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_nanos)
    }

    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar)
    }

    /// The most recent sample.
    pub fn latest(&self) -> Duration {
        Duration::from_nanos(self.latest)
    }

    /// The retransmission timeout before backoff: SRTT + 4·RTTVAR, within `[min_rto, max_rto]`.
    pub fn rto(&self, config: &Config) -> Duration {
        Duration::from_nanos(self.rto_ns(config))
    }

    fn rto_ns(&self, config: &Config) -> u64 {
        let raw = match self.srtt {
            None => ns(config.initial_rto),
            // RFC 6298's clock-granularity term G is 0 here: Instants have nanosecond resolution.
            Some(srtt) => srtt.saturating_add(self.rttvar.saturating_mul(4)),
        };
        let min = ns(config.min_rto);
        raw.clamp(min, ns(config.max_rto).max(min))
    }

    /// The tail-loss probe timeout: `2·SRTT` plus the peer's ACK delay (assumed to be ours),
    /// at least `min_pto` and at most the retransmission timeout; `initial_rto` before a sample.
    pub fn pto(&self, config: &Config) -> Duration {
        let raw = match self.srtt {
            None => ns(config.initial_rto),
            Some(srtt) => srtt.saturating_mul(2).saturating_add(ns(config.ack_delay)),
        };
        Duration::from_nanos(raw.max(ns(config.min_pto)).min(self.rto_ns(config)))
    }

    /// The timeout after `backoff` consecutive expiries: doubled each time, capped at `max_rto`.
    pub fn backed_off(&self, config: &Config, backoff: u32) -> Duration {
        let base = self.rto(config);
        let factor = 1u32 << backoff.min(20);
        base.saturating_mul(factor)
            .min(config.max_rto.max(config.min_rto))
    }
}

/// `d` in nanoseconds, saturating (u64 nanoseconds last 584 years).
fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    fn cfg(initial: Duration, min: Duration, max: Duration) -> Config {
        Config {
            initial_rto: initial,
            min_rto: min,
            max_rto: max,
            ..Config::default()
        }
    }

    #[test]
    fn rfc6298_first_and_next() {
        let c = cfg(US * 1000, US, Duration::from_secs(1));
        let mut r = RttEstimator::new();
        assert_eq!(r.rto(&c), US * 1000);
        r.update(US * 100);
        assert_eq!(r.srtt(), Some(US * 100));
        assert_eq!(r.rttvar(), US * 50);
        assert_eq!(r.rto(&c), US * 300);
        r.update(US * 200);
        // rttvar = 3/4*50 + 1/4*100 = 62.5; srtt = 7/8*100 + 1/8*200 = 112.5
        assert_eq!(r.rttvar(), Duration::from_nanos(62_500));
        assert_eq!(r.srtt(), Some(Duration::from_nanos(112_500)));
    }

    #[test]
    fn floor_and_backoff() {
        let c = cfg(US * 1000, US * 500, US * 4000);
        let mut r = RttEstimator::new();
        r.update(US * 6);
        assert_eq!(r.rto(&c), US * 500);
        assert_eq!(r.backed_off(&c, 1), US * 1000);
        assert_eq!(r.backed_off(&c, 3), US * 4000);
        assert_eq!(r.backed_off(&c, 40), US * 4000);
    }
}

//! A seeded fault layer in diwarp's own datagram I/O (UD and RD queue pairs): drops,
//! duplicates, reorders, delays and corrupts outgoing datagrams on real sockets, so the
//! reliability engine and the UD error queue can be tested on the kernel path. Off unless
//! configured.
//!
//! # `DIWARP_FAULTS`
//!
//! Read when a UD or RD queue pair is created whose [`QpConfig::faults`] is `None`.
//! Comma-separated `key=value` pairs; every key is optional:
//!
//! | key | value | default | meaning |
//! |---|---|---|---|
//! | `drop` | probability 0..=1 | 0 | the datagram is not sent |
//! | `dup` | probability | 0 | it is sent twice |
//! | `reorder` | probability | 0 | it is held and sent after 1..=`reorder_k` later datagrams, or after `delay_us` at the latest |
//! | `reorder_k` | integer ≥ 1 | 3 | see `reorder` |
//! | `delay` | probability | 0 | it is held for `delay_us` |
//! | `delay_us` | microseconds | 200 | see `delay` and `reorder` |
//! | `corrupt` | probability | 0 | 1..=`corrupt_bytes` random bytes of it are flipped |
//! | `corrupt_bytes` | integer 1..=16 | 2 | see `corrupt` |
//! | `seed` | integer | 0 | the same seed and the same datagrams give the same faults |
//!
//! `DIWARP_FAULTS="drop=0.10,dup=0.05,reorder=0.2,delay_us=200,corrupt=0.02,seed=7"`.
//! An empty value means no faults; an unknown key or a bad value makes queue pair creation
//! fail with [`VerbsError::InvalidArgument`] naming the key.
//!
//! Each datagram draws its five decisions independently. Held datagrams go out when their
//! count or time comes, checked on every later send and on every `poll_cq`, and all of them
//! when the queue pair is dropped: only deliberate drops lose a datagram.
//!
//! [`QpConfig::faults`]: super::QpConfig::faults

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::SockaddrStorage;

use super::rng::SplitMix64;
use super::VerbsError;

/// The environment variable read at queue pair creation.
pub const FAULTS_ENV: &str = "DIWARP_FAULTS";

/// Most bytes one corruption may flip.
pub const MAX_CORRUPT_BYTES: u32 = 16;

/// What the fault layer does to outgoing datagrams; see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// Probability that a datagram is dropped.
    pub drop: f64,
    /// Probability that a datagram is sent twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back behind later ones.
    pub reorder: f64,
    /// A reordered datagram goes out after 1..=`reorder_max` later datagrams.
    pub reorder_max: u32,
    /// Probability that a datagram is delayed by `delay_time`.
    pub delay: f64,
    /// How long a delayed datagram is held, and the longest a reordered one is.
    pub delay_time: Duration,
    /// Probability that a datagram is corrupted.
    pub corrupt: f64,
    /// A corrupted datagram has 1..=`corrupt_max` bytes flipped.
    pub corrupt_max: u32,
    /// Seed of the decisions.
    pub seed: u64,
}

// Probabilities are checked to be in 0..=1 (never NaN) before a layer uses them.
impl Eq for FaultConfig {}

impl Default for FaultConfig {
    /// No faults.
    fn default() -> Self {
        FaultConfig {
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_max: 3,
            delay: 0.0,
            delay_time: Duration::from_micros(200),
            corrupt: 0.0,
            corrupt_max: 2,
            seed: 0,
        }
    }
}

fn bad(key: &str, want: &str) -> VerbsError {
    VerbsError::InvalidArgument(format!("{FAULTS_ENV}: bad value for `{key}` ({want})").into())
}

fn probability(key: &str, v: &str) -> Result<f64, VerbsError> {
    match v.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(bad(key, "a probability in 0..=1")),
    }
}

fn integer(key: &str, v: &str) -> Result<u64, VerbsError> {
    v.parse::<u64>()
        .map_err(|_| bad(key, "a non-negative integer"))
}

impl FaultConfig {
    /// Parses the `DIWARP_FAULTS` syntax (see the [module docs](self)).
    pub fn parse(spec: &str) -> Result<FaultConfig, VerbsError> {
        let mut c = FaultConfig::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(VerbsError::InvalidArgument(
                    format!("{FAULTS_ENV}: `{item}` is not key=value").into(),
                ));
            };
            let (key, v) = (key.trim(), value.trim());
            match key {
                "drop" => c.drop = probability(key, v)?,
                "dup" => c.duplicate = probability(key, v)?,
                "reorder" => c.reorder = probability(key, v)?,
                "delay" => c.delay = probability(key, v)?,
                "corrupt" => c.corrupt = probability(key, v)?,
                "reorder_k" => {
                    c.reorder_max = u32::try_from(integer(key, v)?)
                        .ok()
                        .filter(|&k| k >= 1)
                        .ok_or_else(|| bad(key, "an integer >= 1"))?
                }
                "corrupt_bytes" => {
                    c.corrupt_max = u32::try_from(integer(key, v)?)
                        .ok()
                        .filter(|n| (1..=MAX_CORRUPT_BYTES).contains(n))
                        .ok_or_else(|| bad(key, "an integer in 1..=16"))?
                }
                "delay_us" => c.delay_time = Duration::from_micros(integer(key, v)?),
                "seed" => c.seed = integer(key, v)?,
                _ => {
                    return Err(VerbsError::InvalidArgument(
                        format!(
                            "{FAULTS_ENV}: unknown key `{key}` (known: drop, dup, reorder, \
                             reorder_k, delay, delay_us, corrupt, corrupt_bytes, seed)"
                        )
                        .into(),
                    ))
                }
            }
        }
        Ok(c)
    }

    /// The configuration in `DIWARP_FAULTS`, if it is set and not empty.
    pub fn from_env() -> Result<Option<FaultConfig>, VerbsError> {
        match std::env::var(FAULTS_ENV) {
            Ok(s) if !s.trim().is_empty() => FaultConfig::parse(&s).map(Some),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(VerbsError::InvalidArgument(
                format!("{FAULTS_ENV} is not valid UTF-8").into(),
            )),
        }
    }

    /// Checks the ranges `parse` enforces, for a configuration built in code.
    pub fn validate(&self) -> Result<(), VerbsError> {
        for (key, p) in [
            ("drop", self.drop),
            ("dup", self.duplicate),
            ("reorder", self.reorder),
            ("delay", self.delay),
            ("corrupt", self.corrupt),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(bad(key, "a probability in 0..=1"));
            }
        }
        if self.reorder_max == 0 {
            return Err(bad("reorder_k", "an integer >= 1"));
        }
        if !(1..=MAX_CORRUPT_BYTES).contains(&self.corrupt_max) {
            return Err(bad("corrupt_bytes", "an integer in 1..=16"));
        }
        Ok(())
    }
}

/// What the fault layer did since the queue pair was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FaultStats {
    /// Datagrams submitted to the layer.
    pub datagrams: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub delayed: u64,
    pub corrupted: u64,
}

/// Several queue pairs' fault layers as one.
impl std::ops::AddAssign for FaultStats {
    fn add_assign(&mut self, o: FaultStats) {
        self.datagrams += o.datagrams;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.delayed += o.delayed;
        self.corrupted += o.corrupted;
    }
}

fn gather(iov: &[IoSlice<'_>]) -> Vec<u8> {
    let mut v = Vec::with_capacity(iov.iter().map(|s| s.len()).sum());
    for s in iov {
        v.extend_from_slice(s);
    }
    v
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    No,
    /// Released after this many later datagrams (or at the time limit).
    Reorder(u32),
    Delay,
}

/// The fate of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decision {
    drop: bool,
    duplicate: bool,
    /// Bytes to flip (0: none).
    corrupt: u32,
    hold: Hold,
}

struct Held {
    dst: SockaddrStorage,
    data: Vec<u8>,
    due: Instant,
    /// Later datagrams still to pass before it goes (reorder only).
    after: Option<u32>,
}

/// The layer itself: decisions, held datagrams and counters. It sends through the function
/// it is given, so the decisions can be tested without sockets.
pub(crate) struct FaultLayer {
    config: FaultConfig,
    rng: SplitMix64,
    held: VecDeque<Held>,
    stats: FaultStats,
}

impl FaultLayer {
    pub(crate) fn new(config: FaultConfig) -> Result<FaultLayer, VerbsError> {
        config.validate()?;
        Ok(FaultLayer {
            rng: SplitMix64::new(config.seed),
            config,
            held: VecDeque::new(),
            stats: FaultStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> FaultStats {
        self.stats
    }

    pub(crate) fn held_bytes(&self) -> usize {
        self.held.iter().map(|h| h.data.capacity()).sum()
    }

    /// When the earliest held datagram is due.
    pub(crate) fn next_release(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.due).min()
    }

    fn decide(&mut self) -> Decision {
        let c = &self.config;
        // Five draws for every datagram, whatever they decide.
        let drop = self.rng.chance(c.drop);
        let duplicate = self.rng.chance(c.duplicate);
        let corrupt = self.rng.chance(c.corrupt);
        let reorder = self.rng.chance(c.reorder);
        let delay = self.rng.chance(c.delay);
        let (corrupt_max, reorder_max) = (c.corrupt_max, c.reorder_max);
        Decision {
            drop,
            duplicate,
            corrupt: if corrupt {
                1 + self.rng.below(u64::from(corrupt_max)) as u32
            } else {
                0
            },
            hold: if delay {
                Hold::Delay
            } else if reorder {
                Hold::Reorder(1 + self.rng.below(u64::from(reorder_max)) as u32)
            } else {
                Hold::No
            },
        }
    }

    /// Flips `n` distinct bytes of `data` (fewer if it is shorter) to other values.
    fn corrupt(&mut self, data: &mut [u8], n: u32) {
        let n = (n as usize).min(data.len());
        let mut used = [usize::MAX; MAX_CORRUPT_BYTES as usize];
        for i in 0..n {
            let mut pos = self.rng.below(data.len() as u64) as usize;
            while used[..i].contains(&pos) {
                pos = (pos + 1) % data.len();
            }
            used[i] = pos;
            data[pos] ^= 1 + self.rng.below(255) as u8;
        }
    }

    /// Puts one datagram through the layer. Returns what the real send returned, or the
    /// datagram's length when the layer dropped or held it: to the caller a fault looks like
    /// the network's doing, never like a local error.
    pub(crate) fn submit<E>(
        &mut self,
        now: Instant,
        iov: &[IoSlice<'_>],
        dst: &SockaddrStorage,
        emit: &mut E,
    ) -> Result<usize, Errno>
    where
        E: FnMut(&[IoSlice<'_>], &SockaddrStorage) -> Result<usize, Errno>,
    {
        let len: usize = iov.iter().map(|s| s.len()).sum();
        self.stats.datagrams += 1;
        let d = self.decide();
        let mut new_hold = None;
        let result = if d.drop {
            self.stats.dropped += 1;
            Ok(len)
        } else {
            let mut owned = None;
            if d.corrupt > 0 && len > 0 {
                let mut data = gather(iov);
                self.corrupt(&mut data, d.corrupt);
                self.stats.corrupted += 1;
                owned = Some(data);
            }
            match d.hold {
                Hold::No => {
                    let r = match &owned {
                        Some(data) => emit(&[IoSlice::new(data)], dst),
                        None => emit(iov, dst),
                    };
                    if d.duplicate && r.is_ok() {
                        self.stats.duplicated += 1;
                        let _ = match &owned {
                            Some(data) => emit(&[IoSlice::new(data)], dst),
                            None => emit(iov, dst),
                        };
                    }
                    r
                }
                hold => {
                    let data = owned.unwrap_or_else(|| gather(iov));
                    if d.duplicate {
                        // One copy now, the other held: duplicated and reordered.
                        self.stats.duplicated += 1;
                        let _ = emit(&[IoSlice::new(&data)], dst);
                    }
                    let (after, wait) = match hold {
                        Hold::Reorder(k) => {
                            self.stats.reordered += 1;
                            (Some(k), self.config.delay_time)
                        }
                        _ => {
                            self.stats.delayed += 1;
                            (None, self.config.delay_time)
                        }
                    };
                    new_hold = Some(Held {
                        dst: *dst,
                        data,
                        due: now + wait,
                        after,
                    });
                    Ok(len)
                }
            }
        };
        // This datagram counts as "later" for those held before it, not for itself.
        for h in &mut self.held {
            if let Some(a) = &mut h.after {
                *a = a.saturating_sub(1);
            }
        }
        self.release(now, emit);
        self.held.extend(new_hold);
        result
    }

    /// Sends the held datagrams that are due at `now` (by count or time).
    pub(crate) fn release<E>(&mut self, now: Instant, emit: &mut E)
    where
        E: FnMut(&[IoSlice<'_>], &SockaddrStorage) -> Result<usize, Errno>,
    {
        let mut i = 0;
        while i < self.held.len() {
            let h = &mut self.held[i];
            if h.after != Some(0) && h.due > now {
                i += 1;
                continue;
            }
            match emit(&[IoSlice::new(&h.data)], &h.dst) {
                // The socket is full: keep it, it goes at the next chance.
                Err(Errno::EAGAIN | Errno::ENOBUFS) => {
                    h.after = Some(0);
                    i += 1;
                }
                // Sent, or refused as the network would refuse it.
                _ => {
                    self.held.remove(i);
                }
            }
        }
    }

    /// Sends every held datagram now.
    pub(crate) fn flush<E>(&mut self, emit: &mut E)
    where
        E: FnMut(&[IoSlice<'_>], &SockaddrStorage) -> Result<usize, Errno>,
    {
        for h in self.held.drain(..) {
            let _ = emit(&[IoSlice::new(&h.data)], &h.dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn dst() -> SockaddrStorage {
        SockaddrStorage::from("127.0.0.1:9".parse::<SocketAddr>().unwrap())
    }

    /// Runs `n` numbered datagrams through a layer, releasing held ones with the clock moving
    /// 10 µs per datagram; returns what came out, in order, and the counters.
    fn run(config: FaultConfig, n: u32) -> (Vec<Vec<u8>>, FaultStats) {
        let mut layer = FaultLayer::new(config).unwrap();
        let mut out = Vec::new();
        let mut emit = |iov: &[IoSlice<'_>], _: &SockaddrStorage| {
            let d = gather(iov);
            let len = d.len();
            out.push(d);
            Ok(len)
        };
        let t0 = Instant::now();
        let d = dst();
        for i in 0..n {
            let now = t0 + Duration::from_micros(10 * u64::from(i));
            let body = [i.to_be_bytes(), [0xAB; 4]].concat();
            layer
                .submit(
                    now,
                    &[IoSlice::new(&body[..4]), IoSlice::new(&body[4..])],
                    &d,
                    &mut emit,
                )
                .unwrap();
        }
        layer.flush(&mut emit);
        let stats = layer.stats();
        (out, stats)
    }

    fn mix() -> FaultConfig {
        FaultConfig::parse("drop=0.10,dup=0.05,reorder=0.2,delay_us=200,corrupt=0.02,seed=7")
            .unwrap()
    }

    #[test]
    fn parses_the_documented_example() {
        let c = mix();
        assert_eq!(
            c,
            FaultConfig {
                drop: 0.10,
                duplicate: 0.05,
                reorder: 0.2,
                delay_time: Duration::from_micros(200),
                corrupt: 0.02,
                seed: 7,
                ..FaultConfig::default()
            }
        );
        let all = FaultConfig::parse(
            " drop=0, dup=1 ,reorder=0.5,reorder_k=9,delay=0.25,delay_us=5,corrupt=1,corrupt_bytes=16,seed=18446744073709551615,",
        )
        .unwrap();
        assert_eq!(
            (all.reorder_max, all.corrupt_max, all.seed),
            (9, 16, u64::MAX)
        );
        assert_eq!(FaultConfig::parse("").unwrap(), FaultConfig::default());
    }

    #[test]
    fn parse_errors_name_the_key() {
        for (spec, key) in [
            ("drop=1.5", "`drop`"),
            ("dup=x", "`dup`"),
            ("reorder=-0.1", "`reorder`"),
            ("reorder_k=0", "`reorder_k`"),
            ("corrupt_bytes=17", "`corrupt_bytes`"),
            ("delay_us=-3", "`delay_us`"),
            ("seed=abc", "`seed`"),
            ("drop=0.1,lose=0.2", "`lose`"),
            ("drop", "`drop`"),
        ] {
            let e = FaultConfig::parse(spec).unwrap_err();
            assert!(
                matches!(&e, VerbsError::InvalidArgument(m) if m.contains(key)),
                "{spec}: {e}"
            );
        }
        let nan = FaultConfig {
            drop: f64::NAN,
            ..FaultConfig::default()
        };
        assert!(nan.validate().is_err());
    }

    #[test]
    fn off_changes_nothing() {
        let (out, stats) = run(FaultConfig::default(), 1000);
        assert_eq!(out.len(), 1000);
        for (i, d) in out.iter().enumerate() {
            assert_eq!(&d[..4], &(i as u32).to_be_bytes());
        }
        assert_eq!(
            stats,
            FaultStats {
                datagrams: 1000,
                ..FaultStats::default()
            }
        );
    }

    #[test]
    fn deterministic_for_a_seed() {
        let (a, sa) = run(mix(), 5000);
        let (b, sb) = run(mix(), 5000);
        assert_eq!(a, b);
        assert_eq!(sa, sb);
        let (c, _) = run(FaultConfig { seed: 8, ..mix() }, 5000);
        assert_ne!(a, c);
    }

    #[test]
    fn rates_match_the_probabilities() {
        let n = 100_000;
        let config = FaultConfig {
            drop: 0.10,
            duplicate: 0.05,
            reorder: 0.20,
            delay: 0.03,
            corrupt: 0.02,
            seed: 42,
            ..FaultConfig::default()
        };
        let (out, s) = run(config, n);
        let rate = |x: u64| x as f64 / f64::from(n);
        assert!((rate(s.dropped) - 0.10).abs() < 0.005, "{s:?}");
        // Duplicates, corruptions and holds are counted only for datagrams not dropped.
        assert!((rate(s.duplicated) - 0.9 * 0.05).abs() < 0.004, "{s:?}");
        assert!((rate(s.corrupted) - 0.9 * 0.02).abs() < 0.003, "{s:?}");
        assert!((rate(s.delayed) - 0.9 * 0.03).abs() < 0.003, "{s:?}");
        assert!(
            (rate(s.reordered) - 0.9 * 0.97 * 0.20).abs() < 0.006,
            "{s:?}"
        );
        assert_eq!(out.len() as u64, u64::from(n) - s.dropped + s.duplicated);
        // A flipped byte makes a datagram unlike any original (unless it turned one id into
        // another, which the low id byte can), and a corrupted duplicate is sent twice.
        let original = |d: &Vec<u8>| {
            d.len() == 8
                && d[4..] == [0xAB; 4]
                && u32::from_be_bytes(d[..4].try_into().unwrap()) < n
        };
        let changed = out.iter().filter(|d| !original(d)).count() as u64;
        assert!(
            changed >= s.corrupted / 2 && changed <= 2 * s.corrupted,
            "{changed} vs {s:?}"
        );
    }

    #[test]
    fn reordered_datagrams_come_after_one_to_k_later_ones() {
        let config = FaultConfig {
            reorder: 0.3,
            reorder_max: 4,
            delay_time: Duration::from_secs(3600),
            seed: 3,
            ..FaultConfig::default()
        };
        let (out, s) = run(config, 2000);
        assert!(s.reordered > 400, "{s:?}");
        assert_eq!(out.len(), 2000);
        let ids: Vec<u32> = out
            .iter()
            .map(|d| u32::from_be_bytes(d[..4].try_into().unwrap()))
            .collect();
        let mut seen = ids.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..2000).collect::<Vec<_>>(), "each exactly once");
        // No datagram is overtaken by more than reorder_max later ones... plus those that
        // were themselves held and released at the same moment.
        let mut late = 0;
        for (pos, &id) in ids.iter().enumerate() {
            let overtaken_by = ids[..pos].iter().filter(|&&x| x > id).count();
            assert!(
                overtaken_by <= 8,
                "datagram {id} overtaken by {overtaken_by}"
            );
            late += usize::from(overtaken_by > 0);
        }
        assert!(late as u64 >= s.reordered * 9 / 10, "{late} vs {s:?}");
    }

    #[test]
    fn held_datagrams_wait_for_their_time() {
        let config = FaultConfig {
            delay: 1.0,
            delay_time: Duration::from_micros(100),
            ..FaultConfig::default()
        };
        let mut layer = FaultLayer::new(config).unwrap();
        let mut sent = 0;
        let mut emit = |_: &[IoSlice<'_>], _: &SockaddrStorage| {
            sent += 1;
            Ok(1)
        };
        let t0 = Instant::now();
        assert_eq!(layer.held_bytes(), 0);
        layer
            .submit(t0, &[IoSlice::new(&[7; 1000])], &dst(), &mut emit)
            .unwrap();
        assert_eq!(layer.next_release(), Some(t0 + Duration::from_micros(100)));
        layer.release(t0 + Duration::from_micros(99), &mut emit);
        assert_eq!(layer.held.len(), 1);
        assert_eq!(
            layer.held_bytes(),
            1000,
            "the memory ledger's fault_layer account"
        );
        layer.release(t0 + Duration::from_micros(100), &mut emit);
        assert!(layer.held.is_empty());
        assert_eq!(layer.held_bytes(), 0);
        assert_eq!(sent, 1);
    }

    #[test]
    fn a_full_socket_keeps_held_datagrams() {
        let config = FaultConfig {
            delay: 1.0,
            delay_time: Duration::ZERO,
            ..FaultConfig::default()
        };
        let mut layer = FaultLayer::new(config).unwrap();
        let t0 = Instant::now();
        let mut full = |_: &[IoSlice<'_>], _: &SockaddrStorage| Err(Errno::EAGAIN);
        layer
            .submit(t0, &[IoSlice::new(b"x")], &dst(), &mut full)
            .unwrap();
        layer.release(t0, &mut full);
        assert_eq!(layer.held.len(), 1);
        let mut ok = |_: &[IoSlice<'_>], _: &SockaddrStorage| Ok(1);
        layer.release(t0, &mut ok);
        assert!(layer.held.is_empty());
    }
}

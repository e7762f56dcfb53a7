//! splitmix64: a tiny seedable generator for fault decisions and session ids. Not for secrets:
//! session ids only need to differ between incarnations, not to resist guessing.

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// Seeded from the clock, the process id and `salt`, so two incarnations (or two queue
    /// pairs of one process) draw different ids.
    pub(crate) fn from_entropy(salt: u64) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let pid = u64::from(std::process::id());
        let mut r =
            SplitMix64::new(nanos ^ pid.rotate_left(32) ^ salt.wrapping_mul(0x2545_f491_4f6c_dd1d));
        r.next_u64();
        r
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p`; consumes one draw whatever `p` is, so the decisions of one
    /// datagram never shift those of the next.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        let x = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        x < p
    }
}

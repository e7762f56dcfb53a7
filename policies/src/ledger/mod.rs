//! The memory ledger: every byte of transport state in a named [`Account`], with its current
//! and peak bytes and, for the accounts that grow with peers, how many peers they cover.
//!
//! Layers do not know the ledger: each reports its bytes in a typed structure of its own, and
//! the caller (the provider) charges them to accounts in a [`Sample`], which the ledger takes
//! whole. Peaks are the most seen at a sample, or the most a layer itself saw between samples
//! (a layer that tracks its own peak reports it in [`Usage::peak`]).

mod account;
mod serialize;

pub use account::{Account, Scale};

/// What one layer (or several, summed) holds in one account at a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: usize,
    /// The most the layer held between samples, where it keeps track (0 where it does not).
    pub peak: usize,
    /// Peers the bytes cover, for accounts that grow with peers.
    pub peers: Option<usize>,
}

impl Usage {
    pub fn bytes(bytes: usize) -> Usage {
        Usage {
            bytes,
            ..Usage::default()
        }
    }

    pub fn per_peer(bytes: usize, peers: usize) -> Usage {
        Usage {
            bytes,
            peak: 0,
            peers: Some(peers),
        }
    }
}

/// Every account's usage at one moment. Charges to the same account add up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    usage: Vec<Usage>,
}

impl Default for Sample {
    fn default() -> Sample {
        Sample {
            usage: vec![Usage::default(); Account::ALL.len()],
        }
    }
}

impl Sample {
    /// Adds `u` to `account`: bytes and peaks add, peer counts add where given.
    pub fn charge(&mut self, account: Account, u: Usage) -> &mut Sample {
        let e = &mut self.usage[account as usize];
        e.bytes += u.bytes;
        e.peak += u.peak;
        e.peers = match (e.peers, u.peers) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self
    }

    pub fn get(&self, account: Account) -> Usage {
        self.usage[account as usize]
    }

    /// All accounts' bytes.
    pub fn total(&self) -> usize {
        self.usage.iter().map(|u| u.bytes).sum()
    }
}

/// One account in the ledger.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub current: usize,
    pub peak: usize,
    pub peers: Option<usize>,
}

/// The accounts, their peaks, and the peak of their sum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ledger {
    entries: Vec<Entry>,
    total_peak: usize,
    samples: u64,
}

impl Default for Ledger {
    fn default() -> Ledger {
        Ledger {
            entries: vec![Entry::default(); Account::ALL.len()],
            total_peak: 0,
            samples: 0,
        }
    }
}

impl Ledger {
    /// Takes a sample: every account's current bytes become the sample's, peaks rise to it.
    pub fn record(&mut self, s: &Sample) {
        for (e, u) in self.entries.iter_mut().zip(&s.usage) {
            e.current = u.bytes;
            e.peak = e.peak.max(u.bytes).max(u.peak);
            e.peers = u.peers;
        }
        self.total_peak = self.total_peak.max(s.total());
        self.samples += 1;
    }

    pub fn get(&self, account: Account) -> Entry {
        self.entries[account as usize]
    }

    /// Every account with its entry, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Account, Entry)> + '_ {
        Account::ALL.iter().map(|&a| (a, self.get(a)))
    }

    /// The sum of every account at the last sample.
    pub fn total(&self) -> usize {
        self.entries.iter().map(|e| e.current).sum()
    }

    /// The most the accounts held together at any sample (at most the sum of their peaks,
    /// which need not have come at once).
    pub fn total_peak(&self) -> usize {
        self.total_peak
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests;

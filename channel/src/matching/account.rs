//! Where the matcher charges the memory unexpected messages hold.

/// A memory account. The matcher charges each unexpected message when it is buffered and
/// releases the same amount when the message leaves its custody.
pub trait Account {
    /// `bytes` more are held.
    fn charge(&mut self, bytes: usize);
    /// `bytes` charged earlier are no longer held.
    fn release(&mut self, bytes: usize);
}

/// A stand-alone account: the bytes held now and the most ever held at once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemCounter {
    current: usize,
    peak: usize,
}

impl MemCounter {
    /// An empty account.
    pub fn new() -> MemCounter {
        MemCounter::default()
    }

    /// Bytes held now.
    pub fn current(&self) -> usize {
        self.current
    }

    /// The high-water mark.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

impl Account for MemCounter {
    fn charge(&mut self, bytes: usize) {
        self.current += bytes;
        self.peak = self.peak.max(self.current);
    }

    fn release(&mut self, bytes: usize) {
        debug_assert!(bytes <= self.current, "released more than was charged");
        self.current = self.current.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_current_and_peak() {
        let mut a = MemCounter::new();
        a.charge(100);
        a.charge(50);
        a.release(120);
        a.charge(10);
        assert_eq!((a.current(), a.peak()), (40, 150));
        a.release(40);
        assert_eq!((a.current(), a.peak()), (0, 150));
    }
}

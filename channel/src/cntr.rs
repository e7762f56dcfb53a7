//! Counters: completion and error counts an endpoint bumps (MPICH always opens one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::sys::{FI_CNTR_EVENTS_COMP, FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_YIELD};

#[derive(Debug)]
pub struct Counter {
    pub domain: Arc<Domain>,
    value: AtomicU64,
    errors: AtomicU64,
}

impl Counter {
    /// Only completion events; there are no wait objects, so waiting polls and yields.
    pub fn open(
        domain: &Arc<Domain>,
        events: u32,
        wait_obj: u32,
        flags: u64,
    ) -> Result<Arc<Counter>> {
        if events != FI_CNTR_EVENTS_COMP || flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        if ![FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_YIELD].contains(&wait_obj) {
            return Err(Errno::NOSYS);
        }
        Ok(Arc::new(Counter {
            domain: Arc::clone(domain),
            value: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }))
    }

    pub fn read(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }

    pub fn read_err(&self) -> u64 {
        self.errors.load(Ordering::Acquire)
    }

    pub fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::AcqRel);
    }

    pub fn set(&self, n: u64) {
        self.value.store(n, Ordering::Release);
    }

    pub fn add_err(&self, n: u64) {
        self.errors.fetch_add(n, Ordering::AcqRel);
    }

    pub fn set_err(&self, n: u64) {
        self.errors.store(n, Ordering::Release);
    }

    /// Waits until the count reaches `threshold`; an error counted meanwhile ends the wait
    /// with FI_EAVAIL, as libfabric specifies. `None` waits forever.
    pub fn wait(&self, threshold: u64, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let errors = self.read_err();
        loop {
            if self.read() >= threshold {
                return Ok(());
            }
            if self.read_err() != errors {
                return Err(Errno(crate::sys::FI_EAVAIL));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Errno::TIMEDOUT);
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::domain;

    #[test]
    fn counts_and_waits() {
        let c = Counter::open(&domain(), FI_CNTR_EVENTS_COMP, FI_WAIT_UNSPEC, 0).unwrap();
        c.add(3);
        c.add(2);
        assert_eq!(c.read(), 5);
        c.set(1);
        assert_eq!(c.read(), 1);
        c.add_err(1);
        c.set_err(4);
        assert_eq!(c.read_err(), 4);
        assert_eq!(c.wait(1, Some(Duration::ZERO)), Ok(()));
        assert_eq!(
            c.wait(2, Some(Duration::from_millis(5))),
            Err(Errno::TIMEDOUT)
        );
    }

    #[test]
    fn wait_objects_are_refused() {
        let d = domain();
        let fd = crate::sys::FI_WAIT_FD;
        assert_eq!(
            Counter::open(&d, FI_CNTR_EVENTS_COMP, fd, 0).err(),
            Some(Errno::NOSYS)
        );
        assert_eq!(
            Counter::open(&d, 7, FI_WAIT_NONE, 0).err(),
            Some(Errno::BADFLAGS)
        );
    }
}

//! Memory registration for RDMA Write and RDMA Read on RC queue pairs (RFC 5040 §2.1, §5.4).
//!
//! A [`Region`] is memory the queue pair may place into or read from on the peer's behalf. It
//! is a trait, not a slice, because the peer's segments arrive while the caller holds no
//! borrow: the queue pair keeps an `Arc` of it and reaches it through `read_at`/`write_at`.
//! This crate forbids `unsafe`, so its one implementation is an owned, locked buffer
//! ([`VecRegion`]); a C-facing crate implements the trait over raw memory in its own FFI code.
//!
//! Each queue pair has its own table: an STag names a region of that queue pair only (the
//! "STag associated with this stream" rule comes for free). Tagged offsets are zero-based
//! offsets into the region.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard};

use super::VerbsError;

/// Memory a queue pair places into and reads from.
///
/// The queue pair only calls these with `offset + buf.len() <= self.len()`, checked against
/// the length taken at registration: a region must not shrink while it is registered.
pub trait Region: Send + Sync {
    /// Its length in bytes.
    fn len(&self) -> usize;

    /// Whether it is empty (only zero-length operations fit).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst`.
    fn read_at(&self, offset: usize, dst: &mut [u8]);

    /// Copies `src` into the region at `offset`.
    fn write_at(&self, offset: usize, src: &[u8]);
}

/// A region over an owned buffer, behind a lock so the queue pair and its owner can both
/// reach it.
pub struct VecRegion {
    buf: Mutex<Vec<u8>>,
    len: usize,
}

impl VecRegion {
    /// `len` zero bytes.
    pub fn new(len: usize) -> VecRegion {
        VecRegion::from_vec(vec![0; len])
    }

    /// Takes over `buf` as it is.
    pub fn from_vec(buf: Vec<u8>) -> VecRegion {
        VecRegion {
            len: buf.len(),
            buf: Mutex::new(buf),
        }
    }

    /// A copy of the contents.
    pub fn to_vec(&self) -> Vec<u8> {
        self.lock().clone()
    }

    /// Runs `f` on the contents, locked; the length cannot change.
    pub fn with<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        // A panic elsewhere while holding the lock leaves plain bytes behind: still usable.
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for VecRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VecRegion").field("len", &self.len).finish()
    }
}

impl Region for VecRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn read_at(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.lock()[offset..offset + dst.len()]);
    }

    fn write_at(&self, offset: usize, src: &[u8]) {
        self.lock()[offset..offset + src.len()].copy_from_slice(src);
    }
}

/// What a registration allows besides reading it locally (which needs no permission: RDMA
/// Write sends from the caller's slice, not from a region).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Access {
    /// Read Responses may be placed into it (the sink of this side's RDMA Reads).
    pub local_write: bool,
    /// The peer may RDMA Read it.
    pub remote_read: bool,
    /// The peer may RDMA Write it.
    pub remote_write: bool,
}

impl Access {
    /// Nothing beyond local reads.
    pub const NONE: Access = Access {
        local_write: false,
        remote_read: false,
        remote_write: false,
    };
    /// Everything.
    pub const ALL: Access = Access {
        local_write: true,
        remote_read: true,
        remote_write: true,
    };
}

/// A steering tag (RFC 5040 §2.1): the region's index in the upper 24 bits, a key in the low
/// 8 that changes each time the index is reused, so an STag kept past its deregistration does
/// not reach the next region in the same slot (until the key comes round again). Never 0.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stag(NonZeroU32);

impl Stag {
    /// The STag with this wire value; `None` for 0, which names nothing.
    pub fn from_raw(raw: u32) -> Option<Stag> {
        NonZeroU32::new(raw).map(Stag)
    }

    /// Its wire value.
    pub fn raw(self) -> u32 {
        self.0.get()
    }

    /// The index part (upper 24 bits).
    pub fn index(self) -> u32 {
        self.raw() >> 8
    }

    /// The key part (low 8 bits).
    pub fn key(self) -> u8 {
        self.raw() as u8
    }
}

impl fmt::Debug for Stag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stag({:#010x})", self.raw())
    }
}

impl From<Stag> for u32 {
    fn from(s: Stag) -> u32 {
        s.raw()
    }
}

/// Most regions one queue pair holds: every 24-bit index but 0, which would make STags of 0.
pub const MAX_REGIONS: usize = (1 << 24) - 1;

/// What a lookup is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// An RDMA Write from the peer places into it.
    RemoteWrite,
    /// The peer's RDMA Read takes from it.
    RemoteRead,
    /// A Read Response places into it.
    LocalWrite,
}

/// Why a lookup failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    UnknownStag,
    Access,
    Bounds,
}

struct Entry {
    region: Arc<dyn Region>,
    len: usize,
    access: Access,
}

#[derive(Default)]
struct Slot {
    key: u8,
    entry: Option<Entry>,
}

/// One queue pair's registrations.
#[derive(Default)]
pub(crate) struct MrTable {
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: usize,
}

impl MrTable {
    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub(crate) fn register(
        &mut self,
        region: Arc<dyn Region>,
        access: Access,
    ) -> Result<Stag, VerbsError> {
        let slot = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < MAX_REGIONS => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
            None => {
                return Err(VerbsError::InvalidArgument(
                    "no STag left: 2^24 - 1 regions registered".into(),
                ))
            }
        };
        let s = &mut self.slots[slot];
        let len = region.len();
        s.entry = Some(Entry {
            region,
            len,
            access,
        });
        self.live += 1;
        // slot < 2^24 - 1, so the index is 1..2^24 and the STag is never 0.
        let raw = ((slot as u32 + 1) << 8) | u32::from(s.key);
        Ok(Stag::from_raw(raw).expect("index is not 0"))
    }

    pub(crate) fn deregister(&mut self, stag: Stag) -> Result<(), VerbsError> {
        let Some(i) = self.live_slot(stag.raw()) else {
            return Err(VerbsError::InvalidArgument(
                format!("{stag:?} is not registered").into(),
            ));
        };
        let s = &mut self.slots[i];
        s.entry = None;
        s.key = s.key.wrapping_add(1);
        self.free.push(i);
        self.live -= 1;
        Ok(())
    }

    fn live_slot(&self, stag: u32) -> Option<usize> {
        let i = usize::try_from(stag >> 8).ok()?.checked_sub(1)?;
        let s = self.slots.get(i)?;
        (s.entry.is_some() && s.key == stag as u8).then_some(i)
    }

    /// The region `stag` names, if it allows `use_` and holds `len` bytes at `offset`; with
    /// the offset as an index.
    pub(crate) fn lookup(
        &self,
        stag: u32,
        offset: u64,
        len: usize,
        use_: Use,
    ) -> Result<(&dyn Region, usize), Fault> {
        let i = self.live_slot(stag).ok_or(Fault::UnknownStag)?;
        let e = self.slots[i].entry.as_ref().ok_or(Fault::UnknownStag)?;
        let allowed = match use_ {
            Use::RemoteWrite => e.access.remote_write,
            Use::RemoteRead => e.access.remote_read,
            Use::LocalWrite => e.access.local_write,
        };
        if !allowed {
            return Err(Fault::Access);
        }
        let end = offset.checked_add(len as u64).ok_or(Fault::Bounds)?;
        if end > e.len as u64 {
            return Err(Fault::Bounds);
        }
        // end <= e.len, a usize, so offset fits too.
        Ok((&*e.region, offset as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stags_name_live_regions_only() {
        let mut t = MrTable::default();
        let r: Arc<dyn Region> = Arc::new(VecRegion::new(100));
        let a = t.register(r.clone(), Access::ALL).unwrap();
        assert_ne!(a.raw(), 0);
        assert_eq!(a.index(), 1);
        assert!(t.lookup(a.raw(), 0, 100, Use::RemoteWrite).is_ok());
        assert!(t.lookup(a.raw(), 100, 0, Use::RemoteRead).is_ok());
        assert_eq!(
            t.lookup(a.raw(), 1, 100, Use::RemoteRead).err(),
            Some(Fault::Bounds)
        );
        assert_eq!(
            t.lookup(a.raw(), u64::MAX, 2, Use::RemoteRead).err(),
            Some(Fault::Bounds)
        );
        assert_eq!(
            t.lookup(0, 0, 0, Use::RemoteRead).err(),
            Some(Fault::UnknownStag)
        );
        t.deregister(a).unwrap();
        assert!(t.is_empty());
        assert!(t.deregister(a).is_err());
        assert_eq!(
            t.lookup(a.raw(), 0, 1, Use::RemoteRead).err(),
            Some(Fault::UnknownStag)
        );
        // The slot comes back with another key: the old STag still names nothing.
        let b = t.register(r, Access::NONE).unwrap();
        assert_eq!((b.index(), b.key()), (a.index(), a.key().wrapping_add(1)));
        assert_eq!(
            t.lookup(a.raw(), 0, 1, Use::RemoteRead).err(),
            Some(Fault::UnknownStag)
        );
        assert_eq!(
            t.lookup(b.raw(), 0, 1, Use::RemoteRead).err(),
            Some(Fault::Access)
        );
    }
}

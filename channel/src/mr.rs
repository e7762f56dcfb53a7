//! Memory regions: what `fi_mr_reg` registered in a domain, found by key when a peer's RMA
//! WRITE or READ names it.
//!
//! mr_mode is 0 (FI_MR_SCALABLE): the application picks each key, and a remote address is an
//! offset from the start of the region. MPICH then exchanges nothing but the keys it chose.
//! Every access checks the region's bounds and access flags under the table's lock, so a
//! region closed meanwhile is never touched.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Errno, Result};
use crate::hash::Map;
use crate::raw::mem::UserMem;
use crate::sys::{FI_ENOKEY, FI_REMOTE_READ, FI_REMOTE_WRITE};

/// Why a peer's access was refused (the target logs it; the initiator gets FI_EACCES).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no memory region has key {0:#x}")]
    NoKey(u64),
    #[error("bytes {start}..{end} are outside the region of {len} bytes")]
    Bounds { start: u64, end: u64, len: usize },
    #[error("the region does not grant remote {0}")]
    Access(&'static str),
}

struct Region {
    mem: UserMem,
    access: u64,
}

/// The regions of one domain, shared by its endpoints.
#[derive(Default)]
pub struct MrTable(Mutex<Map<u64, Region>>);

impl std::fmt::Debug for MrTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MrTable({} regions)", self.0.lock().len())
    }
}

pub type SharedMrs = Arc<MrTable>;

impl MrTable {
    /// Registers `mem` under `key`. Access 0 grants everything, as fi_mr_reg(3) says.
    pub fn insert(&self, key: u64, mem: UserMem, access: u64) -> Result<()> {
        let mut map = self.0.lock();
        if map.contains_key(&key) {
            return Err(Errno(FI_ENOKEY));
        }
        let access = if access == 0 { u64::MAX } else { access };
        map.insert(key, Region { mem, access });
        Ok(())
    }

    /// Bytes of the table (the regions themselves are the application's).
    pub fn memory_bytes(&self) -> usize {
        crate::hash::map_bytes(&self.0.lock())
    }

    pub fn remove(&self, key: u64) -> bool {
        self.0.lock().remove(&key).is_some()
    }

    /// Places `bytes` at offset `addr` of region `key`.
    pub fn write(&self, key: u64, addr: u64, bytes: &[u8]) -> std::result::Result<(), Refusal> {
        let map = self.0.lock();
        let (r, at) = check(&map, key, addr, bytes.len(), FI_REMOTE_WRITE, "write")?;
        r.mem.write_at(at, bytes);
        Ok(())
    }

    /// Whether `len` bytes at offset `addr` of region `key` may be read.
    pub fn readable(&self, key: u64, addr: u64, len: usize) -> std::result::Result<(), Refusal> {
        check(&self.0.lock(), key, addr, len, FI_REMOTE_READ, "read").map(|_| ())
    }

    /// Appends `len` bytes from offset `addr` of region `key` to `out`.
    pub fn read(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), Refusal> {
        let map = self.0.lock();
        let (r, at) = check(&map, key, addr, len, FI_REMOTE_READ, "read")?;
        r.mem.read_into(at, len, out);
        Ok(())
    }
}

impl MrTable {
    /// Reads `len` bytes at offset `addr` of region `key`, lets `f` change them, writes them
    /// back and returns what they were: one atomic operation, under the table's lock. `need`
    /// is the access it takes (remote write, remote read, or both).
    pub fn update(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        need: u64,
        f: impl FnOnce(&mut [u8]),
    ) -> std::result::Result<Vec<u8>, Refusal> {
        let map = self.0.lock();
        let what = if need & FI_REMOTE_WRITE != 0 {
            "write"
        } else {
            "read"
        };
        let (r, at) = check(&map, key, addr, len, need, what)?;
        let mut old = Vec::with_capacity(len);
        r.mem.read_into(at, len, &mut old);
        let mut new = old.clone();
        f(&mut new);
        if new != old {
            r.mem.write_at(at, &new);
        }
        Ok(old)
    }
}

/// The region and the offset in it, if `len` bytes at `addr` lie inside it and `need` is
/// granted (every bit of it).
fn check<'a>(
    map: &'a Map<u64, Region>,
    key: u64,
    addr: u64,
    len: usize,
    need: u64,
    what: &'static str,
) -> std::result::Result<(&'a Region, usize), Refusal> {
    let r = map.get(&key).ok_or(Refusal::NoKey(key))?;
    let end = addr.checked_add(len as u64);
    let inside = usize::try_from(addr)
        .ok()
        .zip(end.and_then(|e| usize::try_from(e).ok()))
        .filter(|&(_, e)| e <= r.mem.len());
    let Some((at, _)) = inside else {
        return Err(Refusal::Bounds {
            start: addr,
            end: end.unwrap_or(u64::MAX),
            len: r.mem.len(),
        });
    };
    if r.access & need != need {
        return Err(Refusal::Access(what));
    }
    Ok((r, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::FI_READ;

    #[test]
    fn writes_and_reads_inside_a_region_only() {
        let t = MrTable::default();
        let (mem, shown) = UserMem::owned(vec![0; 16]);
        t.insert(1 << 63, mem, FI_REMOTE_READ | FI_REMOTE_WRITE)
            .unwrap();
        t.write(1 << 63, 4, b"abcd").unwrap();
        assert_eq!(&shown.lock()[..10], b"\0\0\0\0abcd\0\0");
        let mut out = vec![];
        t.read(1 << 63, 5, 3, &mut out).unwrap();
        assert_eq!(out, b"bcd");
        t.write(1 << 63, 12, b"wxyz").unwrap();
        let refused = t.write(1 << 63, 13, b"wxyz").unwrap_err();
        assert_eq!(
            refused,
            Refusal::Bounds {
                start: 13,
                end: 17,
                len: 16
            }
        );
        assert!(t.write(1 << 63, u64::MAX, b"a").is_err(), "no wrap-around");
        assert_eq!(t.read(2, 0, 1, &mut out), Err(Refusal::NoKey(2)));
        assert_eq!(
            &shown.lock()[12..],
            b"wxyz",
            "a refused write writes nothing"
        );
        assert!(
            t.readable(1 << 63, 16, 0).is_ok(),
            "an empty read at the end"
        );
    }

    #[test]
    fn access_flags_are_checked_and_keys_are_unique() {
        let t = MrTable::default();
        let (mem, _) = UserMem::owned(vec![0; 8]);
        t.insert(7, mem.clone(), FI_REMOTE_READ | FI_READ).unwrap();
        assert_eq!(t.write(7, 0, b"x"), Err(Refusal::Access("write")));
        assert!(t.readable(7, 0, 8).is_ok());
        assert_eq!(t.insert(7, mem.clone(), 0), Err(Errno(FI_ENOKEY)));
        assert!(t.remove(7) && !t.remove(7));
        t.insert(7, mem, 0).unwrap();
        assert!(t.write(7, 0, b"x").is_ok(), "access 0 grants all");
    }
}

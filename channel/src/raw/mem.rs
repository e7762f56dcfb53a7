//! Application memory named by the pointers of a send or receive call.
//!
//! libfabric's contract is that a buffer passed to a data operation stays valid, and is not
//! touched by the application, until the operation completes (or, for FI_INJECT, until the
//! call returns); registered memory stays valid until its registration is closed. [`UserMem`] is built only here, from those pointers, and gives the safe
//! layer bounds-checked reads and writes; this module is where that contract is relied upon.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{Errno, Result};
use crate::sys::iovec;

/// One contiguous piece: an address and a length.
#[derive(Clone, Copy, Debug)]
struct Seg {
    addr: usize,
    len: usize,
}

#[derive(Clone, Debug)]
enum Backing {
    /// One application buffer, by address: the common case, which allocates nothing.
    One(Seg),
    /// The application's buffers (an iovec of several), by address.
    Raw(Arc<[Seg]>),
    /// Memory owned by the provider itself: tests of the safe layer.
    Owned(Arc<Mutex<Vec<u8>>>),
}

/// A send's source or a receive's destination: one buffer or an iovec, viewed as one range of
/// `len()` bytes starting `base` bytes into the backing memory.
#[derive(Clone, Debug)]
pub struct UserMem {
    backing: Backing,
    base: usize,
    len: usize,
}

impl UserMem {
    /// A buffer of `len` bytes at `ptr` (any pointer when `len` is 0).
    ///
    /// SAFETY: `ptr` is valid for reads and writes of `len` bytes until the operation it
    /// belongs to completes.
    pub(crate) unsafe fn from_raw(ptr: *const u8, len: usize) -> Result<UserMem> {
        if ptr.is_null() && len > 0 {
            return Err(Errno::INVAL);
        }
        Ok(UserMem {
            backing: Backing::One(Seg {
                addr: ptr as usize,
                len,
            }),
            base: 0,
            len,
        })
    }

    /// The buffers of an iovec array.
    ///
    /// SAFETY: `iov` is null (with `count` 0) or points to `count` iovecs, each valid as for
    /// [`UserMem::from_raw`].
    pub(crate) unsafe fn from_iov(iov: *const iovec, count: usize) -> Result<UserMem> {
        if count == 0 {
            return UserMem::from_raw(std::ptr::null(), 0);
        }
        if iov.is_null() {
            return Err(Errno::INVAL);
        }
        let v = std::slice::from_raw_parts(iov, count);
        let mut segs = Vec::with_capacity(count);
        let mut len = 0usize;
        for e in v {
            if e.iov_base.is_null() && e.iov_len > 0 {
                return Err(Errno::INVAL);
            }
            len = len.checked_add(e.iov_len).ok_or(Errno::INVAL)?;
            segs.push(Seg {
                addr: e.iov_base as usize,
                len: e.iov_len,
            });
        }
        let backing = match segs[..] {
            [one] => Backing::One(one),
            _ => Backing::Raw(segs.into()),
        };
        Ok(UserMem {
            backing,
            base: 0,
            len,
        })
    }

    /// Memory of the provider's own (for tests): the returned handle shows its contents.
    pub fn owned(bytes: Vec<u8>) -> (UserMem, Arc<Mutex<Vec<u8>>>) {
        let len = bytes.len();
        let v = Arc::new(Mutex::new(bytes));
        let m = UserMem {
            backing: Backing::Owned(Arc::clone(&v)),
            base: 0,
            len,
        };
        (m, v)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `len` bytes from `offset` (clamped to what there is).
    pub fn slice(&self, offset: usize, len: usize) -> UserMem {
        let offset = offset.min(self.len);
        UserMem {
            backing: self.backing.clone(),
            base: self.base + offset,
            len: len.min(self.len - offset),
        }
    }

    /// The address of byte `offset`, as completions report a buffer (0 for owned memory).
    pub fn addr_at(&self, offset: usize) -> usize {
        match self.segs() {
            Some(segs) => {
                let mut at = self.base + offset;
                for s in segs.iter() {
                    if at < s.len || s.len == 0 && at == 0 {
                        return s.addr + at;
                    }
                    at -= s.len;
                }
                segs.last().map_or(0, |s| s.addr + s.len)
            }
            None => 0,
        }
    }

    /// The application's buffers, or `None` for memory of the provider's own.
    fn segs(&self) -> Option<&[Seg]> {
        match &self.backing {
            Backing::One(s) => Some(std::slice::from_ref(s)),
            Backing::Raw(segs) => Some(segs),
            Backing::Owned(_) => None,
        }
    }

    /// Calls `f` on each backing piece overlapping `[offset, offset + len)` of this range,
    /// with the piece's position relative to `offset`.
    fn for_pieces(&self, offset: usize, len: usize, mut f: impl FnMut(usize, usize, usize)) {
        let start = self.base + offset.min(self.len);
        let end = self.base + (offset.saturating_add(len)).min(self.len);
        let Some(segs) = self.segs() else {
            return;
        };
        let mut seg_start = 0usize;
        for s in segs.iter() {
            let seg_end = seg_start + s.len;
            let lo = start.max(seg_start);
            let hi = end.min(seg_end);
            if lo < hi {
                f(s.addr + (lo - seg_start), lo - start, hi - lo);
            }
            if seg_end >= end {
                break;
            }
            seg_start = seg_end;
        }
    }

    /// Copies `data` to `offset`; what would fall past the end is not written. Returns the
    /// bytes written.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> usize {
        let n = data.len().min(self.len.saturating_sub(offset));
        match &self.backing {
            Backing::One(_) | Backing::Raw(_) => self.for_pieces(offset, n, |addr, rel, len| {
                // SAFETY: the piece lies inside a buffer the application lent for this
                // operation (from_raw/from_iov), and `rel + len <= n <= data.len()`.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr().add(rel), addr as *mut u8, len)
                }
            }),
            Backing::Owned(v) => {
                let at = self.base + offset;
                v.lock()[at..at + n].copy_from_slice(&data[..n]);
            }
        }
        n
    }

    /// Lets `read` fill bytes from `offset` on, at most `max` and within one piece of the
    /// buffer, straight from where they come (a socket), instead of copying them from a
    /// buffer of the provider's: returns what `read` returned. `Ok(0)` without calling `read`
    /// when nothing lies there.
    pub fn read_at(
        &self,
        offset: usize,
        max: usize,
        read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let n = max.min(self.len.saturating_sub(offset));
        if n == 0 {
            return Ok(0);
        }
        match &self.backing {
            Backing::One(_) | Backing::Raw(_) => {
                let mut first = None;
                self.for_pieces(offset, n, |addr, _, len| {
                    first = first.or(Some((addr, len)));
                });
                let Some((addr, len)) = first.filter(|&(_, len)| len > 0) else {
                    return Ok(0);
                };
                // SAFETY: the piece lies inside a buffer the application lent for this
                // operation (from_raw/from_iov), which it does not touch until the operation
                // completes; nothing else refers to these bytes while `read` runs.
                let dst = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) };
                read(dst)
            }
            Backing::Owned(v) => {
                let at = self.base + offset;
                read(&mut v.lock()[at..at + n])
            }
        }
    }

    /// `len` bytes from `offset` as a `Bytes` that refers to the application's buffer
    /// instead of copying it, when they lie in one contiguous piece of it. The caller keeps the
    /// `Bytes` no longer than the operation lasts (until its completion).
    pub fn lend(&self, offset: usize, len: usize) -> Option<Bytes> {
        self.segs()?;
        let mut piece = None;
        let mut pieces = 0;
        self.for_pieces(offset, len, |addr, _, n| {
            pieces += 1;
            piece = Some(Lent { addr, len: n });
        });
        match piece {
            Some(p) if pieces == 1 && p.len == len => Some(Bytes::from_owner(p)),
            _ => None,
        }
    }

    /// Appends `len` bytes from `offset` (clamped to what there is) to `out`.
    pub fn read_into(&self, offset: usize, len: usize, out: &mut Vec<u8>) {
        let n = len.min(self.len.saturating_sub(offset));
        match &self.backing {
            Backing::One(_) | Backing::Raw(_) => self.for_pieces(offset, n, |addr, _, len| {
                // SAFETY: as in write_at; the application may not write the buffer meanwhile.
                out.extend_from_slice(unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
            }),
            Backing::Owned(v) => {
                let at = self.base + offset;
                out.extend_from_slice(&v.lock()[at..at + n]);
            }
        }
    }
}

/// A piece of an application buffer lent to the queue pair (see [`UserMem::lend`]).
struct Lent {
    addr: usize,
    len: usize,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the piece lies in a buffer the application lent for an operation that has
        // not completed yet: the data path drops every `Lent` before completing it, except
        // clones the queue pair may still hold. Those are never read in user space once the
        // peer acknowledged them (acknowledgement is what completes the operation): a
        // retransmission still queued for the socket goes by gather I/O, which the kernel
        // reads (a buffer gone gives EFAULT, a counted send error). A failed operation's
        // clones are dropped with its session, or the queue pair's error state, before the
        // failure is reported. One exception, in tests only: the fault layer copies what it
        // holds back or corrupts, a late retransmission included.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iov_pieces_read_and_write_across_boundaries() {
        let mut a = [0u8; 3];
        let mut b = [0u8; 0];
        let mut c = [0u8; 5];
        let iov = [
            iovec {
                iov_base: a.as_mut_ptr().cast(),
                iov_len: a.len(),
            },
            iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 0,
            },
            iovec {
                iov_base: c.as_mut_ptr().cast(),
                iov_len: c.len(),
            },
        ];
        // SAFETY: the arrays outlive every use of `m`.
        let m = unsafe { UserMem::from_iov(iov.as_ptr(), iov.len()) }.unwrap();
        assert_eq!(m.len(), 8);
        assert_eq!(m.write_at(2, &[1, 2, 3, 4, 5, 6, 7]), 6);
        let mut out = vec![];
        m.read_into(1, 100, &mut out);
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 6]);
        let s = m.slice(4, 2);
        assert_eq!(s.addr_at(0), c.as_ptr() as usize + 1);
        out.clear();
        s.read_into(0, 9, &mut out);
        assert_eq!(out, [3, 4]);
        assert_eq!(a, [0, 0, 1]);
        assert_eq!(c, [2, 3, 4, 5, 6]);
        assert_eq!(m.lend(3, 5).as_deref(), Some(&[2, 3, 4, 5, 6][..]));
        assert_eq!(m.lend(2, 2), None, "spans two pieces");
        assert_eq!(UserMem::owned(vec![1]).0.lend(0, 1), None);
    }

    #[test]
    fn reads_in_place_fill_one_piece_at_a_time() {
        let mut a = [0u8; 3];
        let mut c = [0u8; 5];
        let iov = [
            iovec {
                iov_base: a.as_mut_ptr().cast(),
                iov_len: a.len(),
            },
            iovec {
                iov_base: c.as_mut_ptr().cast(),
                iov_len: c.len(),
            },
        ];
        // SAFETY: the arrays outlive every use of `m`.
        let m = unsafe { UserMem::from_iov(iov.as_ptr(), iov.len()) }.unwrap();
        let mut src = &[1u8, 2, 3, 4, 5, 6, 7][..];
        let mut at = 1;
        let mut runs = vec![];
        while !src.is_empty() {
            let n = m
                .read_at(at, src.len(), &mut |dst| std::io::Read::read(&mut src, dst))
                .unwrap();
            runs.push(n);
            at += n;
        }
        assert_eq!(runs, [2, 5], "one piece per read");
        assert_eq!((a, c), ([0, 1, 2], [3, 4, 5, 6, 7]));
        // Past the end nothing is read, and `read` is not called.
        let called = &mut false;
        let n = m.read_at(8, 4, &mut |_| {
            *called = true;
            Ok(1)
        });
        assert_eq!((n.unwrap(), *called), (0, false));
        let (owned, v) = UserMem::owned(vec![0; 4]);
        let mut src = &[9u8, 9][..];
        let n = owned
            .slice(1, 3)
            .read_at(1, 5, &mut |dst| std::io::Read::read(&mut src, dst))
            .unwrap();
        assert_eq!((n, v.lock().clone()), (2, vec![0, 0, 9, 9]));
    }

    #[test]
    fn null_with_length_is_refused() {
        // SAFETY: a null pointer is checked before any use.
        assert!(unsafe { UserMem::from_raw(std::ptr::null(), 4) }.is_err());
        assert!(unsafe { UserMem::from_raw(std::ptr::null(), 0) }.is_ok());
    }
}

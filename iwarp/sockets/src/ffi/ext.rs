//! The extensions' C entry points (`include/diwarp_sockets.h`: `diwarp_reg_mr`,
//! `diwarp_post_send`, `diwarp_rdma_read`, ...) and the program's memory as a `Region`.

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{Access, Region};

use super::{inside, io_errno, wait_fd, WAIT};
use crate::extensions::Completion;
use crate::registry;
use crate::stream::Stream;

/// Program memory the library may read and write until the program takes it back
/// (`diwarp_dereg_mr`, or a receive's completion). The address is kept as a number: the
/// region is handed to the queue pair, which may touch it from any thread holding the
/// socket's lock.
struct Raw {
    addr: usize,
    len: usize,
}

impl Region for Raw {
    fn len(&self) -> usize {
        self.len
    }
    fn read_at(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset.checked_add(dst.len()).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds of memory the program lent for as long as it is registered.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.addr + offset) as *const u8,
                dst.as_mut_ptr(),
                dst.len(),
            );
        }
    }
    fn write_at(&self, offset: usize, src: &[u8]) {
        assert!(offset.checked_add(src.len()).is_some_and(|e| e <= self.len));
        // SAFETY: as above.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), (self.addr + offset) as *mut u8, src.len());
        }
    }
}

fn raw(addr: *const c_void, len: usize) -> Result<Arc<dyn Region>, i32> {
    if addr.is_null() && len > 0 {
        return Err(libc::EFAULT);
    }
    Ok(Arc::new(Raw {
        addr: addr as usize,
        len,
    }))
}

/// Runs `f` on `fd`'s RC stream: `EBADF` for a socket that is not switched, `EOPNOTSUPP`
/// for a datagram one or one inherited over `fork`.
fn with_stream<R>(fd: c_int, f: impl FnOnce(&mut Stream) -> Result<R, i32>) -> Result<R, i32> {
    // The caller is inside already: ask the registry itself.
    let s = registry::get(fd).ok_or(libc::EBADF)?;
    let mut st = s.lock();
    if st.generation != registry::generation() {
        return Err(libc::EOPNOTSUPP);
    }
    let stream = st.conduit.as_stream().ok_or(libc::EOPNOTSUPP)?;
    f(stream)
}

/// The C layout of a completion.
#[repr(C)]
pub struct DiwarpWc {
    wr_id: u64,
    opcode: u32,
    status: i32,
    byte_len: u64,
}

impl From<Completion> for DiwarpWc {
    fn from(c: Completion) -> Self {
        DiwarpWc {
            wr_id: c.wr_id,
            opcode: c.opcode as u32,
            status: c.status,
            byte_len: c.byte_len,
        }
    }
}

const ACCESS_LOCAL_WRITE: c_int = 1;
const ACCESS_REMOTE_READ: c_int = 2;
const ACCESS_REMOTE_WRITE: c_int = 4;

/// # Safety
/// `addr` is valid for `len` bytes until the region is deregistered; `stag` is writable.
#[no_mangle]
pub unsafe extern "C" fn diwarp_reg_mr(
    fd: c_int,
    addr: *mut c_void,
    len: usize,
    access: c_int,
    stag: *mut u32,
) -> c_int {
    inside(|| {
        if stag.is_null()
            || access & !(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE) != 0
        {
            return Err(libc::EINVAL);
        }
        let access = Access {
            local_write: access & ACCESS_LOCAL_WRITE != 0,
            remote_read: access & ACCESS_REMOTE_READ != 0,
            remote_write: access & ACCESS_REMOTE_WRITE != 0,
        };
        let region = raw(addr, len)?;
        *stag = with_stream(fd, |s| s.register(region, access).map_err(|e| io_errno(&e)))?;
        Ok(0)
    })
}

/// # Safety
/// None beyond the C call's.
#[no_mangle]
pub unsafe extern "C" fn diwarp_dereg_mr(fd: c_int, stag: u32) -> c_int {
    inside(|| {
        with_stream(fd, |s| s.deregister(stag).map_err(|e| io_errno(&e)))?;
        Ok(0)
    })
}

/// # Safety
/// `buf` is valid for `len` bytes (they are copied before this returns).
#[no_mangle]
pub unsafe extern "C" fn diwarp_post_send(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    wr_id: u64,
) -> c_int {
    inside(|| {
        let data = super::io::slice(buf, len);
        with_stream(fd, |s| s.post_send(data, wr_id).map_err(|e| io_errno(&e)))?;
        Ok(0)
    })
}

/// # Safety
/// `buf` is valid for `len` bytes until the receive completes.
#[no_mangle]
pub unsafe extern "C" fn diwarp_post_recv(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    wr_id: u64,
) -> c_int {
    inside(|| {
        let region = raw(buf, len)?;
        with_stream(fd, |s| {
            s.post_recv(region, wr_id);
            Ok(())
        })?;
        Ok(0)
    })
}

/// # Safety
/// `buf` is valid for `len` bytes (they are copied before this returns).
#[no_mangle]
pub unsafe extern "C" fn diwarp_rdma_write(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    remote_stag: u32,
    remote_offset: u64,
    wr_id: u64,
) -> c_int {
    inside(|| {
        let data = super::io::slice(buf, len);
        with_stream(fd, |s| {
            s.rdma_write(data, remote_stag, remote_offset, wr_id)
                .map_err(|e| io_errno(&e))
        })?;
        Ok(0)
    })
}

/// # Safety
/// None beyond the C call's: the local region was registered with `diwarp_reg_mr`.
#[no_mangle]
pub unsafe extern "C" fn diwarp_rdma_read(
    fd: c_int,
    local_stag: u32,
    local_offset: u64,
    len: usize,
    remote_stag: u32,
    remote_offset: u64,
    wr_id: u64,
) -> c_int {
    inside(|| {
        with_stream(fd, |s| {
            s.rdma_read(
                (local_stag, local_offset),
                len,
                (remote_stag, remote_offset),
                wr_id,
            )
            .map_err(|e| io_errno(&e))
        })?;
        Ok(0)
    })
}

/// Copies up to `max` completions to `wc`; how many.
///
/// SAFETY: `wc` is valid for `max` entries.
unsafe fn take(fd: c_int, wc: *mut DiwarpWc, max: c_int) -> Result<c_int, i32> {
    let max = usize::try_from(max).map_err(|_| libc::EINVAL)?;
    if wc.is_null() && max > 0 {
        return Err(libc::EFAULT);
    }
    let got = with_stream(fd, |s| Ok(s.completions(max)))?;
    for (i, c) in got.iter().enumerate() {
        wc.add(i).write(DiwarpWc::from(*c));
    }
    Ok(got.len() as c_int)
}

/// # Safety
/// `wc` is valid for `max` entries.
#[no_mangle]
pub unsafe extern "C" fn diwarp_poll(fd: c_int, wc: *mut DiwarpWc, max: c_int) -> c_int {
    inside(|| take(fd, wc, max))
}

/// As `diwarp_poll`, waiting up to `timeout_ms` (-1: for ever) for at least one.
///
/// # Safety
/// `wc` is valid for `max` entries.
#[no_mangle]
pub unsafe extern "C" fn diwarp_wait(
    fd: c_int,
    wc: *mut DiwarpWc,
    max: c_int,
    timeout_ms: c_int,
) -> c_int {
    inside(|| {
        let deadline = u64::try_from(timeout_ms)
            .ok()
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        loop {
            let n = take(fd, wc, max)?;
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if n > 0 || left == Some(Duration::ZERO) {
                return Ok(n);
            }
            wait_fd(fd, libc::POLLIN, left.map_or(WAIT, |l| l.min(WAIT)))?;
        }
    })
}

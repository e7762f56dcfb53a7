//! `fid_cq`: completions in the application's chosen entry format.

use std::ffi::{c_void, CStr};
use std::mem::size_of;
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::time::Duration;

use super::obj::{self, Object};
use super::panic::{entry, entry_or};
use super::stubs;
use crate::cq::{Completion, CompletionQueue, CqFormat};
use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(obj::fi_close::<CompletionQueue>);

static OPS: sys::fi_ops_cq = sys::fi_ops_cq {
    size: size_of::<sys::fi_ops_cq>(),
    read: Some(read),
    readfrom: Some(readfrom),
    readerr: Some(readerr),
    sread: Some(sread),
    sreadfrom: Some(sreadfrom),
    signal: Some(signal),
    strerror: Some(strerror),
};

impl Object for CompletionQueue {
    type Fid = sys::fid_cq;
    const CLASS: u32 = sys::FI_CLASS_CQ;
    const CLOSE: &'static str = "cq close";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_cq {
        sys::fid_cq {
            fid,
            ops: ptr::from_ref(&OPS).cast_mut(),
        }
    }
}

/// `fi_cq_open`.
pub(super) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cq_attr,
    cq: *mut *mut sys::fid_cq,
    context: *mut c_void,
) -> c_int {
    obj::open("fi_cq_open", cq, context, || {
        let d = obj::get::<Domain>(domain.cast())?;
        let a = attr.as_ref().ok_or(Errno::INVAL)?;
        CompletionQueue::open(d, a.format, a.wait_obj, a.size)
    })
}

/// Writes entry `i` of a `buf` holding entries of the queue's format.
///
/// SAFETY: `buf` has room for at least `i + 1` entries of `format`.
unsafe fn put(buf: *mut c_void, format: CqFormat, i: usize, c: &Completion) {
    let ctx = c.op_context as *mut c_void;
    match format {
        CqFormat::Context => buf
            .cast::<sys::fi_cq_entry>()
            .add(i)
            .write(sys::fi_cq_entry { op_context: ctx }),
        CqFormat::Msg => buf
            .cast::<sys::fi_cq_msg_entry>()
            .add(i)
            .write(sys::fi_cq_msg_entry {
                op_context: ctx,
                flags: c.flags,
                len: c.len,
            }),
        CqFormat::Data => buf
            .cast::<sys::fi_cq_data_entry>()
            .add(i)
            .write(sys::fi_cq_data_entry {
                op_context: ctx,
                flags: c.flags,
                len: c.len,
                buf: c.buf as *mut c_void,
                data: c.data,
            }),
        CqFormat::Tagged => {
            buf.cast::<sys::fi_cq_tagged_entry>()
                .add(i)
                .write(sys::fi_cq_tagged_entry {
                    op_context: ctx,
                    flags: c.flags,
                    len: c.len,
                    buf: c.buf as *mut c_void,
                    data: c.data,
                    tag: c.tag,
                })
        }
    }
}

/// SAFETY: `buf` holds `count` entries; `src` is null or holds `count` addresses.
unsafe fn read_into(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut sys::fi_addr_t,
) -> Result<isize> {
    read_with(cq, buf, count, src, |cq, count, out| cq.read(count, out))
}

/// [`read_into`], blocking for up to `timeout` milliseconds (negative: no limit).
/// SAFETY: as for [`read_into`].
unsafe fn sread_into(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut sys::fi_addr_t,
    timeout: c_int,
) -> Result<isize> {
    let limit = u64::try_from(timeout).ok().map(Duration::from_millis);
    read_with(cq, buf, count, src, |cq, count, out| {
        cq.sread(count, limit, out)
    })
}

/// SAFETY: as for [`read_into`].
unsafe fn read_with(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut sys::fi_addr_t,
    read: impl FnOnce(&CompletionQueue, usize, &mut dyn FnMut(usize, &Completion)) -> Result<usize>,
) -> Result<isize> {
    let cq = obj::get::<CompletionQueue>(cq.cast())?;
    if buf.is_null() && count > 0 {
        return Err(Errno::INVAL);
    }
    let n = read(cq, count, &mut |i, c| {
        put(buf, cq.format, i, c);
        if !src.is_null() {
            src.add(i).write(c.src.unwrap_or(sys::FI_ADDR_NOTAVAIL));
        }
    })?;
    Ok(n as isize)
}

/// `fi_cq_read`: never 0; -FI_EAGAIN when empty, -FI_EAVAIL when an error entry waits.
unsafe extern "C" fn read(cq: *mut sys::fid_cq, buf: *mut c_void, count: usize) -> isize {
    entry("fi_cq_read", || read_into(cq, buf, count, ptr::null_mut()))
}

unsafe extern "C" fn readfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut sys::fi_addr_t,
) -> isize {
    entry("fi_cq_readfrom", || read_into(cq, buf, count, src))
}

/// `fi_cq_sread`: `cond` (a threshold) is only a hint, as libfabric allows; one entry ends
/// the wait.
unsafe extern "C" fn sread(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    entry("fi_cq_sread", || {
        sread_into(cq, buf, count, ptr::null_mut(), timeout)
    })
}

unsafe extern "C" fn sreadfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut sys::fi_addr_t,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    entry("fi_cq_sreadfrom", || {
        sread_into(cq, buf, count, src, timeout)
    })
}

/// `fi_cq_signal`: a blocking read under way returns -FI_EAGAIN.
unsafe extern "C" fn signal(cq: *mut sys::fid_cq) -> c_int {
    entry("fi_cq_signal", || {
        obj::get::<CompletionQueue>(cq.cast())?.signal()?;
        Ok(0)
    })
}

/// `fi_cq_readerr`. Only the 1.17 fields are written: a 2.x caller's struct is larger, and
/// its extra fields keep what the 2.x inline wrapper put there. diwarp has no provider-specific
/// error data, so `err_data_size` comes back 0; an application built for an API before 1.5
/// has a struct that ends before `err_data`, and nothing is written there.
unsafe extern "C" fn readerr(
    cq: *mut sys::fid_cq,
    buf: *mut sys::fi_cq_err_entry,
    _flags: u64,
) -> isize {
    entry("fi_cq_readerr", || {
        let cq = obj::get::<CompletionQueue>(cq.cast())?;
        if buf.is_null() {
            return Err(Errno::INVAL);
        }
        let e = cq.read_err()?;
        let c = &e.completion;
        // Field by field through the raw pointer: the caller's struct may be the shorter one.
        ptr::addr_of_mut!((*buf).op_context).write(c.op_context as *mut c_void);
        ptr::addr_of_mut!((*buf).flags).write(c.flags);
        ptr::addr_of_mut!((*buf).len).write(c.len);
        ptr::addr_of_mut!((*buf).buf).write(c.buf as *mut c_void);
        ptr::addr_of_mut!((*buf).data).write(c.data);
        ptr::addr_of_mut!((*buf).tag).write(c.tag);
        ptr::addr_of_mut!((*buf).olen).write(e.olen);
        ptr::addr_of_mut!((*buf).err).write(e.err.0 as c_int);
        ptr::addr_of_mut!((*buf).prov_errno).write(e.prov_errno);
        if cq.domain.api_version >= crate::info::fi_version(1, 5) {
            ptr::addr_of_mut!((*buf).err_data_size).write(0);
        }
        Ok(1)
    })
}

static UNKNOWN: &std::ffi::CStr = c"diwarp: unknown error";

/// `fi_cq_strerror`: diwarp's `prov_errno` values are fi error numbers.
unsafe extern "C" fn strerror(
    _cq: *mut sys::fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    entry_or("fi_cq_strerror", UNKNOWN.as_ptr(), || {
        // libfabric's strings are static, so without a buffer the pointer can be returned.
        let text = sys::fi_strerror(prov_errno.saturating_abs());
        if buf.is_null() || len == 0 || text.is_null() {
            return text;
        }
        let bytes = CStr::from_ptr(text).to_bytes();
        let n = bytes.len().min(len - 1);
        ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
        buf.add(n).write(0);
        buf.cast_const()
    })
}

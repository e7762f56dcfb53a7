//! `fid_av`.

use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::slice;

use super::obj::{self, Object};
use super::out::copy_out;
use super::panic::{entry, entry_or};
use super::stubs;
use crate::addr::EpName;
use crate::av::{straddr as to_text, AddressVector};
use crate::domain::Domain;
use crate::error::Errno;
use crate::sys;

static FI_OPS: sys::fi_ops = stubs::fi_ops(obj::fi_close::<AddressVector>);

static OPS: sys::fi_ops_av = sys::fi_ops_av {
    size: size_of::<sys::fi_ops_av>(),
    insert: Some(insert),
    insertsvc: Some(stubs::av_insertsvc),
    insertsym: Some(stubs::av_insertsym),
    remove: Some(remove),
    lookup: Some(lookup),
    straddr: Some(straddr),
    av_set: Some(stubs::av_set),
};

impl Object for AddressVector {
    type Fid = sys::fid_av;
    const CLASS: u32 = sys::FI_CLASS_AV;
    const CLOSE: &'static str = "av close";
    fn fi_ops() -> &'static sys::fi_ops {
        &FI_OPS
    }
    fn fid(&self, fid: sys::fid) -> sys::fid_av {
        sys::fid_av {
            fid,
            ops: ptr::from_ref(&OPS).cast_mut(),
        }
    }
}

/// `fi_av_open`.
pub(super) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_av_attr,
    av: *mut *mut sys::fid_av,
    context: *mut c_void,
) -> c_int {
    obj::open("fi_av_open", av, context, || {
        let d = obj::get::<Domain>(domain.cast())?;
        let a = attr.as_ref().ok_or(Errno::INVAL)?;
        AddressVector::open(
            d,
            a.type_,
            a.count,
            a.rx_ctx_bits,
            !a.name.is_null(),
            a.flags,
        )
    })
}

/// `fi_av_insert`: `count` names packed back to back; returns how many were inserted (Open
/// MPI 4.1 inserts all ranks at once and checks the count). With FI_SYNC_ERR, `context` is
/// an `int` per name that gets 0 or the error.
unsafe extern "C" fn insert(
    av: *mut sys::fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut sys::fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    entry("fi_av_insert", || {
        let av = obj::get::<AddressVector>(av.cast())?;
        let bytes = count.checked_mul(EpName::LEN).ok_or(Errno::INVAL)?;
        if count == 0 {
            return Ok(0);
        }
        if addr.is_null() || (flags & sys::FI_SYNC_ERR != 0 && context.is_null()) {
            return Err(Errno::INVAL);
        }
        let names = slice::from_raw_parts(addr.cast::<u8>(), bytes);
        let r = av.insert(names, flags)?;
        if !fi_addr.is_null() {
            ptr::copy_nonoverlapping(r.handles.as_ptr(), fi_addr, count);
        }
        if flags & sys::FI_SYNC_ERR != 0 {
            let errs = context.cast::<c_int>();
            for (i, e) in r.errors.iter().enumerate() {
                errs.add(i).write(e.0 as c_int);
            }
        }
        c_int::try_from(r.count).map_err(|_| Errno::INVAL)
    })
}

unsafe extern "C" fn remove(
    av: *mut sys::fid_av,
    fi_addr: *mut sys::fi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    entry("fi_av_remove", || {
        let av = obj::get::<AddressVector>(av.cast())?;
        if count == 0 {
            return Ok(0);
        }
        if fi_addr.is_null() {
            return Err(Errno::INVAL);
        }
        av.remove(slice::from_raw_parts(fi_addr, count), flags)?;
        Ok(0)
    })
}

/// `fi_av_lookup`: a short buffer gets a truncated name and the full length, and succeeds.
unsafe extern "C" fn lookup(
    av: *mut sys::fid_av,
    fi_addr: sys::fi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    entry("fi_av_lookup", || {
        let av = obj::get::<AddressVector>(av.cast())?;
        let len = addrlen.as_mut().ok_or(Errno::INVAL)?;
        let name = av.lookup(fi_addr)?.encode();
        copy_out(&name, addr, *len);
        *len = EpName::LEN;
        Ok(0)
    })
}

/// `fi_av_straddr`: NUL-terminated text, truncated to `*len`; `*len` becomes the full size.
unsafe extern "C" fn straddr(
    _av: *mut sys::fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    entry_or("fi_av_straddr", ptr::null(), || {
        let (Some(len), false) = (len.as_mut(), addr.is_null()) else {
            return ptr::null();
        };
        let text = to_text(slice::from_raw_parts(addr.cast::<u8>(), EpName::LEN));
        let text = CString::new(text).unwrap_or_default();
        let bytes = text.as_bytes_with_nul();
        if !buf.is_null() && *len > 0 {
            let n = bytes.len().min(*len);
            ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
            buf.add(n - 1).write(0);
        }
        *len = bytes.len();
        buf.cast_const()
    })
}

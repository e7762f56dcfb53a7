//! `struct fi_info` to [`crate::info::Info`] and back.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr;

use crate::error::{Errno, Result};
use crate::info::{AuthKey, DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr, AUTH_KEY_MAX};
use crate::sys;

/// SAFETY: `p` is null or a NUL-terminated string.
unsafe fn string(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// Reads hints (or an info passed back to `fi_domain`/`fi_endpoint`); absent attribute
/// structs mean "no requirement".
///
/// SAFETY: `h` and the attribute pointers in it are valid or null, as libfabric requires.
pub(super) unsafe fn read(h: &sys::fi_info) -> Info {
    let mut i = Info {
        caps: h.caps,
        mode: h.mode,
        addr_format: h.addr_format,
        ..Default::default()
    };
    if let Some(t) = h.tx_attr.as_ref() {
        i.tx = TxAttr {
            caps: t.caps,
            mode: t.mode,
            op_flags: t.op_flags,
            msg_order: t.msg_order,
            comp_order: t.comp_order,
            inject_size: t.inject_size,
            size: t.size,
            iov_limit: t.iov_limit,
            rma_iov_limit: t.rma_iov_limit,
        };
    }
    if let Some(r) = h.rx_attr.as_ref() {
        i.rx = RxAttr {
            caps: r.caps,
            mode: r.mode,
            op_flags: r.op_flags,
            msg_order: r.msg_order,
            comp_order: r.comp_order,
            size: r.size,
            iov_limit: r.iov_limit,
        };
    }
    if let Some(e) = h.ep_attr.as_ref() {
        i.ep = EpAttr {
            ep_type: e.type_,
            protocol: e.protocol,
            max_msg_size: e.max_msg_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            auth_key_size: e.auth_key_size,
        };
    }
    if let Some(d) = h.domain_attr.as_ref() {
        i.domain = DomainAttr {
            name: string(d.name),
            threading: d.threading,
            control_progress: d.control_progress,
            data_progress: d.data_progress,
            resource_mgmt: d.resource_mgmt,
            av_type: d.av_type,
            mr_mode: d.mr_mode,
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            caps: d.caps,
            mode: d.mode,
            auth_key_size: d.auth_key_size,
            auth_key: auth_key(d.auth_key, d.auth_key_size),
        };
    }
    if let Some(f) = h.fabric_attr.as_ref() {
        i.fabric = FabricAttr {
            name: string(f.name),
        };
    }
    i
}

/// The bytes of a domain's `auth_key`, unless absent or too long to be a job key (then the
/// negotiation refuses the size).
///
/// SAFETY: `p` is null or points to `size` readable bytes.
unsafe fn auth_key(p: *const u8, size: usize) -> Option<AuthKey> {
    (!p.is_null() && size <= AUTH_KEY_MAX)
        .then(|| AuthKey(std::slice::from_raw_parts(p, size).to_vec()))
}

/// A `malloc`ed copy of `key`, since `fi_freeinfo` will `free` it.
fn key_dup(key: &AuthKey) -> Result<*mut u8> {
    // SAFETY: a fresh allocation of the key's length (at least 1 byte), filled before use.
    unsafe {
        let p = libc::malloc(key.0.len()).cast::<u8>();
        if p.is_null() {
            return Err(Errno::NOMEM);
        }
        ptr::copy_nonoverlapping(key.0.as_ptr(), p, key.0.len());
        Ok(p)
    }
}

/// A `malloc`ed copy, since `fi_freeinfo` will `free` it.
fn strdup(s: &Option<String>) -> Result<*mut c_char> {
    let Some(s) = s else {
        return Ok(ptr::null_mut());
    };
    let c = CString::new(s.as_str()).map_err(|_| Errno::INVAL)?;
    // SAFETY: `c` is NUL-terminated.
    let p = unsafe { libc::strdup(c.as_ptr()) };
    if p.is_null() {
        Err(Errno::NOMEM)
    } else {
        Ok(p)
    }
}

/// Builds an info the core can free and duplicate. It is allocated by the core's own
/// `fi_dupinfo(NULL)`, which under a 2.x core returns its full, larger structs; diwarp
/// writes only the 1.17 fields, a prefix of every later layout. `prov_name` stays NULL: the
/// core fills it in (setting it here makes the core report "diwarp;diwarp").
///
/// SAFETY: must run with a libfabric core loaded.
pub(super) unsafe fn write(i: &Info) -> Result<*mut sys::fi_info> {
    let p = sys::fi_dupinfo(ptr::null());
    if p.is_null() {
        return Err(Errno::NOMEM);
    }
    let filled = fill(&mut *p, i);
    if filled.is_err() {
        sys::fi_freeinfo(p);
    }
    filled.map(|()| p)
}

/// SAFETY: `o` comes from `fi_dupinfo(NULL)`, so its attribute pointers are valid or null.
unsafe fn fill(o: &mut sys::fi_info, i: &Info) -> Result<()> {
    let (Some(tx), Some(rx), Some(ep), Some(d), Some(f)) = (
        o.tx_attr.as_mut(),
        o.rx_attr.as_mut(),
        o.ep_attr.as_mut(),
        o.domain_attr.as_mut(),
        o.fabric_attr.as_mut(),
    ) else {
        return Err(Errno::NOMEM);
    };
    o.caps = i.caps;
    o.mode = i.mode;
    o.addr_format = i.addr_format;

    tx.caps = i.tx.caps;
    tx.mode = i.tx.mode;
    tx.op_flags = i.tx.op_flags;
    tx.msg_order = i.tx.msg_order;
    tx.comp_order = i.tx.comp_order;
    tx.inject_size = i.tx.inject_size;
    tx.size = i.tx.size;
    tx.iov_limit = i.tx.iov_limit;
    tx.rma_iov_limit = i.tx.rma_iov_limit;

    rx.caps = i.rx.caps;
    rx.mode = i.rx.mode;
    rx.op_flags = i.rx.op_flags;
    rx.msg_order = i.rx.msg_order;
    rx.comp_order = i.rx.comp_order;
    rx.size = i.rx.size;
    rx.iov_limit = i.rx.iov_limit;

    ep.type_ = i.ep.ep_type;
    ep.protocol = i.ep.protocol;
    ep.max_msg_size = i.ep.max_msg_size;
    ep.mem_tag_format = i.ep.mem_tag_format;
    ep.tx_ctx_cnt = i.ep.tx_ctx_cnt;
    ep.rx_ctx_cnt = i.ep.rx_ctx_cnt;

    let a = &i.domain;
    d.threading = a.threading;
    d.control_progress = a.control_progress;
    d.data_progress = a.data_progress;
    d.resource_mgmt = a.resource_mgmt;
    d.av_type = a.av_type;
    d.mr_mode = a.mr_mode;
    d.mr_key_size = a.mr_key_size;
    d.cq_data_size = a.cq_data_size;
    d.cq_cnt = a.cq_cnt;
    d.ep_cnt = a.ep_cnt;
    d.tx_ctx_cnt = a.tx_ctx_cnt;
    d.rx_ctx_cnt = a.rx_ctx_cnt;
    d.max_ep_tx_ctx = a.max_ep_tx_ctx;
    d.max_ep_rx_ctx = a.max_ep_rx_ctx;
    d.max_ep_stx_ctx = a.max_ep_stx_ctx;
    d.max_ep_srx_ctx = a.max_ep_srx_ctx;
    d.cntr_cnt = a.cntr_cnt;
    d.caps = a.caps;
    d.mode = a.mode;
    d.name = strdup(&a.name)?;
    if let Some(k) = &a.auth_key {
        d.auth_key = key_dup(k)?;
        d.auth_key_size = k.0.len();
    }

    f.name = strdup(&i.fabric.name)?;
    f.prov_version = crate::info::provider_version();
    Ok(())
}

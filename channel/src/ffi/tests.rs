//! The fid tables driven the way an application drives them through libfabric's inline
//! wrappers (`fi_domain(fab, ...)` is `fab->ops->domain(fab, ...)`), without a core in between.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr::{self, null, null_mut};

use super::provider;
use crate::addr::EpName;
use crate::error::Errno;
use crate::sys::*;

fn neg(e: u64) -> c_int {
    -(e as c_int)
}

/// `fi_close`.
unsafe fn close(f: *mut fid) -> c_int {
    (*(*f).ops).close.unwrap()(f)
}

struct Objects {
    info: *mut fi_info,
    fab: *mut fid_fabric,
    dom: *mut fid_domain,
    av: *mut fid_av,
    cq: *mut fid_cq,
    cntr: *mut fid_cntr,
    ep: *mut fid_ep,
}

/// MPICH's sequence (research §1.4): fabric, domain, AV, counter, CQ, endpoint, binds, enable.
unsafe fn open_all() -> Objects {
    open_all_at(crate::info::fi_version(1, 17))
}

/// [`open_all`] for an application built for API version `api`.
unsafe fn open_all_at(api: u32) -> Objects {
    open_all_with(api, FI_SEND | FI_RECV | FI_SELECTIVE_COMPLETION)
}

/// [`open_all`] with the CQ bound with `cq_flags`.
unsafe fn open_all_with(api: u32, cq_flags: u64) -> Objects {
    let getinfo = (*provider::ptr()).getinfo.unwrap();
    let mut info = null_mut();
    assert_eq!(
        getinfo(
            crate::info::fi_version(1, 17),
            null(),
            null(),
            0,
            null(),
            &mut info
        ),
        0
    );
    (*(*info).domain_attr).threading = FI_THREAD_DOMAIN;
    let mut o = Objects {
        info,
        fab: null_mut(),
        dom: null_mut(),
        av: null_mut(),
        cq: null_mut(),
        cntr: null_mut(),
        ep: null_mut(),
    };
    assert_eq!(
        (*provider::ptr()).fabric.unwrap()((*info).fabric_attr, &mut o.fab, null_mut()),
        0
    );
    (*o.fab).api_version = api;
    assert_eq!(
        (*(*o.fab).ops).domain.unwrap()(o.fab, info, &mut o.dom, null_mut()),
        0
    );
    let dops = &*(*o.dom).ops;
    let mut av_attr = fi_av_attr {
        type_: FI_AV_TABLE,
        count: 4,
        ..Default::default()
    };
    assert_eq!(
        dops.av_open.unwrap()(o.dom, &mut av_attr, &mut o.av, null_mut()),
        0
    );
    let mut cntr_attr = fi_cntr_attr {
        events: FI_CNTR_EVENTS_COMP,
        wait_obj: FI_WAIT_UNSPEC,
        ..Default::default()
    };
    assert_eq!(
        dops.cntr_open.unwrap()(o.dom, &mut cntr_attr, &mut o.cntr, null_mut()),
        0
    );
    let mut cq_attr = fi_cq_attr {
        format: FI_CQ_FORMAT_TAGGED,
        wait_obj: FI_WAIT_NONE,
        ..Default::default()
    };
    assert_eq!(
        dops.cq_open.unwrap()(o.dom, &mut cq_attr, &mut o.cq, null_mut()),
        0
    );
    assert_eq!(
        dops.endpoint.unwrap()(o.dom, info, &mut o.ep, null_mut()),
        0
    );
    let bind = (*(*o.ep).fid.ops).bind.unwrap();
    let control = (*(*o.ep).fid.ops).control.unwrap();
    let ep = ptr::addr_of_mut!((*o.ep).fid);
    assert_eq!(
        control(ep, FI_ENABLE as c_int, null_mut()),
        neg(FI_ENOAV as u64)
    );
    assert_eq!(bind(ep, ptr::addr_of_mut!((*o.av).fid), 0), 0);
    assert_eq!(bind(ep, ptr::addr_of_mut!((*o.cq).fid), cq_flags), 0);
    assert_eq!(
        bind(ep, ptr::addr_of_mut!((*o.cntr).fid), FI_READ | FI_WRITE),
        0
    );
    assert_eq!(bind(ep, ptr::addr_of_mut!((*o.dom).fid), 0), neg(FI_ENOSYS));
    assert_eq!(control(ep, FI_ENABLE as c_int, null_mut()), 0);
    o
}

unsafe fn close_all(o: Objects) {
    // Parents refuse to close while children hold them.
    assert_eq!(close(ptr::addr_of_mut!((*o.dom).fid)), neg(FI_EBUSY));
    assert_eq!(close(ptr::addr_of_mut!((*o.cq).fid)), neg(FI_EBUSY));
    for f in [
        ptr::addr_of_mut!((*o.ep).fid),
        ptr::addr_of_mut!((*o.av).fid),
        ptr::addr_of_mut!((*o.cq).fid),
        ptr::addr_of_mut!((*o.cntr).fid),
        ptr::addr_of_mut!((*o.dom).fid),
        ptr::addr_of_mut!((*o.fab).fid),
    ] {
        assert_eq!(close(f), 0);
    }
    fi_freeinfo(o.info);
}

#[test]
fn object_lifecycle_names_and_addresses() {
    unsafe {
        let o = open_all();
        let ep = ptr::addr_of_mut!((*o.ep).fid);
        let cm = &*(*o.ep).cm;

        // Open MPI 5's two-step getname.
        let mut len = 0usize;
        assert_eq!(
            cm.getname.unwrap()(ep, null_mut(), &mut len),
            neg(FI_ETOOSMALL as u64)
        );
        assert_eq!(len, EpName::LEN);
        let mut name = [0u8; 64];
        len = name.len();
        assert_eq!(
            cm.getname.unwrap()(ep, name.as_mut_ptr().cast(), &mut len),
            0
        );
        assert!(EpName::decode(&name[..len]).is_ok());

        // MPICH inserts itself first and must get 0; Open MPI 4.1 inserts a batch and checks
        // the count.
        let avops = &*(*o.av).ops;
        let mut batch = [0u8; 3 * EpName::LEN];
        const L: usize = EpName::LEN;
        batch[..L].copy_from_slice(&name[..L]);
        batch[L..2 * L].copy_from_slice(&name[..L]);
        let mut handles = [0u64; 3];
        let mut errs = [0 as c_int; 3];
        let insert = avops.insert.unwrap();
        assert_eq!(
            insert(
                o.av,
                name.as_ptr().cast(),
                1,
                handles.as_mut_ptr(),
                0,
                null_mut()
            ),
            1
        );
        assert_eq!(handles[0], 0);
        let n = insert(
            o.av,
            batch.as_ptr().cast(),
            3,
            handles.as_mut_ptr(),
            FI_SYNC_ERR,
            errs.as_mut_ptr().cast(),
        );
        assert_eq!(n, 2);
        // The same name again keeps its handle (as libfabric's util AV gives it).
        assert_eq!(handles, [0, 0, FI_ADDR_NOTAVAIL]);
        assert_eq!(errs, [0, 0, FI_EINVAL as c_int]);
        let mut back = [0u8; 8];
        let mut blen = back.len();
        assert_eq!(
            avops.lookup.unwrap()(o.av, 0, back.as_mut_ptr().cast(), &mut blen),
            0
        );
        assert_eq!((blen, &back[..]), (EpName::LEN, &name[..8]));
        let mut text = [0 as std::os::raw::c_char; 16];
        let mut tlen = text.len();
        let s = avops.straddr.unwrap()(o.av, name.as_ptr().cast(), text.as_mut_ptr(), &mut tlen);
        assert_eq!(s, text.as_ptr());
        assert!(tlen > 16, "full length reported");
        assert_eq!(text[15], 0, "truncated text is terminated");
        // Inserted three times: gone after the third remove.
        let mut gone = [0u64, 0];
        assert_eq!(avops.remove.unwrap()(o.av, gone.as_mut_ptr(), 2, 0), 0);
        assert_eq!(
            avops.lookup.unwrap()(o.av, 0, back.as_mut_ptr().cast(), &mut blen),
            0
        );
        assert_eq!(avops.remove.unwrap()(o.av, gone.as_mut_ptr(), 1, 0), 0);
        assert_eq!(
            avops.lookup.unwrap()(o.av, 0, back.as_mut_ptr().cast(), &mut blen),
            neg(FI_EINVAL)
        );

        close_all(o);
    }
}

#[test]
fn cq_counter_options_and_unimplemented_ops() {
    unsafe {
        let o = open_all();
        let ep = ptr::addr_of_mut!((*o.ep).fid);
        let cqops = &*(*o.cq).ops;
        let mut entries = [fi_cq_tagged_entry::default(); 4];
        assert_eq!(
            cqops.read.unwrap()(o.cq, entries.as_mut_ptr().cast(), 4),
            -(FI_EAGAIN as isize)
        );
        let mut err = fi_cq_err_entry::default();
        assert_eq!(
            cqops.readerr.unwrap()(o.cq, &mut err, 0),
            -(FI_EAGAIN as isize)
        );
        let mut buf = [0 as std::os::raw::c_char; 64];
        let msg = cqops.strerror.unwrap()(
            o.cq,
            FI_ETRUNC as c_int,
            null(),
            buf.as_mut_ptr(),
            buf.len(),
        );
        assert_eq!(msg, buf.as_ptr());

        let c = &*(*o.cntr).ops;
        assert_eq!(c.add.unwrap()(o.cntr, 5), 0);
        assert_eq!(c.read.unwrap()(o.cntr), 5);
        assert_eq!(c.wait.unwrap()(o.cntr, 5, 0), 0);
        assert_eq!(c.wait.unwrap()(o.cntr, 6, 1), neg(FI_ETIMEDOUT));

        let epops = &*(*o.ep).ops;
        let v: usize = 4096;
        let (lvl, opt) = (FI_OPT_ENDPOINT as c_int, FI_OPT_MIN_MULTI_RECV as c_int);
        let set = epops.setopt.unwrap()(ep, lvl, opt, ptr::from_ref(&v).cast(), size_of::<usize>());
        assert_eq!(set, 0);
        let (mut got, mut glen) = (0usize, size_of::<usize>());
        let get = epops.getopt.unwrap()(
            ep,
            lvl,
            opt,
            ptr::from_mut(&mut got).cast::<c_void>(),
            &mut glen,
        );
        assert_eq!((get, got), (0, 4096));
        assert_eq!(
            epops.setopt.unwrap()(ep, lvl, 99, null(), 0),
            neg(FI_ENOPROTOOPT)
        );

        let mut flags = FI_TRANSMIT;
        let control = (*(*o.ep).fid.ops).control.unwrap();
        assert_eq!(
            control(ep, FI_GETOPSFLAG as c_int, ptr::from_mut(&mut flags).cast()),
            0
        );
        assert_eq!(flags, 0, "getinfo without hints leaves op_flags empty");

        // A send or an RMA write to an address not in the AV is refused, not a crash.
        let t = &*(*o.ep).tagged;
        let r = t.send.unwrap()(o.ep, null(), 0, null_mut(), 99, 1, null_mut());
        assert_eq!(r, -(FI_EINVAL as isize));
        let r = (*(*o.ep).rma).write.unwrap()(o.ep, null(), 0, null_mut(), 99, 0, 0, null_mut());
        assert_eq!(r, -(FI_EINVAL as isize));
        let r =
            (*(*o.ep).rma).writedata.unwrap()(o.ep, null(), 0, null_mut(), 0, 99, 0, 0, null_mut());
        assert_eq!(r, -(FI_ENOSYS as isize), "no remote CQ data on writes");

        // Registration: the requested key is the key, once per domain; a null base with a
        // length is refused; closing frees the key.
        let reg = (*(*o.dom).mr).reg.unwrap();
        let dom = ptr::addr_of_mut!((*o.dom).fid);
        let mut buf = [0u8; 64];
        let (mut mr, mut again) = (null_mut::<fid_mr>(), null_mut::<fid_mr>());
        let access = FI_REMOTE_READ | FI_REMOTE_WRITE;
        let key = 1u64 << 63 | 9;
        let at = buf.as_mut_ptr().cast::<c_void>();
        assert_eq!(reg(dom, at, 64, access, 0, key, 0, &mut mr, null_mut()), 0);
        assert_eq!((*mr).key, key);
        assert_eq!(
            reg(dom, at, 64, access, 0, key, 0, &mut again, null_mut()),
            neg(FI_ENOKEY as u64)
        );
        assert_eq!(
            reg(dom, null(), 64, access, 0, 1, 0, &mut again, null_mut()),
            neg(FI_EINVAL)
        );
        assert_eq!(
            (*(*o.dom).fid.ops).close.unwrap()(dom),
            neg(FI_EBUSY),
            "an MR holds its domain"
        );
        assert_eq!(
            (*(*mr).fid.ops).close.unwrap()(ptr::addr_of_mut!((*mr).fid)),
            0
        );
        assert_eq!(
            reg(dom, at, 64, access, 0, key, 0, &mut again, null_mut()),
            0
        );
        assert_eq!(
            (*(*again).fid.ops).close.unwrap()(ptr::addr_of_mut!((*again).fid)),
            0
        );

        close_all(o);
    }
}

#[test]
fn foreign_fids_are_refused() {
    unsafe {
        let o = open_all();
        // A CQ passed where an endpoint is expected: its ops table gives it away.
        let cq_as_ep = ptr::addr_of_mut!((*o.cq).fid);
        let getname = (*(*o.ep).cm).getname.unwrap();
        let mut len = 64usize;
        assert_eq!(getname(cq_as_ep, null_mut(), &mut len), Errno::INVAL.ret());
        assert_eq!(
            (*(*o.av).ops).insert.unwrap()(o.cq.cast(), null(), 1, null_mut(), 0, null_mut()),
            neg(FI_EINVAL)
        );
        close_all(o);
    }
}

/// The open calls' shared edge (`obj::open`): the arguments are checked before the
/// out-pointer, and the new fid names its class, its context and its class's operations.
#[test]
fn opens_check_arguments_then_the_out_pointer() {
    unsafe {
        let o = open_all();
        let cq_open = (*(*o.dom).ops).cq_open.unwrap();
        let mut attr = fi_cq_attr {
            format: FI_CQ_FORMAT_TAGGED,
            wait_obj: FI_WAIT_NONE,
            ..Default::default()
        };
        let mut cq = null_mut();
        let cntr_as_domain = o.cntr.cast();
        assert_eq!(
            cq_open(cntr_as_domain, &mut attr, &mut cq, null_mut()),
            neg(FI_EINVAL)
        );
        assert_eq!(
            cq_open(o.dom, null_mut(), &mut cq, null_mut()),
            neg(FI_EINVAL)
        );
        assert_eq!(
            cq_open(o.dom, &mut attr, null_mut(), null_mut()),
            neg(FI_EINVAL)
        );
        attr.wait_obj = FI_WAIT_FD;
        assert_eq!(
            cq_open(o.dom, &mut attr, null_mut(), null_mut()),
            Errno::NOSYS.ret(),
            "the out-pointer is checked last"
        );
        assert!(cq.is_null());
        attr.wait_obj = FI_WAIT_NONE;
        let context = ptr::without_provenance_mut::<c_void>(0x5eed);
        assert_eq!(cq_open(o.dom, &mut attr, &mut cq, context), 0);
        assert_eq!((*cq).fid.fclass, FI_CLASS_CQ as usize);
        assert_eq!((*cq).fid.context, context);
        assert!(ptr::eq((*cq).ops, (*o.cq).ops));
        assert!(ptr::eq((*cq).fid.ops, (*o.cq).fid.ops));
        assert_eq!(close(ptr::addr_of_mut!((*cq).fid)), 0);
        close_all(o);
    }
}

#[test]
fn getinfo_refuses_layering_probes() {
    unsafe {
        let getinfo = (*provider::ptr()).getinfo.unwrap();
        let hints = fi_dupinfo(null());
        (*(*hints).ep_attr).type_ = FI_EP_DGRAM;
        let mut info = null_mut();
        assert_eq!(
            getinfo(
                crate::info::fi_version(1, 17),
                null(),
                null(),
                1 << 59,
                hints,
                &mut info
            ),
            neg(FI_ENODATA)
        );
        assert!(info.is_null());
        fi_freeinfo(hints);
    }
}

/// A domain's `auth_key` in the hints comes back in the answer as the core's own copy (it
/// frees it with the info) and opens a domain with it.
#[test]
fn an_auth_key_in_the_hints_comes_back_and_opens_a_domain() {
    const KEY: &[u8] = b"hinted-job-key-0123456789abcdef";
    unsafe {
        let getinfo = (*provider::ptr()).getinfo.unwrap();
        let hints = fi_dupinfo(null());
        let d = &mut *(*hints).domain_attr;
        d.auth_key = libc::malloc(KEY.len()).cast();
        ptr::copy_nonoverlapping(KEY.as_ptr(), d.auth_key, KEY.len());
        d.auth_key_size = KEY.len();
        let mut info = null_mut();
        let v = crate::info::fi_version(1, 17);
        assert_eq!(getinfo(v, null(), null(), 0, hints, &mut info), 0);
        fi_freeinfo(hints);
        let a = &*(*info).domain_attr;
        assert_eq!(a.auth_key_size, KEY.len());
        assert_eq!(std::slice::from_raw_parts(a.auth_key, a.auth_key_size), KEY);
        let mut fab = null_mut();
        assert_eq!(
            (*provider::ptr()).fabric.unwrap()((*info).fabric_attr, &mut fab, null_mut()),
            0
        );
        (*fab).api_version = v;
        let mut dom = null_mut();
        assert_eq!(
            (*(*fab).ops).domain.unwrap()(fab, info, &mut dom, null_mut()),
            0
        );
        let opened = super::obj::get::<crate::domain::Domain>(dom.cast()).unwrap();
        assert!(opened.job_key.is_some());
        assert_eq!(close(ptr::addr_of_mut!((*dom).fid)), 0);
        assert_eq!(close(ptr::addr_of_mut!((*fab).fid)), 0);
        fi_freeinfo(info);
    }
}

/// A peek that finds nothing is an error entry; `fi_cq_readerr` writes the struct of the
/// application's API version: before 1.5 it ends before `err_data`, and nothing is written there.
#[test]
fn readerr_writes_only_the_callers_struct() {
    for (api, short) in [((1, 4), true), ((1, 17), false)] {
        unsafe {
            let o = open_all_at(crate::info::fi_version(api.0, api.1));
            let msg = fi_msg_tagged {
                msg_iov: null(),
                desc: null_mut(),
                iov_count: 0,
                addr: FI_ADDR_UNSPEC,
                tag: 1,
                ignore: 0,
                context: 0x77 as *mut c_void,
                data: 0,
            };
            let peek = (*(*o.ep).tagged).recvmsg.unwrap();
            assert_eq!(peek(o.ep, &msg, FI_PEEK | FI_COMPLETION), 0);
            let cqops = &*(*o.cq).ops;
            let mut entries = [fi_cq_tagged_entry::default(); 1];
            assert_eq!(
                cqops.read.unwrap()(o.cq, entries.as_mut_ptr().cast(), 1),
                -(FI_EAVAIL as isize)
            );
            let mut slot = std::mem::MaybeUninit::<fi_cq_err_entry>::uninit();
            let buf = slot.as_mut_ptr();
            ptr::write_bytes(buf.cast::<u8>(), 0xAB, size_of::<fi_cq_err_entry>());
            assert_eq!(cqops.readerr.unwrap()(o.cq, buf, 0), 1);
            let e = ptr::read(buf);
            assert_eq!((e.op_context as usize, e.err), (0x77, FI_ENOMSG as c_int));
            let raw = std::slice::from_raw_parts(buf.cast::<u8>(), size_of::<fi_cq_err_entry>());
            let tail = &raw[std::mem::offset_of!(fi_cq_err_entry, err_data)..];
            if short {
                assert!(tail.iter().all(|&b| b == 0xAB), "written past a 1.4 struct");
            } else {
                assert_eq!(e.err_data_size, 0);
            }
            close_all(o);
        }
    }
}

/// Without selective completion every write completes, FI_INJECT in `fi_writemsg`'s flags
/// included, but an `fi_inject_write` never does (libfabric: the inject calls generate no
/// completion). Writes to the endpoint itself, through the fid tables as an application calls.
#[test]
fn inject_write_never_completes_and_an_injected_writemsg_does() {
    unsafe {
        let o = open_all_with(crate::info::fi_version(1, 17), FI_SEND | FI_RECV);
        let ep = ptr::addr_of_mut!((*o.ep).fid);
        let mut name = [0u8; 64];
        let mut len = name.len();
        assert_eq!(
            (*(*o.ep).cm).getname.unwrap()(ep, name.as_mut_ptr().cast(), &mut len),
            0
        );
        let mut me = 0u64;
        let insert = (*(*o.av).ops).insert.unwrap();
        assert_eq!(
            insert(o.av, name.as_ptr().cast(), 1, &mut me, 0, null_mut()),
            1
        );
        let mut target = [0u8; 64];
        let key = 1u64 << 63 | 5;
        let mut mr = null_mut::<fid_mr>();
        let reg = (*(*o.dom).mr).reg.unwrap();
        let dom = ptr::addr_of_mut!((*o.dom).fid);
        let at = target.as_mut_ptr().cast::<c_void>();
        assert_eq!(
            reg(dom, at, 64, FI_REMOTE_WRITE, 0, key, 0, &mut mr, null_mut()),
            0
        );
        let rma = &*(*o.ep).rma;
        let first = [1u8; 8];
        assert_eq!(
            rma.inject.unwrap()(o.ep, first.as_ptr().cast(), 8, me, 0, key),
            0
        );
        let second = [2u8; 8];
        let iov = iovec {
            iov_base: second.as_ptr() as *mut c_void,
            iov_len: 8,
        };
        let rma_iov = fi_rma_iov {
            addr: 8,
            len: 8,
            key,
        };
        let msg = fi_msg_rma {
            msg_iov: &iov,
            desc: null_mut(),
            iov_count: 1,
            addr: me,
            rma_iov: &rma_iov,
            rma_iov_count: 1,
            context: 0x99 as *mut c_void,
            data: 0,
        };
        assert_eq!(rma.writemsg.unwrap()(o.ep, &msg, FI_INJECT), 0);
        let read = (*(*o.cq).ops).read.unwrap();
        let mut seen = vec![];
        let poll = |seen: &mut Vec<usize>| {
            let mut e = [fi_cq_tagged_entry::default(); 4];
            let n = read(o.cq, e.as_mut_ptr().cast(), 4);
            seen.extend(
                e.iter()
                    .take(n.max(0) as usize)
                    .map(|c| c.op_context as usize),
            );
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < until && (seen.is_empty() || target[8] != 2) {
            poll(&mut seen);
        }
        // A little longer: an inject's completion would come after its write landed.
        for _ in 0..2000 {
            poll(&mut seen);
        }
        assert_eq!(&target[..16], &[[1u8; 8], [2u8; 8]].concat()[..]);
        assert_eq!(seen, [0x99], "only the writemsg completes");
        assert_eq!(
            (*(*mr).fid.ops).close.unwrap()(ptr::addr_of_mut!((*mr).fid)),
            0
        );
        close_all(o);
    }
}

/// Atomics through the fid tables, on the endpoint's own region: a fetching add, a compare
/// and swap that hits and one that misses, an injected add (no completion), an
/// ATOMIC_READ without an operand, and the calls that say what is offered.
#[test]
fn atomics_through_the_fid_tables() {
    unsafe {
        let o = open_all_with(crate::info::fi_version(1, 17), FI_SEND | FI_RECV);
        let ep = ptr::addr_of_mut!((*o.ep).fid);
        let mut name = [0u8; 64];
        let mut len = name.len();
        assert_eq!(
            (*(*o.ep).cm).getname.unwrap()(ep, name.as_mut_ptr().cast(), &mut len),
            0
        );
        let mut me = 0u64;
        let insert = (*(*o.av).ops).insert.unwrap();
        assert_eq!(
            insert(o.av, name.as_ptr().cast(), 1, &mut me, 0, null_mut()),
            1
        );
        let mut target = [5u64, 7];
        let key = 1u64 << 63 | 6;
        let mut mr = null_mut::<fid_mr>();
        let reg = (*(*o.dom).mr).reg.unwrap();
        let dom = ptr::addr_of_mut!((*o.dom).fid);
        let at = target.as_mut_ptr().cast::<c_void>();
        let access = FI_REMOTE_WRITE | FI_REMOTE_READ;
        assert_eq!(reg(dom, at, 16, access, 0, key, 0, &mut mr, null_mut()), 0);
        let a = &*(*o.ep).atomic;
        let read = (*(*o.cq).ops).read.unwrap();
        let next = || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                let mut e = [fi_cq_tagged_entry::default(); 1];
                if read(o.cq, e.as_mut_ptr().cast(), 1) == 1 {
                    return (e[0].op_context as usize, e[0].flags);
                }
                assert!(std::time::Instant::now() < until, "no completion");
            }
        };
        let (dt, sum) = (FI_UINT64, FI_SUM);
        let add = [10u64, 20];
        let mut old = [0u64; 2];
        let r = a.readwrite.unwrap()(
            o.ep,
            add.as_ptr().cast(),
            2,
            null_mut(),
            old.as_mut_ptr().cast(),
            null_mut(),
            me,
            0,
            key,
            dt,
            sum,
            ctx(0x1),
        );
        assert_eq!(r, 0);
        assert_eq!(next(), (0x1, FI_ATOMIC | FI_READ));
        assert_eq!((old, target), ([5, 7], [15, 27]));
        // Compare and swap: the first element matches, the second does not.
        let (swap, compare) = ([1u64, 2], [15u64, 0]);
        let r = a.compwrite.unwrap()(
            o.ep,
            swap.as_ptr().cast(),
            2,
            null_mut(),
            compare.as_ptr().cast(),
            null_mut(),
            old.as_mut_ptr().cast(),
            null_mut(),
            me,
            0,
            key,
            dt,
            FI_CSWAP,
            ctx(0x2),
        );
        assert_eq!(r, 0);
        assert_eq!(next(), (0x2, FI_ATOMIC | FI_READ));
        assert_eq!((old, target), ([15, 27], [1, 27]));
        // An injected add: no completion; then an ATOMIC_READ without an operand shows it.
        let r = a.inject.unwrap()(o.ep, add.as_ptr().cast(), 1, me, 8, key, dt, sum);
        assert_eq!(r, 0);
        let mut got = [0u64; 1];
        let ioc = fi_ioc {
            addr: got.as_mut_ptr().cast(),
            count: 1,
        };
        let rma_ioc = fi_rma_ioc {
            addr: 8,
            count: 1,
            key,
        };
        let msg = fi_msg_atomic {
            msg_iov: null(),
            desc: null_mut(),
            iov_count: 0,
            addr: me,
            rma_iov: &rma_ioc,
            rma_iov_count: 1,
            datatype: dt,
            op: FI_ATOMIC_READ,
            context: ctx(0x3),
            data: 0,
        };
        let mut res = ioc;
        assert_eq!(
            a.readwritemsg.unwrap()(o.ep, &msg, &mut res, null_mut(), 1, 0),
            0
        );
        assert_eq!(next(), (0x3, FI_ATOMIC | FI_READ));
        assert_eq!((got, target), ([37], [1, 37]));
        // What is offered: bitwise ops on integers, not on floats; no complex types.
        let mut count = 0usize;
        assert_eq!(
            a.writevalid.unwrap()(o.ep, FI_INT32, FI_BXOR, &mut count),
            0
        );
        assert_eq!(count, crate::atomic::MAX_BYTES / 4);
        assert_eq!(
            a.writevalid.unwrap()(o.ep, FI_DOUBLE, FI_BXOR, &mut count),
            -(FI_EOPNOTSUPP as c_int)
        );
        assert_eq!(
            a.compwritevalid.unwrap()(o.ep, FI_FLOAT_COMPLEX, FI_CSWAP, &mut count),
            -(FI_EOPNOTSUPP as c_int)
        );
        assert_eq!(
            a.readwritevalid.unwrap()(o.ep, FI_DOUBLE, FI_ATOMIC_READ, &mut count),
            0
        );
        let mut attr = fi_atomic_attr::default();
        let query = (*(*o.dom).ops).query_atomic.unwrap();
        assert_eq!(
            query(o.dom, FI_INT16, FI_MSWAP, &mut attr, FI_COMPARE_ATOMIC),
            0
        );
        assert_eq!((attr.count, attr.size), (crate::atomic::MAX_BYTES / 2, 2));
        assert_eq!(
            query(o.dom, FI_INT16, FI_MSWAP, &mut attr, 0),
            -(FI_EOPNOTSUPP as c_int),
            "a compare op outside the compare call"
        );
        assert_eq!(
            (*(*mr).fid.ops).close.unwrap()(ptr::addr_of_mut!((*mr).fid)),
            0
        );
        close_all(o);
    }
}

/// An operation context: a number the completion brings back.
fn ctx(n: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(n)
}

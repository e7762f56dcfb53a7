//! Operations diwarp does not offer, each returning -FI_ENOSYS. libfabric's inline wrappers
//! call most table slots without a NULL check, so every slot needs a function of the exact
//! type; the core exports no `fi_no_*` helpers to borrow.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::raw::{c_char, c_int};

use crate::sys::*;

macro_rules! enosys {
    ($($name:ident($($arg:ty),*) -> $ret:ty;)*) => {$(
        pub(super) extern "C" fn $name($(_: $arg),*) -> $ret {
            -(FI_ENOSYS as $ret)
        }
    )*};
}

type Ctx = *mut c_void;
type Ep = *mut fid_ep;

// Slots of `struct fi_ops` that no diwarp object implements.
enosys! {
    fid_bind(*mut fid, *mut fid, u64) -> c_int;
    fid_control(*mut fid, c_int, Ctx) -> c_int;
    fid_ops_open(*mut fid, *const c_char, u64, *mut Ctx, Ctx) -> c_int;
    fid_tostr(*const fid, *mut c_char, usize) -> c_int;
    fid_ops_set(*mut fid, *const c_char, u64, Ctx, Ctx) -> c_int;
}

/// `struct fi_ops` for a class whose only operation is `close`.
pub(super) const fn fi_ops(close: unsafe extern "C" fn(*mut fid) -> c_int) -> fi_ops {
    fi_ops {
        size: size_of::<fi_ops>(),
        close: Some(close),
        bind: Some(fid_bind),
        control: Some(fid_control),
        ops_open: Some(fid_ops_open),
        tostr: Some(fid_tostr),
        ops_set: Some(fid_ops_set),
    }
}

// Fabric: no passive endpoints, event queues or wait sets.
enosys! {
    fabric_passive_ep(*mut fid_fabric, *mut fi_info, *mut *mut fid_pep, Ctx) -> c_int;
    fabric_eq_open(*mut fid_fabric, *mut fi_eq_attr, *mut *mut fid_eq, Ctx) -> c_int;
    fabric_wait_open(*mut fid_fabric, *mut fi_wait_attr, *mut *mut fid_wait) -> c_int;
    fabric_trywait(*mut fid_fabric, *mut *mut fid, c_int) -> c_int;
    fabric_domain2(*mut fid_fabric, *mut fi_info, *mut *mut fid_domain, u64, Ctx) -> c_int;
}

// Domain: no scalable endpoints, poll sets, shared contexts or collectives.
enosys! {
    domain_scalable_ep(*mut fid_domain, *mut fi_info, *mut Ep, Ctx) -> c_int;
    domain_poll_open(*mut fid_domain, *mut fi_poll_attr, *mut *mut fid_poll) -> c_int;
    domain_stx_ctx(*mut fid_domain, *mut fi_tx_attr, *mut *mut fid_stx, Ctx) -> c_int;
    domain_srx_ctx(*mut fid_domain, *mut fi_rx_attr, *mut Ep, Ctx) -> c_int;
    domain_query_collective(*mut fid_domain, fi_collective_op, *mut fi_collective_attr, u64) -> c_int;
    domain_endpoint2(*mut fid_domain, *mut fi_info, *mut Ep, u64, Ctx) -> c_int;
}

// Endpoint control and connection management that RDM endpoints do not use.
enosys! {
    ep_tx_ctx(Ep, c_int, *mut fi_tx_attr, *mut Ep, Ctx) -> c_int;
    ep_rx_ctx(Ep, c_int, *mut fi_rx_attr, *mut Ep, Ctx) -> c_int;
    ep_rx_size_left(Ep) -> isize;
    ep_tx_size_left(Ep) -> isize;
    cm_setname(fid_t, Ctx, usize) -> c_int;
    cm_getpeer(Ep, Ctx, *mut usize) -> c_int;
    cm_connect(Ep, *const c_void, *const c_void, usize) -> c_int;
    cm_listen(*mut fid_pep) -> c_int;
    cm_accept(Ep, *const c_void, usize) -> c_int;
    cm_reject(*mut fid_pep, fid_t, *const c_void, usize) -> c_int;
    cm_shutdown(Ep, u64) -> c_int;
    cm_join(Ep, *const c_void, u64, *mut *mut fid_mc, Ctx) -> c_int;
}

// Remote CQ data on RMA writes is not offered (neither MPI uses it); collectives are not
// offered at all (no FI_COLLECTIVE cap).
enosys! {
    rma_writedata(Ep, *const c_void, usize, Ctx, u64, fi_addr_t, u64, u64, Ctx) -> isize;
    rma_injectdata(Ep, *const c_void, usize, u64, fi_addr_t, u64, u64) -> isize;
}

type Dt = fi_datatype;
type Op = fi_op;
type IocMut = *mut fi_ioc;

enosys! {
    coll_barrier(Ep, fi_addr_t, Ctx) -> isize;
    coll_broadcast(Ep, Ctx, usize, Ctx, fi_addr_t, fi_addr_t, Dt, u64, Ctx) -> isize;
    coll_alltoall(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, Dt, u64, Ctx) -> isize;
    coll_allreduce(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, Dt, Op, u64, Ctx) -> isize;
    coll_allgather(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, Dt, u64, Ctx) -> isize;
    coll_reduce_scatter(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, Dt, Op, u64, Ctx) -> isize;
    coll_reduce(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, fi_addr_t, Dt, Op, u64, Ctx) -> isize;
    coll_scatter(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, fi_addr_t, Dt, u64, Ctx) -> isize;
    coll_gather(Ep, *const c_void, usize, Ctx, Ctx, Ctx, fi_addr_t, fi_addr_t, Dt, u64, Ctx) -> isize;
    coll_msg(Ep, *const fi_msg_collective, IocMut, *mut Ctx, usize, u64) -> isize;
    coll_barrier2(Ep, fi_addr_t, u64, Ctx) -> isize;
}

pub(super) static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
    size: size_of::<fi_ops_collective>(),
    barrier: Some(coll_barrier),
    broadcast: Some(coll_broadcast),
    alltoall: Some(coll_alltoall),
    allreduce: Some(coll_allreduce),
    allgather: Some(coll_allgather),
    reduce_scatter: Some(coll_reduce_scatter),
    reduce: Some(coll_reduce),
    scatter: Some(coll_scatter),
    gather: Some(coll_gather),
    msg: Some(coll_msg),
    barrier2: Some(coll_barrier2),
};

// Address vectors: no name resolution, symmetric ranges or AV sets.
enosys! {
    av_insertsvc(*mut fid_av, *const c_char, *const c_char, *mut fi_addr_t, u64, Ctx) -> c_int;
    av_insertsym(*mut fid_av, *const c_char, usize, *const c_char, usize, *mut fi_addr_t, u64, Ctx) -> c_int;
    av_set(*mut fid_av, *mut fi_av_set_attr, *mut *mut fid_av_set, Ctx) -> c_int;
}

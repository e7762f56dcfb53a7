//! What diwarp offers in `fi_getinfo`, and how it answers an application's hints.
//!
//! [`Info`] mirrors the parts of `struct fi_info` that matter, as plain Rust; `ffi::info` converts
//! in both directions. [`negotiate`] holds every rule, each traceable to what MPICH or Open MPI
//! asks.

use crate::sys::*;

pub const PROVIDER_NAME: &str = "diwarp";
pub const FABRIC_NAME: &str = "diwarp";
pub const DOMAIN_NAME: &str = "diwarp";

/// Capabilities offered when the hints ask for none. FI_SOURCE is supported but not offered by
/// default: neither MPI asks for it, and MPICH copies the default caps into its real request.
/// MPICH's first query has no hints and its second asks for exactly these, so offering FI_RMA
/// here is what makes MPICH use it (its fallback for long active messages without RMA, a
/// pipeline, corrupts their headers when a second one starts while the first is sending).
pub const DEFAULT_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RECV
    | FI_MULTI_RECV
    | FI_DIRECTED_RECV
    | RMA_CAPS
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
/// FI_ATOMIC is offered to those who ask for it (Open MPI's `btl ofi`, for `osc rdma`), not
/// by default: MPICH would take it and move its accumulates from messages to atomics.
pub const SUPPORTED_CAPS: u64 = DEFAULT_CAPS | FI_SOURCE | FI_ATOMIC;
/// RMA and its four directions; asking for FI_RMA (or FI_ATOMIC) alone means all four
/// (fi_getinfo(3)).
const RMA_CAPS: u64 = FI_RMA | RMA_DIRECTIONS;
const RMA_DIRECTIONS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Capabilities an application must ask for to get; the rest are returned whenever supported.
const PRIMARY_CAPS: u64 =
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | RMA_CAPS | FI_ATOMIC;
const SECONDARY_DEFAULT: u64 = FI_MULTI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM;
const TX_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RMA
    | FI_ATOMIC
    | FI_READ
    | FI_WRITE
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
const RX_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RECV
    | FI_MULTI_RECV
    | FI_DIRECTED_RECV
    | FI_SOURCE
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
const DOMAIN_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;

/// MPICH always asks for FI_DELIVERY_COMPLETE and never relaxes it; all of these are honoured
/// by completing a send only once the peer has acknowledged it.
pub const TX_OP_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_MATCH_COMPLETE;
pub const RX_OP_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV;
/// Send-after-send is the MPI non-overtaking rule. A target takes a peer's WRITEs and READs in
/// order, so reads and writes after writes and reads after reads keep their order; a write or
/// a send after a read does not (a read's chunks are copied when they are sent, later), nor
/// does a read or write after a send (a rendezvous send's data is placed after its answer).
/// Atomics from one peer are applied in its send order, so the atomic orderings hold;
/// FI_ORDER_DATA does not, since rendezvous segments are placed as they arrive.
pub const SUPPORTED_ORDER: u64 = FI_ORDER_SAS
    | FI_ORDER_SAW
    | FI_ORDER_RAR
    | FI_ORDER_RAW
    | FI_ORDER_WAW
    | FI_ORDER_RMA_RAR
    | FI_ORDER_RMA_RAW
    | FI_ORDER_RMA_WAW
    | FI_ORDER_ATOMIC_RAR
    | FI_ORDER_ATOMIC_RAW
    | FI_ORDER_ATOMIC_WAR
    | FI_ORDER_ATOMIC_WAW;

/// libfabric's `FI_TAG_GENERIC` (a 64-bit tag without fixed fields; absent from the 1.17
/// headers). Its bit 63 is set, which Open MPI needs.
pub const TAG_GENERIC: u64 = 0xAAAA_AAAA_AAAA_AAAA;

/// As large as the default eager size: MPI sends up to it inject (complete at once, the bytes
/// copied) instead of waiting for the peer's acknowledgement, as a TCP send completes once the
/// kernel has the bytes; what stays unacknowledged counts against the session's send buffer.
pub const INJECT_SIZE: usize = 32 * 1024;
pub const QUEUE_SIZE: usize = 8192;
pub const IOV_LIMIT: usize = 16;
/// One remote range per RMA operation, which is all MPICH posts.
pub const RMA_IOV_LIMIT: usize = 1;
pub const CQ_DATA_SIZE: usize = 8;
/// Objects per domain are limited only by memory; these are what `fi_info` reports.
pub const OBJECT_COUNT: usize = 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub size: usize,
    pub iov_limit: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpAttr {
    pub ep_type: u32,
    pub protocol: u32,
    pub max_msg_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAttr {
    pub name: Option<String>,
    pub threading: u32,
    pub control_progress: u32,
    pub data_progress: u32,
    pub resource_mgmt: u32,
    pub av_type: u32,
    pub mr_mode: i32,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key_size: usize,
    /// The job key an application hands the domain (authenticated mode), if any.
    pub auth_key: Option<AuthKey>,
}

/// A domain's `auth_key` bytes: never printed (the info is, at FI_LOG_LEVEL=debug).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthKey(pub Vec<u8>);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuthKey({} bytes)", self.0.len())
    }
}

/// The longest `auth_key` taken: a job key is a secret of a few dozen bytes.
pub const AUTH_KEY_MAX: usize = 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricAttr {
    pub name: Option<String>,
}

/// The fields of `struct fi_info` diwarp reads from hints and fills in answers. In hints, zero
/// and `None` mean "no requirement", as in libfabric.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub tx: TxAttr,
    pub rx: RxAttr,
    pub ep: EpAttr,
    pub domain: DomainAttr,
    pub fabric: FabricAttr,
}

/// Why hints were refused: the field that asked for something diwarp does not do. The caller
/// turns it into `-FI_ENODATA` and logs the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused(pub &'static str);

/// The provider version diwarp reports (`fi_info` shows it as the fabric's `prov_version`).
pub fn provider_version() -> u32 {
    let major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap_or(0);
    let minor: u32 = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap_or(0);
    fi_version(major, minor)
}

/// libfabric's `FI_VERSION` macro.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The answer to `fi_getinfo` without hints.
pub fn offer(api_version: u32) -> Info {
    Info {
        caps: DEFAULT_CAPS,
        mode: 0,
        addr_format: FI_FORMAT_UNSPEC,
        tx: TxAttr {
            caps: DEFAULT_CAPS & TX_CAPS,
            mode: 0,
            op_flags: 0,
            msg_order: FI_ORDER_SAS,
            comp_order: FI_ORDER_NONE,
            inject_size: INJECT_SIZE,
            size: QUEUE_SIZE,
            iov_limit: IOV_LIMIT,
            rma_iov_limit: RMA_IOV_LIMIT,
        },
        rx: RxAttr {
            caps: DEFAULT_CAPS & RX_CAPS,
            mode: 0,
            op_flags: 0,
            msg_order: FI_ORDER_SAS,
            comp_order: FI_ORDER_NONE,
            size: QUEUE_SIZE,
            iov_limit: IOV_LIMIT,
        },
        ep: EpAttr {
            ep_type: FI_EP_RDM,
            protocol: FI_PROTO_UNSPEC,
            // Open MPI has no rendezvous of its own and sends anything up to this size in one
            // call; MPICH takes it as its eager threshold.
            max_msg_size: usize::MAX,
            // Bit 63 must be usable: Open MPI derives its tag layout from the leading zeros.
            mem_tag_format: TAG_GENERIC,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            auth_key_size: 0,
        },
        domain: DomainAttr {
            name: Some(DOMAIN_NAME.into()),
            threading: FI_THREAD_SAFE,
            control_progress: FI_PROGRESS_MANUAL,
            data_progress: FI_PROGRESS_MANUAL,
            resource_mgmt: FI_RM_ENABLED,
            av_type: FI_AV_TABLE,
            // Sends and receives need no registration; before 1.5 "none" was spelled SCALABLE.
            mr_mode: if api_version < fi_version(1, 5) {
                FI_MR_SCALABLE as i32
            } else {
                0
            },
            mr_key_size: 8,
            cq_data_size: CQ_DATA_SIZE,
            cq_cnt: OBJECT_COUNT,
            ep_cnt: OBJECT_COUNT,
            tx_ctx_cnt: OBJECT_COUNT,
            rx_ctx_cnt: OBJECT_COUNT,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            max_ep_stx_ctx: 0,
            max_ep_srx_ctx: 0,
            cntr_cnt: OBJECT_COUNT,
            caps: DOMAIN_CAPS,
            mode: 0,
            auth_key_size: 0,
            auth_key: None,
        },
        fabric: FabricAttr {
            name: Some(FABRIC_NAME.into()),
        },
    }
}

fn subset(asked: u64, allowed: u64, field: &'static str) -> Result<(), Refused> {
    if asked & !allowed == 0 {
        Ok(())
    } else {
        Err(Refused(field))
    }
}

fn at_most(asked: usize, limit: usize, field: &'static str) -> Result<(), Refused> {
    if asked <= limit {
        Ok(())
    } else {
        Err(Refused(field))
    }
}

fn one_of(asked: u32, allowed: &[u32], field: &'static str) -> Result<(), Refused> {
    if allowed.contains(&asked) {
        Ok(())
    } else {
        Err(Refused(field))
    }
}

fn same_name(asked: &Option<String>, ours: &str, field: &'static str) -> Result<(), Refused> {
    match asked {
        Some(name) if name != ours => Err(Refused(field)),
        _ => Ok(()),
    }
}

/// The info diwarp returns for `hints`, or the first field it cannot satisfy.
pub fn negotiate(api_version: u32, hints: Option<&Info>) -> Result<Info, Refused> {
    let mut out = offer(api_version);
    let Some(h) = hints else {
        return Ok(out);
    };

    // RDM only: util providers (rxm, rxd) probe core providers for MSG and DGRAM endpoints to
    // layer on, and must never find them here.
    one_of(h.ep.ep_type, &[FI_EP_UNSPEC, FI_EP_RDM], "ep_attr.type")?;
    one_of(h.ep.protocol, &[FI_PROTO_UNSPEC], "ep_attr.protocol")?;
    one_of(h.addr_format, &[FI_FORMAT_UNSPEC], "addr_format")?;

    subset(h.caps, SUPPORTED_CAPS, "caps")?;
    let primary = match h.caps & PRIMARY_CAPS {
        0 => DEFAULT_CAPS & PRIMARY_CAPS,
        asked => asked,
    };
    let primary = if primary & (FI_RMA | FI_ATOMIC) != 0 && primary & RMA_DIRECTIONS == 0 {
        primary | RMA_DIRECTIONS
    } else {
        primary
    };
    out.caps = primary | SECONDARY_DEFAULT | (h.caps & FI_SOURCE);

    subset(h.tx.caps, SUPPORTED_CAPS, "tx_attr.caps")?;
    subset(h.tx.op_flags, TX_OP_FLAGS, "tx_attr.op_flags")?;
    subset(h.tx.msg_order, SUPPORTED_ORDER, "tx_attr.msg_order")?;
    subset(h.tx.comp_order, FI_ORDER_NONE, "tx_attr.comp_order")?;
    at_most(h.tx.inject_size, INJECT_SIZE, "tx_attr.inject_size")?;
    at_most(h.tx.size, QUEUE_SIZE, "tx_attr.size")?;
    at_most(h.tx.iov_limit, IOV_LIMIT, "tx_attr.iov_limit")?;
    at_most(h.tx.rma_iov_limit, RMA_IOV_LIMIT, "tx_attr.rma_iov_limit")?;
    out.tx.caps = out.caps & TX_CAPS;
    out.tx.op_flags = h.tx.op_flags;
    out.tx.msg_order = FI_ORDER_SAS | h.tx.msg_order;

    subset(h.rx.caps, SUPPORTED_CAPS, "rx_attr.caps")?;
    subset(h.rx.op_flags, RX_OP_FLAGS, "rx_attr.op_flags")?;
    subset(h.rx.msg_order, SUPPORTED_ORDER, "rx_attr.msg_order")?;
    subset(h.rx.comp_order, FI_ORDER_NONE, "rx_attr.comp_order")?;
    at_most(h.rx.size, QUEUE_SIZE, "rx_attr.size")?;
    at_most(h.rx.iov_limit, IOV_LIMIT, "rx_attr.iov_limit")?;
    out.rx.caps = out.caps & RX_CAPS;
    out.rx.op_flags = h.rx.op_flags;
    out.rx.msg_order = FI_ORDER_SAS | h.rx.msg_order;

    // FI_SHARED_CONTEXT is usize::MAX, so the limit refuses shared contexts too.
    at_most(h.ep.tx_ctx_cnt, 1, "ep_attr.tx_ctx_cnt")?;
    at_most(h.ep.rx_ctx_cnt, 1, "ep_attr.rx_ctx_cnt")?;
    at_most(h.ep.auth_key_size, 0, "ep_attr.auth_key_size")?;
    if h.ep.mem_tag_format != 0 {
        out.ep.mem_tag_format = h.ep.mem_tag_format;
    }

    let d = &h.domain;
    same_name(&d.name, DOMAIN_NAME, "domain_attr.name")?;
    same_name(&h.fabric.name, FABRIC_NAME, "fabric_attr.name")?;
    // Every threading level is honoured by locking inside; MPICH insists on getting back
    // exactly the FI_THREAD_DOMAIN it asked for.
    one_of(
        d.threading,
        &[
            FI_THREAD_UNSPEC,
            FI_THREAD_SAFE,
            FI_THREAD_FID,
            FI_THREAD_DOMAIN,
            FI_THREAD_COMPLETION,
            FI_THREAD_ENDPOINT,
        ],
        "domain_attr.threading",
    )?;
    if d.threading != FI_THREAD_UNSPEC {
        out.domain.threading = d.threading;
    }
    let manual = [FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL];
    one_of(d.control_progress, &manual, "domain_attr.control_progress")?;
    one_of(d.data_progress, &manual, "domain_attr.data_progress")?;
    one_of(
        d.resource_mgmt,
        &[FI_RM_UNSPEC, FI_RM_ENABLED, FI_RM_DISABLED],
        "domain_attr.resource_mgmt",
    )?;
    if d.resource_mgmt != FI_RM_UNSPEC {
        out.domain.resource_mgmt = d.resource_mgmt;
    }
    one_of(
        d.av_type,
        &[FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE],
        "domain_attr.av_type",
    )?;
    if d.av_type != FI_AV_UNSPEC {
        out.domain.av_type = d.av_type;
    }
    at_most(d.cq_data_size, CQ_DATA_SIZE, "domain_attr.cq_data_size")?;
    at_most(d.mr_key_size, 8, "domain_attr.mr_key_size")?;
    at_most(d.cq_cnt, OBJECT_COUNT, "domain_attr.cq_cnt")?;
    at_most(d.ep_cnt, OBJECT_COUNT, "domain_attr.ep_cnt")?;
    at_most(d.cntr_cnt, OBJECT_COUNT, "domain_attr.cntr_cnt")?;
    at_most(d.tx_ctx_cnt, OBJECT_COUNT, "domain_attr.tx_ctx_cnt")?;
    at_most(d.rx_ctx_cnt, OBJECT_COUNT, "domain_attr.rx_ctx_cnt")?;
    at_most(d.max_ep_tx_ctx, 1, "domain_attr.max_ep_tx_ctx")?;
    at_most(d.max_ep_rx_ctx, 1, "domain_attr.max_ep_rx_ctx")?;
    at_most(d.max_ep_stx_ctx, 0, "domain_attr.max_ep_stx_ctx")?;
    at_most(d.max_ep_srx_ctx, 0, "domain_attr.max_ep_srx_ctx")?;
    // A job key for authenticated mode (its size, at least iwarp's minimum, must be the
    // bytes'); the answer carries it on to fi_domain.
    if d.auth_key_size != 0 {
        let fits = d.auth_key.as_ref().is_some_and(|k| {
            k.0.len() == d.auth_key_size
                && (iwarp::auth::MIN_SECRET_LEN..=AUTH_KEY_MAX).contains(&k.0.len())
        });
        if !fits {
            return Err(Refused("domain_attr.auth_key_size"));
        }
        out.domain.auth_key_size = d.auth_key_size;
        out.domain.auth_key = d.auth_key.clone();
    }
    subset(d.caps, DOMAIN_CAPS, "domain_attr.caps")?;
    // mr_mode and the mode bits list what the application is prepared to do; diwarp needs none
    // of it, so whatever was offered is fine and the answer stays empty.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: u32 = fi_version(1, 17);

    /// MPICH 5.0.2's second query, as observed (research §1.2), with diwarp's default caps.
    fn mpich_hints() -> Info {
        let mut h = Info {
            caps: offer(V).caps,
            mode: FI_CONTEXT | FI_ASYNC_IOV | FI_RX_CQ_DATA | FI_CONTEXT2,
            ..Default::default()
        };
        h.domain.threading = FI_THREAD_DOMAIN;
        h.domain.control_progress = FI_PROGRESS_MANUAL;
        h.domain.data_progress = FI_PROGRESS_MANUAL;
        h.domain.resource_mgmt = FI_RM_ENABLED;
        h.domain.av_type = FI_AV_TABLE;
        h.domain.mr_mode = FI_MR_ENDPOINT as i32;
        h.domain.cq_data_size = 4;
        h.tx.op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
        h.tx.msg_order = FI_ORDER_SAS
            | FI_ORDER_ATOMIC_RAR
            | FI_ORDER_ATOMIC_RAW
            | FI_ORDER_ATOMIC_WAR
            | FI_ORDER_ATOMIC_WAW;
        h.rx.op_flags = FI_COMPLETION;
        h.rx.msg_order = FI_ORDER_SAS;
        h.ep.ep_type = FI_EP_RDM;
        h.ep.mem_tag_format = 0x00C0_0000_7FFF_FFFF;
        h
    }

    /// Open MPI 4.1.4's hints (research §2.1).
    fn ompi_hints() -> Info {
        let mut h = Info {
            caps: FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV,
            mode: FI_CONTEXT | FI_CONTEXT2,
            ..Default::default()
        };
        h.tx.op_flags = FI_COMPLETION;
        h.rx.op_flags = FI_COMPLETION;
        h.tx.msg_order = FI_ORDER_SAS;
        h.rx.msg_order = FI_ORDER_SAS;
        h.domain.threading = FI_THREAD_DOMAIN;
        h.domain.av_type = FI_AV_MAP;
        h.domain.resource_mgmt = FI_RM_ENABLED;
        h.domain.cq_data_size = 4;
        h.ep.ep_type = FI_EP_RDM;
        h
    }

    #[test]
    fn null_hints_offer_what_mpich_needs() {
        let i = negotiate(V, None).unwrap();
        assert_eq!(i.ep.ep_type, FI_EP_RDM);
        for cap in [FI_MSG, FI_TAGGED, FI_MULTI_RECV, FI_DIRECTED_RECV] {
            assert_ne!(i.caps & cap, 0);
        }
        assert_eq!(i.caps & FI_SOURCE, 0);
        assert_eq!(i.ep.max_msg_size, usize::MAX);
        assert_eq!(i.domain.cq_data_size, 8);
        assert_ne!(i.ep.mem_tag_format >> 63, 0);
        assert_eq!(i.domain.mr_mode, 0);
        assert_eq!(i.mode, 0);
        assert!(i.domain.name.is_some() && i.fabric.name.is_some());
    }

    #[test]
    fn mpich_hints_are_accepted_and_echoed() {
        let i = negotiate(fi_version(2, 5), Some(&mpich_hints())).unwrap();
        assert_eq!(i.domain.threading, FI_THREAD_DOMAIN);
        assert_eq!(i.tx.op_flags, FI_COMPLETION | FI_DELIVERY_COMPLETE);
        assert_ne!(i.tx.msg_order & FI_ORDER_SAS, 0);
        assert_eq!(i.ep.mem_tag_format, 0x00C0_0000_7FFF_FFFF);
        assert_eq!(i.domain.av_type, FI_AV_TABLE);
        assert_eq!(i.mode, 0);
        assert_eq!(i.caps, offer(V).caps);
    }

    #[test]
    fn rma_alone_means_every_direction_and_is_granted_only_when_asked() {
        let h = Info {
            caps: FI_RMA,
            ..Default::default()
        };
        let i = negotiate(V, Some(&h)).unwrap();
        assert_eq!(i.caps & RMA_CAPS, RMA_CAPS);
        assert_eq!(i.caps & (FI_MSG | FI_TAGGED), 0);
        assert_eq!(i.tx.caps & (FI_REMOTE_READ | FI_REMOTE_WRITE), 0);
        assert_eq!(i.rx.caps & (FI_READ | FI_WRITE), 0);
        let h = Info {
            caps: FI_RMA | FI_READ,
            ..Default::default()
        };
        assert_eq!(
            negotiate(V, Some(&h)).unwrap().caps & RMA_CAPS,
            FI_RMA | FI_READ
        );
        assert_eq!(negotiate(V, None).unwrap().caps & RMA_CAPS, RMA_CAPS);
        let i = negotiate(fi_version(1, 5), Some(&ompi_hints())).unwrap();
        assert_eq!(i.caps & RMA_CAPS, 0, "Open MPI does not ask for RMA");
    }

    #[test]
    fn atomics_are_granted_only_when_asked_with_every_direction() {
        assert_eq!(negotiate(V, None).unwrap().caps & FI_ATOMIC, 0);
        let i = negotiate(V, Some(&mpich_hints())).unwrap();
        assert_eq!(
            i.caps & FI_ATOMIC,
            0,
            "MPICH keeps its accumulates as messages"
        );
        let h = Info {
            caps: FI_ATOMIC | FI_RMA,
            ..Default::default()
        };
        let i = negotiate(V, Some(&h)).unwrap();
        assert_eq!(i.caps & (FI_ATOMIC | RMA_CAPS), FI_ATOMIC | RMA_CAPS);
        assert_ne!(i.tx.caps & FI_ATOMIC, 0);
        assert_ne!(i.rx.caps & FI_ATOMIC, 0);
        let h = Info {
            caps: FI_ATOMIC,
            ..Default::default()
        };
        let i = negotiate(V, Some(&h)).unwrap();
        assert_eq!(
            i.caps & (FI_ATOMIC | RMA_DIRECTIONS),
            FI_ATOMIC | RMA_DIRECTIONS
        );
    }

    #[test]
    fn ompi_hints_get_bit_63_and_map() {
        let i = negotiate(fi_version(1, 5), Some(&ompi_hints())).unwrap();
        assert_eq!(i.ep.mem_tag_format, TAG_GENERIC);
        assert_eq!(i.domain.av_type, FI_AV_MAP);
        assert_eq!(
            i.caps & FI_MSG,
            0,
            "primary caps not asked for are not granted"
        );
        assert_ne!(i.caps & FI_DIRECTED_RECV, 0);
        assert_ne!(i.caps & FI_TAGGED, 0);
    }

    #[test]
    fn layering_probes_and_unsupported_requests_are_refused() {
        for t in [FI_EP_MSG, FI_EP_DGRAM] {
            let mut h = Info::default();
            h.ep.ep_type = t;
            assert_eq!(negotiate(V, Some(&h)), Err(Refused("ep_attr.type")));
        }
        let h = Info {
            caps: FI_TAGGED | FI_HMEM,
            ..Default::default()
        };
        assert_eq!(negotiate(V, Some(&h)), Err(Refused("caps")));
        let h = Info {
            caps: FI_COLLECTIVE,
            ..Default::default()
        };
        assert_eq!(negotiate(V, Some(&h)), Err(Refused("caps")));
        let mut h = Info::default();
        h.tx.rma_iov_limit = 2;
        assert_eq!(
            negotiate(V, Some(&h)),
            Err(Refused("tx_attr.rma_iov_limit"))
        );
        let mut h = Info::default();
        h.tx.msg_order = FI_ORDER_RMA_WAR;
        assert_eq!(negotiate(V, Some(&h)), Err(Refused("tx_attr.msg_order")));
        let mut h = Info::default();
        h.domain.data_progress = FI_PROGRESS_AUTO;
        assert_eq!(
            negotiate(V, Some(&h)),
            Err(Refused("domain_attr.data_progress"))
        );
        let mut h = Info::default();
        h.ep.tx_ctx_cnt = FI_SHARED_CONTEXT as usize;
        assert_eq!(negotiate(V, Some(&h)), Err(Refused("ep_attr.tx_ctx_cnt")));
        let mut h = Info::default();
        h.rx.msg_order = FI_ORDER_DATA;
        assert_eq!(negotiate(V, Some(&h)), Err(Refused("rx_attr.msg_order")));
        let mut h = Info::default();
        h.domain.name = Some("mlx5_0".into());
        assert_eq!(negotiate(V, Some(&h)), Err(Refused("domain_attr.name")));
    }

    #[test]
    fn an_auth_key_is_carried_when_it_can_be_a_job_key() {
        let with_key = |size: usize, len: Option<usize>| {
            let mut h = Info::default();
            h.domain.auth_key_size = size;
            h.domain.auth_key = len.map(|n| AuthKey(vec![7; n]));
            negotiate(V, Some(&h))
        };
        let i = with_key(32, Some(32)).unwrap();
        assert_eq!(i.domain.auth_key_size, 32);
        assert_eq!(i.domain.auth_key, Some(AuthKey(vec![7; 32])));
        assert_eq!(with_key(0, None).unwrap().domain.auth_key, None);
        let refused = Err(Refused("domain_attr.auth_key_size"));
        // Too short to be a job key, too long, a size without bytes, a size that is not theirs.
        assert_eq!(with_key(8, Some(8)), refused);
        assert_eq!(with_key(AUTH_KEY_MAX + 1, Some(AUTH_KEY_MAX + 1)), refused);
        assert_eq!(with_key(32, None), refused);
        assert_eq!(with_key(32, Some(31)), refused);
        // The ep's key is still refused; and the key's bytes are never printed.
        let mut h = Info::default();
        h.ep.auth_key_size = 32;
        assert_eq!(
            negotiate(V, Some(&h)),
            Err(Refused("ep_attr.auth_key_size"))
        );
        assert_eq!(
            format!("{:?}", AuthKey(b"secret-bytes".to_vec())),
            "AuthKey(12 bytes)"
        );
    }

    #[test]
    fn fi_source_only_when_asked() {
        let h = Info {
            caps: FI_TAGGED | FI_SOURCE,
            ..Default::default()
        };
        let i = negotiate(V, Some(&h)).unwrap();
        assert_ne!(i.caps & FI_SOURCE, 0);
        assert_ne!(i.rx.caps & FI_SOURCE, 0);
        assert_eq!(i.tx.caps & FI_SOURCE, 0);
    }

    #[test]
    fn fi_info_tool_hints_are_accepted() {
        // fi_info sets every mode bit and every mr_mode bit but BASIC and SCALABLE.
        let mut h = Info {
            mode: !0,
            ..Default::default()
        };
        h.domain.mode = !0;
        h.domain.mr_mode = !((FI_MR_BASIC | FI_MR_SCALABLE) as i32);
        let i = negotiate(V, Some(&h)).unwrap();
        assert_eq!(i.mode, 0);
        assert_eq!(i.caps, DEFAULT_CAPS);
    }

    #[test]
    fn old_api_versions_get_scalable_mr() {
        assert_eq!(
            offer(fi_version(1, 4)).domain.mr_mode,
            FI_MR_SCALABLE as i32
        );
    }
}

//! The RDM endpoint's control side: its name and socket, what it is bound to, enabling, options.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::addr::EpName;
use crate::av::AddressVector;
use crate::cntr::Counter;
use crate::cq::CompletionQueue;
use crate::diag;
use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::ffi::sys::*;
use crate::info::{negotiate, Info, RX_OP_FLAGS, TX_OP_FLAGS};

/// Until the application sets FI_OPT_MIN_MULTI_RECV, a multi-receive buffer is released once
/// less than this much of it is left (MPICH sets the same value itself).
pub const DEFAULT_MIN_MULTI_RECV: usize = 16 * 1024;

/// What `fi_ep_bind` attaches.
pub enum Bind {
    Av(Arc<AddressVector>),
    Cq(Arc<CompletionQueue>),
    Cntr(Arc<Counter>),
}

#[derive(Debug, Default)]
struct Bound {
    av: Option<Arc<AddressVector>>,
    tx_cq: Option<Arc<CompletionQueue>>,
    rx_cq: Option<Arc<CompletionQueue>>,
    /// FI_SELECTIVE_COMPLETION per direction: only operations flagged FI_COMPLETION complete.
    tx_selective: bool,
    rx_selective: bool,
    cntrs: Vec<(Arc<Counter>, u64)>,
}

#[derive(Debug)]
struct State {
    bound: Bound,
    enabled: bool,
    min_multi_recv: usize,
    tx_op_flags: u64,
    rx_op_flags: u64,
}

#[derive(Debug)]
pub struct Endpoint {
    pub domain: Arc<Domain>,
    pub info: Info,
    name: EpName,
    /// Bound at creation so the name is known before any traffic; the data path moves it into
    /// the endpoint's datagram queue pair.
    socket: UdpSocket,
    state: Mutex<State>,
}

const CNTR_FLAGS: u64 = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

impl Endpoint {
    pub fn open(domain: &Arc<Domain>, api_version: u32, info: &Info) -> Result<Arc<Endpoint>> {
        let info = negotiate(api_version, Some(info)).map_err(|r| {
            diag!(Warn, EpCtrl, "fi_endpoint: unsupported attribute {}", r.0);
            Errno::NODATA
        })?;
        let ip = crate::iface::resolve(domain.fabric.config.iface.as_deref()).map_err(|e| {
            diag!(Warn, EpCtrl, "FI_DIWARP_IFACE: {e}");
            Errno::NODATA
        })?;
        let socket = UdpSocket::bind(SocketAddr::new(ip, 0)).map_err(|e| {
            diag!(Warn, EpCtrl, "cannot bind a UDP socket on {ip}: {e}");
            Errno(e.raw_os_error().map_or(FI_EOTHER, |n| n as u32))
        })?;
        let port = socket.local_addr().map_err(|_| Errno::OTHER)?.port();
        let name = EpName {
            ip,
            udp_port: port,
            tcp_port: 0,
            nonce: RandomState::new().hash_one((std::process::id(), port)),
        };
        diag!(Info, EpCtrl, "endpoint {name}");
        let state = State {
            bound: Bound::default(),
            enabled: false,
            min_multi_recv: DEFAULT_MIN_MULTI_RECV,
            tx_op_flags: info.tx.op_flags,
            rx_op_flags: info.rx.op_flags,
        };
        Ok(Arc::new(Endpoint {
            domain: Arc::clone(domain),
            info,
            name,
            socket,
            state: Mutex::new(state),
        }))
    }

    pub fn name(&self) -> EpName {
        self.name
    }

    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    pub fn bind(&self, target: Bind, flags: u64) -> Result<()> {
        let mut st = self.state.lock();
        if st.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let same_domain = |d: &Arc<Domain>| Arc::ptr_eq(d, &self.domain);
        let b = &mut st.bound;
        match target {
            Bind::Av(av) => {
                if !same_domain(&av.domain) {
                    return Err(Errno::INVAL);
                }
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if b.av.is_some() {
                    return Err(Errno::INVAL);
                }
                b.av = Some(av);
            }
            Bind::Cq(cq) => {
                if !same_domain(&cq.domain) {
                    return Err(Errno::INVAL);
                }
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0
                    || flags & (FI_TRANSMIT | FI_RECV) == 0
                {
                    return Err(Errno::BADFLAGS);
                }
                let selective = flags & FI_SELECTIVE_COMPLETION != 0;
                if (flags & FI_TRANSMIT != 0 && b.tx_cq.is_some())
                    || (flags & FI_RECV != 0 && b.rx_cq.is_some())
                {
                    return Err(Errno::INVAL);
                }
                if flags & FI_TRANSMIT != 0 {
                    b.tx_cq = Some(Arc::clone(&cq));
                    b.tx_selective = selective;
                }
                if flags & FI_RECV != 0 {
                    b.rx_cq = Some(cq);
                    b.rx_selective = selective;
                }
            }
            Bind::Cntr(cntr) => {
                if !same_domain(&cntr.domain) {
                    return Err(Errno::INVAL);
                }
                if flags & !CNTR_FLAGS != 0 || flags == 0 {
                    return Err(Errno::BADFLAGS);
                }
                b.cntrs.push((cntr, flags));
            }
        }
        Ok(())
    }

    /// An RDM endpoint needs an AV to address peers, and somewhere to report each direction's
    /// completions (a CQ, or a counter for that direction).
    pub fn enable(&self) -> Result<()> {
        let mut st = self.state.lock();
        let b = &st.bound;
        if b.av.is_none() {
            return Err(Errno::NOAV);
        }
        let counted = |f: u64| b.cntrs.iter().any(|(_, flags)| flags & f != 0);
        if (b.tx_cq.is_none() && !counted(FI_SEND)) || (b.rx_cq.is_none() && !counted(FI_RECV)) {
            return Err(Errno(FI_ENOCQ));
        }
        st.enabled = true;
        Ok(())
    }

    pub fn is_enabled(&self) -> bool {
        self.state.lock().enabled
    }

    pub fn min_multi_recv(&self) -> usize {
        self.state.lock().min_multi_recv
    }

    pub fn set_min_multi_recv(&self, n: usize) {
        self.state.lock().min_multi_recv = n;
    }

    /// FI_GETOPSFLAG: `selector` holds FI_TRANSMIT or FI_RECV.
    pub fn op_flags(&self, selector: u64) -> Result<u64> {
        let st = self.state.lock();
        if selector & FI_TRANSMIT != 0 {
            Ok(st.tx_op_flags)
        } else if selector & FI_RECV != 0 {
            Ok(st.rx_op_flags)
        } else {
            Err(Errno::INVAL)
        }
    }

    /// FI_SETOPSFLAG: `value` is FI_TRANSMIT or FI_RECV plus the new default flags.
    pub fn set_op_flags(&self, value: u64) -> Result<()> {
        let mut st = self.state.lock();
        if value & FI_TRANSMIT != 0 {
            let flags = value & !FI_TRANSMIT;
            if flags & !(TX_OP_FLAGS | FI_INJECT) != 0 {
                return Err(Errno::BADFLAGS);
            }
            st.tx_op_flags = flags;
        } else if value & FI_RECV != 0 {
            let flags = value & !FI_RECV;
            if flags & !RX_OP_FLAGS != 0 {
                return Err(Errno::BADFLAGS);
            }
            st.rx_op_flags = flags;
        } else {
            return Err(Errno::INVAL);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::domain;

    fn parts() -> (
        Arc<Endpoint>,
        Arc<AddressVector>,
        Arc<CompletionQueue>,
        Arc<Counter>,
    ) {
        let d = domain();
        let ep = Endpoint::open(&d, crate::info::fi_version(1, 17), &d.info.clone()).unwrap();
        let av = AddressVector::open(&d, FI_AV_TABLE, 0, 0, false, 0).unwrap();
        let cq = CompletionQueue::open(&d, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0).unwrap();
        let cntr = Counter::open(&d, FI_CNTR_EVENTS_COMP, FI_WAIT_UNSPEC, 0).unwrap();
        (ep, av, cq, cntr)
    }

    #[test]
    fn mpich_binding_sequence() {
        let (ep, av, cq, cntr) = parts();
        assert_eq!(ep.enable(), Err(Errno::NOAV));
        ep.bind(Bind::Av(av), 0).unwrap();
        assert_eq!(ep.enable(), Err(Errno(FI_ENOCQ)));
        ep.bind(
            Bind::Cq(cq.clone()),
            FI_SEND | FI_RECV | FI_SELECTIVE_COMPLETION,
        )
        .unwrap();
        assert_eq!(ep.bind(Bind::Cq(cq), FI_RECV), Err(Errno::INVAL));
        ep.bind(Bind::Cntr(cntr), FI_READ | FI_WRITE).unwrap();
        ep.enable().unwrap();
        assert!(ep.is_enabled());
        let (_, av2, _, _) = parts();
        assert_eq!(ep.bind(Bind::Av(av2), 0), Err(Errno::OPBADSTATE));
    }

    #[test]
    fn bind_checks_domain_and_flags() {
        let (ep, _, cq, cntr) = parts();
        let (_, other_av, _, _) = parts();
        assert_eq!(ep.bind(Bind::Av(other_av), 0), Err(Errno::INVAL));
        assert_eq!(ep.bind(Bind::Cq(cq.clone()), 0), Err(Errno::BADFLAGS));
        assert_eq!(
            ep.bind(Bind::Cq(cq), FI_RECV | FI_MULTI_RECV),
            Err(Errno::BADFLAGS)
        );
        assert_eq!(ep.bind(Bind::Cntr(cntr), 0), Err(Errno::BADFLAGS));
    }

    #[test]
    fn name_is_a_bound_socket() {
        let (ep, ..) = parts();
        let n = ep.name();
        assert_ne!(n.udp_port, 0);
        assert_eq!(ep.socket().local_addr().unwrap(), n.udp_addr());
        assert_eq!(EpName::decode(&n.encode()), Some(n));
    }

    #[test]
    fn options_and_op_flags() {
        let (ep, ..) = parts();
        assert_eq!(ep.min_multi_recv(), DEFAULT_MIN_MULTI_RECV);
        ep.set_min_multi_recv(100);
        assert_eq!(ep.min_multi_recv(), 100);
        ep.set_op_flags(FI_TRANSMIT | FI_COMPLETION | FI_DELIVERY_COMPLETE)
            .unwrap();
        assert_eq!(
            ep.op_flags(FI_TRANSMIT),
            Ok(FI_COMPLETION | FI_DELIVERY_COMPLETE)
        );
        assert_eq!(ep.set_op_flags(FI_RECV | FI_INJECT), Err(Errno::BADFLAGS));
        assert_eq!(ep.op_flags(0), Err(Errno::INVAL));
    }
}

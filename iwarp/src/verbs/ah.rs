use std::net::SocketAddr;

/// Where a UD send goes: the remote queue pair's UDP socket address and QP number.
///
/// The QP number travels in the DDP header's queue number (its high 30 bits), so the receiver can
/// refuse datagrams meant for another queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressHandle {
    pub addr: SocketAddr,
    pub qpn: u32,
}

impl AddressHandle {
    /// An address handle for `qpn` at `addr`.
    pub fn new(addr: SocketAddr, qpn: u32) -> Self {
        AddressHandle { addr, qpn }
    }
}

//! FI_DIWARP_PORT_RANGE as an endpoint meets it: both of its listening sockets in the range,
//! and no endpoint at all when the range is used up or malformed.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};

use super::Endpoint;
use crate::error::Errno;
use crate::params::Config;
use crate::ports::PortRange;
use crate::testutil::domain_with;

/// Two ports free for both protocols on loopback when looked at.
fn free_pair() -> PortRange {
    (30011..60000)
        .step_by(89)
        .map(|low| PortRange { low, high: low + 1 })
        .find(|r| {
            (r.low..=r.high).all(|p| {
                UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
                    && TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
            })
        })
        .expect("two free ports on loopback")
}

fn open(config: Config) -> Result<std::sync::Arc<Endpoint>, Errno> {
    let d = domain_with(config);
    Endpoint::open(&d, crate::info::fi_version(1, 17), &d.info.clone())
}

#[test]
fn an_endpoint_listens_inside_the_range_and_none_opens_past_it() {
    let r = free_pair();
    let config = Config {
        port_range: Ok(Some(r)),
        ..Config::default()
    };
    assert_eq!(
        config.promote.mode,
        policies::promote::Mode::Hybrid,
        "the default mode listens for RC"
    );
    let a = open(config.clone()).unwrap();
    let b = open(config.clone()).unwrap();
    for n in [a.name(), b.name()] {
        assert!(r.contains(n.udp_port), "UDP {} outside {r}", n.udp_port);
        assert!(r.contains(n.tcp_port), "TCP {} outside {r}", n.tcp_port);
    }
    assert_ne!(a.name().udp_port, b.name().udp_port);
    assert_eq!(
        open(config.clone()).err(),
        Some(Errno(libc::EADDRINUSE as u32)),
        "two ports, two endpoints"
    );
    drop(a);
    assert!(
        open(config).is_ok(),
        "a closed endpoint gives its ports back"
    );
}

#[test]
fn a_malformed_range_keeps_the_endpoint_shut() {
    let config = Config {
        port_range: Err("\"9-1\": the low end is above the high end".into()),
        ..Config::default()
    };
    assert_eq!(open(config).err(), Some(Errno::INVAL));
}

//! `DIWARP_FAULTS` read at queue pair creation. One test per process: it sets the variable.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::*;

#[test]
fn faults_come_from_the_environment() {
    std::env::set_var(FAULTS_ENV, "drop=1,seed=3");
    let want = FaultConfig {
        drop: 1.0,
        seed: 3,
        ..FaultConfig::default()
    };
    let mut a = UdQp::create(QpConfig::default()).unwrap();
    assert_eq!(a.config().faults, Some(want));
    // A configuration in code wins; RC has no datagrams to fault.
    let explicit = QpConfig {
        faults: Some(FaultConfig::default()),
        ..QpConfig::default()
    };
    let rd = RdQp::create(explicit).unwrap();
    assert_eq!(rd.config().faults, Some(FaultConfig::default()));
    let rc = RcQp::create(QpConfig::default()).unwrap();
    assert_eq!(rc.config().faults, None);

    // drop=1: nothing arrives, and the counters say why.
    let mut b = UdQp::create(QpConfig::default()).unwrap();
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    a.bind_udp(local).unwrap();
    let b_addr = b.bind_udp(local).unwrap();
    b.post_recv(RecvWr {
        wr_id: 1,
        buf: vec![0; 16],
    })
    .unwrap();
    for i in 0..10 {
        a.post_send(SendWr {
            wr_id: i,
            opcode: SendOpcode::Send,
            data: b"lost",
            ah: Some(AddressHandle::new(b_addr, b.qpn())),
            signaled: false,
        })
        .unwrap();
    }
    let stats = a.fault_stats().unwrap();
    assert_eq!((stats.datagrams, stats.dropped), (10, 10));
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < Duration::from_millis(50) {
        assert_eq!(b.poll_cq(&mut out, 1).unwrap(), 0);
    }

    for (spec, key) in [
        ("drop=0.5,bogus=1", "`bogus`"),
        ("corrupt=2", "`corrupt`"),
        ("reorder_k=0", "`reorder_k`"),
    ] {
        std::env::set_var(FAULTS_ENV, spec);
        let e = RdQp::create(QpConfig::default()).unwrap_err();
        assert!(
            matches!(&e, VerbsError::InvalidArgument(m) if m.contains(key) && m.contains(FAULTS_ENV)),
            "{spec}: {e}"
        );
    }
    std::env::set_var(FAULTS_ENV, "  ");
    let quiet = UdQp::create(QpConfig::default()).unwrap();
    assert_eq!(quiet.config().faults, None);
    std::env::remove_var(FAULTS_ENV);
}

//! An RD queue pair meets thousands of peers that exist only in this test: their datagrams are
//! forged (the handshake by hand, the data by a `reliability::Session` playing each peer's
//! side) and handed in with `inject_datagram`, and what the queue pair sends is kept by its
//! null link instead of leaving. Nothing touches a network.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::*;
use iwarp::wire::datagram::qn_for;
use iwarp::wire::ddp::UNTAGGED_HEADER_LEN;
use iwarp::wire::rdmap::{Opcode, SegmentRepr};
use reliability::Session;

/// Forged peer `k`'s address: 10.x.y.z, never this host (so their sessions are remote ones).
fn addr(k: u32) -> SocketAddr {
    SocketAddr::from(([10, (k >> 16) as u8, (k >> 8) as u8, k as u8], 5000))
}

/// The message forged peer `k` sends: an RD Send to queue pair `qpn`, its payload naming `k`.
fn message(k: u32, qpn: u32, msn: u32) -> (Vec<u8>, Vec<u8>) {
    let payload = format!("message {msn} from forged peer {k:07}").into_bytes();
    let mut msg = vec![0u8; UNTAGGED_HEADER_LEN];
    let qn = qn_for(qpn, Opcode::Send.queue());
    SegmentRepr::untagged(Opcode::Send, true, qn, msn, 0)
        .emit(&mut msg)
        .unwrap();
    msg.extend_from_slice(&payload);
    (msg, payload)
}

/// `PEERS` forged peers each say HELLO, get the queue pair's HELLO-ACK back through the null
/// link, and send one message through their own session. Every message is received with its
/// bytes and source; once the peers have been idle a while they hold no active part, and the
/// RD layer's own state per peer is small.
#[test]
fn thousands_of_forged_peers_make_first_contact() {
    const PEERS: u32 = 4096;
    const FORGED_QPN: u32 = 7;
    let config = QpConfig {
        crc: false,
        max_recv_wr: PEERS as usize,
        ..QpConfig::default()
    };
    let mut qp = RdQp::create(config.clone()).unwrap();
    qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    qp.null_link();
    let ours = qp.qpn();
    for k in 0..PEERS {
        qp.post_recv(RecvWr {
            wr_id: u64::from(k),
            buf: vec![0; 64],
        })
        .unwrap();
    }

    // The handshake: each forged peer says HELLO with an id and epoch of its own.
    for k in 0..PEERS {
        let hello = RdHello {
            kind: RdHelloKind::Hello,
            checksum: false,
            dst_qpn: ours,
            src_qpn: FORGED_QPN,
            id: 1000 + k,
            epoch: 0xE0 + k,
            echo: (0, 0),
        };
        qp.inject_datagram(&hello.emit(), addr(k));
    }
    let mut acks = std::collections::HashMap::new();
    for (dst, bytes) in qp.take_sent() {
        let h = RdHello::parse(&bytes).expect("only HELLO-ACKs so far");
        assert_eq!(h.kind, RdHelloKind::Ack);
        assert_eq!((h.dst_qpn, h.src_qpn), (FORGED_QPN, ours));
        let k = h.echo.0 - 1000;
        assert_eq!((dst, h.echo.1), (addr(k), 0xE0 + k));
        assert!(
            acks.insert(k, (h.id, h.epoch)).is_none(),
            "one ACK per HELLO"
        );
    }
    assert_eq!(acks.len(), PEERS as usize);
    let m = qp.memory();
    assert_eq!((m.peers, m.active_peers), (PEERS as usize, 0), "{m:?}");

    // The data: each forged peer's session, with the ids just agreed, sends one message.
    let rd = Arc::new(RdConfig {
        checksum: false,
        ..RdConfig::default()
    });
    let now = Instant::now();
    let mut buf = Vec::new();
    let mut want = std::collections::HashMap::new();
    let mut sessions = Vec::new();
    for k in 0..PEERS {
        let (id, epoch) = acks[&k];
        let ids = SessionIds {
            local_id: 1000 + k,
            local_epoch: 0xE0 + k,
            remote_id: id,
            remote_epoch: epoch,
        };
        let mut peer = Session::new(Arc::clone(&rd), ids, now).unwrap();
        let (msg, payload) = message(k, ours, 1);
        peer.send(now, msg).unwrap();
        while peer.poll_transmit(now, &mut buf).is_some() {
            qp.inject_datagram(&buf, addr(k));
        }
        want.insert(addr(k), payload);
        sessions.push(peer);
    }
    let mut got = Vec::new();
    while got.len() < PEERS as usize {
        let before = got.len();
        qp.poll_cq(&mut got, 1024).unwrap();
        assert!(got.len() > before, "{} of {PEERS} received", got.len());
    }
    for wc in &got {
        assert_eq!(wc.status, WcStatus::Success);
        let src = wc.src.expect("a source");
        let payload = want.remove(&src).expect("one message per forged peer");
        assert_eq!(wc.data(), &payload[..]);
    }
    assert!(want.is_empty());
    // What the queue pair sent since: ACKs to the forged peers only.
    assert!(qp.take_sent().iter().all(|(dst, _)| dst.ip().is_ipv4()));

    // Idle now: after the grace period their active parts go.
    let m = qp.memory();
    assert!(m.active_peers > 0, "busy peers keep theirs a while: {m:?}");
    std::thread::sleep(Duration::from_millis(150));
    qp.poll_cq(&mut got, 1).unwrap();
    let m = qp.memory();
    assert_eq!((m.peers, m.active_peers), (PEERS as usize, 0), "{m:?}");
    let rd_per_peer = m.peer_entries / PEERS as usize;
    let all_per_peer = m.peer_state / PEERS as usize;
    println!("per idle peer: {rd_per_peer} bytes in the RD layer, {all_per_peer} with the engine's session");
    assert!(
        rd_per_peer <= 110,
        "{rd_per_peer} bytes per idle peer: {m:?}"
    );

    // A retired peer comes back where it left off: its next message is the one expected.
    let now = Instant::now();
    for (k, peer) in sessions.iter_mut().enumerate().take(16) {
        let k = k as u32;
        qp.post_recv(RecvWr {
            wr_id: 1 << 32 | u64::from(k),
            buf: vec![0; 64],
        })
        .unwrap();
        let (msg, payload) = message(k, ours, 2);
        peer.send(now, msg).unwrap();
        while peer.poll_transmit(now, &mut buf).is_some() {
            qp.inject_datagram(&buf, addr(k));
        }
        want.insert(addr(k), payload);
    }
    got.clear();
    qp.poll_cq(&mut got, 64).unwrap();
    assert_eq!(got.len(), 16);
    for wc in &got {
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(Some(wc.data()), want.remove(&wc.src.unwrap()).as_deref());
    }
    assert_eq!(qp.stats().protocol_errors, 0);
}

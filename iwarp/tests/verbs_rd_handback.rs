//! Hand-back on an RD queue pair (`rd.stall_after` set), over real loopback sockets: a peer
//! that stops answering is reported stalled, giving it up returns exactly the sends it had not
//! acknowledged, whole, in order and without completions, and a probe greets it afresh.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::*;

const STALL: Duration = Duration::from_millis(50);
const DEADLINE: Duration = Duration::from_secs(20);

fn config(stall: Option<Duration>) -> QpConfig {
    let mut c = QpConfig::default();
    c.rd.stall_after = stall;
    c
}

fn rd(config: &QpConfig) -> RdQp {
    let mut qp = RdQp::create(config.clone()).unwrap();
    qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    qp
}

fn ah_of(qp: &RdQp) -> AddressHandle {
    AddressHandle::new(qp.local_addr().unwrap(), qp.qpn())
}

/// Message `i`: its own length and bytes, small ones (copied by the queue pair) and large ones
/// (lent whole) mixed.
fn message(i: u64) -> Vec<u8> {
    let len = [0usize, 1, 100, 9_000, 70_000, 300_000][(i % 6) as usize];
    (0..len).map(|k| (k as u64 ^ (i * 131)) as u8).collect()
}

fn post(qp: &mut RdQp, to: AddressHandle, i: u64) {
    let data = message(i);
    // Every other one signaled; large ones handed over rather than copied.
    let signaled = i.is_multiple_of(2);
    if data.len() > 8192 {
        qp.post_send_owned(SendWrOwned {
            wr_id: i,
            opcode: SendOpcode::Send,
            data: data.into(),
            ah: Some(to),
            signaled,
        })
        .unwrap();
    } else {
        qp.post_send(SendWr {
            wr_id: i,
            opcode: SendOpcode::Send,
            data: &data,
            ah: Some(to),
            signaled,
        })
        .unwrap();
    }
}

fn receive(qp: &mut RdQp, n: usize) {
    for k in 0..n {
        qp.post_recv(RecvWr {
            wr_id: 10_000 + k as u64,
            buf: vec![0; 300_000],
        })
        .unwrap();
    }
}

/// Polls `qps` until `done`; panics past the deadline.
fn pump(
    qps: &mut [&mut RdQp],
    got: &mut Vec<WorkCompletion>,
    mut done: impl FnMut(&mut [&mut RdQp], &[WorkCompletion]) -> bool,
) {
    let start = Instant::now();
    let mut out = Vec::new();
    loop {
        for (k, qp) in qps.iter_mut().enumerate() {
            out.clear();
            qp.poll_cq(&mut out, 64).unwrap();
            if k == 0 {
                got.append(&mut out);
            }
        }
        if done(qps, got) {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "not done: {got:?}");
    }
}

#[test]
fn a_silent_peers_unacknowledged_sends_come_back_whole_in_order() {
    let c = config(Some(STALL));
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    receive(&mut b, 12);
    // Six go through and are acknowledged: the three signaled ones complete.
    for i in 0..6 {
        post(&mut a, to_b, i);
    }
    let mut got = Vec::new();
    pump(&mut [&mut a, &mut b], &mut got, |qps, g| {
        g.len() == 3 && qps[0].sends_outstanding() == 0
    });
    assert!(got.iter().all(|wc| wc.status == WcStatus::Success));
    assert_eq!(got.iter().map(|wc| wc.wr_id).collect::<Vec<_>>(), [0, 2, 4]);
    // B stops reading: six more are never acknowledged.
    for i in 6..12 {
        post(&mut a, to_b, i);
    }
    let mut stalled = Vec::new();
    let since = Instant::now();
    pump(&mut [&mut a], &mut got, |qps, _| {
        qps[0].take_stalled(&mut stalled);
        !stalled.is_empty()
    });
    let waited = since.elapsed();
    // Counted from B's last ACK, before `since`; the engine's tests pin the moment exactly.
    assert!(
        waited < STALL + Duration::from_secs(5),
        "stalled after {waited:?}"
    );
    assert_eq!(stalled, [to_b.addr]);
    assert_eq!(
        got.len(),
        3,
        "no completion for what is outstanding: {got:?}"
    );
    let mut back = Vec::new();
    a.take_returned(&mut back);
    assert!(back.is_empty(), "the session goes on until given up");
    assert!(a.give_up(to_b.addr));
    assert!(!a.give_up("127.0.0.1:9".parse::<SocketAddr>().unwrap()));
    a.take_returned(&mut back);
    assert_eq!(back.len(), 6);
    for (r, i) in back.iter().zip(6u64..) {
        assert_eq!(
            (r.wr_id, r.signaled, r.addr),
            (i, i.is_multiple_of(2), to_b.addr)
        );
        let mut whole = r.head.to_vec();
        whole.extend_from_slice(&r.data);
        assert_eq!(whole, message(i), "message {i}");
        assert_eq!(r.len(), message(i).len());
    }
    // No completion follows, and every send slot is free.
    let mut out = Vec::new();
    a.poll_cq(&mut out, 64).unwrap();
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(a.sends_outstanding(), 0);
    assert_eq!(a.stats().stalls, 1);
    assert_eq!(a.stats().sends_handed_back, 6);
}

#[test]
fn without_stall_after_sends_fail_and_nothing_comes_back() {
    let c = config(None);
    let (mut a, b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    for i in 0..4 {
        post(&mut a, to_b, i);
    }
    assert!(a.give_up(to_b.addr));
    let mut back = Vec::new();
    a.take_returned(&mut back);
    assert!(back.is_empty());
    let mut out = Vec::new();
    a.poll_cq(&mut out, 64).unwrap();
    // Errors complete even when unsignaled.
    assert_eq!(out.len(), 4, "{out:?}");
    assert!(out.iter().all(|wc| wc.status == WcStatus::TransportError));
    let mut stalled = Vec::new();
    a.take_stalled(&mut stalled);
    assert!(stalled.is_empty());
    drop(b);
}

#[test]
fn a_peer_given_up_is_greeted_again_by_a_probe_and_sent_to() {
    let c = config(Some(STALL));
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    receive(&mut b, 2);
    post(&mut a, to_b, 0);
    let mut got = Vec::new();
    pump(&mut [&mut a, &mut b], &mut got, |qps, _| {
        qps[0].sends_outstanding() == 0
    });
    assert!(a.is_open(to_b.addr));
    assert!(a.give_up(to_b.addr));
    assert!(!a.is_open(to_b.addr));
    a.probe(to_b).unwrap();
    // A second probe while the handshake runs is nothing new.
    a.probe(to_b).unwrap();
    pump(&mut [&mut a, &mut b], &mut got, |qps, _| {
        qps[0].is_open(to_b.addr)
    });
    // The peer took the greeting as a new session: the next message arrives whole.
    post(&mut a, to_b, 2);
    let mut at_b = Vec::new();
    let start = Instant::now();
    while at_b
        .iter()
        .all(|wc: &WorkCompletion| wc.opcode != WcOpcode::Recv)
    {
        let mut out = Vec::new();
        a.poll_cq(&mut out, 64).unwrap();
        b.poll_cq(&mut at_b, 64).unwrap();
        assert!(start.elapsed() < DEADLINE);
    }
    let wc = at_b.iter().find(|wc| wc.opcode == WcOpcode::Recv).unwrap();
    assert_eq!(
        (wc.status, wc.byte_len),
        (WcStatus::Success, message(2).len())
    );
    let buf = wc.buf.as_ref().expect("the posted buffer");
    assert_eq!(&buf[..wc.byte_len], &message(2)[..]);
}

//! Authenticated mode (`QpConfig::auth`): RD queue pairs with the job's key talk as usual, with
//! the tag in place of the CRC; a stranger who sees every datagram and can send any gets
//! nothing in: each forgery, alteration, redirection or datagram of another job is dropped
//! and counted before anything reads it, and the messages arrive exactly once, intact.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::auth::{Context, JobKey, TAG_LEN};
use iwarp::verbs::*;

const DEADLINE: Duration = Duration::from_secs(30);

fn key(secret: u8) -> Arc<JobKey> {
    Arc::new(JobKey::new(&[secret; 32]).unwrap())
}

fn rd(auth: Option<Arc<JobKey>>) -> RdQp {
    let mut qp = RdQp::create(QpConfig {
        auth,
        max_recv_wr: 1024,
        ..QpConfig::default()
    })
    .unwrap();
    qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    qp
}

fn ah_of(qp: &RdQp) -> AddressHandle {
    AddressHandle::new(qp.local_addr().unwrap(), qp.qpn())
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64 ^ 0x5555;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const SIZES: [usize; 7] = [0, 1, 100, 1400, 5000, 70_000, 300_000];

fn post_all(qp: &mut RdQp) {
    for (i, &len) in SIZES.iter().enumerate() {
        qp.post_recv(RecvWr {
            wr_id: i as u64,
            buf: vec![0xEE; len.max(1)],
        })
        .unwrap();
    }
}

fn send_all(qp: &mut RdQp, to: AddressHandle) {
    for (i, &len) in SIZES.iter().enumerate() {
        qp.post_send(SendWr {
            wr_id: 100 + i as u64,
            opcode: SendOpcode::Send,
            data: &pattern(len, i as u64),
            ah: Some(to),
            signaled: true,
        })
        .unwrap();
    }
}

/// Checks that `got` holds each message of [`SIZES`] once, in order, with its bytes and source.
fn check_received(got: &[WorkCompletion], from: SocketAddr) {
    let recvs: Vec<_> = got.iter().filter(|wc| wc.wr_id < 100).collect();
    assert_eq!(recvs.len(), SIZES.len(), "{recvs:?}");
    for (i, wc) in recvs.iter().enumerate() {
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        assert_eq!(wc.wr_id, i as u64);
        assert_eq!(wc.src, Some(from));
        assert_eq!(wc.data(), &pattern(SIZES[i], i as u64)[..], "message {i}");
    }
}

#[test]
fn queue_pairs_with_the_jobs_key_exchange_every_size_with_no_crc() {
    let mut a = rd(Some(key(1)));
    let mut b = rd(Some(key(1)));
    post_all(&mut b);
    send_all(&mut a, ah_of(&b));
    let (mut ga, mut gb) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while gb.len() < SIZES.len() || ga.len() < SIZES.len() {
        a.poll_cq(&mut ga, 64).unwrap();
        b.poll_cq(&mut gb, 64).unwrap();
        assert!(
            start.elapsed() < DEADLINE,
            "{} sent, {} received",
            ga.len(),
            gb.len()
        );
    }
    assert!(ga.iter().all(|wc| wc.status == WcStatus::Success), "{ga:?}");
    check_received(&gb, a.local_addr().unwrap());
    for s in [a.stats(), b.stats()] {
        assert_eq!(s.dropped_unauthenticated, 0, "{s:?}");
        assert_eq!(s.crc_peers, 0, "the tag stands for the CRC: {s:?}");
        assert_eq!(s.dropped_checksum, 0);
    }
}

#[test]
fn a_queue_pair_with_another_key_is_never_heard() {
    let mut a = rd(Some(key(1)));
    let mut b = rd(Some(key(2)));
    let mut plain = rd(None);
    post_all(&mut b);
    send_all(&mut a, ah_of(&b));
    plain
        .post_send(SendWr {
            wr_id: 1,
            opcode: SendOpcode::Send,
            data: b"no key",
            ah: Some(ah_of(&b)),
            signaled: true,
        })
        .unwrap();
    let mut got = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        a.poll_cq(&mut got, 64).unwrap();
        plain.poll_cq(&mut got, 64).unwrap();
        b.poll_cq(&mut got, 64).unwrap();
    }
    assert!(got.is_empty(), "nothing completes either way: {got:?}");
    // HELLOs only so far (the handshake never ends), each dropped by B, and B's silence
    // leaves A's and the plain one's resent.
    let s = b.stats();
    assert!(s.dropped_unauthenticated >= 2, "{s:?}");
    assert_eq!(s.datagrams_read, s.dropped_unauthenticated, "{s:?}");
    assert_eq!((s.control_received, s.peers), (0, 0), "{s:?}");
}

/// Everything A sends B goes through the test (A's link is null; the test hands each datagram
/// to B as if from A), which also plays the stranger: it replays every datagram, flips a bit
/// in it, cuts its tag off, tags it again with another key, forges new ones from its fields,
/// and redirects it to another queue pair of the same job. Only the genuine copies and the
/// replays pass the check (the replays are then duplicates to the sequence window); every
/// other one is counted, at the queue pair it reached, and nothing else moves.
#[test]
fn a_stranger_who_sees_every_datagram_gets_nothing_in() {
    let job = key(7);
    let mut a = rd(Some(Arc::clone(&job)));
    a.null_link();
    let mut b = rd(Some(Arc::clone(&job)));
    let mut c = rd(Some(Arc::clone(&job)));
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other = JobKey::new(&[8; 32]).unwrap();
    let (a_addr, b_addr, c_addr) = (
        a.local_addr().unwrap(),
        b.local_addr().unwrap(),
        c.local_addr().unwrap(),
    );
    post_all(&mut b);
    send_all(&mut a, ah_of(&b));
    let (mut ga, mut gb, mut gc) = (Vec::new(), Vec::new(), Vec::new());
    let (mut forged_b, mut forged_c, mut genuine) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    while ga.len() < SIZES.len() || gb.len() < SIZES.len() {
        a.poll_cq(&mut ga, 64).unwrap();
        for (dst, d) in a.take_sent() {
            assert_eq!(dst, b_addr);
            assert!(d.len() > TAG_LEN);
            genuine += 1;
            b.inject_datagram(&d, a_addr);
            // A replay from anywhere: a data datagram's tag is good (it binds the receiver,
            // not the port data leaves from), so it is the sequence window's to drop; a
            // handshake's binds its sender's address too, which the stranger's is not.
            stranger.send_to(&d, b_addr).unwrap();
            if iwarp_is_control(&d) {
                forged_b += 1;
            }
            // Altered: one bit of the header, of the payload, of the tag.
            for at in [1, d.len() / 2, d.len() - 1] {
                let mut x = d.clone();
                x[at] ^= 0x10;
                stranger.send_to(&x, b_addr).unwrap();
                forged_b += 1;
            }
            // The tag cut off, as a datagram of the mode without one would come.
            stranger.send_to(&d[..d.len() - TAG_LEN], b_addr).unwrap();
            forged_b += 1;
            // Tagged by another job's key, and forged anew from its fields (the next
            // sequence number, other payload) under that key.
            let body = &d[..d.len() - TAG_LEN];
            let mut x = body.to_vec();
            x.extend_from_slice(&other.tag(&Context::Datagram { to: b_addr }, body));
            b.inject_datagram(&x, a_addr);
            forged_b += 1;
            let mut y = body.to_vec();
            if y.len() > 16 && !iwarp_is_control(&y) {
                y[15] = y[15].wrapping_add(1);
                for v in y.iter_mut().skip(36) {
                    *v = 0x41;
                }
            }
            y.extend_from_slice(&other.tag(&Context::Datagram { to: b_addr }, &y));
            stranger.send_to(&y, b_addr).unwrap();
            forged_b += 1;
            // Redirected to another queue pair of the same job.
            c.inject_datagram(&d, a_addr);
            stranger.send_to(&d, c_addr).unwrap();
            forged_c += 2;
        }
        b.poll_cq(&mut gb, 64).unwrap();
        c.poll_cq(&mut gc, 64).unwrap();
        assert!(
            start.elapsed() < DEADLINE,
            "{} sent, {} received",
            ga.len(),
            gb.len()
        );
    }
    // The stranger's datagrams sent last may still be in B's and C's sockets.
    let settle = Instant::now();
    while (b.stats().dropped_unauthenticated < forged_b
        || c.stats().dropped_unauthenticated < forged_c)
        && settle.elapsed() < DEADLINE
    {
        b.poll_cq(&mut gb, 64).unwrap();
        c.poll_cq(&mut gc, 64).unwrap();
    }
    assert!(ga.iter().all(|wc| wc.status == WcStatus::Success), "{ga:?}");
    check_received(&gb, a_addr);
    assert!(gc.is_empty(), "{gc:?}");
    let (sb, sc) = (b.stats(), c.stats());
    assert!(genuine >= SIZES.len() as u64);
    assert_eq!(sb.dropped_unauthenticated, forged_b, "{sb:?}");
    assert_eq!(sc.dropped_unauthenticated, forged_c, "{sc:?}");
    assert_eq!((sc.peers, sc.control_received), (0, 0), "{sc:?}");
    assert_eq!(sb.protocol_errors, 0, "{sb:?}");
}

/// A handshake datagram's first byte: 0xE_ (reliability datagrams start 0x1_).
fn iwarp_is_control(d: &[u8]) -> bool {
    d.first().is_some_and(|b| b >> 4 == 0xE)
}

#[test]
fn a_wildcard_socket_is_refused_in_authenticated_mode() {
    let mut qp = RdQp::create(QpConfig {
        auth: Some(key(1)),
        ..QpConfig::default()
    })
    .unwrap();
    let err = qp.bind_udp("0.0.0.0:0".parse().unwrap()).unwrap_err();
    assert!(err.to_string().contains("bound to one address"), "{err}");
}

/// A queue pair with another job's key: its HELLOs are never answered, and the send waiting
/// on them fails within the peer timeout (`idle_timeout`) instead of hanging.
#[test]
fn a_send_to_a_queue_pair_with_another_key_fails_in_bounded_time() {
    let mut config = QpConfig {
        auth: Some(key(1)),
        ..QpConfig::default()
    };
    config.rd.idle_timeout = Duration::from_millis(300);
    // The peer timeout may count from any moment after this one (the queue pair reads its
    // clock when it is created, bound or polled), so the lower bound is measured from here.
    let start = Instant::now();
    let mut a = RdQp::create(config).unwrap();
    a.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut b = rd(Some(key(2)));
    a.post_send(SendWr {
        wr_id: 9,
        opcode: SendOpcode::Send,
        data: b"hello?",
        ah: Some(ah_of(&b)),
        signaled: true,
    })
    .unwrap();
    let mut got = Vec::new();
    while got.is_empty() {
        a.poll_cq(&mut got, 4).unwrap();
        b.poll_cq(&mut Vec::new(), 4).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10), "no completion");
    }
    assert_eq!(got[0].wr_id, 9);
    assert_ne!(got[0].status, WcStatus::Success, "{:?}", got[0]);
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert!(b.stats().dropped_unauthenticated >= 1);
}

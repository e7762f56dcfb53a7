//! RC queue pairs in authenticated mode over real loopback TCP: with the job's key both ends
//! prove it at MPA start-up and then carry every size with the FPDU CRC; a peer with another
//! key, one not in authenticated mode, and a stranger who writes a start-up of its own are
//! refused within the connect timeout, and nothing of theirs reaches a receive queue.

#[allow(dead_code)] // each test program uses some of the helpers
mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use iwarp::auth::JobKey;
use iwarp::verbs::*;
use iwarp::wire::mpa::{FrameKind, StartupRepr};

const DEADLINE: Duration = Duration::from_secs(30);

fn cfg(key: Option<u8>) -> QpConfig {
    QpConfig {
        auth: key.map(|k| Arc::new(JobKey::new(&[k; 32]).unwrap())),
        connect_timeout: Duration::from_secs(2),
        ..QpConfig::default()
    }
}

/// A connected queue pair and the peer's private data, or why not.
type Connected = Result<(RcQp, Vec<u8>), VerbsError>;

/// `a` connects to `b` (accepting on another thread); both results.
fn connect(ca: QpConfig, cb: QpConfig) -> (Connected, Connected) {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = thread::spawn(move || {
        let mut b = RcQp::create(cb).unwrap();
        b.accept_with_private_data(&listener, b"from b")
            .map(|(_, pd)| (b, pd))
    });
    let mut a = RcQp::create(ca).unwrap();
    let ra = a.connect(addr, b"from a").map(|pd| (a, pd));
    (ra, acceptor.join().unwrap())
}

fn unauthenticated(r: &Connected) -> bool {
    matches!(r, Err(VerbsError::Unauthenticated(_)))
}

/// Sends `msg` from `tx` to `rx` and checks every byte.
fn send_checked(tx: &mut RcQp, rx: &mut RcQp, wr_id: u64, msg: &[u8]) {
    post_buf(rx, wr_id, vec![0xEE; msg.len()]);
    tx.post_send(SendWr {
        wr_id,
        opcode: SendOpcode::Send,
        data: msg,
        ah: None,
        signaled: true,
    })
    .unwrap();
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while sent.is_empty() || got.is_empty() {
        tx.poll_cq(&mut sent, 4).unwrap();
        rx.poll_cq(&mut got, 4).unwrap();
        assert!(start.elapsed() < DEADLINE, "stuck at {} bytes", msg.len());
    }
    assert_eq!((sent[0].wr_id, sent[0].status), (wr_id, WcStatus::Success));
    assert_eq!((got[0].wr_id, got[0].status), (wr_id, WcStatus::Success));
    assert!(got[0].data() == msg, "{} bytes differ", msg.len());
}

#[test]
fn ends_with_the_jobs_key_connect_and_carry_every_size_with_the_crc() {
    let (ra, rb) = connect(cfg(Some(1)), cfg(Some(1)));
    let (mut a, pa) = ra.unwrap();
    let (mut b, pb) = rb.unwrap();
    // The ULP's private data crosses as given: nonces and proofs are the start-up's.
    assert_eq!(
        (pa.as_slice(), pb.as_slice()),
        (&b"from b"[..], &b"from a"[..])
    );
    assert!(a.settings().unwrap().crc && b.settings().unwrap().crc);
    for (i, len) in [0usize, 1, 3, 100, 9000, 70_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let msg = pattern(len, i as u8);
        send_checked(&mut a, &mut b, i as u64, &msg);
        send_checked(&mut b, &mut a, 100 + i as u64, &msg);
    }
}

#[test]
fn ends_with_different_keys_are_refused_within_the_connect_timeout() {
    let start = Instant::now();
    let (ra, rb) = connect(cfg(Some(1)), cfg(Some(2)));
    assert!(unauthenticated(&ra), "initiator: {:?}", ra.err());
    // The responder waits for a proof that never comes: the initiator's close ends it.
    assert!(rb.is_err(), "the responder took a stranger");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn an_end_not_in_authenticated_mode_is_refused_either_way() {
    let (ra, rb) = connect(cfg(None), cfg(Some(1)));
    assert!(unauthenticated(&rb), "responder: {:?}", rb.err());
    assert!(ra.is_err() || send_fails(ra.unwrap().0));
    let (ra, rb) = connect(cfg(Some(1)), cfg(None));
    assert!(unauthenticated(&ra), "initiator: {:?}", ra.err());
    assert!(rb.is_err() || send_fails(rb.unwrap().0));
}

/// An end without a key that thinks itself connected: the other end closed, so what it waits
/// to receive fails (flushed), and nothing arrives.
fn send_fails(mut qp: RcQp) -> bool {
    post_buf(&mut qp, 1, vec![0; 16]);
    wait_one_within(&mut qp, DEADLINE).status != WcStatus::Success
}

/// A stranger (no key) writes a well-formed Request with a nonce, then a proof frame of its
/// own making and a Send behind it: the acceptor refuses, and nothing is received.
#[test]
fn a_strangers_start_up_and_first_fpdu_are_refused() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = thread::spawn(move || {
        let mut b = RcQp::create(cfg(Some(1))).unwrap();
        post_buf(&mut b, 7, vec![0; 64]);
        b.accept_with_private_data(&listener, b"from b").map(|_| b)
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut pd = b"a name".to_vec();
    pd.extend([0x42; 16]);
    let request = StartupRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        reject: false,
        revision: 1,
        ird_ord: None,
        private_data: pd,
    };
    s.write_all(&request.emit().unwrap()).unwrap();
    // The Reply comes (it proves the responder, which a stranger cannot check).
    let mut reply = vec![0u8; 20];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..16], FrameKind::Reply.key());
    // A well-formed proof frame with a proof of its own making, then a Send's worth of bytes.
    let mut forged = proof_frame(&[0x55; 16], true);
    forged.extend([0x55; 64]);
    let _ = s.write_all(&forged);
    let r = acceptor.join().unwrap();
    assert!(
        matches!(r, Err(VerbsError::Unauthenticated(_))),
        "{:?}",
        r.err()
    );
}

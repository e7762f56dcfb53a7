//! RC connections set up without blocking (`RcSetup`): one thread drives both ends of each
//! connection, several at once, every call returning at once; the connections then carry
//! messages both ways, every byte checked. Refused, silent and garbled peers fail, at the
//! deadline and not before.

#[allow(dead_code)] // each test program uses some of the helpers
mod common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use iwarp::verbs::*;

const DEADLINE: Duration = Duration::from_secs(20);

fn config() -> QpConfig {
    QpConfig {
        connect_timeout: Duration::from_secs(5),
        ..QpConfig::default()
    }
}

type Outcome = Option<Result<Established, VerbsError>>;

/// One pass over the set-ups without an outcome yet; no call may block for long.
fn pass(setups: &mut [Option<RcSetup>], done: &mut [Outcome]) {
    for (s, d) in setups.iter_mut().zip(done.iter_mut()) {
        if d.is_some() {
            continue;
        }
        let t = Instant::now();
        let r = s.as_mut().expect("a set-up").progress(t);
        assert!(
            t.elapsed() < Duration::from_millis(50),
            "progress blocked {:?}",
            t.elapsed()
        );
        *d = r.transpose();
    }
}

/// Drives `setups` until each has an outcome.
fn drive(setups: &mut [Option<RcSetup>]) -> Vec<Result<Established, VerbsError>> {
    let mut done: Vec<Outcome> = setups.iter().map(|_| None).collect();
    let start = Instant::now();
    while done.iter().any(Option::is_none) {
        pass(setups, &mut done);
        assert!(start.elapsed() < DEADLINE, "set-ups did not finish");
        std::thread::sleep(Duration::from_micros(200));
    }
    done.into_iter().map(Option::unwrap).collect()
}

#[test]
fn many_connections_set_up_in_one_thread_carry_messages() {
    const N: usize = 8;
    let listener = TcpListener::bind(localhost()).unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let now = Instant::now();
    let active: Vec<Option<RcSetup>> = (0..N)
        .map(|i| Some(RcSetup::connect(addr, &config(), format!("a{i}").as_bytes(), now).unwrap()))
        .collect();
    // The passive ends are accepted while the active ends progress: one thread for all.
    let mut all = active;
    let mut done: Vec<Outcome> = (0..N).map(|_| None).collect();
    let mut accepted = 0;
    let start = Instant::now();
    while accepted < N || done.iter().any(Option::is_none) {
        if accepted < N {
            match listener.accept() {
                Ok((stream, _)) => {
                    let pd = format!("b{accepted}");
                    all.push(Some(
                        RcSetup::accept(stream, &config(), pd.as_bytes(), Instant::now()).unwrap(),
                    ));
                    done.push(None);
                    accepted += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        pass(&mut all, &mut done);
        assert!(start.elapsed() < DEADLINE, "set-ups did not finish");
    }
    let ests: Vec<_> = done.into_iter().map(Option::unwrap).collect();
    let mut qps = Vec::new();
    for (setup, est) in all.into_iter().zip(ests) {
        let est = est.expect("established");
        let mut qp = RcQp::create(config()).unwrap();
        let pd = qp.finish(setup.unwrap(), est).unwrap();
        assert_eq!(qp.state(), QpState::Rts);
        qps.push((qp, pd));
    }
    // The i-th active end's peer is the passive end that got its private data.
    let (a, b) = qps.split_at_mut(N);
    for (i, (qa, pd_a)) in a.iter_mut().enumerate() {
        let j = b
            .iter()
            .position(|(_, pd)| pd == format!("a{i}").as_bytes())
            .expect("its passive end");
        let (qb, _) = &mut b[j];
        assert_eq!(pd_a, format!("b{j}").as_bytes());
        assert_eq!(qa.peer_addr(), qb.local_addr());
        ping(qa, qb, i as u8);
        ping(qb, qa, 100 + i as u8);
    }
}

/// A 70 000-byte message from `tx` to `rx`, every byte checked.
fn ping(tx: &mut RcQp, rx: &mut RcQp, seed: u8) {
    let msg: Vec<u8> = (0..70_000u32)
        .map(|k| (k as u8).wrapping_mul(7) ^ seed)
        .collect();
    post_buf(rx, 1, vec![0; msg.len()]);
    tx.post_send(SendWr {
        wr_id: 2,
        opcode: SendOpcode::Send,
        data: &msg,
        ah: None,
        signaled: true,
    })
    .unwrap();
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while sent.is_empty() || got.is_empty() {
        tx.poll_cq(&mut sent, 4).unwrap();
        rx.poll_cq(&mut got, 4).unwrap();
        assert!(start.elapsed() < DEADLINE);
    }
    assert_eq!((got[0].wr_id, got[0].status), (1, WcStatus::Success));
    assert_eq!(got[0].byte_len, msg.len());
    assert!(got[0].data() == &msg[..], "seed {seed}: the bytes differ");
}

#[test]
fn a_refused_connect_fails() {
    // A port nobody listens on.
    let addr = TcpListener::bind(localhost())
        .unwrap()
        .local_addr()
        .unwrap();
    let mut s = vec![Some(
        RcSetup::connect(addr, &config(), b"", Instant::now()).unwrap(),
    )];
    match drive(&mut s).remove(0) {
        Err(VerbsError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn a_silent_peer_fails_at_the_deadline_and_not_before() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let t0 = Instant::now();
    let mut s = RcSetup::connect(addr, &config(), b"", t0).unwrap();
    let (_held, _) = listener.accept().unwrap();
    assert_eq!(s.deadline(), Some(t0 + config().connect_timeout));
    assert!(matches!(s.progress(t0 + Duration::from_secs(4)), Ok(None)));
    assert!(!s.wants_write(), "the Request went out");
    assert!(matches!(
        s.progress(t0 + config().connect_timeout),
        Err(VerbsError::Timeout)
    ));
}

#[test]
fn garbage_from_the_initiator_fails_the_responder() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let mut c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (stream, _) = listener.accept().unwrap();
    let mut s = vec![Some(
        RcSetup::accept(stream, &config(), b"", Instant::now()).unwrap(),
    )];
    c.write_all(&[0x42; 64]).unwrap();
    assert!(matches!(drive(&mut s).remove(0), Err(VerbsError::Mpa(_))));
}

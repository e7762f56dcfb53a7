//! An RC queue pair in receiver mode (`poll_cq_with`): no receives posted, every message lent
//! to the receiver whole and in order — single-FPDU ones where they lie, longer ones joined —
//! with markers and CRC on and off; a message longer than the receiver takes breaks the
//! connection instead of growing a buffer.

#[allow(dead_code)] // each test program uses some of the helpers
mod common;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use common::*;
use iwarp::verbs::*;

#[derive(Default)]
struct Collect {
    got: Vec<(SocketAddr, Vec<u8>)>,
    limit: Option<usize>,
}

impl RdReceiver for Collect {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        panic!("RC lends whole messages in order only");
    }
    fn message(&mut self, src: SocketAddr, payload: &[u8]) {
        self.got.push((src, payload.to_vec()));
    }
    fn max_message(&self) -> usize {
        self.limit.unwrap_or(1 << 24)
    }
}

/// A connected RC pair, markers and CRC as asked.
fn rc_pair(markers: bool, crc: bool) -> (RcQp, RcQp) {
    let config = QpConfig {
        markers,
        crc,
        crc_same_host: crc,
        ..QpConfig::default()
    };
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let c = config.clone();
    let server = std::thread::spawn(move || {
        let mut qp = RcQp::create(c).unwrap();
        qp.accept(&listener).unwrap();
        qp
    });
    let mut client = RcQp::create(config).unwrap();
    client.connect(addr, &[]).unwrap();
    (client, server.join().unwrap())
}

/// Polls `a` and `b` (receiver mode) until `n` messages arrived at `b`, within 30 s.
fn collect(a: &mut RcQp, b: &mut RcQp, n: usize) -> Collect {
    let mut r = Collect::default();
    let mut wcs = vec![];
    let deadline = Instant::now() + Duration::from_secs(30);
    while r.got.len() < n {
        let _ = a.poll_cq(&mut wcs, 16);
        b.poll_cq_with(&mut r, &mut wcs, 16).unwrap();
        assert!(Instant::now() < deadline, "{} of {n} arrived", r.got.len());
    }
    r
}

fn run(markers: bool, crc: bool) {
    let (mut a, mut b) = rc_pair(markers, crc);
    let sizes = [0, 1, 100, 65_000, 65_517, 65_518, 200_000, 3];
    for (i, &n) in sizes.iter().enumerate() {
        a.post_send(SendWr {
            wr_id: i as u64,
            opcode: SendOpcode::Send,
            data: &pattern(n, i as u8),
            ah: None,
            signaled: true,
        })
        .unwrap();
    }
    let r = collect(&mut a, &mut b, sizes.len());
    let peer = b.peer_addr().unwrap();
    for (i, (&n, (src, got))) in sizes.iter().zip(&r.got).enumerate() {
        assert_eq!(*src, peer);
        assert!(*got == pattern(n, i as u8), "message {i} of {n} bytes");
    }
}

#[test]
fn messages_are_lent_whole_and_in_order() {
    for (markers, crc) in [(false, false), (false, true), (true, true)] {
        run(markers, crc);
    }
}

#[test]
fn a_message_longer_than_the_receiver_takes_breaks_the_connection() {
    let (mut a, mut b) = rc_pair(false, true);
    a.post_send(SendWr {
        wr_id: 1,
        opcode: SendOpcode::Send,
        data: &pattern(100_000, 1),
        ah: None,
        signaled: true,
    })
    .unwrap();
    let mut r = Collect {
        limit: Some(70_000),
        ..Collect::default()
    };
    let mut wcs = vec![];
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.state() != QpState::Error {
        let _ = a.poll_cq(&mut wcs, 16);
        let _ = b.poll_cq_with(&mut r, &mut wcs, 16);
        assert!(Instant::now() < deadline, "the connection did not break");
    }
    assert!(r.got.is_empty());
    assert!(
        matches!(b.last_error(), Some(VerbsError::Protocol(_))),
        "{:?}",
        b.last_error()
    );
}

/// Prefixed sends (a header and a payload kept apart, as the provider sends them): one
/// segment's worth is framed in place, a longer one joined; sent faster than the receiver
/// reads, so the kernel refuses parts and the rest waits in the queue pair, in order.
#[test]
fn prefixed_sends_arrive_whole_while_the_kernel_is_full() {
    for (markers, crc) in [(false, true), (true, true), (false, false)] {
        let (mut a, mut b) = rc_pair(markers, crc);
        let sizes: Vec<usize> = (0..200)
            .map(|i| [0, 7, 1000, 60_000, 65_500, 70_000][i % 6])
            .collect();
        let mut wcs = vec![];
        for (i, &n) in sizes.iter().enumerate() {
            let prefix = pattern(20 + i % 13, 200);
            let wr = SendWrOwned {
                wr_id: i as u64,
                opcode: SendOpcode::Send,
                data: pattern(n, i as u8).into(),
                ah: None,
                signaled: false,
            };
            a.post_send_prefixed(wr, &prefix).unwrap();
            let _ = a.poll_cq(&mut wcs, 16);
        }
        let r = collect(&mut a, &mut b, sizes.len());
        for (i, (&n, (_, got))) in sizes.iter().zip(&r.got).enumerate() {
            let mut want = pattern(20 + i % 13, 200);
            want.extend_from_slice(&pattern(n, i as u8));
            assert!(
                *got == want,
                "message {i} of {n} bytes (markers {markers}, crc {crc})"
            );
        }
        assert_eq!(a.state(), QpState::Rts);
    }
}

/// Long single-FPDU messages the receiver asks for are read from the socket straight into
/// its buffer (not with markers, which sit inside the payload): every message whole and in
/// order, whichever way it came, whatever the receiver takes per read.
#[test]
fn long_messages_are_read_in_place_whole_and_in_order() {
    let sizes = [10, 5000, 60_000, 65_000, 65_517, 200_000, 30_000, 4200];
    for (markers, crc) in [(false, false), (false, true), (true, true)] {
        for run in [1000, 1 << 20] {
            let (mut a, mut b) = rc_pair(markers, crc);
            let msgs: Vec<Vec<u8>> = (0..64)
                .map(|i| in_place_message(i, sizes[i % sizes.len()]))
                .collect();
            for (i, m) in msgs.iter().enumerate() {
                a.post_send(SendWr {
                    wr_id: i as u64,
                    opcode: SendOpcode::Send,
                    data: m,
                    ah: None,
                    signaled: false,
                })
                .unwrap();
            }
            let mut r = InPlaceRecorder::new(run);
            let mut wcs = vec![];
            let deadline = Instant::now() + Duration::from_secs(30);
            while r.got.len() < msgs.len() {
                let _ = a.poll_cq(&mut wcs, 16);
                b.poll_cq_with(&mut r, &mut wcs, 16).unwrap();
                assert!(Instant::now() < deadline, "{} arrived", r.got.len());
            }
            for (i, (want, got)) in msgs.iter().zip(&r.got).enumerate() {
                assert!(want == got, "message {i} (markers {markers}, crc {crc})");
            }
            if markers {
                assert_eq!(r.placed, 0);
            } else {
                assert!(r.placed > 0, "none in place (crc {crc}, run {run})");
            }
            assert!(!r.reading());
        }
    }
}

//! UD queue pairs over real loopback UDP sockets: every byte checked, every wait bounded.

#[allow(dead_code)] // each test program uses some of the helpers
mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use iwarp::crc;
use iwarp::verbs::*;
use iwarp::wire::datagram::{self, qn_for};
use iwarp::wire::ddp::Placement;
use iwarp::wire::rdmap::{Opcode, SegmentRepr};

const DEADLINE: Duration = Duration::from_secs(10);

fn ud_pair(config: QpConfig) -> (UdQp, UdQp) {
    let mut a = UdQp::create(config.clone()).unwrap();
    let mut b = UdQp::create(config).unwrap();
    a.bind_udp(localhost()).unwrap();
    b.bind_udp(localhost()).unwrap();
    (a, b)
}

fn ah_of(qp: &UdQp) -> AddressHandle {
    AddressHandle::new(qp.local_addr().unwrap(), qp.qpn())
}

/// Polls until one completion arrives; panics after the deadline.
fn wait_one(qp: &mut UdQp) -> WorkCompletion {
    wait_one_within(qp, DEADLINE)
}

/// Polls for a while and asserts that nothing completes.
fn expect_nothing(qp: &mut UdQp, for_: Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < for_ {
        assert_eq!(qp.poll_cq(&mut out, 8).unwrap(), 0, "unexpected {out:?}");
    }
}

fn send(qp: &mut UdQp, to: AddressHandle, wr_id: u64, data: &[u8]) {
    qp.post_send(SendWr {
        wr_id,
        opcode: SendOpcode::Send,
        data,
        ah: Some(to),
        signaled: true,
    })
    .unwrap();
    let wc = wait_one(qp);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
        (wr_id, WcStatus::Success, WcOpcode::Send, data.len())
    );
}

fn sizes(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..=20).collect();
    v.extend([
        31, 32, 33, 255, 256, 1000, 1471, 1472, 1473, 4095, 4096, 4097, 8192, 9000, 16383, 32768,
        65000,
    ]);
    v.extend([max - 4, max - 3, max - 2, max - 1, max]);
    v
}

fn roundtrip_all_sizes(config: QpConfig) {
    let (mut a, mut b) = ud_pair(config);
    let max = a.max_message();
    assert_eq!(max, datagram::MAX_DATAGRAM - 18 - 4);
    for (i, size) in sizes(max).into_iter().enumerate() {
        let data = pattern(size, i as u8);
        // Alternate a buffer of exactly the message size with the largest one.
        let buf_len = if i % 2 == 0 { size } else { max };
        post_buf(&mut b, 1000 + i as u64, vec![0xEE; buf_len]);
        send(&mut a, ah_of(&b), i as u64, &data);
        let wc = wait_one(&mut b);
        assert_eq!(wc.wr_id, 1000 + i as u64);
        assert_eq!(wc.status, WcStatus::Success, "size {size}");
        assert_eq!(wc.opcode, WcOpcode::Recv);
        assert_eq!(wc.byte_len, size);
        assert_eq!(wc.src, a.local_addr());
        assert!(!wc.solicited);
        assert_eq!(wc.buf.as_ref().unwrap().len(), buf_len);
        assert!(wc.data() == &data[..], "size {size}: contents differ");
    }
    assert_eq!(b.poll_error(), None);
    assert_eq!(b.error_count(), 0);
    // The scatter tail is the only storage a UD queue pair keeps.
    assert_eq!(b.memory_bytes(), 65527);
}

#[test]
fn all_sizes_with_crc() {
    roundtrip_all_sizes(QpConfig::default());
}

#[test]
fn all_sizes_without_crc() {
    roundtrip_all_sizes(QpConfig {
        crc: false,
        ..QpConfig::default()
    });
}

#[test]
fn both_directions_and_solicited() {
    let (mut a, mut b) = ud_pair(QpConfig::default());
    post_buf(&mut a, 1, vec![0; 64]);
    post_buf(&mut b, 2, vec![0; 64]);
    a.post_send(SendWr {
        wr_id: 3,
        opcode: SendOpcode::SendSolicited,
        data: b"ping",
        ah: Some(ah_of(&b)),
        signaled: false,
    })
    .unwrap();
    let wc = wait_one(&mut b);
    assert!(wc.solicited);
    assert_eq!(wc.data(), b"ping");
    assert_eq!(wc.src, a.local_addr());
    b.post_send(SendWr {
        wr_id: 4,
        opcode: SendOpcode::Send,
        data: b"pong!",
        ah: Some(ah_of(&a)),
        signaled: false,
    })
    .unwrap();
    let wc = wait_one(&mut a);
    assert!(!wc.solicited);
    assert_eq!(wc.data(), b"pong!");
    assert_eq!(wc.src, b.local_addr());
    // Unsignaled sends leave no completion behind.
    expect_nothing(&mut a, Duration::from_millis(20));
    expect_nothing(&mut b, Duration::from_millis(20));
}

#[test]
fn receive_buffer_too_small() {
    let (mut a, mut b) = ud_pair(QpConfig::default());
    let data = pattern(100, 9);
    for buf_len in [0usize, 1, 50, 96, 99] {
        let mut buf = Vec::with_capacity(128);
        buf.resize(buf_len, 0xEE);
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        post_buf(&mut b, 7, buf);
        send(&mut a, ah_of(&b), 1, &data);
        let wc = wait_one(&mut b);
        assert_eq!(wc.status, WcStatus::LocalLengthError, "buffer {buf_len}");
        assert_eq!(wc.byte_len, 100);
        assert!(wc.data().is_empty());
        let buf = wc.buf.unwrap();
        // The same allocation, the same length: the kernel was never given more.
        assert_eq!(
            (buf.as_ptr(), buf.capacity(), buf.len()),
            (ptr, cap, buf_len)
        );
        assert_eq!(&buf[..], &data[..buf_len]);
    }
    // Buffers that hold the payload but not (all of) the CRC behind it still succeed.
    for buf_len in [100usize, 101, 102, 103, 104, 105] {
        post_buf(&mut b, 8, vec![0xEE; buf_len]);
        send(&mut a, ah_of(&b), 2, &data);
        let wc = wait_one(&mut b);
        assert_eq!(wc.status, WcStatus::Success, "buffer {buf_len}");
        assert_eq!(wc.data(), &data[..]);
    }
    // 0-byte message into a 0-byte buffer; 1 byte into it is too long.
    post_buf(&mut b, 9, Vec::new());
    send(&mut a, ah_of(&b), 3, &[]);
    let wc = wait_one(&mut b);
    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 0));
    post_buf(&mut b, 10, Vec::new());
    send(&mut a, ah_of(&b), 4, &[1]);
    let wc = wait_one(&mut b);
    assert_eq!((wc.status, wc.byte_len), (WcStatus::LocalLengthError, 1));
    assert_eq!(b.error_count(), 0);
}

/// A correct datagram as a foreign sender would build it.
fn datagram_to(qpn: u32, msn: u32, payload: &[u8], crc_on: bool) -> Vec<u8> {
    let seg = SegmentRepr::untagged(Opcode::Send, true, qn_for(qpn, 0), msn, 0);
    datagram::encode(&seg, payload, crc_on)
}

/// Replaces the trailer with the right CRC over everything before it.
fn fix_crc(d: &mut [u8]) {
    let n = d.len() - 4;
    let c = crc::to_wire(crc::crc32c(&d[..n]));
    d[n..].copy_from_slice(&c);
}

#[test]
fn bad_datagrams_go_to_the_error_queue() {
    let mut b = UdQp::create(QpConfig::default()).unwrap();
    let b_addr = b.bind_udp(localhost()).unwrap();
    let raw = UdpSocket::bind(localhost()).unwrap();
    let raw_addr = raw.local_addr().unwrap();
    // One posted receive: none of the bad datagrams may consume it.
    post_buf(&mut b, 42, vec![0; 256]);

    let mut bad_crc = datagram_to(b.qpn(), 5, b"payload", true);
    bad_crc[20] ^= 1;
    let garbage = vec![0xAB; 40];
    let mut bad_version = datagram_to(b.qpn(), 6, b"x", true);
    bad_version[0] = (bad_version[0] & !3) | 2;
    fix_crc(&mut bad_version);
    let wrong_qpn = datagram_to(b.qpn() + 1, 7, b"not for you", true);
    let wrong_queue = datagram::encode(
        &SegmentRepr::untagged(Opcode::ReadRequest, true, qn_for(b.qpn(), 1), 8, 0),
        &[0; 28],
        true,
    );
    let tagged = datagram::encode(
        &SegmentRepr::tagged(Opcode::RdmaWrite, true, 1, 0),
        b"w",
        true,
    );
    let not_last = datagram::encode(
        &SegmentRepr::untagged(Opcode::Send, false, qn_for(b.qpn(), 0), 9, 0),
        b"first half",
        true,
    );
    let short = vec![0x41; 5];
    for d in [
        &bad_crc,
        &garbage,
        &bad_version,
        &wrong_qpn,
        &wrong_queue,
        &tagged,
        &not_last,
        &short,
    ] {
        raw.send_to(d, b_addr).unwrap();
    }
    expect_nothing(&mut b, Duration::from_millis(50));
    let good = pattern(200, 3);
    raw.send_to(&datagram_to(b.qpn(), 10, &good, true), b_addr)
        .unwrap();
    let wc = wait_one(&mut b);
    assert_eq!((wc.wr_id, wc.status), (42, WcStatus::Success));
    assert_eq!(wc.data(), &good[..]);
    assert_eq!(wc.src, Some(raw_addr));

    let mut events = Vec::new();
    while let Some(e) = b.poll_error() {
        assert_eq!(e.src, Some(raw_addr));
        events.push(e);
    }
    assert_eq!(events.len(), 8, "{events:#?}");
    assert_eq!(b.error_count(), 8);
    assert!(matches!(events[0].kind, UdErrorKind::BadCrc { .. }));
    assert_eq!((events[0].msn, events[0].len), (Some(5), bad_crc.len()));
    assert!(matches!(events[1].kind, UdErrorKind::BadCrc { .. }));
    assert_eq!(events[1].msn, None);
    assert!(matches!(events[2].kind, UdErrorKind::Decode(_)));
    assert_eq!(
        events[3].kind,
        UdErrorKind::WrongQpn {
            qpn: b.qpn() + 1,
            queue: 0
        }
    );
    assert_eq!(events[3].msn, Some(7));
    assert_eq!(
        events[4].kind,
        UdErrorKind::Unsupported(Opcode::ReadRequest)
    );
    assert_eq!(events[5].kind, UdErrorKind::Unsupported(Opcode::RdmaWrite));
    assert_eq!(events[6].kind, UdErrorKind::Unsupported(Opcode::Send));
    assert_eq!(events[6].msn, Some(9));
    assert_eq!(events[7].kind, UdErrorKind::BadLength);
}

#[test]
fn crc_off_ignores_the_trailer() {
    let mut b = UdQp::create(QpConfig {
        crc: false,
        ..QpConfig::default()
    })
    .unwrap();
    let b_addr = b.bind_udp(localhost()).unwrap();
    let raw = UdpSocket::bind(localhost()).unwrap();
    post_buf(&mut b, 1, vec![0; 16]);
    let mut d = datagram_to(b.qpn(), 1, b"abc", true);
    let n = d.len();
    d[n - 1] ^= 0xff;
    raw.send_to(&d, b_addr).unwrap();
    let wc = wait_one(&mut b);
    assert_eq!(wc.data(), b"abc");
}

#[test]
fn wire_format_of_sends() {
    let mut a = UdQp::create(QpConfig::default()).unwrap();
    a.bind_udp(localhost()).unwrap();
    let raw = UdpSocket::bind(localhost()).unwrap();
    raw.set_read_timeout(Some(DEADLINE)).unwrap();
    let to = AddressHandle::new(raw.local_addr().unwrap(), 12345);
    let mut buf = vec![0u8; 70000];
    for (i, len) in [0usize, 1, 1000, a.max_message()].into_iter().enumerate() {
        let data = pattern(len, i as u8);
        send(&mut a, to, i as u64, &data);
        let (n, from) = raw.recv_from(&mut buf).unwrap();
        assert_eq!(Some(from), a.local_addr());
        assert_eq!(n, 18 + len + 4);
        let (seg, range) = datagram::parse(&buf[..n], true).unwrap();
        assert_eq!(seg.opcode, Opcode::Send);
        assert!(seg.last);
        assert_eq!(
            seg.placement,
            Placement::Untagged {
                inval_stag: 0,
                qn: qn_for(12345, 0),
                msn: i as u32 + 1,
                mo: 0
            }
        );
        assert_eq!(&buf[range], &data[..]);
    }
}

#[test]
fn datagram_waits_in_the_socket_until_a_receive_is_posted() {
    let (mut a, mut b) = ud_pair(QpConfig::default());
    send(&mut a, ah_of(&b), 1, b"early");
    expect_nothing(&mut b, Duration::from_millis(30));
    post_buf(&mut b, 2, vec![0; 8]);
    let wc = wait_one(&mut b);
    assert_eq!((wc.wr_id, wc.data()), (2, &b"early"[..]));
}

#[test]
fn message_too_large_and_missing_ah() {
    let (mut a, b) = ud_pair(QpConfig::default());
    let big = vec![0u8; a.max_message() + 1];
    let err = a
        .post_send(SendWr {
            wr_id: 1,
            opcode: SendOpcode::Send,
            data: &big,
            ah: Some(ah_of(&b)),
            signaled: true,
        })
        .unwrap_err();
    assert!(
        matches!(err, VerbsError::MessageTooLarge { len, max } if len == big.len() && max == a.max_message()),
        "{err:?}"
    );
    let err = post_x(&mut a, 2, None).unwrap_err();
    assert!(matches!(err, VerbsError::MissingAddressHandle), "{err:?}");
    // Refused WRs took no slot and left no completion.
    assert_eq!(a.send_queue_space(), QpConfig::default().max_send_wr);
    expect_nothing(&mut a, Duration::from_millis(10));
}

#[test]
fn queue_limits() {
    let config = QpConfig {
        max_send_wr: 2,
        max_recv_wr: 2,
        ..QpConfig::default()
    };
    let (mut a, mut b) = ud_pair(config);
    let to = Some(ah_of(&b));
    let out = fill_send_queue_of_two(&mut a, to);
    assert_eq!(out.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1, 2]);

    post_buf(&mut b, 10, vec![0; 8]);
    post_buf(&mut b, 11, vec![0; 8]);
    let (err, back) = b
        .try_post_recv(RecvWr {
            wr_id: 12,
            buf: vec![1, 2, 3],
        })
        .unwrap_err();
    assert!(matches!(err, VerbsError::QueueFull));
    assert_eq!((back.wr_id, back.buf), (12, vec![1, 2, 3]));
    // Receives complete in posting order.
    a.post_send(abc_send(4, to)).unwrap();
    let wcs: Vec<u64> = (0..2).map(|_| wait_one(&mut b).wr_id).collect();
    assert_eq!(wcs, [10, 11]);
    post_buf(&mut b, 12, vec![0; 8]);
}

#[test]
fn states_and_types() {
    let rd = RdQp::create(QpConfig::default()).unwrap();
    assert_eq!((rd.qp_type(), rd.state()), (QpType::Rd, QpState::Init));
    // Nothing has happened on an unbound RD queue pair: its counters and memory read zero.
    assert_eq!((rd.stats(), rd.memory_bytes()), (RdStats::default(), 0));

    let mut ud = UdQp::create(QpConfig::default()).unwrap();
    assert_eq!(ud.state(), QpState::Init);
    assert_eq!(ud.local_addr(), None);
    let err = post_x(&mut ud, 1, Some(AddressHandle::new(localhost(), 1))).unwrap_err();
    assert_invalid_state(&err, QpState::Init);
    // Receives may be posted before the socket is attached.
    post_buf(&mut ud, 5, vec![0; 4]);
    let socket = UdpSocket::bind(localhost()).unwrap();
    let addr = socket.local_addr().unwrap();
    assert_eq!(ud.attach_udp(socket).unwrap(), addr);
    assert_eq!(ud.state(), QpState::Rts);
    assert!(matches!(
        ud.bind_udp(localhost()),
        Err(VerbsError::InvalidState { .. })
    ));

    let rc = RcQp::create(QpConfig::default()).unwrap();
    assert_ne!(rc.qpn(), ud.qpn());

    // Moving to Error flushes the posted receive and returns its buffer.
    ud.set_error();
    assert_eq!(ud.state(), QpState::Error);
    let wc = wait_one(&mut ud);
    assert_eq!(
        (wc.wr_id, wc.status, wc.buf.unwrap().len()),
        (5, WcStatus::FlushError, 4)
    );
    post_buf(&mut ud, 6, vec![0; 2]);
    let wc = wait_one(&mut ud);
    assert_eq!((wc.wr_id, wc.status), (6, WcStatus::FlushError));
}

#[test]
fn queue_pairs_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<UdQp>();
    assert_send::<RdQp>();
    assert_send::<RcQp>();
    assert_send::<WorkCompletion>();
    let (mut a, mut b) = ud_pair(QpConfig::default());
    let to = ah_of(&b);
    post_buf(&mut b, 1, vec![0; 8]);
    let t = std::thread::spawn(move || {
        send(&mut a, to, 1, b"moved");
        a
    });
    let _a = t.join().unwrap();
    assert_eq!(wait_one(&mut b).data(), b"moved");
}

#[test]
fn error_queue_catches_corrupted_datagrams_under_faults() {
    let n = 400u32;
    let faulty = QpConfig {
        faults: Some(FaultConfig {
            corrupt: 0.3,
            corrupt_max: 3,
            duplicate: 0.1,
            seed: 11,
            ..FaultConfig::default()
        }),
        socket_buffer: Some(4 << 20),
        ..QpConfig::default()
    };
    let clean = QpConfig {
        faults: Some(FaultConfig::default()),
        socket_buffer: Some(4 << 20),
        ..QpConfig::default()
    };
    let mut a = UdQp::create(faulty).unwrap();
    let mut b = UdQp::create(clean).unwrap();
    a.bind_udp(localhost()).unwrap();
    b.bind_udp(localhost()).unwrap();
    let to_b = ah_of(&b);
    let message = |i: u32| [i.to_be_bytes().to_vec(), pattern(996, i as u8)].concat();
    for i in 0..n {
        send(&mut a, to_b, u64::from(i), &message(i));
    }
    let f = a.fault_stats().unwrap();
    assert!(f.corrupted > 60 && f.duplicated > 20, "{f:?}");
    assert_eq!(b.fault_stats(), Some(FaultStats::default()));
    for i in 0..32 {
        post_buf(&mut b, i, vec![0; 1000]);
    }
    // Every datagram arrives (loopback, large buffers): intact, or caught by the CRC.
    let (mut intact, mut errors) = (0u64, 0u64);
    let start = Instant::now();
    let mut out = Vec::new();
    while intact + errors < u64::from(n) + f.duplicated {
        out.clear();
        b.poll_cq(&mut out, 8).unwrap();
        for wc in out.drain(..) {
            assert_eq!(wc.status, WcStatus::Success);
            let i = u32::from_be_bytes(wc.data()[..4].try_into().unwrap());
            assert!(
                i < n && wc.data() == &message(i)[..],
                "a corrupted datagram got through"
            );
            intact += 1;
            post_buf(&mut b, 0, wc.buf.unwrap());
        }
        while let Some(e) = b.poll_error() {
            assert!(matches!(e.kind, UdErrorKind::BadCrc { .. }), "{e:?}");
            assert_eq!(e.src, a.local_addr());
            errors += 1;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{intact} intact, {errors} errors, {f:?}"
        );
    }
    // A corrupted datagram that was also duplicated is caught twice.
    assert!(
        errors >= f.corrupted && errors <= 2 * f.corrupted,
        "{errors} vs {f:?}"
    );
    assert_eq!(b.error_count(), errors);
}

//! RC queue pairs over real loopback TCP: MPA start-up, segmentation, markers and CRC, length
//! errors and broken peers. Every byte is checked and every wait has a deadline.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use iwarp::verbs::*;
use iwarp::wire::ddp::Placement;
use iwarp::wire::mpa::{
    negotiate, FpduDecoder, FpduSender, FrameKind, IrdOrd, Negotiated, StartupRepr,
};
use iwarp::wire::rdmap::{Opcode, SegmentRepr};

const DEADLINE: Duration = Duration::from_secs(30);

fn cfg(markers: bool, crc: bool) -> QpConfig {
    QpConfig {
        markers,
        crc,
        ..QpConfig::default()
    }
}

/// A connected pair: `a` initiated, `b` accepted; private data checked both ways.
fn rc_pair(ca: QpConfig, cb: QpConfig) -> (RcQp, RcQp) {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = thread::spawn(move || {
        let mut b = RcQp::create(cb).unwrap();
        let (_, pd) = b.accept_with_private_data(&listener, b"from b").unwrap();
        assert_eq!(pd, b"from a");
        b
    });
    let mut a = RcQp::create(ca).unwrap();
    let pd = a.connect(addr, b"from a").unwrap();
    assert_eq!(pd, b"from b");
    let b = acceptor.join().unwrap();
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(b.state(), QpState::Rts);
    assert_eq!(a.peer_addr(), b.local_addr());
    assert_eq!(b.peer_addr(), a.local_addr());
    (a, b)
}

/// Sends every message from `tx` to `rx` (receive buffers of `buf_len`, or the message's own
/// size when `None`), driving both sides until all completions are in; checks every byte.
fn transfer(tx: &mut RcQp, rx: &mut RcQp, msgs: &[Vec<u8>], buf_len: Option<usize>) {
    for (i, m) in msgs.iter().enumerate() {
        let len = buf_len.unwrap_or(m.len());
        post_buf(rx, 10_000 + i as u64, vec![0xEE; len]);
    }
    for (i, m) in msgs.iter().enumerate() {
        tx.post_send(SendWr {
            wr_id: i as u64,
            opcode: SendOpcode::Send,
            data: m,
            ah: None,
            signaled: true,
        })
        .unwrap();
    }
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while sent.len() < msgs.len() || got.len() < msgs.len() {
        tx.poll_cq(&mut sent, 16).unwrap();
        rx.poll_cq(&mut got, 16).unwrap();
        assert!(
            start.elapsed() < DEADLINE,
            "stuck: {} of {} sent, {} received",
            sent.len(),
            msgs.len(),
            got.len()
        );
    }
    for (i, wc) in sent.iter().enumerate() {
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (i as u64, WcStatus::Success, WcOpcode::Send)
        );
        assert_eq!(wc.byte_len, msgs[i].len());
    }
    for (i, wc) in got.iter().enumerate() {
        assert_eq!(wc.wr_id, 10_000 + i as u64);
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "message {i}"
        );
        assert_eq!(wc.byte_len, msgs[i].len());
        assert!(
            wc.data() == &msgs[i][..],
            "message {i} ({} bytes) differs",
            msgs[i].len()
        );
    }
}

/// Polls until one completion arrives; panics after the deadline.
fn wait_one(qp: &mut RcQp) -> WorkCompletion {
    wait_one_within(qp, DEADLINE)
}

fn sizes(seg: usize) -> Vec<usize> {
    vec![
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        100,
        seg - 1,
        seg,
        seg + 1,
        2 * seg,
        2 * seg + 3,
        1 << 20,
        (3 << 20) + 5,
    ]
}

fn all_sizes_both_ways(markers: bool, crc: bool) {
    let (mut a, mut b) = rc_pair(cfg(markers, crc), cfg(markers, crc));
    let s = a.settings().unwrap();
    assert_eq!(
        (s.markers_tx, s.markers_rx, s.crc, s.revision),
        (markers, markers, crc, 2)
    );
    let msgs: Vec<Vec<u8>> = sizes(s.segment_payload)
        .into_iter()
        .enumerate()
        .map(|(i, n)| pattern(n, i as u8))
        .collect();
    for m in &msgs {
        transfer(&mut a, &mut b, std::slice::from_ref(m), None);
        transfer(&mut b, &mut a, std::slice::from_ref(m), Some(m.len() + 17));
    }
    // And all at once, so several messages share the stream and the send queue.
    transfer(&mut a, &mut b, &msgs, Some(4 << 20));
}

#[test]
fn sizes_plain() {
    all_sizes_both_ways(false, false);
}

#[test]
fn sizes_crc() {
    all_sizes_both_ways(false, true);
}

#[test]
fn sizes_markers() {
    all_sizes_both_ways(true, false);
}

#[test]
fn sizes_markers_crc() {
    all_sizes_both_ways(true, true);
}

#[test]
fn asymmetric_wishes() {
    // a wants markers toward itself and no CRC; b wants CRC: CRC wins both ways, markers
    // only flow b → a.
    let (mut a, mut b) = rc_pair(cfg(true, false), cfg(false, true));
    let sa = a.settings().unwrap();
    let sb = b.settings().unwrap();
    assert_eq!((sa.markers_tx, sa.markers_rx, sa.crc), (false, true, true));
    assert_eq!((sb.markers_tx, sb.markers_rx, sb.crc), (true, false, true));
    assert_eq!(sa.segment_payload, RC_MAX_SEGMENT_PAYLOAD);
    assert!(sb.segment_payload < RC_MAX_SEGMENT_PAYLOAD);
    let msgs: Vec<Vec<u8>> = [0, 1, 513, 70_000, 300_000]
        .into_iter()
        .map(|n| pattern(n, 5))
        .collect();
    transfer(&mut a, &mut b, &msgs, Some(300_000));
    transfer(&mut b, &mut a, &msgs, Some(300_000));
}

#[test]
fn small_segments() {
    for markers in [false, true] {
        let c = QpConfig {
            max_ulpdu: 1000,
            markers,
            ..QpConfig::default()
        };
        let (mut a, mut b) = rc_pair(c.clone(), c);
        assert_eq!(a.settings().unwrap().segment_payload, 1000);
        let msgs: Vec<Vec<u8>> = (0..3000)
            .step_by(97)
            .chain([100_000])
            .map(|n| pattern(n, n as u8))
            .collect();
        transfer(&mut a, &mut b, &msgs, None);
        transfer(&mut b, &mut a, &msgs, Some(100_000));
    }
}

#[test]
fn kernel_backlog_is_kept_and_drained() {
    // Small socket buffers and several large messages posted before the receiver reads:
    // the kernel takes only part, the rest waits in the queue pair.
    for markers in [false, true] {
        let c = QpConfig {
            socket_buffer: Some(64 * 1024),
            markers,
            ..QpConfig::default()
        };
        let (mut a, mut b) = rc_pair(c.clone(), c);
        let msgs: Vec<Vec<u8>> = (0..4)
            .map(|i| pattern((2 << 20) + i * 1001, i as u8))
            .chain((0..50).map(|i| pattern(i * 37, i as u8)))
            .collect();
        transfer(&mut a, &mut b, &msgs, Some(3 << 20));
        // The backlog's storage is given back once it drains.
        assert!(a.memory_bytes() < 1 << 20, "{}", a.memory_bytes());
    }
}

#[test]
fn receive_too_small_keeps_the_stream_usable() {
    let c = QpConfig {
        max_ulpdu: 64,
        ..QpConfig::default()
    };
    let (mut a, mut b) = rc_pair(c.clone(), c);
    let send = |qp: &mut RcQp, data: &[u8]| {
        qp.post_send(SendWr {
            wr_id: 0,
            opcode: SendOpcode::Send,
            data,
            ah: None,
            signaled: false,
        })
        .unwrap()
    };
    for (msg_len, buf_len) in [(1000usize, 100usize), (65, 64), (1, 0), (5000, 4999)] {
        let big = pattern(msg_len, 1);
        let next = pattern(50, 2);
        post_buf(&mut b, 1, vec![0xEE; buf_len]);
        post_buf(&mut b, 2, vec![0xEE; 64]);
        send(&mut a, &big);
        send(&mut a, &next);
        let start = Instant::now();
        let mut out = Vec::new();
        while out.len() < 2 {
            a.poll_cq(&mut out, 0).unwrap();
            b.poll_cq(&mut out, 2).unwrap();
            assert!(start.elapsed() < DEADLINE);
        }
        assert_eq!(
            (out[0].wr_id, out[0].status),
            (1, WcStatus::LocalLengthError)
        );
        assert_eq!(out[0].byte_len, msg_len);
        assert_eq!(out[0].buf.as_ref().unwrap().len(), buf_len);
        assert_eq!((out[1].wr_id, out[1].status), (2, WcStatus::Success));
        assert_eq!(out[1].data(), &next[..]);
    }
    assert_eq!(b.state(), QpState::Rts);
}

#[test]
fn solicited_and_posting_before_connect() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = thread::spawn(move || {
        let mut b = RcQp::create(QpConfig::default()).unwrap();
        // A receive posted in Init is there when the connection comes up.
        post_buf(&mut b, 9, vec![0; 16]);
        b.accept(&listener).unwrap();
        b
    });
    let mut a = RcQp::create(QpConfig::default()).unwrap();
    let err = post_x(&mut a, 1, None).unwrap_err();
    assert_invalid_state(&err, QpState::Init);
    assert!(a.connect(addr, &[]).unwrap().is_empty());
    let mut b = acceptor.join().unwrap();
    a.post_send(SendWr {
        wr_id: 2,
        opcode: SendOpcode::SendSolicited,
        data: b"hello",
        ah: None,
        signaled: true,
    })
    .unwrap();
    let wc = wait_one(&mut b);
    assert_eq!(
        (wc.wr_id, wc.solicited, wc.data(), wc.src),
        (9, true, &b"hello"[..], None)
    );
    let wc = wait_one(&mut a);
    assert_eq!((wc.wr_id, wc.opcode, wc.byte_len), (2, WcOpcode::Send, 5));
}

#[test]
fn send_queue_full() {
    let c = QpConfig {
        max_send_wr: 2,
        ..QpConfig::default()
    };
    let (mut a, _b) = rc_pair(c.clone(), c);
    fill_send_queue_of_two(&mut a, None);
}

#[test]
fn dropping_the_peer_flushes_receives() {
    let (a, mut b) = rc_pair(QpConfig::default(), QpConfig::default());
    post_buf(&mut b, 1, vec![0; 8]);
    post_buf(&mut b, 2, vec![0; 8]);
    drop(a);
    let w1 = wait_one(&mut b);
    let w2 = wait_one(&mut b);
    assert_eq!((w1.wr_id, w1.status), (1, WcStatus::FlushError));
    assert_eq!((w2.wr_id, w2.status), (2, WcStatus::FlushError));
    assert_eq!(w1.buf.unwrap().len(), 8);
    assert_eq!(b.state(), QpState::Error);
    assert!(
        matches!(b.last_error(), Some(VerbsError::PeerClosed)),
        "{:?}",
        b.last_error()
    );
    let err = post_x(&mut b, 3, None).unwrap_err();
    assert_invalid_state(&err, QpState::Error);
    post_buf(&mut b, 4, vec![0; 8]);
    let w = wait_one(&mut b);
    assert_eq!((w.wr_id, w.status), (4, WcStatus::FlushError));
}

/// An orderly close: the sending side closes after its last byte (however long the kernel
/// takes it), the closing end still receives, and each end's error state says the peer
/// closed, never a reset.
#[test]
fn closing_the_sending_side_in_order() {
    let (mut a, mut b) = rc_pair(QpConfig::default(), QpConfig::default());
    let big = pattern(4 << 20, 7);
    post_buf(&mut b, 1, vec![0; big.len()]);
    a.post_send(SendWr {
        wr_id: 1,
        opcode: SendOpcode::Send,
        data: &big,
        ah: None,
        signaled: true,
    })
    .unwrap();
    let deadline = Instant::now() + DEADLINE;
    let mut got = None;
    while !a.close_send().unwrap() {
        assert!(Instant::now() < deadline, "the send never drained");
        let mut wcs = Vec::new();
        b.poll_cq(&mut wcs, 1).unwrap();
        got = got.or(wcs.pop());
    }
    assert_eq!(a.state(), QpState::Closing);
    assert!(a.close_send().unwrap(), "a second close is a no-op");
    let w = wait_one(&mut a);
    assert_eq!(
        (w.wr_id, w.status),
        (1, WcStatus::Success),
        "a's send completed"
    );
    let err = post_x(&mut a, 2, None).unwrap_err();
    assert_invalid_state(&err, QpState::Closing);
    // The peer's send, posted before it saw the end of stream, reaches the closing end.
    post_buf(&mut a, 3, vec![0; 8]);
    b.post_send(SendWr {
        wr_id: 4,
        opcode: SendOpcode::Send,
        data: b"reply",
        ah: None,
        signaled: true,
    })
    .unwrap();
    let w = wait_one(&mut a);
    assert_eq!(
        (w.wr_id, w.status, w.data()),
        (3, WcStatus::Success, &b"reply"[..])
    );
    assert_eq!(a.state(), QpState::Closing);
    let mut wcs: Vec<_> = got.into_iter().collect();
    while wcs.len() < 2 {
        wcs.push(wait_one(&mut b));
    }
    wcs.sort_by_key(|w| w.wr_id);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::Success));
    assert!(
        wcs[0].data() == big.as_slice(),
        "every byte sent before the close arrives"
    );
    assert_eq!(
        (wcs[1].wr_id, wcs[1].opcode, wcs[1].status),
        (4, WcOpcode::Send, WcStatus::Success)
    );
    // The end of stream follows the last message.
    post_buf(&mut b, 5, vec![0; 8]);
    let w = wait_one(&mut b);
    assert_eq!((w.wr_id, w.status), (5, WcStatus::FlushError));
    assert!(
        matches!(b.last_error(), Some(VerbsError::PeerClosed)),
        "{:?}",
        b.last_error()
    );
    drop(b);
    post_buf(&mut a, 6, vec![0; 8]);
    let w = wait_one(&mut a);
    assert_eq!((w.wr_id, w.status), (6, WcStatus::FlushError));
    assert!(
        matches!(a.last_error(), Some(VerbsError::PeerClosed)),
        "{:?}",
        a.last_error()
    );
}

#[test]
fn dropping_the_sender_mid_message() {
    let c = QpConfig {
        socket_buffer: Some(64 * 1024),
        crc: false,
        ..QpConfig::default()
    };
    let (mut a, mut b) = rc_pair(c.clone(), c);
    let big = vec![0x5A; 8 << 20];
    a.post_send(SendWr {
        wr_id: 1,
        opcode: SendOpcode::Send,
        data: &big,
        ah: None,
        signaled: true,
    })
    .unwrap();
    // Most of it waits in the queue pair, not in the kernel.
    assert!(a.memory_bytes() > 4 << 20, "{}", a.memory_bytes());
    post_buf(&mut b, 7, vec![0; 8 << 20]);
    // Let part of it arrive, then the sender goes away with the rest still queued.
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < Duration::from_millis(50) {
        b.poll_cq(&mut out, 1).unwrap();
    }
    assert!(out.is_empty());
    drop(a);
    let wc = wait_one(&mut b);
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::TransportError));
    assert!(wc.byte_len > 0 && wc.byte_len < big.len(), "{wc:?}");
    assert_eq!(b.state(), QpState::Error);
}

// ---- a hand-made peer, speaking MPA from the wire codecs directly ----

fn ird_ord() -> Option<IrdOrd> {
    Some(IrdOrd {
        ird: 1,
        ord: 1,
        peer_to_peer: false,
        zero_length_rtr: false,
        write_rtr: false,
        read_rtr: false,
    })
}

fn frame(kind: FrameKind, markers: bool, crc: bool, revision: u8, pd: &[u8]) -> StartupRepr {
    StartupRepr {
        kind,
        markers,
        crc,
        reject: false,
        revision,
        ird_ord: if revision == 2 { ird_ord() } else { None },
        private_data: pd.to_vec(),
    }
}

fn read_startup(s: &mut TcpStream) -> (StartupRepr, Vec<u8>) {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        if !buf.is_empty() {
            if let Some((f, n)) = StartupRepr::parse(&buf).unwrap() {
                return (f, buf.split_off(n));
            }
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "peer closed during start-up");
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct RawPeer {
    stream: TcpStream,
    negotiated: Negotiated,
    sender: FpduSender,
    decoder: FpduDecoder,
}

impl RawPeer {
    fn new(stream: TcpStream, negotiated: Negotiated, leftover: &[u8]) -> Self {
        let mut decoder = FpduDecoder::new(negotiated.markers_rx, negotiated.crc);
        decoder.push(leftover);
        RawPeer {
            stream,
            negotiated,
            sender: FpduSender::new(negotiated.markers_tx, negotiated.crc),
            decoder,
        }
    }

    /// Initiates to `addr` with the given wishes.
    fn connect(addr: SocketAddr, markers: bool, crc: bool, revision: u8) -> (Self, StartupRepr) {
        let mut s = TcpStream::connect(addr).unwrap();
        let req = frame(FrameKind::Request, markers, crc, revision, b"raw");
        s.write_all(&req.emit().unwrap()).unwrap();
        let (reply, rest) = read_startup(&mut s);
        let n = negotiate(&req, &reply).unwrap();
        (RawPeer::new(s, n, &rest), reply)
    }

    /// Responds on `listener` with the given wishes.
    fn accept(listener: &TcpListener, markers: bool, crc: bool) -> (Self, StartupRepr) {
        let (mut s, _) = listener.accept().unwrap();
        let (req, rest) = read_startup(&mut s);
        let rep = frame(FrameKind::Reply, markers, crc, req.revision, b"raw");
        s.write_all(&rep.emit().unwrap()).unwrap();
        let n = negotiate(&rep, &req).unwrap();
        (RawPeer::new(s, n, &rest), req)
    }

    fn fpdu(&mut self, seg: SegmentRepr, payload: &[u8]) -> Vec<u8> {
        let mut h = [0u8; 18];
        let hl = seg.emit(&mut h).unwrap();
        let mut out = Vec::new();
        self.sender.encode(&[&h[..hl], payload], &mut out).unwrap();
        out
    }

    /// Closes the connection with a TCP reset (linger zero) instead of an orderly FIN.
    fn reset(self) {
        socket2::SockRef::from(&self.stream)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
    }

    /// Reads one segment (header and payload).
    fn next_segment(&mut self) -> (SegmentRepr, Vec<u8>) {
        self.stream.set_read_timeout(Some(DEADLINE)).unwrap();
        loop {
            if let Some(u) = self.decoder.next_ulpdu().unwrap() {
                let (seg, payload) = SegmentRepr::parse(u).unwrap();
                return (seg, payload.to_vec());
            }
            let mut chunk = vec![0u8; 65536];
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "closed");
            self.decoder.push(&chunk[..n]);
        }
    }
}

fn send_seg(msn: u32, mo: u32, last: bool) -> SegmentRepr {
    SegmentRepr::untagged(Opcode::Send, last, 0, msn, mo)
}

/// A queue pair accepting on a background thread; the test plays the initiator.
fn accept_in_thread(config: QpConfig) -> (SocketAddr, thread::JoinHandle<RcQp>) {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let t = thread::spawn(move || {
        let mut b = RcQp::create(config).unwrap();
        let (_, pd) = b.accept(&listener).unwrap();
        assert_eq!(pd, b"raw");
        b
    });
    (addr, t)
}

/// A default queue pair accepted from a raw initiator (revision 2, no markers, CRC as
/// `crc` asks), with `receives` receives of 1000 bytes posted (work requests 1, 2, ...).
fn raw_initiator(crc: bool, receives: u64) -> (RawPeer, RcQp) {
    let (addr, t) = accept_in_thread(QpConfig::default());
    let (raw, _) = RawPeer::connect(addr, false, crc, 2);
    let mut b = t.join().unwrap();
    for wr_id in 1..=receives {
        post_buf(&mut b, wr_id, vec![0; 1000]);
    }
    (raw, b)
}

#[test]
fn wire_format_of_sends() {
    for markers in [false, true] {
        let listener = TcpListener::bind(localhost()).unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = thread::spawn(move || RawPeer::accept(&listener, markers, true));
        let c = QpConfig {
            max_ulpdu: 4000,
            ..QpConfig::default()
        };
        let mut qp = RcQp::create(c).unwrap();
        assert_eq!(qp.connect(addr, b"qp").unwrap(), b"raw");
        let (mut raw, req) = peer.join().unwrap();
        assert_eq!((req.revision, req.crc, req.markers), (2, true, false));
        assert!(req.ird_ord.is_some());
        assert_eq!(req.private_data, b"qp");
        assert_eq!(qp.settings().unwrap().markers_tx, markers);
        assert_eq!(raw.negotiated.markers_rx, markers);
        for (msn, len) in [(1u32, 10_000usize), (2, 0), (3, 4000)] {
            let data = pattern(len, msn as u8);
            qp.post_send(SendWr {
                wr_id: msn as u64,
                opcode: SendOpcode::Send,
                data: &data,
                ah: None,
                signaled: true,
            })
            .unwrap();
            let mut got = Vec::new();
            loop {
                let (seg, payload) = raw.next_segment();
                assert_eq!(seg.opcode, Opcode::Send);
                let Placement::Untagged {
                    qn,
                    msn: m,
                    mo,
                    inval_stag,
                } = seg.placement
                else {
                    panic!("tagged")
                };
                assert_eq!((qn, m, mo as usize, inval_stag), (0, msn, got.len(), 0));
                assert!(payload.len() <= 4000);
                got.extend_from_slice(&payload);
                if seg.last {
                    break;
                }
                assert_eq!(payload.len(), 4000);
            }
            assert!(got == data);
            let wc = wait_one(&mut qp);
            assert_eq!((wc.wr_id, wc.status), (msn as u64, WcStatus::Success));
        }
    }
}

#[test]
fn revision_1_and_enhanced_replies() {
    for rev in [1u8, 2] {
        let (addr, t) = accept_in_thread(QpConfig::default());
        let (mut raw, reply) = RawPeer::connect(addr, false, false, rev);
        let mut b = t.join().unwrap();
        assert_eq!(reply.kind, FrameKind::Reply);
        assert_eq!(reply.revision, rev);
        assert_eq!(reply.ird_ord.is_some(), rev == 2);
        assert!(reply.crc, "the queue pair's CRC wish is in the reply");
        assert_eq!(b.settings().unwrap().revision, rev);
        // The raw peer's first FPDU arrives intact.
        let fpdu = raw.fpdu(send_seg(1, 0, true), b"first");
        raw.stream.write_all(&fpdu).unwrap();
        post_buf(&mut b, 1, vec![0; 8]);
        let wc = wait_one(&mut b);
        assert_eq!(wc.data(), b"first");
    }
    // A revision-1 queue pair against a revision-2 one.
    let c1 = QpConfig {
        mpa_revision: 1,
        ..QpConfig::default()
    };
    let (mut a, mut b) = rc_pair(c1, QpConfig::default());
    assert_eq!(a.settings().unwrap().revision, 1);
    assert_eq!(b.settings().unwrap().revision, 1);
    transfer(&mut a, &mut b, &[pattern(100_000, 1)], None);
}

#[test]
fn peer_closes_mid_message() {
    let (mut raw, mut b) = raw_initiator(true, 2);
    let first = raw.fpdu(send_seg(1, 0, false), &[1; 100]);
    let second = raw.fpdu(send_seg(1, 100, true), &[2; 100]);
    raw.stream.write_all(&first).unwrap();
    raw.stream.write_all(&second[..50]).unwrap();
    drop(raw);
    let w1 = wait_one(&mut b);
    assert_eq!(
        (w1.wr_id, w1.status, w1.byte_len),
        (1, WcStatus::TransportError, 100)
    );
    let w2 = wait_one(&mut b);
    assert_eq!((w2.wr_id, w2.status), (2, WcStatus::FlushError));
    assert_eq!(b.state(), QpState::Error);
    assert!(
        matches!(b.last_error(), Some(VerbsError::PeerClosed)),
        "{:?}",
        b.last_error()
    );
}

#[test]
fn peer_resets_mid_message() {
    let (mut raw, mut b) = raw_initiator(true, 1);
    let first = raw.fpdu(send_seg(1, 0, false), &[1; 100]);
    raw.stream.write_all(&first).unwrap();
    // Wait until the first segment is placed, so the reset hits a message in progress.
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < Duration::from_millis(30) {
        b.poll_cq(&mut out, 1).unwrap();
    }
    raw.reset();
    let w = wait_one(&mut b);
    assert_eq!(
        (w.wr_id, w.status, w.byte_len),
        (1, WcStatus::TransportError, 100)
    );
    assert_eq!(b.state(), QpState::Error);
    // Sending on the reset connection fails too, without a signal killing the process.
    assert!(post_x(&mut b, 5, None).is_err());
}

#[test]
fn send_to_a_reset_peer_completes_in_error() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = thread::spawn(move || RawPeer::accept(&listener, false, false));
    let mut qp = RcQp::create(QpConfig::default()).unwrap();
    qp.connect(addr, &[]).unwrap();
    let (raw, _) = peer.join().unwrap();
    raw.reset();
    thread::sleep(Duration::from_millis(20));
    let data = vec![1u8; 100_000];
    let start = Instant::now();
    let mut out = Vec::new();
    // The first write may still be accepted locally; one after the reset is seen fails.
    while qp.state() == QpState::Rts {
        qp.post_send(SendWr {
            wr_id: 1,
            opcode: SendOpcode::Send,
            data: &data,
            ah: None,
            signaled: false,
        })
        .unwrap();
        qp.poll_cq(&mut out, 16).unwrap();
        assert!(start.elapsed() < DEADLINE);
    }
    qp.poll_cq(&mut out, 16).unwrap();
    assert!(
        out.iter().any(|w| w.status == WcStatus::TransportError),
        "{out:?}"
    );
}

#[test]
fn crc_error_breaks_the_connection() {
    let (mut raw, mut b) = raw_initiator(true, 1);
    let mut fpdu = raw.fpdu(send_seg(1, 0, true), &[7; 64]);
    fpdu[30] ^= 0x10;
    raw.stream.write_all(&fpdu).unwrap();
    let w = wait_one(&mut b);
    assert_eq!((w.wr_id, w.status), (1, WcStatus::FlushError));
    assert_eq!(b.state(), QpState::Error);
    assert!(
        matches!(
            b.last_error(),
            Some(VerbsError::Mpa(iwarp::wire::Error::BadCrc { .. }))
        ),
        "{:?}",
        b.last_error()
    );
    // The queue pair closed the connection.
    raw.stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(raw.stream.read(&mut buf), Ok(0) | Err(_)));
}

/// A message read in place is handed over only once its CRC checked out: with one octet
/// flipped, the connection breaks and the receiver never gets it; intact, it gets it once.
#[test]
fn a_message_read_in_place_is_handed_over_only_with_a_good_crc() {
    for flip in [None, Some(20_000), Some(49_999)] {
        let (mut raw, mut b) = raw_initiator(true, 0);
        let m = in_place_message(0, 50_000);
        let mut fpdu = raw.fpdu(send_seg(1, 0, true), &m);
        if let Some(at) = flip {
            // Past ULPDU_Length and the DDP/RDMAP header.
            fpdu[2 + 18 + at] ^= 0x10;
        }
        let mut r = InPlaceRecorder::new(1 << 20);
        let mut wcs = vec![];
        // The head first, so the receiver starts on the FPDU before the rest is in.
        raw.stream.write_all(&fpdu[..1000]).unwrap();
        let deadline = Instant::now() + DEADLINE;
        while !r.reading() {
            b.poll_cq_with(&mut r, &mut wcs, 16).unwrap();
            assert!(Instant::now() < deadline, "not taken in place");
        }
        raw.stream.write_all(&fpdu[1000..]).unwrap();
        while r.got.is_empty() && b.state() == QpState::Rts {
            let _ = b.poll_cq_with(&mut r, &mut wcs, 16);
            assert!(Instant::now() < deadline, "neither handed over nor broken");
        }
        match flip {
            None => {
                assert_eq!((r.placed, r.got.len()), (1, 1));
                assert!(r.got[0] == m);
                assert_eq!(b.state(), QpState::Rts);
            }
            Some(at) => {
                assert!(r.got.is_empty(), "octet {at}");
                assert!(
                    matches!(
                        b.last_error(),
                        Some(VerbsError::Mpa(iwarp::wire::Error::BadCrc { .. }))
                    ),
                    "{:?}",
                    b.last_error()
                );
            }
        }
    }
}

#[test]
fn out_of_sequence_msn_breaks_the_connection() {
    let (mut raw, mut b) = raw_initiator(false, 1);
    let fpdu = raw.fpdu(send_seg(2, 0, true), &[7; 64]);
    raw.stream.write_all(&fpdu).unwrap();
    let w = wait_one(&mut b);
    assert_eq!(w.status, WcStatus::FlushError);
    assert!(
        matches!(b.last_error(), Some(VerbsError::Protocol(_))),
        "{:?}",
        b.last_error()
    );
}

// ---- start-up failures, each bounded by the connect timeout ----

fn short_timeout() -> QpConfig {
    QpConfig {
        connect_timeout: Duration::from_millis(300),
        ..QpConfig::default()
    }
}

/// Runs a raw listener that answers one connection with `answer`, then holds it open.
fn raw_server(answer: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        if !answer.is_empty() {
            let _ = read_startup(&mut s);
            s.write_all(&answer).unwrap();
        }
        thread::sleep(Duration::from_secs(2));
    });
    addr
}

#[test]
fn rejected_connect() {
    let mut rep = frame(FrameKind::Reply, false, false, 2, b"go away");
    rep.reject = true;
    let addr = raw_server(rep.emit().unwrap());
    let mut qp = RcQp::create(short_timeout()).unwrap();
    let start = Instant::now();
    let err = qp.connect(addr, b"hello").unwrap_err();
    assert!(
        matches!(&err, VerbsError::Rejected { private_data } if private_data == b"go away"),
        "{err:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(qp.state(), QpState::Init);
}

#[test]
fn garbage_reply() {
    let addr = raw_server(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec());
    let mut qp = RcQp::create(short_timeout()).unwrap();
    let err = qp.connect(addr, &[]).unwrap_err();
    assert!(
        matches!(err, VerbsError::Mpa(iwarp::wire::Error::BadMpaKey)),
        "{err:?}"
    );
}

#[test]
fn request_where_a_reply_belongs() {
    let req = frame(FrameKind::Request, false, false, 2, b"");
    let addr = raw_server(req.emit().unwrap());
    let mut qp = RcQp::create(short_timeout()).unwrap();
    let err = qp.connect(addr, &[]).unwrap_err();
    assert!(matches!(err, VerbsError::Startup(_)), "{err:?}");
}

#[test]
fn silent_responder_times_out() {
    let addr = raw_server(Vec::new());
    let mut qp = RcQp::create(short_timeout()).unwrap();
    let start = Instant::now();
    let err = qp.connect(addr, &[]).unwrap_err();
    assert!(matches!(err, VerbsError::Timeout), "{err:?}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
}

#[test]
fn accept_times_out_without_a_client() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let mut qp = RcQp::create(short_timeout()).unwrap();
    let start = Instant::now();
    let err = qp.accept(&listener).unwrap_err();
    assert!(matches!(err, VerbsError::Timeout), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(2));
    // A non-blocking listener works the same.
    listener.set_nonblocking(true).unwrap();
    assert!(matches!(qp.accept(&listener), Err(VerbsError::Timeout)));
}

#[test]
fn accept_rejects_garbage_and_silence() {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let client = thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let mut reply = frame(FrameKind::Reply, false, false, 2, b"");
        reply.reject = false;
        let mut wrong = TcpStream::connect(addr).unwrap();
        wrong.write_all(&reply.emit().unwrap()).unwrap();
        thread::sleep(Duration::from_secs(2));
    });
    let mut qp = RcQp::create(short_timeout()).unwrap();
    let err = qp.accept(&listener).unwrap_err();
    assert!(
        matches!(err, VerbsError::Mpa(iwarp::wire::Error::BadMpaKey)),
        "{err:?}"
    );
    let start = Instant::now();
    let err = qp.accept(&listener).unwrap_err();
    assert!(matches!(err, VerbsError::Timeout), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(2));
    let err = qp.accept(&listener).unwrap_err();
    assert!(matches!(err, VerbsError::Startup(_)), "{err:?}");
    assert_eq!(qp.state(), QpState::Init);
    drop(client);
}

#[test]
fn connection_refused() {
    let addr = TcpListener::bind(localhost())
        .unwrap()
        .local_addr()
        .unwrap();
    let mut qp = RcQp::create(short_timeout()).unwrap();
    assert!(matches!(qp.connect(addr, &[]), Err(VerbsError::Io(_))));
}

//! RDMA Write and RDMA Read on RC queue pairs over loopback TCP: every byte written is read
//! back and checked, with markers and CRC on and off, with posted receives and in receiver
//! mode; the wire format against a hand-made peer; and every violation breaks the connection
//! with an error completion instead of a panic or a hang.

#[allow(dead_code)] // each test program uses some of the helpers
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use iwarp::verbs::*;
use iwarp::wire::ddp::Placement;
use iwarp::wire::mpa::{negotiate, FpduDecoder, FpduSender, FrameKind, IrdOrd, StartupRepr};
use iwarp::wire::rdmap::{Opcode, ReadRequestRepr, SegmentRepr};

const DEADLINE: Duration = Duration::from_secs(30);

fn cfg(markers: bool, crc: bool) -> QpConfig {
    QpConfig {
        markers,
        crc,
        crc_same_host: crc,
        ..QpConfig::default()
    }
}

/// A connected pair: `a` initiated, `b` accepted.
fn rc_pair(c: QpConfig) -> (RcQp, RcQp) {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let cb = c.clone();
    let acceptor = thread::spawn(move || {
        let mut b = RcQp::create(cb).unwrap();
        b.accept(&listener).unwrap();
        b
    });
    let mut a = RcQp::create(c).unwrap();
    a.connect(addr, &[]).unwrap();
    (a, acceptor.join().unwrap())
}

/// Receiver mode: keeps every message, and what `region` held when it was handed over.
#[derive(Default)]
struct Collect {
    got: Vec<Vec<u8>>,
    region: Option<Arc<VecRegion>>,
    seen: Vec<Vec<u8>>,
}

impl RdReceiver for Collect {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        panic!("RC lends whole messages in order only");
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        self.got.push(payload.to_vec());
        if let Some(r) = &self.region {
            self.seen.push(r.to_vec());
        }
    }
    fn max_message(&self) -> usize {
        1 << 24
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Posted,
    Lending,
}

/// Two queue pairs driven together, each polled as `mode` says.
struct Pair {
    a: RcQp,
    b: RcQp,
    mode: Mode,
    ra: Collect,
    rb: Collect,
    wa: Vec<WorkCompletion>,
    wb: Vec<WorkCompletion>,
}

impl Pair {
    fn new(c: QpConfig, mode: Mode) -> Pair {
        let (a, b) = rc_pair(c);
        Pair {
            a,
            b,
            mode,
            ra: Collect::default(),
            rb: Collect::default(),
            wa: Vec::new(),
            wb: Vec::new(),
        }
    }

    fn poll(&mut self) {
        match self.mode {
            Mode::Posted => {
                self.a.poll_cq(&mut self.wa, 64).unwrap();
                self.b.poll_cq(&mut self.wb, 64).unwrap();
            }
            Mode::Lending => {
                self.a.poll_cq_with(&mut self.ra, &mut self.wa, 64).unwrap();
                self.b.poll_cq_with(&mut self.rb, &mut self.wb, 64).unwrap();
            }
        }
    }

    /// Polls until `a` has `n` completions (taken out, in order).
    fn wait_a(&mut self, n: usize) -> Vec<WorkCompletion> {
        let start = Instant::now();
        while self.wa.len() < n {
            self.poll();
            assert!(
                start.elapsed() < DEADLINE,
                "{} of {n} completions ({:?}, a {:?}, b {:?})",
                self.wa.len(),
                self.mode,
                self.a.last_error(),
                self.b.last_error()
            );
        }
        self.wa.drain(..).collect()
    }

    /// Polls until both sides are in Error.
    fn wait_broken(&mut self) {
        let start = Instant::now();
        while self.a.state() != QpState::Error || self.b.state() != QpState::Error {
            self.poll();
            assert!(start.elapsed() < DEADLINE, "the connection did not break");
        }
    }
}

fn write(qp: &mut RcQp, wr_id: u64, data: &[u8], stag: Stag, offset: u64) {
    qp.post_rdma_write(RdmaWriteWr {
        wr_id,
        data,
        remote_stag: stag,
        remote_offset: offset,
        signaled: true,
    })
    .unwrap();
}

fn read(qp: &mut RcQp, wr_id: u64, local: (Stag, u64), len: usize, remote: (Stag, u64)) {
    qp.post_rdma_read(RdmaReadWr {
        wr_id,
        local_stag: local.0,
        local_offset: local.1,
        len,
        remote_stag: remote.0,
        remote_offset: remote.1,
    })
    .unwrap();
}

fn assert_wc(wc: &WorkCompletion, wr_id: u64, opcode: WcOpcode, len: usize) {
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
        (wr_id, WcStatus::Success, opcode, len),
        "{wc:?}"
    );
}

const MIB: usize = 1 << 20;

/// Writes each size into `b`'s region, reads it back into `a`'s, and checks both regions.
fn write_read_back(markers: bool, crc: bool, mode: Mode) {
    let mut p = Pair::new(cfg(markers, crc), mode);
    let seg = p.a.settings().unwrap().segment_payload;
    let src = Arc::new(VecRegion::new(4 * MIB + 100));
    let sink = Arc::new(VecRegion::new(4 * MIB + 100));
    let src_stag = p.b.register(src.clone(), Access::ALL).unwrap();
    let local = Access {
        local_write: true,
        ..Access::NONE
    };
    let sink_stag = p.a.register(sink.clone(), local).unwrap();
    for (i, n) in [0, 1, seg - 1, seg, seg + 1, 2 * seg + 1, MIB, 4 * MIB]
        .into_iter()
        .enumerate()
    {
        let data = pattern(n, i as u8);
        let (woff, roff) = (7 + i as u64, 3 + i as u64);
        write(&mut p.a, 2 * i as u64, &data, src_stag, woff);
        let wc = p.wait_a(1);
        assert_wc(&wc[0], 2 * i as u64, WcOpcode::RdmaWrite, n);
        read(
            &mut p.a,
            2 * i as u64 + 1,
            (sink_stag, roff),
            n,
            (src_stag, woff),
        );
        let wc = p.wait_a(1);
        assert_wc(&wc[0], 2 * i as u64 + 1, WcOpcode::RdmaRead, n);
        let (woff, roff) = (woff as usize, roff as usize);
        src.with(|s| assert!(s[woff..woff + n] == data[..], "{n} bytes at b"));
        sink.with(|s| assert!(s[roff..roff + n] == data[..], "{n} bytes read back"));
    }
    // RDMA is silent at the target.
    p.poll();
    assert!(p.wb.is_empty(), "{:?}", p.wb);
    assert!(p.rb.got.is_empty() && p.ra.got.is_empty());
    assert_eq!((p.a.state(), p.b.state()), (QpState::Rts, QpState::Rts));
    // The 4 MiB Read Response's send buffer is given back once it drained.
    assert!(p.b.memory_bytes() < 2 * MIB, "{}", p.b.memory_bytes());
}

#[test]
fn write_then_read_back_plain() {
    write_read_back(false, false, Mode::Posted);
    write_read_back(false, false, Mode::Lending);
}

#[test]
fn write_then_read_back_crc() {
    write_read_back(false, true, Mode::Posted);
    write_read_back(false, true, Mode::Lending);
}

#[test]
fn write_then_read_back_markers() {
    write_read_back(true, false, Mode::Posted);
    write_read_back(true, true, Mode::Lending);
}

#[test]
fn write_then_read_back_markers_crc() {
    write_read_back(true, true, Mode::Posted);
    write_read_back(true, false, Mode::Lending);
}

/// A Send posted after an RDMA Write is received after the Write's data is in place.
#[test]
fn a_send_after_a_write_sees_the_data_in_place() {
    for mode in [Mode::Posted, Mode::Lending] {
        for markers in [false, true] {
            let mut p = Pair::new(cfg(markers, true), mode);
            let region = Arc::new(VecRegion::new(MIB + 10));
            let stag = p.b.register(region.clone(), Access::ALL).unwrap();
            p.rb.region = Some(region.clone());
            for round in 0..4u8 {
                let data = pattern(MIB, round);
                if mode == Mode::Posted {
                    post_buf(&mut p.b, 100 + round as u64, vec![0; 64]);
                }
                write(&mut p.a, 1, &data, stag, 10);
                p.a.post_send(SendWr {
                    wr_id: 2,
                    opcode: SendOpcode::Send,
                    data: b"done",
                    ah: None,
                    signaled: true,
                })
                .unwrap();
                let start = Instant::now();
                let seen = loop {
                    p.poll();
                    if mode == Mode::Posted {
                        if let Some(wc) = p.wb.pop() {
                            assert_eq!((wc.wr_id, wc.data()), (100 + round as u64, &b"done"[..]));
                            // The receive completed after the placement: look now.
                            break region.to_vec();
                        }
                    } else if let Some(seen) = p.rb.seen.pop() {
                        assert_eq!(p.rb.got.pop().unwrap(), b"done");
                        break seen;
                    }
                    assert!(start.elapsed() < DEADLINE);
                };
                assert!(seen[10..] == data[..], "round {round} ({mode:?})");
                let wc = p.wait_a(2);
                assert_wc(&wc[0], 1, WcOpcode::RdmaWrite, MIB);
                assert_wc(&wc[1], 2, WcOpcode::Send, 4);
            }
        }
    }
}

/// Many reads in flight complete in the order posted, each with its own data, while writes
/// and sends share the stream.
#[test]
fn outstanding_reads_complete_in_order() {
    for mode in [Mode::Posted, Mode::Lending] {
        let mut p = Pair::new(cfg(false, true), mode);
        let src = Arc::new(VecRegion::from_vec(pattern(2 * MIB, 9)));
        let sink = Arc::new(VecRegion::new(40 * 70_000));
        let src_stag = p.b.register(src.clone(), Access::ALL).unwrap();
        let sink_stag = p.a.register(sink.clone(), Access::ALL).unwrap();
        let sizes = [0usize, 1, 65_000, 70_000, 100, 0, 3, 65_536];
        let mut want = Vec::new();
        for i in 0..40 {
            let n = sizes[i % sizes.len()];
            let from = (i * 40_503) % (2 * MIB - 70_000);
            read(
                &mut p.a,
                i as u64,
                (sink_stag, (i * 70_000) as u64),
                n,
                (src_stag, from as u64),
            );
            want.push((i * 70_000, src.to_vec()[from..from + n].to_vec()));
        }
        let wcs = p.wait_a(40);
        for (i, wc) in wcs.iter().enumerate() {
            assert_wc(wc, i as u64, WcOpcode::RdmaRead, sizes[i % sizes.len()]);
        }
        sink.with(|s| {
            for (i, (at, w)) in want.iter().enumerate() {
                assert!(s[*at..at + w.len()] == w[..], "read {i}");
            }
        });
        assert!(p.wb.is_empty());
    }
}

/// Reads and writes of random sizes and places, both directions at once, many in flight,
/// against a model of every region.
#[test]
fn random_writes_and_reads_match_a_model() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    // Small socket buffers too: writes and Read Responses then wait in the send buffers,
    // both ways at once.
    for (markers, crc, mode, socket_buffer) in [
        (false, false, Mode::Posted, None),
        (true, true, Mode::Lending, None),
        (false, true, Mode::Lending, Some(32 * 1024)),
        (true, false, Mode::Posted, Some(32 * 1024)),
    ] {
        let c = QpConfig {
            max_ulpdu: 1000 + next(3000),
            socket_buffer,
            ..cfg(markers, crc)
        };
        let mut p = Pair::new(c, mode);
        const LEN: usize = 300_000;
        // Per side: a region the peer writes and reads, and a sink for its own reads.
        let regions: Vec<[Arc<VecRegion>; 2]> = (0..2)
            .map(|_| [Arc::new(VecRegion::new(LEN)), Arc::new(VecRegion::new(LEN))])
            .collect();
        let mut model = vec![[vec![0u8; LEN], vec![0u8; LEN]]; 2];
        let mut stags = Vec::new();
        for (qp, r) in [&mut p.a, &mut p.b].into_iter().zip(&regions) {
            let exposed = Access {
                remote_read: true,
                remote_write: true,
                local_write: false,
            };
            stags.push([
                qp.register(r[0].clone(), exposed).unwrap(),
                qp.register(r[1].clone(), Access::ALL).unwrap(),
            ]);
        }
        let mut posted = [0usize; 2];
        for op in 0..300 {
            let side = next(2);
            let peer = 1 - side;
            let n = [0, 1, 17, 999, 5000, 70_000][next(6)];
            let at = next(LEN - n + 1);
            let from = next(LEN - n + 1);
            let qp = if side == 0 { &mut p.a } else { &mut p.b };
            if next(2) == 0 {
                let data = pattern(n, op as u8);
                write(qp, op, &data, stags[peer][0], at as u64);
                model[peer][0][at..at + n].copy_from_slice(&data);
            } else {
                read(
                    qp,
                    op,
                    (stags[side][1], at as u64),
                    n,
                    (stags[peer][0], from as u64),
                );
                let got = model[peer][0][from..from + n].to_vec();
                model[side][1][at..at + n].copy_from_slice(&got);
            }
            posted[side] += 1;
            if next(8) == 0 {
                p.poll();
            }
        }
        let start = Instant::now();
        while p.wa.len() < posted[0] || p.wb.len() < posted[1] {
            p.poll();
            assert!(start.elapsed() < DEADLINE, "{mode:?}: {:?} {:?}", p.a, p.b);
        }
        assert!(p
            .wa
            .iter()
            .chain(&p.wb)
            .all(|w| w.status == WcStatus::Success));
        for side in 0..2 {
            for k in 0..2 {
                assert!(
                    regions[side][k].to_vec() == model[side][k],
                    "side {side} region {k} ({markers} {crc} {mode:?})"
                );
            }
        }
    }
}

/// With posted receives and none posted, a Send that arrives waits for one, and so does
/// everything behind it: the RDMA Write after it is placed only once the Send is received.
#[test]
fn a_send_without_a_receive_holds_up_what_follows() {
    let mut p = Pair::new(QpConfig::default(), Mode::Posted);
    let region = Arc::new(VecRegion::new(100));
    let stag = p.b.register(region.clone(), Access::ALL).unwrap();
    write(&mut p.a, 1, b"before", stag, 0);
    p.a.post_send(abc_send(2, None)).unwrap();
    write(&mut p.a, 3, b"after", stag, 50);
    assert_eq!(p.wait_a(3).len(), 3);
    let start = Instant::now();
    while region.to_vec()[..6] != *b"before" {
        p.poll();
        assert!(start.elapsed() < DEADLINE);
    }
    for _ in 0..100 {
        p.poll();
    }
    assert_eq!(region.to_vec()[50..55], [0; 5]);
    assert!(p.wb.is_empty());
    post_buf(&mut p.b, 7, vec![0; 8]);
    let start = Instant::now();
    while p.wb.is_empty() {
        p.poll();
        assert!(start.elapsed() < DEADLINE);
    }
    assert_eq!((p.wb[0].wr_id, p.wb[0].data()), (7, &b"abc"[..]));
    while region.to_vec()[50..55] != *b"after" {
        p.poll();
        assert!(start.elapsed() < DEADLINE);
    }
    assert_eq!((p.a.state(), p.b.state()), (QpState::Rts, QpState::Rts));
}

// ---- violations: each breaks the connection, with error completions on both sides ----

/// `a` does `op` against `b`'s region (registered with `access`); the connection must break
/// with `b` reporting `why`, a receive posted at `b` flushed, and a read posted at `a` after
/// `op` completing in error.
fn violation(access: Access, why: &str, op: impl Fn(&mut RcQp, Stag)) {
    for mode in [Mode::Posted, Mode::Lending] {
        let mut p = Pair::new(QpConfig::default(), mode);
        let region = Arc::new(VecRegion::new(1000));
        let stag = p.b.register(region, access).unwrap();
        let sink = Arc::new(VecRegion::new(1000));
        let sink_stag = p.a.register(sink, Access::ALL).unwrap();
        // A good region, so the read after the violation is valid in itself.
        let good =
            p.b.register(Arc::new(VecRegion::new(10)), Access::ALL)
                .unwrap();
        post_buf(&mut p.b, 5, vec![0; 10]);
        op(&mut p.a, stag);
        read(&mut p.a, 77, (sink_stag, 0), 10, (good, 0));
        p.wait_broken();
        assert!(
            matches!(p.b.last_error(), Some(VerbsError::Protocol(w)) if *w == why),
            "{mode:?}: {:?}",
            p.b.last_error()
        );
        // The oldest read in flight fails with TransportError, later ones are flushed.
        let reads: Vec<_> =
            p.wa.iter()
                .filter(|w| w.opcode == WcOpcode::RdmaRead)
                .collect();
        assert_eq!(reads[0].status, WcStatus::TransportError, "{reads:?}");
        assert!(reads.iter().all(|w| w.status != WcStatus::Success));
        assert_eq!(reads.last().unwrap().wr_id, 77);
        assert_eq!((p.wb[0].wr_id, p.wb[0].status), (5, WcStatus::FlushError));
        assert!(post_x(&mut p.a, 1, None).is_err());
    }
}

fn rw() -> Access {
    Access {
        remote_read: true,
        remote_write: true,
        local_write: false,
    }
}

#[test]
fn write_to_an_unknown_stag_breaks_the_connection() {
    violation(rw(), "RDMA Write to an unknown STag", |a, s| {
        let wrong = Stag::from_raw(s.raw() ^ 0x1000).unwrap();
        write(a, 1, b"abc", wrong, 0);
    });
    violation(rw(), "RDMA Write to an unknown STag", |a, s| {
        let wrong = Stag::from_raw(s.raw().wrapping_add(1)).unwrap();
        write(a, 1, b"abc", wrong, 0);
    });
}

#[test]
fn write_without_remote_write_breaks_the_connection() {
    let ro = Access {
        remote_read: true,
        ..Access::NONE
    };
    violation(
        ro,
        "RDMA Write to a region without remote write access",
        |a, s| write(a, 1, b"abc", s, 0),
    );
}

#[test]
fn read_without_remote_read_breaks_the_connection() {
    let wo = Access {
        remote_write: true,
        local_write: true,
        ..Access::NONE
    };
    violation(
        wo,
        "RDMA Read of a region without remote read access",
        |a, s| {
            let local = a_sink(a);
            read(a, 1, (local, 0), 10, (s, 0));
        },
    );
}

/// `a`'s sink in [`violation`]: registered first on a fresh queue pair, so index 1, key 0.
fn a_sink(_: &RcQp) -> Stag {
    Stag::from_raw(1 << 8).unwrap()
}

#[test]
fn out_of_bounds_breaks_the_connection() {
    violation(rw(), "RDMA Write beyond the region's bounds", |a, s| {
        write(a, 1, &[1; 10], s, 991)
    });
    violation(rw(), "RDMA Write beyond the region's bounds", |a, s| {
        write(a, 1, &[], s, 1001)
    });
    violation(rw(), "RDMA Write beyond the region's bounds", |a, s| {
        write(a, 1, &[1; 2], s, u64::MAX - 5)
    });
    violation(rw(), "RDMA Read beyond the region's bounds", |a, s| {
        let local = a_sink(a);
        read(a, 1, (local, 0), 2, (s, 999));
    });
    violation(rw(), "RDMA Read beyond the region's bounds", |a, s| {
        let local = a_sink(a);
        read(a, 1, (local, 0), 0, (s, 1001));
    });
}

#[test]
fn a_deregistered_region_is_out_of_reach() {
    for mode in [Mode::Posted, Mode::Lending] {
        let mut p = Pair::new(QpConfig::default(), mode);
        let region = Arc::new(VecRegion::new(100));
        let stag = p.b.register(region.clone(), Access::ALL).unwrap();
        let keep =
            p.b.register(Arc::new(VecRegion::new(1)), Access::NONE)
                .unwrap();
        write(&mut p.a, 1, b"first", stag, 0);
        p.wait_a(1);
        let start = Instant::now();
        while region.to_vec()[..5] != *b"first" {
            p.poll();
            assert!(start.elapsed() < DEADLINE);
        }
        p.b.deregister(stag).unwrap();
        assert!(p.b.deregister(stag).is_err());
        write(&mut p.a, 2, b"second", stag, 0);
        // `a` registered nothing and has no read in flight: only a posted receive makes it
        // read the socket and notice the close.
        post_buf(&mut p.a, 3, vec![0; 8]);
        p.wait_broken();
        let flushed = p.wait_a(2);
        assert_eq!(
            (flushed[1].wr_id, flushed[1].status),
            (3, WcStatus::FlushError)
        );
        assert!(
            matches!(p.b.last_error(), Some(VerbsError::Protocol(w)) if w.contains("unknown STag")),
            "{:?}",
            p.b.last_error()
        );
        assert_eq!(&region.to_vec()[..6], b"first\0");
        p.b.deregister(keep).unwrap();
    }
}

#[test]
fn bad_local_regions_are_refused_at_post() {
    let (mut a, _b) = rc_pair(QpConfig::default());
    let r = Arc::new(VecRegion::new(100));
    let no_write = a.register(r.clone(), Access::NONE).unwrap();
    let ok = a.register(r, Access::ALL).unwrap();
    let unknown = Stag::from_raw(0xff_ff00).unwrap();
    for (local, off, len) in [
        (no_write, 0, 10),
        (unknown, 0, 10),
        (ok, 95, 10),
        (ok, u64::MAX, 1),
    ] {
        let err = a
            .post_rdma_read(RdmaReadWr {
                wr_id: 1,
                local_stag: local,
                local_offset: off,
                len,
                remote_stag: ok,
                remote_offset: 0,
            })
            .unwrap_err();
        assert!(matches!(err, VerbsError::InvalidArgument(_)), "{err:?}");
    }
    let err = a
        .post_rdma_write(RdmaWriteWr {
            wr_id: 1,
            data: b"ab",
            remote_stag: ok,
            remote_offset: u64::MAX,
            signaled: true,
        })
        .unwrap_err();
    assert!(matches!(err, VerbsError::InvalidArgument(_)), "{err:?}");
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(a.sends_outstanding(), 0);
    // Not connected: refused.
    let mut c = RcQp::create(QpConfig::default()).unwrap();
    let s = c
        .register(Arc::new(VecRegion::new(4)), Access::ALL)
        .unwrap();
    let err = c
        .post_rdma_write(RdmaWriteWr {
            wr_id: 1,
            data: b"ab",
            remote_stag: s,
            remote_offset: 0,
            signaled: true,
        })
        .unwrap_err();
    assert_invalid_state(&err, QpState::Init);
}

// ---- a hand-made peer: the wire format both ways, and what only a broken peer sends ----

fn startup(kind: FrameKind) -> StartupRepr {
    StartupRepr {
        kind,
        markers: false,
        crc: true,
        reject: false,
        revision: 2,
        ird_ord: Some(IrdOrd {
            ird: 1,
            ord: 1,
            peer_to_peer: false,
            zero_length_rtr: false,
            write_rtr: false,
            read_rtr: false,
        }),
        private_data: Vec::new(),
    }
}

struct RawPeer {
    stream: TcpStream,
    sender: FpduSender,
    decoder: FpduDecoder,
}

impl RawPeer {
    /// Accepts the queue pair's connection on `listener`.
    fn accept(listener: &TcpListener) -> RawPeer {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut buf = Vec::new();
        let (req, rest) = loop {
            let mut chunk = [0u8; 256];
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&chunk[..n]);
            if let Some((f, n)) = StartupRepr::parse(&buf).unwrap() {
                break (f, buf.split_off(n));
            }
        };
        let rep = startup(FrameKind::Reply);
        s.write_all(&rep.emit().unwrap()).unwrap();
        let n = negotiate(&rep, &req).unwrap();
        let mut decoder = FpduDecoder::new(n.markers_rx, n.crc);
        decoder.push(&rest);
        RawPeer {
            stream: s,
            sender: FpduSender::new(n.markers_tx, n.crc),
            decoder,
        }
    }

    fn send(&mut self, seg: SegmentRepr, payload: &[u8]) {
        let mut h = [0u8; 18];
        let hl = seg.emit(&mut h).unwrap();
        let mut out = Vec::new();
        self.sender.encode(&[&h[..hl], payload], &mut out).unwrap();
        self.stream.write_all(&out).unwrap();
    }

    fn next_segment(&mut self) -> (SegmentRepr, Vec<u8>) {
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

/// A queue pair (segments of 4000 bytes) connected to a raw peer.
fn raw_pair() -> (RcQp, RawPeer) {
    let listener = TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = thread::spawn(move || RawPeer::accept(&listener));
    let mut qp = RcQp::create(QpConfig {
        max_ulpdu: 4000,
        ..QpConfig::default()
    })
    .unwrap();
    qp.connect(addr, &[]).unwrap();
    (qp, peer.join().unwrap())
}

fn poll_until(
    qp: &mut RcQp,
    mut done: impl FnMut(&RcQp, &[WorkCompletion]) -> bool,
) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let start = Instant::now();
    while !done(qp, &out) {
        qp.poll_cq(&mut out, 16).unwrap();
        assert!(start.elapsed() < DEADLINE, "{:?} {out:?}", qp.last_error());
    }
    out
}

#[test]
fn wire_format_of_writes_reads_and_responses() {
    let (mut qp, mut raw) = raw_pair();
    let mine = Arc::new(VecRegion::from_vec(pattern(20_000, 4)));
    let stag = qp.register(mine.clone(), Access::ALL).unwrap();
    let remote = Stag::from_raw(0x1234_5678).unwrap();

    // RDMA Write: tagged segments, TO advancing, L on the last.
    let data = pattern(10_000, 1);
    write(&mut qp, 1, &data, remote, 1 << 40);
    let mut got = Vec::new();
    loop {
        let (seg, payload) = raw.next_segment();
        assert_eq!(seg.opcode, Opcode::RdmaWrite);
        assert_eq!(
            seg.placement,
            Placement::Tagged {
                stag: remote.raw(),
                offset: (1 << 40) + got.len() as u64
            }
        );
        got.extend_from_slice(&payload);
        if seg.last {
            break;
        }
        assert_eq!(payload.len(), 4000);
    }
    assert!(got == data);

    // RDMA Read: a Read Request on queue 1, MSN 1 then 2, MO 0, L.
    for (msn, len) in [(1u32, 9000usize), (2, 0)] {
        read(&mut qp, 10 + msn as u64, (stag, 100), len, (remote, 7));
        let (seg, payload) = raw.next_segment();
        assert_eq!((seg.opcode, seg.last), (Opcode::ReadRequest, true));
        assert!(matches!(
            seg.placement,
            Placement::Untagged { qn: 1, msn: m, mo: 0, inval_stag: 0 } if m == msn
        ));
        let (req, rest) = ReadRequestRepr::parse(&payload).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            req,
            ReadRequestRepr {
                sink_stag: stag.raw(),
                sink_to: 100,
                len: len as u32,
                src_stag: remote.raw(),
                src_to: 7,
            }
        );
        // Answer it in two segments (or one empty one).
        let answer = pattern(len, 200);
        let half = len / 2;
        if len > 0 {
            raw.send(
                SegmentRepr::tagged(Opcode::ReadResponse, false, stag.raw(), 100),
                &answer[..half],
            );
        }
        raw.send(
            SegmentRepr::tagged(Opcode::ReadResponse, true, stag.raw(), 100 + half as u64),
            &answer[half..],
        );
        let wcs = poll_until(&mut qp, |_, out| {
            out.iter().any(|w| w.opcode == WcOpcode::RdmaRead)
        });
        let wc = wcs.iter().find(|w| w.opcode == WcOpcode::RdmaRead).unwrap();
        assert_wc(wc, 10 + msn as u64, WcOpcode::RdmaRead, len);
        mine.with(|m| assert!(m[100..100 + len] == answer[..]));
    }

    // The queue pair answers a Read Request with Read Response segments into the sink.
    let sink = 0x0abc_de01u32;
    for (msn, len, from) in [(1u32, 9000usize, 50u64), (2, 0, 20_000)] {
        let req = ReadRequestRepr {
            sink_stag: sink,
            sink_to: 1 << 33,
            len: len as u32,
            src_stag: stag.raw(),
            src_to: from,
        };
        let mut payload = [0u8; ReadRequestRepr::LEN];
        req.emit(&mut payload).unwrap();
        raw.send(
            SegmentRepr::untagged(Opcode::ReadRequest, true, 1, msn, 0),
            &payload,
        );
        let mut got = Vec::new();
        let start = Instant::now();
        let mut out = Vec::new();
        loop {
            qp.poll_cq(&mut out, 16).unwrap();
            raw.stream.set_nonblocking(true).unwrap();
            let mut chunk = vec![0u8; 65536];
            match raw.stream.read(&mut chunk) {
                Ok(n) => raw.decoder.push(&chunk[..n]),
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
            }
            raw.stream.set_nonblocking(false).unwrap();
            let mut last = false;
            while let Some(u) = raw.decoder.next_ulpdu().unwrap() {
                let (seg, p) = SegmentRepr::parse(u).unwrap();
                assert_eq!(seg.opcode, Opcode::ReadResponse);
                assert_eq!(
                    seg.placement,
                    Placement::Tagged {
                        stag: sink,
                        offset: (1 << 33) + got.len() as u64
                    }
                );
                assert!(p.len() <= 4000);
                got.extend_from_slice(p);
                last = seg.last;
            }
            if last {
                break;
            }
            assert!(start.elapsed() < DEADLINE);
        }
        let from = from as usize;
        assert!(got == mine.to_vec()[from..from + len]);
        // No completion for the responder.
        assert!(
            out.iter().all(|w| w.opcode != WcOpcode::RdmaRead),
            "{out:?}"
        );
    }
    assert_eq!(qp.state(), QpState::Rts);
}

/// What only a broken peer sends: the queue pair breaks the connection with `why`, and the
/// receive it had posted completes in error.
fn raw_violation(why: &str, send: impl FnOnce(&mut RawPeer, Stag)) {
    let (mut qp, mut raw) = raw_pair();
    let stag = qp
        .register(Arc::new(VecRegion::new(1000)), Access::ALL)
        .unwrap();
    post_buf(&mut qp, 9, vec![0; 10]);
    send(&mut raw, stag);
    let out = poll_until(&mut qp, |qp, _| qp.state() == QpState::Error);
    assert!(
        matches!(qp.last_error(), Some(VerbsError::Protocol(w)) if *w == why),
        "{:?}",
        qp.last_error()
    );
    let out = if out.is_empty() {
        vec![wait_one_within(&mut qp, DEADLINE)]
    } else {
        out
    };
    assert_eq!((out[0].wr_id, out[0].status), (9, WcStatus::FlushError));
}

#[test]
fn a_read_response_without_a_read_breaks_the_connection() {
    raw_violation(
        "Read Response with no RDMA Read outstanding",
        |raw, stag| {
            raw.send(
                SegmentRepr::tagged(Opcode::ReadResponse, true, stag.raw(), 0),
                b"xyz",
            )
        },
    );
}

#[test]
fn a_read_request_out_of_sequence_breaks_the_connection() {
    raw_violation("Read Request MSN out of sequence", |raw, stag| {
        let req = ReadRequestRepr {
            sink_stag: 5,
            sink_to: 0,
            len: 10,
            src_stag: stag.raw(),
            src_to: 0,
        };
        let mut payload = [0u8; ReadRequestRepr::LEN];
        req.emit(&mut payload).unwrap();
        raw.send(
            SegmentRepr::untagged(Opcode::ReadRequest, true, 1, 2, 0),
            &payload,
        );
    });
}

#[test]
fn a_read_response_out_of_place_breaks_the_connection() {
    let (mut qp, mut raw) = raw_pair();
    let stag = qp
        .register(Arc::new(VecRegion::new(1000)), Access::ALL)
        .unwrap();
    read(&mut qp, 3, (stag, 0), 100, (stag, 0));
    let (seg, _) = raw.next_segment();
    assert_eq!(seg.opcode, Opcode::ReadRequest);
    raw.send(
        SegmentRepr::tagged(Opcode::ReadResponse, true, stag.raw(), 1),
        &[0; 100],
    );
    let out = poll_until(&mut qp, |qp, _| qp.state() == QpState::Error);
    assert!(
        matches!(qp.last_error(), Some(VerbsError::Protocol(w)) if w.contains("Read Response not where")),
        "{:?}",
        qp.last_error()
    );
    let wc = if out.is_empty() {
        wait_one_within(&mut qp, DEADLINE)
    } else {
        out.into_iter().next().unwrap()
    };
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.status),
        (3, WcOpcode::RdmaRead, WcStatus::TransportError)
    );
}

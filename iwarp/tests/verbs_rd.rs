//! RD queue pairs over real loopback UDP sockets: every byte checked, every wait bounded.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::*;

const DEADLINE: Duration = Duration::from_secs(30);

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn rd(config: &QpConfig) -> RdQp {
    let mut qp = RdQp::create(config.clone()).unwrap();
    qp.bind_udp(localhost()).unwrap();
    qp
}

fn ah_of(qp: &RdQp) -> AddressHandle {
    AddressHandle::new(qp.local_addr().unwrap(), qp.qpn())
}

/// Message `seq` of `len` bytes: differs for every message and position.
fn pattern(len: usize, seq: u64) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (len as u64) ^ 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn send(qp: &mut RdQp, to: AddressHandle, wr_id: u64, data: &[u8], signaled: bool) {
    qp.post_send(SendWr {
        wr_id,
        opcode: SendOpcode::Send,
        data,
        ah: Some(to),
        signaled,
    })
    .unwrap();
}

fn post(qp: &mut RdQp, wr_id: u64, len: usize) {
    qp.post_recv(RecvWr {
        wr_id,
        buf: vec![0xEE; len],
    })
    .unwrap();
}

/// Polls every queue pair in turn until `done` says so; panics past `limit`.
fn pump(
    qps: &mut [&mut RdQp],
    got: &mut [Vec<WorkCompletion>],
    limit: Duration,
    mut done: impl FnMut(&[Vec<WorkCompletion>]) -> bool,
) {
    let start = Instant::now();
    let mut out = Vec::with_capacity(64);
    loop {
        for (qp, got) in qps.iter_mut().zip(got.iter_mut()) {
            out.clear();
            qp.poll_cq(&mut out, 64).unwrap();
            got.append(&mut out);
        }
        if done(got) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "not done within {limit:?}: {:?}",
            got.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
}

fn sizes() -> Vec<usize> {
    let seg = 65_408 - 18; // payload bytes of a message's first segment
    let mut v: Vec<usize> = (0..=3).collect();
    v.extend([17, 18, 19, 1000, 8173, 8174, 8175, 8192]);
    v.extend([
        seg - 1,
        seg,
        seg + 1,
        65_535,
        65_536,
        65_537,
        2 * 65_408 - 18,
        2 * 65_408,
    ]);
    v.extend([1 << 20, (1 << 20) + 1, 16 << 20]);
    v
}

#[test]
fn every_size_round_trips_whole() {
    let c = QpConfig::default();
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    for (i, size) in sizes().into_iter().enumerate() {
        let data = pattern(size, i as u64);
        // Alternate an exact buffer with a larger one.
        let buf_len = if i % 2 == 0 { size } else { size + 100 };
        post(&mut b, 1000 + i as u64, buf_len);
        send(&mut a, to_b, i as u64, &data, true);
        let mut got = [Vec::new(), Vec::new()];
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
            g[0].len() == 1 && g[1].len() == 1
        });
        let [sent, recvd] = got;
        assert_eq!(
            (
                sent[0].wr_id,
                sent[0].status,
                sent[0].opcode,
                sent[0].byte_len
            ),
            (i as u64, WcStatus::Success, WcOpcode::Send, size)
        );
        let wc = &recvd[0];
        assert_eq!(wc.wr_id, 1000 + i as u64);
        assert_eq!(wc.status, WcStatus::Success, "size {size}");
        assert_eq!(wc.byte_len, size);
        assert_eq!(wc.src, a.local_addr());
        assert!(!wc.solicited);
        assert_eq!(wc.buf.as_ref().unwrap().len(), buf_len);
        assert!(wc.data() == &data[..], "size {size}: contents differ");
    }
    let s = a.stats();
    assert_eq!(s.peers, 1);
    assert_eq!(
        s.handshake_failures + s.peer_failures + s.protocol_errors,
        0
    );
    assert_eq!(b.stats().protocol_errors, 0);
    assert_eq!(b.bound_receives(), 0);
}

#[test]
fn prefixed_sends_arrive_as_prefix_then_data() {
    let c = QpConfig::default();
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    for (i, (pre, size)) in [(0, 100), (24, 100), (24, 9000), (7, 200_000)]
        .into_iter()
        .enumerate()
    {
        let prefix = pattern(pre, 99);
        let data = pattern(size, i as u64);
        post(&mut b, 1, pre + size);
        let wr = SendWrOwned {
            wr_id: i as u64,
            opcode: SendOpcode::Send,
            data: data.clone().into(),
            ah: Some(to_b),
            signaled: true,
        };
        a.post_send_prefixed(wr, &prefix).unwrap();
        let mut got = [Vec::new(), Vec::new()];
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
            g[0].len() == 1 && g[1].len() == 1
        });
        assert_eq!(got[0][0].byte_len, pre + size);
        let whole: Vec<u8> = prefix.iter().chain(&data).copied().collect();
        assert!(got[1][0].data() == &whole[..], "prefix {pre}, data {size}");
    }
}

/// Two queue pairs whose session is up: one message went from the first to the second.
fn connected(c: &QpConfig) -> (RdQp, RdQp, AddressHandle) {
    connected_as(c, c)
}

/// Two queue pairs, `a` configured as `ca` and `b` as `cb`, after `a` greeted `b` (HELLO, then
/// HELLO-ACK) with a first message that arrived.
fn connected_as(ca: &QpConfig, cb: &QpConfig) -> (RdQp, RdQp, AddressHandle) {
    let (mut a, mut b) = (rd(ca), rd(cb));
    let to_b = ah_of(&b);
    post(&mut b, 0, 10);
    send(&mut a, to_b, 1, b"first", true);
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[0].len() == 1 && g[1].len() == 1
    });
    assert_eq!(got[1][0].data(), b"first");
    (a, b, to_b)
}

#[test]
fn corked_sends_wait_for_uncork_then_arrive_in_order() {
    // The session is up, so the corked sends are not held by the handshake instead.
    let (mut a, mut b, to_b) = connected(&QpConfig::default());
    let sizes = [100, 60_000, 60_000, 8_000];
    for (i, &size) in sizes.iter().enumerate() {
        post(&mut b, 1 + i as u64, size);
    }
    let read_before = b.stats().datagrams_read;
    a.cork();
    for (i, &size) in sizes.iter().enumerate() {
        send(&mut a, to_b, 1 + i as u64, &pattern(size, i as u64), true);
    }
    // Only the receiver polls: the sender's own poll would send what it holds.
    let until = Instant::now() + Duration::from_millis(20);
    let mut out = Vec::new();
    while Instant::now() < until {
        b.poll_cq(&mut out, 8).unwrap();
    }
    assert!(out.is_empty(), "corked sends arrived: {out:?}");
    assert_eq!(b.stats().datagrams_read, read_before);
    a.uncork();
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[0].len() == sizes.len() && g[1].len() == sizes.len()
    });
    for (i, wc) in got[1].iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (1 + i as u64, WcStatus::Success));
        assert!(
            wc.data() == &pattern(sizes[i], i as u64)[..],
            "message {i} differs"
        );
    }
    let sent: Vec<u64> = got[0].iter().map(|wc| wc.wr_id).collect();
    assert_eq!(sent, [1, 2, 3, 4]);
    // Uncorked, a send leaves when posted again.
    post(&mut b, 9, 10);
    send(&mut a, to_b, 9, b"again", true);
    let mut out = Vec::new();
    let start = Instant::now();
    while out.is_empty() {
        b.poll_cq(&mut out, 8).unwrap();
        assert!(
            start.elapsed() < DEADLINE,
            "an uncorked send did not leave by itself"
        );
    }
    assert_eq!(out[0].data(), b"again");
}

#[test]
fn limits_and_a_missing_address_handle() {
    let c = QpConfig::default();
    let mut a = rd(&c);
    assert_eq!(a.max_message(), RD_MAX_MESSAGE);
    assert_eq!(RD_MAX_MESSAGE, u32::MAX as usize - 18);
    let e = a
        .post_send(SendWr {
            wr_id: 1,
            opcode: SendOpcode::Send,
            data: b"x",
            ah: None,
            signaled: true,
        })
        .unwrap_err();
    assert!(matches!(e, VerbsError::MissingAddressHandle), "{e}");
    assert_eq!(a.send_queue_space(), c.max_send_wr);
}

/// Drives a two-way exchange of `n` messages per direction with sizes from `size_of` (sent
/// with `post_send` and `post_send_owned` in turn), keeping `depth` receives posted and up to `max_send_wr` sends outstanding; checks every
/// message arrives once, intact, in order.
fn exchange(a: &mut RdQp, b: &mut RdQp, n: u64, depth: usize, size_of: fn(u64) -> usize) {
    let max_size = (0..n).map(size_of).max().unwrap();
    let ah = [ah_of(b), ah_of(a)];
    let srcs = [a.local_addr(), b.local_addr()];
    let mut qps = [a, b];
    for qp in qps.iter_mut() {
        for i in 0..depth {
            post(qp, i as u64, max_size);
        }
    }
    let mut next_send = [0u64; 2];
    let mut next_recv = [0u64; 2];
    let mut acked = [0u64; 2];
    let mut out = Vec::with_capacity(64);
    let start = Instant::now();
    while next_recv != [n, n] || acked != [n, n] {
        for side in 0..2 {
            let qp = &mut *qps[side];
            while next_send[side] < n && qp.send_queue_space() > 0 {
                let seq = next_send[side];
                let data = pattern(size_of(seq), seq + side as u64 * 1_000_000);
                let signaled = seq % 3 == 0 || seq == n - 1;
                if seq % 2 == 0 {
                    send(qp, ah[side], seq, &data, signaled);
                } else {
                    // Half the messages hand their buffer over instead of lending it.
                    qp.post_send_owned(SendWrOwned {
                        wr_id: seq,
                        opcode: SendOpcode::Send,
                        data: data.into(),
                        ah: Some(ah[side]),
                        signaled,
                    })
                    .unwrap();
                }
                next_send[side] += 1;
            }
            out.clear();
            qp.poll_cq(&mut out, 64).unwrap();
            for wc in out.drain(..) {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                match wc.opcode {
                    WcOpcode::Send => {
                        // Signaled sends complete in order; unsignaled ones count implicitly.
                        assert!(wc.wr_id >= acked[side]);
                        acked[side] = wc.wr_id + 1;
                    }
                    WcOpcode::Recv => {
                        let seq = next_recv[side];
                        let other = 1 - side;
                        let want = pattern(size_of(seq), seq + other as u64 * 1_000_000);
                        assert_eq!(wc.byte_len, want.len(), "side {side} message {seq}");
                        assert!(wc.data() == &want[..], "side {side} message {seq} differs");
                        assert_eq!(wc.src, srcs[other]);
                        next_recv[side] += 1;
                        let buf = wc.buf.unwrap();
                        qp.post_recv(RecvWr { wr_id: seq, buf }).unwrap();
                    }
                    WcOpcode::RdmaWrite | WcOpcode::RdmaRead => panic!("RD has no RDMA: {wc:?}"),
                }
            }
        }
        assert!(
            start.elapsed() < DEADLINE,
            "stuck: received {next_recv:?}, acked {acked:?}, sent {next_send:?}\n{:?}\n{:?}\n{:?} {:?}",
            qps[0].stats(),
            qps[1].stats(),
            qps[0].bound_receives(),
            qps[1].bound_receives(),
        );
    }
}

fn mixed_size(seq: u64) -> usize {
    match seq % 7 {
        0 => 0,
        1 => 1 + (seq as usize % 100),
        2 => 8_000 + (seq as usize % 400),
        3 => 65_390,
        4 => 200_000 + (seq as usize % 1000),
        5 => 64,
        _ => 3_000,
    }
}

#[test]
fn many_messages_in_flight_both_ways() {
    let c = QpConfig::default();
    let (mut a, mut b) = (rd(&c), rd(&c));
    exchange(&mut a, &mut b, 2000, 64, mixed_size);
    for qp in [&a, &b] {
        let s = qp.stats();
        assert_eq!(s.messages_delivered, 2000, "{s:?}");
        assert_eq!(s.protocol_errors, 0);
        // 256 sends of up to 200 kB outrun the 8 MiB send buffer: the queue pair held them.
        assert!(s.would_block > 0, "{s:?}");
    }
}

/// Datagrams cut for a 1500-byte Ethernet MTU, on loopback (whose own MTU is 64 KiB).
fn ethernet_sized() -> QpConfig {
    let mut c = QpConfig {
        fit_mtu: false,
        ..QpConfig::default()
    };
    c.rd.max_datagram_size = 1500 - 28;
    c
}

#[test]
fn ethernet_sized_datagrams_leave_in_gso_runs_and_come_in_gro_runs() {
    let c = ethernet_sized();
    let (mut a, mut b) = (rd(&c), rd(&c));
    exchange(&mut a, &mut b, 1000, 64, mixed_size);
    for qp in [&a, &b] {
        let s = qp.stats();
        assert_eq!(s.messages_delivered, 1000, "{s:?}");
        assert_eq!((s.protocol_errors, s.send_errors), (0, 0), "{s:?}");
        assert_eq!(s.max_datagram_size, 1472);
        // Linux 4.18 (GSO) and 5.0 (GRO) or later, as everywhere diwarp runs.
        assert!(s.gso_sends > 0 && s.gro_runs > 0, "{s:?}");
        // Most datagrams travelled in runs: far fewer reads than datagrams.
        assert!(s.gro_runs * 4 < s.datagrams_read, "{s:?}");
    }
}

#[test]
fn ethernet_sized_runs_wait_whole_for_receives() {
    // Datagrams of a coalesced run are set aside one by one (copied out of the run).
    let s = data_waits_for_receives(&ethernet_sized(), 40, |seq| 1000 + 37 * seq as usize, 4096);
    assert!(s.gro_runs > 0, "{s:?}");
}

#[test]
fn every_size_round_trips_whole_in_ethernet_sized_datagrams() {
    let c = ethernet_sized();
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    for (i, size) in [
        0,
        1,
        1400,
        1430,
        1431,
        1432,
        1500,
        3000,
        65_536,
        1 << 20,
        3 << 20,
    ]
    .into_iter()
    .enumerate()
    {
        let data = pattern(size, i as u64);
        post(&mut b, 1000 + i as u64, size);
        send(&mut a, to_b, i as u64, &data, true);
        let mut got = [Vec::new(), Vec::new()];
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
            g[0].len() == 1 && g[1].len() == 1
        });
        assert_eq!(got[0][0].status, WcStatus::Success, "size {size}");
        let wc = &got[1][0];
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, size));
        assert!(wc.data() == &data[..], "size {size}: contents differ");
    }
}

fn faulty(seed: u64) -> QpConfig {
    QpConfig {
        faults: Some(FaultConfig {
            drop: 0.10,
            duplicate: 0.05,
            corrupt: 0.02,
            reorder: 0.20,
            seed,
            ..FaultConfig::default()
        }),
        ..QpConfig::default()
    }
}

#[test]
fn faults_lose_corrupt_and_duplicate_nothing() {
    let (mut a, mut b) = (rd(&faulty(1)), rd(&faulty(2)));
    exchange(&mut a, &mut b, 600, 32, mixed_size);
    let (sa, sb) = (a.stats(), b.stats());
    let (fa, fb) = (a.fault_stats().unwrap(), b.fault_stats().unwrap());
    for (s, f) in [(&sa, &fa), (&sb, &fb)] {
        assert!(
            f.dropped > 0 && f.duplicated > 0 && f.corrupted > 0 && f.reordered > 0,
            "{f:?}"
        );
        assert!(s.retransmits > 0, "{s:?}");
        assert_eq!(s.messages_delivered, 600);
        assert_eq!(s.protocol_errors, 0);
    }
    // The peer's CRC caught corrupted datagrams (some hit handshake datagrams instead).
    assert!(
        sa.dropped_checksum + sb.dropped_checksum + sa.dropped_control + sb.dropped_control > 0
    );
    assert!(sa.duplicates + sb.duplicates > 0, "{sa:?} {sb:?}");
    // The fault layer hooks the shared socket: nothing may bypass it.
    assert_eq!((sa.connected_peers, sb.connected_peers), (0, 0));
    eprintln!("a: {sa:?}\n   {fa:?}\nb: {sb:?}\n   {fb:?}");
}

#[test]
fn a_side_without_crc_gets_one_from_a_side_that_asks() {
    // MPA's rule: the CRC is on both ways if either side asks. Corruption in both directions
    // is then caught on both sides, whatever each side's own setting.
    let corrupting = |seed, crc| QpConfig {
        crc,
        faults: Some(FaultConfig {
            corrupt: 0.05,
            seed,
            ..FaultConfig::default()
        }),
        ..QpConfig::default()
    };
    let (mut a, mut b) = (rd(&corrupting(3, true)), rd(&corrupting(4, false)));
    exchange(&mut a, &mut b, 600, 32, mixed_size);
    let (sa, sb) = (a.stats(), b.stats());
    for s in [&sa, &sb] {
        assert_eq!(s.messages_delivered, 600);
        assert!(s.dropped_checksum > 0, "{s:?}");
    }
}

#[test]
fn peers_on_one_host_skip_the_crc_unless_a_side_asks_for_it_there() {
    let with = |crc_same_host| QpConfig {
        crc_same_host,
        ..QpConfig::default()
    };
    // (a's setting, b's setting) → whether their session carries the CRC.
    for (sa, sb, want) in [
        (false, false, 0),
        (true, false, 1),
        (false, true, 1),
        (true, true, 1),
    ] {
        let (mut a, mut b) = (rd(&with(sa)), rd(&with(sb)));
        exchange(&mut a, &mut b, 50, 8, mixed_size);
        for qp in [&a, &b] {
            let s = qp.stats();
            assert_eq!(s.messages_delivered, 50);
            assert_eq!((s.peers, s.crc_peers), (1, want), "{sa} {sb}: {s:?}");
        }
    }
    // One side greets, the other answers (HELLO, then HELLO-ACK), instead of both at once.
    for (sa, sb, want) in [(false, false, 0), (true, false, 1), (false, true, 1)] {
        let (a, b, _) = connected_as(&with(sa), &with(sb));
        for qp in [&a, &b] {
            assert_eq!(qp.stats().crc_peers, want, "{sa} {sb}");
        }
    }
    // Without a handshake the exemption cannot be agreed on: both ends follow `crc` alone,
    // even when configured differently.
    let (mut a, mut b) = (rd(&with(false)), rd(&with(true)));
    pre_seed(&mut a, &mut b);
    exchange(&mut a, &mut b, 50, 8, mixed_size);
    assert_eq!(a.stats().crc_peers, 1);
    assert_eq!(b.stats().crc_peers, 1);
    // Faults stand for a wire: a queue pair with them asks whatever its setting.
    let faulty = QpConfig {
        crc_same_host: false,
        faults: Some(FaultConfig {
            duplicate: 0.01,
            seed: 5,
            ..FaultConfig::default()
        }),
        ..QpConfig::default()
    };
    let (mut a, mut b) = (rd(&faulty), rd(&with(false)));
    exchange(&mut a, &mut b, 50, 8, mixed_size);
    assert_eq!(a.stats().crc_peers, 1);
    assert_eq!(b.stats().crc_peers, 1);
}

fn short_limit() -> QpConfig {
    QpConfig {
        rd: RdConfig {
            idle_timeout: Duration::from_millis(300),
            ..RdConfig::default()
        },
        ..QpConfig::default()
    }
}

#[test]
fn a_peer_that_never_answers_fails_the_send() {
    let c = short_limit();
    let mut a = rd(&c);
    // A socket that never reads: the handshake goes unanswered.
    let silent = std::net::UdpSocket::bind(localhost()).unwrap();
    let to = AddressHandle::new(silent.local_addr().unwrap(), 5);
    let start = Instant::now();
    send(&mut a, to, 1, b"hello?", false);
    send(&mut a, to, 2, &pattern(100_000, 2), true);
    let mut got = [Vec::new()];
    pump(&mut [&mut a], &mut got, Duration::from_secs(5), |g| {
        g[0].len() == 2
    });
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(800), "{elapsed:?}");
    // Errors complete even when unsignaled, in order.
    let ends: Vec<_> = got[0]
        .iter()
        .map(|w| (w.wr_id, w.status, w.byte_len))
        .collect();
    assert_eq!(
        ends,
        [
            (1, WcStatus::TransportError, 6),
            (2, WcStatus::TransportError, 100_000)
        ]
    );
    let s = a.stats();
    assert_eq!(s.handshake_failures, 1);
    assert!(s.control_sent >= 4, "HELLO resent with backoff: {s:?}");
    assert_eq!(s.peers, 0);
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(a.next_deadline(), None);
}

#[test]
fn a_peer_that_vanishes_fails_pending_sends() {
    let c = short_limit();
    let (mut a, b, to_b) = connected(&c);
    drop(b);
    let start = Instant::now();
    send(&mut a, to_b, 2, &pattern(300_000, 9), true);
    send(&mut a, to_b, 3, b"third", false);
    assert!(a.next_deadline().is_some());
    let mut got = [Vec::new()];
    pump(&mut [&mut a], &mut got, Duration::from_secs(5), |g| {
        g[0].len() == 2
    });
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_millis(900), "{elapsed:?}");
    let ends: Vec<_> = got[0].iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        ends,
        [(2, WcStatus::TransportError), (3, WcStatus::TransportError)]
    );
    assert_eq!(a.stats().peer_failures, 1);
    // The queue pair still works: a new peer gets a new session.
    let mut c2 = rd(&c);
    post(&mut c2, 7, 4);
    send(&mut a, ah_of(&c2), 4, b"next", true);
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut c2], &mut got, DEADLINE, |g| {
        g[0].len() == 1 && g[1].len() == 1
    });
    assert_eq!(got[1][0].data(), b"next");
}

#[test]
fn a_receive_too_small_is_a_length_error_and_the_stream_goes_on() {
    let c = QpConfig::default();
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    // Inline, then segmented, each followed by a message that fits.
    for (i, (small, big)) in [(100usize, 1000usize), (100_000, 300_000)]
        .into_iter()
        .enumerate()
    {
        let i = i as u64 * 10;
        post(&mut b, i, small);
        post(&mut b, i + 1, big);
        send(&mut a, to_b, i, &pattern(big, i), true);
        send(&mut a, to_b, i + 1, &pattern(big, i + 1), true);
        let mut got = [Vec::new(), Vec::new()];
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
            g[0].len() == 2 && g[1].len() == 2
        });
        let r = &got[1];
        assert_eq!(
            (r[0].wr_id, r[0].status, r[0].byte_len),
            (i, WcStatus::LocalLengthError, big)
        );
        assert!(r[0].data().is_empty());
        let first = r[0].buf.as_ref().unwrap();
        assert_eq!(first.len(), small, "nothing written past the buffer");
        assert!(first.iter().all(|&x| x == 0xEE), "nothing written at all");
        assert_eq!((r[1].wr_id, r[1].status), (i + 1, WcStatus::Success));
        assert!(r[1].data() == &pattern(big, i + 1)[..]);
        assert!(got[0].iter().all(|w| w.status == WcStatus::Success));
    }
}

#[test]
fn two_senders_to_one_queue_pair() {
    let r = two_senders_to(&QpConfig::default());
    // Each peer's datagrams (here ACKs) left from a socket connected to it.
    assert_eq!(r.connected_peers, 2, "{r:?}");
    assert!(r.connected_sends > 0, "{r:?}");
}

#[test]
fn peers_past_the_connected_socket_cap_share_the_queue_pairs_socket() {
    let r = two_senders_to(&QpConfig {
        connected_peers: 1,
        ..QpConfig::default()
    });
    assert_eq!(r.connected_peers, 1, "{r:?}");
    let r = two_senders_to(&QpConfig {
        connected_peers: 0,
        ..QpConfig::default()
    });
    assert_eq!(r.connected_peers, 0, "{r:?}");
    assert_eq!(r.connected_sends, 0, "{r:?}");
}

/// Two queue pairs with default settings send 300 messages each to one configured by `rc`,
/// which checks every byte and that each message names its sender by the address of the
/// sender's queue pair, whatever socket its datagrams left from. Returns the receiver's
/// counters.
fn two_senders_to(rc: &QpConfig) -> RdStats {
    let c = QpConfig::default();
    let (mut a, mut b, mut r) = (rd(&c), rd(&c), rd(rc));
    let to_r = ah_of(&r);
    let n = 300u64;
    let size = |seq: u64| mixed_size(seq * 3);
    for i in 0..64 {
        post(&mut r, i, 300_000);
    }
    let (mut sent, mut got_from) = ([0u64; 2], [0u64; 2]);
    let srcs = [a.local_addr(), b.local_addr()];
    let start = Instant::now();
    let mut out = Vec::new();
    while got_from != [n, n] {
        for (k, qp) in [&mut a, &mut b].into_iter().enumerate() {
            if sent[k] < n && qp.send_queue_space() > 0 {
                let seq = sent[k];
                send(
                    qp,
                    to_r,
                    seq,
                    &pattern(size(seq), seq + 77 * k as u64),
                    false,
                );
                sent[k] += 1;
            }
            out.clear();
            qp.poll_cq(&mut out, 16).unwrap();
            assert!(out.iter().all(|w| w.status == WcStatus::Success), "{out:?}");
        }
        out.clear();
        r.poll_cq(&mut out, 64).unwrap();
        for wc in out.drain(..) {
            assert_eq!(wc.status, WcStatus::Success);
            let k = srcs
                .iter()
                .position(|s| *s == wc.src)
                .expect("known sender");
            let seq = got_from[k];
            assert!(
                wc.data() == &pattern(size(seq), seq + 77 * k as u64)[..],
                "sender {k} message {seq}"
            );
            got_from[k] += 1;
            r.post_recv(RecvWr {
                wr_id: 0,
                buf: wc.buf.unwrap(),
            })
            .unwrap();
        }
        assert!(start.elapsed() < DEADLINE, "stuck at {got_from:?}");
    }
    for qp in [&a, &b] {
        let s = qp.stats();
        assert_eq!(s.connected_peers, 1);
        // Their data left from it.
        assert!(s.connected_sends >= n, "{s:?}");
    }
    let s = r.stats();
    assert_eq!((s.peers, s.send_errors), (2, 0), "{s:?}");
    s
}

/// Sends `n` messages to a side with no receive posted and checks that nothing completes
/// there (and not every send: a segmented message has nowhere to go, so it cannot be
/// acknowledged), then posts receives of `room` bytes and checks that every message arrives
/// once, intact, in order. Returns the receiver's counters.
fn data_waits_for_receives(c: &QpConfig, n: u64, size: fn(u64) -> usize, room: usize) -> RdStats {
    let (mut a, mut b) = (rd(c), rd(c));
    let to_b = ah_of(&b);
    for seq in 0..n {
        send(&mut a, to_b, seq, &pattern(size(seq), seq), true);
    }
    let mut got = [Vec::new(), Vec::new()];
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |_| true);
    }
    assert!(got[1].is_empty());
    let acked = got[0].len() as u64;
    assert!(acked < n, "{acked} sends completed with no receive posted");
    let s = b.stats();
    assert!(s.parked > 0, "{s:?}");
    for i in 0..n {
        post(&mut b, 1000 + i, room);
    }
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[0].len() as u64 == n && g[1].len() as u64 == n
    });
    for (seq, wc) in got[1].iter().enumerate() {
        let seq = seq as u64;
        assert_eq!((wc.wr_id, wc.status), (1000 + seq, WcStatus::Success));
        assert!(wc.data() == &pattern(size(seq), seq)[..], "message {seq}");
    }
    for (seq, wc) in got[0].iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (seq as u64, WcStatus::Success));
    }
    assert_eq!(b.bound_receives(), 0);
    b.stats()
}

#[test]
fn without_posted_receives_data_waits_and_nothing_is_lost() {
    let size = |seq: u64| {
        if seq % 5 == 4 {
            150_000
        } else {
            10 + seq as usize
        }
    };
    let s = data_waits_for_receives(&QpConfig::default(), 60, size, 150_000);
    // Small messages were copied aside, not parked.
    assert!(s.stashed > 0, "{s:?}");
}

/// Gives `a` and `b` a session without a handshake; returns `a`'s ids.
fn pre_seed(a: &mut RdQp, b: &mut RdQp) -> SessionIds {
    let ids = SessionIds {
        local_id: 0x1111,
        local_epoch: 7,
        remote_id: 0x2222,
        remote_epoch: 9,
    };
    a.set_peer(ah_of(b), ids).unwrap();
    b.set_peer(ah_of(a), ids.mirrored()).unwrap();
    ids
}

#[test]
fn pre_seeded_ids_skip_the_handshake() {
    // Nothing resent before the ACK, however late a loaded machine runs the receiver: a copy
    // would make the RTT sample ambiguous, and none would be taken (Karn).
    let c = QpConfig {
        rd: RdConfig {
            initial_rto: Duration::from_secs(5),
            min_pto: Duration::ZERO,
            ..RdConfig::default()
        },
        ..QpConfig::default()
    };
    let (mut a, mut b) = (rd(&c), rd(&c));
    let ids = pre_seed(&mut a, &mut b);
    assert_eq!(a.peer_ids(b.local_addr().unwrap()), Some(ids));
    post(&mut b, 1, 64);
    a.post_send(SendWr {
        wr_id: 9,
        opcode: SendOpcode::SendSolicited,
        data: b"pre-seeded",
        ah: Some(ah_of(&b)),
        signaled: true,
    })
    .unwrap();
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[0].len() == 1 && g[1].len() == 1
    });
    assert_eq!(got[1][0].data(), b"pre-seeded");
    assert!(got[1][0].solicited);
    for qp in [&a, &b] {
        let s = qp.stats();
        assert_eq!((s.control_sent, s.control_received), (0, 0), "{s:?}");
    }
    let (stats, rtt) = a.peer_stats(b.local_addr().unwrap()).unwrap();
    assert_eq!(stats.messages_acked, 1);
    assert!(rtt.srtt.is_some());
}

#[test]
fn handshake_gives_both_sides_mirrored_ids() {
    let c = QpConfig::default();
    let (mut a, mut b) = (rd(&c), rd(&c));
    // Both start at once: each says HELLO to the other.
    post(&mut a, 1, 8);
    post(&mut b, 1, 8);
    send(&mut a, ah_of(&b), 1, b"a->b", true);
    send(&mut b, ah_of(&a), 1, b"b->a", true);
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[0].len() == 2 && g[1].len() == 2
    });
    let ia = a.peer_ids(b.local_addr().unwrap()).unwrap();
    let ib = b.peer_ids(a.local_addr().unwrap()).unwrap();
    assert_eq!(ia, ib.mirrored());
    assert_ne!(ia.local_epoch, ia.remote_epoch);
}

#[test]
fn deadlines_follow_outstanding_work() {
    let c = QpConfig::default();
    let (mut a, mut b) = (rd(&c), rd(&c));
    assert_eq!(a.next_deadline(), None);
    post(&mut b, 1, 8);
    send(&mut a, ah_of(&b), 1, b"tick", true);
    let d = a.next_deadline().expect("a HELLO to resend");
    assert!(d <= Instant::now() + Duration::from_millis(2));
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[0].len() == 1 && g[1].len() == 1
    });
    // Acknowledged and idle: what is left is a delayed ACK, then at most the stale failure
    // timer of the busy period, which the engine drops at no cost when it comes, and the
    // freeze of the idle sessions `dormant_after` after they were last heard from (before
    // `start`).
    let dormant_after = c.rd.dormant_after.expect("on by default");
    let start = Instant::now();
    let settled = |a: &RdQp, b: &RdQp, freeze: Option<Instant>| {
        let soon = Instant::now() + Duration::from_secs(5);
        [a.next_deadline(), b.next_deadline()]
            .iter()
            .flatten()
            .all(|&d| d > soon || freeze.is_some_and(|f| d <= f))
    };
    loop {
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |_| true);
        if settled(&a, &b, Some(start + dormant_after)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "timers never settle"
        );
    }
    // Once frozen, nothing is left to wake for.
    std::thread::sleep(
        (start + dormant_after + Duration::from_millis(20))
            .saturating_duration_since(Instant::now()),
    );
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |_| true);
    assert!(
        settled(&a, &b, None),
        "{:?}",
        [a.next_deadline(), b.next_deadline()]
    );
    assert_eq!((a.stats().dormant_peers, b.stats().dormant_peers), (1, 1));
}

#[test]
fn queue_full_beyond_max_send_wr_and_nothing_dropped() {
    let c = QpConfig {
        max_send_wr: 4,
        ..QpConfig::default()
    };
    let (mut a, mut b) = (rd(&c), rd(&c));
    let to_b = ah_of(&b);
    // Four sends wait for the handshake; the fifth does not fit.
    for i in 0..4 {
        send(&mut a, to_b, i, &pattern(1 << 20, i), false);
    }
    let e = a
        .post_send(SendWr {
            wr_id: 5,
            opcode: SendOpcode::Send,
            data: b"no room",
            ah: Some(to_b),
            signaled: true,
        })
        .unwrap_err();
    assert!(matches!(e, VerbsError::QueueFull), "{e}");
    let mut pending: VecDeque<u64> = (0..4).collect();
    for i in 0..4 {
        post(&mut b, i, 1 << 20);
    }
    let mut got = [Vec::new(), Vec::new()];
    pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |g| {
        g[1].len() == 4
    });
    for wc in &got[1] {
        let i = pending.pop_front().unwrap();
        assert!(wc.data() == &pattern(1 << 20, i)[..]);
    }
    let start = Instant::now();
    while a.send_queue_space() < 4 {
        pump(&mut [&mut a, &mut b], &mut got, DEADLINE, |_| true);
        assert!(start.elapsed() < DEADLINE);
    }
    assert!(got[0].is_empty(), "unsignaled sends complete silently");
}

/// Records what receiver mode hands over; messages whose first byte is `b'T'` are taken early
/// (as order-independent), whole or segment by segment, all others must come in order.
#[derive(Default)]
struct Recorder {
    early: Vec<(u64, bool)>,
    in_order: Vec<u64>,
    /// Messages taken segment by segment: being filled (bytes, bytes placed), and done.
    placing: std::collections::HashMap<u64, (Vec<u8>, usize)>,
    placed: Vec<u64>,
    contents_ok: bool,
}

impl Recorder {
    fn check(&mut self, payload: &[u8]) -> u64 {
        let seq = u64::from_le_bytes(payload[1..9].try_into().unwrap());
        let want = tagged_payload(seq);
        self.contents_ok &= payload == &want[..];
        seq
    }
}

impl RdReceiver for Recorder {
    fn early(&mut self, _src: SocketAddr, payload: &[u8], in_order: bool) -> bool {
        if payload[0] != b'T' {
            return false;
        }
        let seq = self.check(payload);
        self.early.push((seq, in_order));
        true
    }

    fn message(&mut self, _src: SocketAddr, payload: &[u8]) {
        let seq = self.check(payload);
        self.in_order.push(seq);
    }

    fn segment(&mut self, _src: SocketAddr, head: &[u8], offset: usize, bytes: &[u8]) -> bool {
        if head[0] != b'T' {
            assert_eq!(offset, 0, "a refused message is not offered again");
            return false;
        }
        let seq = u64::from_le_bytes(head[1..9].try_into().unwrap());
        let first = !self.placing.contains_key(&seq);
        self.contents_ok &= first == (offset == 0);
        let (buf, got) = self.placing.entry(seq).or_insert_with(|| {
            let len = tagged_payload(seq).len();
            (vec![0; len], 0)
        });
        match buf.get_mut(offset..offset + bytes.len()) {
            Some(dst) => dst.copy_from_slice(bytes),
            None => self.contents_ok = false,
        }
        // Every call names the message by the head its first segment brought.
        self.contents_ok &= buf.starts_with(head);
        *got += bytes.len();
        if *got >= buf.len() {
            self.contents_ok &= *got == buf.len() && *buf == tagged_payload(seq);
            self.placing.remove(&seq);
            self.placed.push(seq);
        }
        true
    }
}

/// Message `seq`: a kind byte (every third is order-independent, `T`), the sequence number,
/// then a pattern; sizes from one byte past the header to several datagrams.
fn tagged_payload(seq: u64) -> Vec<u8> {
    let len = 9 + mixed_size(seq);
    let mut v = pattern(len, seq);
    v[0] = if seq.is_multiple_of(3) { b'T' } else { b'O' };
    v[1..9].copy_from_slice(&seq.to_le_bytes());
    v
}

#[test]
fn receiver_mode_lends_messages_in_order_and_takes_early_ones() {
    let small = |mut c: QpConfig| {
        c.rd.max_datagram_size = 1472;
        c
    };
    let configs = [
        QpConfig::default(),
        faulty(5),
        small(QpConfig::default()),
        small(faulty(6)),
    ];
    for (k, config) in configs.into_iter().enumerate() {
        let (mut a, mut b) = (rd(&config), rd(&config));
        let to_b = ah_of(&b);
        let n = 400u64;
        let mut rec = Recorder {
            contents_ok: true,
            ..Recorder::default()
        };
        let mut next = 0u64;
        let mut acked = 0u64;
        let mut out = Vec::new();
        let start = Instant::now();
        while acked < n || rec.early.len() + rec.in_order.len() + rec.placed.len() < n as usize {
            while next < n && next < acked + 32 {
                send(&mut a, to_b, next, &tagged_payload(next), true);
                next += 1;
            }
            out.clear();
            a.poll_cq(&mut out, 64).unwrap();
            acked += out.iter().filter(|w| w.status == WcStatus::Success).count() as u64;
            assert!(out.iter().all(|w| w.status == WcStatus::Success));
            out.clear();
            b.poll_cq_with(&mut rec, &mut out, 64).unwrap();
            assert!(out.is_empty(), "receiver mode completes no receives");
            assert!(start.elapsed() < DEADLINE, "config {k}: stuck at {acked} acked, early {} in order {} placed {} placing {:?} {:?}", rec.early.len(), rec.in_order.len(), rec.placed.len(), rec.placing.iter().map(|(s, (b, g))| (*s, b.len(), *g)).collect::<Vec<_>>(), (a.stats(), b.stats()));
        }
        assert!(rec.contents_ok, "a message differs");
        assert!(
            rec.in_order.windows(2).all(|w| w[0] < w[1]),
            "in-order messages keep the send order"
        );
        let mut all: Vec<u64> = rec.early.iter().map(|e| e.0).collect();
        all.extend(&rec.placed);
        assert!(
            all.iter().all(|s| s % 3 == 0),
            "only T messages are taken early"
        );
        // At 1472-byte datagrams every whole message is inline: delivered in turn, not placed.
        assert_eq!(
            !rec.early.is_empty(),
            k < 2,
            "whole T messages offered early"
        );
        assert!(!rec.placed.is_empty(), "segmented T messages are placed");
        assert!(rec.placing.is_empty(), "no message is left half placed");
        if k % 2 == 1 {
            // A message whose first segment came late goes through reassembly, in its turn.
            assert!(
                rec.in_order.iter().any(|s| s % 3 == 0),
                "faults send some segmented T messages the long way"
            );
        }
        all.extend(&rec.in_order);
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "each message exactly once");
        assert_eq!(b.stats().protocol_errors, 0);
    }
}

//! Dormant sessions of an RD queue pair, with forged peers (see `verbs_rd_forged.rs`): after
//! `dormant_after` without traffic the engine freezes each idle session into a few words the
//! peer's entry keeps, and whatever needs the session (a send, a datagram for it) resumes it
//! where it stood, unseen by the peer.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::*;
use iwarp::wire::datagram::qn_for;
use iwarp::wire::ddp::UNTAGGED_HEADER_LEN;
use iwarp::wire::rdmap::{Opcode, SegmentRepr};
use reliability::header::{Kind, Packet};
use reliability::{Delivery, MsgId, Placement, Session, Sink};

const FORGED_QPN: u32 = 7;
const DORMANT_AFTER: Duration = Duration::from_millis(50);
/// Past both the dormancy and the RD layer's idle grace (100 ms).
const QUIET: Duration = Duration::from_millis(150);

/// Forged peer `k`'s address: 10.x.y.z, never this host.
fn addr(k: u32) -> SocketAddr {
    SocketAddr::from(([10, (k >> 16) as u8, (k >> 8) as u8, k as u8], 5000))
}

fn ah(k: u32) -> AddressHandle {
    AddressHandle::new(addr(k), FORGED_QPN)
}

/// An RD Send to queue pair `qpn` from forged peer `k`: the whole message and its payload.
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

fn config(peers: usize) -> QpConfig {
    let mut c = QpConfig {
        crc: false,
        max_recv_wr: peers,
        ..QpConfig::default()
    };
    c.rd.dormant_after = Some(DORMANT_AFTER);
    c
}

/// Messages a forged peer's session delivered, whole.
#[derive(Default)]
struct Got(Vec<(MsgId, Vec<u8>)>);

impl Sink for Got {
    fn place(&mut self, _: Placement<'_>) {}
    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        if let Delivery::Inline(b) = d {
            self.0.push((msg, b.to_vec()));
        }
    }
}

/// The queue pair's receiver in receiver mode.
#[derive(Default)]
struct Receiver(Vec<(SocketAddr, Vec<u8>)>);

impl RdReceiver for Receiver {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        false
    }
    fn message(&mut self, src: SocketAddr, payload: &[u8]) {
        self.0.push((src, payload.to_vec()));
    }
}

/// The forged side: one session per peer, and what each received from the queue pair.
struct Forged {
    sessions: Vec<Session>,
    got: Vec<Got>,
}

impl Forged {
    /// Gives each forged peer what the queue pair sent it (HELLO-ACKs are skipped).
    fn take_from(&mut self, qp: &mut RdQp) {
        let now = Instant::now();
        for (dst, bytes) in qp.take_sent() {
            if RdHello::parse(&bytes).is_some() {
                continue;
            }
            let std::net::IpAddr::V4(ip) = dst.ip() else {
                panic!("forged peers are IPv4: {dst}")
            };
            let k = (u32::from(ip) & 0x00ff_ffff) as usize;
            let _ = self.sessions[k].handle_datagram(now, &bytes, &mut self.got[k]);
        }
    }

    /// Peer `k`'s datagrams, in order, for what it has queued.
    fn transmit(&mut self, k: u32) -> Vec<Vec<u8>> {
        let now = Instant::now();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while self.sessions[k as usize]
            .poll_transmit(now, &mut buf)
            .is_some()
        {
            out.push(buf.clone());
        }
        out
    }

    /// Peer `k`'s ACK, once its delay has passed.
    fn ack(&mut self, k: u32) -> Vec<Vec<u8>> {
        let start = Instant::now();
        loop {
            let s = &mut self.sessions[k as usize];
            let now = Instant::now();
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
            let out = self.transmit(k);
            if !out.is_empty() {
                return out;
            }
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "peer {k} owes no ACK"
            );
        }
    }
}

/// `peers` forged peers say HELLO (through `inject`) and get their session ids back.
fn handshake(
    qp: &mut RdQp,
    peers: u32,
    mut inject: impl FnMut(&mut RdQp, &[u8], SocketAddr),
) -> Forged {
    let ours = qp.qpn();
    for k in 0..peers {
        let hello = RdHello {
            kind: RdHelloKind::Hello,
            checksum: false,
            dst_qpn: ours,
            src_qpn: FORGED_QPN,
            id: 1000 + k,
            epoch: 0xE0 + k,
            echo: (0, 0),
        };
        inject(qp, &hello.emit(), addr(k));
    }
    let mut acks = HashMap::new();
    for (_, bytes) in qp.take_sent() {
        let h = RdHello::parse(&bytes).expect("only HELLO-ACKs so far");
        acks.insert(h.echo.0 - 1000, (h.id, h.epoch));
    }
    assert_eq!(acks.len(), peers as usize);
    let rd = Arc::new(RdConfig {
        checksum: false,
        ..RdConfig::default()
    });
    let now = Instant::now();
    let sessions = (0..peers)
        .map(|k| {
            let (id, epoch) = acks[&k];
            let ids = SessionIds {
                local_id: 1000 + k,
                local_epoch: 0xE0 + k,
                remote_id: id,
                remote_epoch: epoch,
            };
            Session::new(Arc::clone(&rd), ids, now).unwrap()
        })
        .collect();
    Forged {
        sessions,
        got: (0..peers).map(|_| Got::default()).collect(),
    }
}

fn post_recvs(qp: &mut RdQp, n: u32, tag: u64) {
    for k in 0..n {
        qp.post_recv(RecvWr {
            wr_id: tag << 32 | u64::from(k),
            buf: vec![0; 64],
        })
        .unwrap();
    }
}

/// Polls until `n` completions are in, each a success.
fn receive(qp: &mut RdQp, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < n {
        qp.poll_cq(&mut got, 1024).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} of {n}",
            got.len()
        );
    }
    assert!(got.iter().all(|wc| wc.status == WcStatus::Success));
    got
}

/// 4,096 forged peers make first contact and send a message; quiet a while, every one is
/// dormant: no engine session, no active part, a small entry each. Then a few send again
/// (delivered once, in order), one repeats its first datagram (an ACK back, no second
/// delivery), and a message to a dormant peer leaves at once with the numbers that follow.
#[test]
fn forged_peers_go_dormant_and_wake_where_they_stood() {
    const PEERS: u32 = 4096;
    let mut qp = RdQp::create(config(PEERS as usize)).unwrap();
    qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    qp.null_link();
    let ours = qp.qpn();
    post_recvs(&mut qp, PEERS, 0);
    let mut f = handshake(&mut qp, PEERS, |qp, d, src| qp.inject_datagram(d, src));

    let now = Instant::now();
    let mut first = Vec::new();
    let mut want = HashMap::new();
    for k in 0..PEERS {
        let (msg, payload) = message(k, ours, 1);
        f.sessions[k as usize].send(now, msg).unwrap();
        let dgrams = f.transmit(k);
        assert_eq!(dgrams.len(), 1);
        qp.inject_datagram(&dgrams[0], addr(k));
        first.push(dgrams[0].clone());
        want.insert(addr(k), payload);
    }
    for wc in receive(&mut qp, PEERS as usize) {
        assert_eq!(Some(wc.data()), want.remove(&wc.src.unwrap()).as_deref());
    }
    // Our side talks to peer 200 too before the quiet: its session then has numbers of its
    // own to resume from.
    let before = b"before the quiet";
    qp.post_send(SendWr {
        wr_id: 1,
        opcode: SendOpcode::Send,
        data: before,
        ah: Some(ah(200)),
        signaled: true,
    })
    .unwrap();
    qp.flush_acks();
    f.take_from(&mut qp);
    assert_eq!(f.got[200].0.len(), 1);
    for d in f.ack(200) {
        qp.inject_datagram(&d, addr(200));
    }
    let acked = receive_sends(&mut qp, 1);
    assert_eq!(acked, [1]);
    qp.flush_acks();
    f.take_from(&mut qp);

    std::thread::sleep(QUIET);
    qp.run_timers();
    let s = qp.stats();
    let m = qp.memory();
    assert_eq!(
        (s.dormant_peers, s.sessions_open, s.peers),
        (PEERS as usize, 0, PEERS as usize),
        "{s:?}"
    );
    assert_eq!(s.sessions_frozen, u64::from(PEERS));
    assert_eq!(m.active_peers, 0, "{m:?}");
    let rd_per_peer = m.peer_entries / PEERS as usize;
    let engine_per_peer = (m.peer_state - m.peer_entries) / PEERS as usize;
    println!(
        "per dormant peer: {rd_per_peer} bytes in the RD layer (session words included), \
         {engine_per_peer} in the engine's session map, {} in its tables",
        m.engine / PEERS as usize
    );
    assert!(
        rd_per_peer <= 110,
        "{rd_per_peer} bytes per idle peer: {m:?}"
    );
    // The counters of the frozen sessions stay in the totals.
    assert_eq!(
        (s.messages_delivered, s.messages_acked),
        (u64::from(PEERS), 1),
        "{s:?}"
    );

    // 16 peers send again: each message is delivered once, the next one expected.
    let now = Instant::now();
    post_recvs(&mut qp, 16, 1);
    for k in 0..16 {
        let (msg, payload) = message(k, ours, 2);
        f.sessions[k as usize].send(now, msg).unwrap();
        for d in f.transmit(k) {
            qp.inject_datagram(&d, addr(k));
        }
        want.insert(addr(k), payload);
    }
    for wc in receive(&mut qp, 16) {
        assert_eq!(Some(wc.data()), want.remove(&wc.src.unwrap()).as_deref());
    }
    assert!(want.is_empty());
    let s = qp.stats();
    assert_eq!((s.sessions_resumed, s.duplicates), (16, 0), "{s:?}");
    assert_eq!(s.messages_delivered, u64::from(PEERS) + 16);
    qp.flush_acks();
    f.take_from(&mut qp);

    // Peer 100, dormant still, repeats its first datagram: the resumed session knows it as
    // delivered and answers with an ACK covering it.
    qp.take_sent();
    qp.inject_datagram(&first[100], addr(100));
    qp.flush_acks();
    let sent = qp.take_sent();
    assert!(!sent.is_empty());
    let copy = Packet::new_checked(&first[100][..]).unwrap();
    for (dst, bytes) in &sent {
        assert_eq!(*dst, addr(100));
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.kind(), Ok(Kind::Ack));
        assert_eq!(p.session(), 1100, "to peer 100's session");
        assert_eq!(
            p.ack().0,
            copy.seq().0.wrapping_add(1),
            "everything up to the copy"
        );
    }
    let mut none = Vec::new();
    qp.poll_cq(&mut none, 16).unwrap();
    assert!(none.is_empty(), "no second delivery");
    let s = qp.stats();
    assert_eq!(
        (s.duplicates, s.messages_delivered),
        (1, u64::from(PEERS) + 16)
    );

    // A message to peer 200, dormant: no HELLO, one data datagram at once, whose numbers
    // follow the message sent before the quiet (which the peer would drop as a duplicate
    // otherwise).
    let after = b"after the quiet";
    qp.post_send(SendWr {
        wr_id: 2,
        opcode: SendOpcode::Send,
        data: after,
        ah: Some(ah(200)),
        signaled: true,
    })
    .unwrap();
    let sent = qp.take_sent();
    assert_eq!(sent.len(), 1, "one datagram, at once");
    let (dst, bytes) = &sent[0];
    assert_eq!(*dst, addr(200));
    assert!(RdHello::parse(bytes).is_none(), "no handshake");
    let p = Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(p.kind(), Ok(Kind::Single));
    assert_eq!((p.seq().0, p.msg()), (1, MsgId(1)), "next after the first");
    let got = &mut f.got[200];
    let _ = f.sessions[200].handle_datagram(Instant::now(), bytes, got);
    assert_eq!(got.0.len(), 2);
    assert_eq!(got.0[1].0, MsgId(1));
    assert_eq!(&got.0[1].1[UNTAGGED_HEADER_LEN..], after);
    assert_eq!(f.sessions[200].stats().duplicates, 0);
    assert_eq!(qp.stats().control_sent, u64::from(PEERS), "HELLO-ACKs only");
}

/// Completes sends, returning their wr_ids.
fn receive_sends(qp: &mut RdQp, n: usize) -> Vec<u64> {
    let got = receive(qp, n);
    got.iter()
        .map(|wc| {
            assert_eq!(wc.opcode, WcOpcode::Send);
            wc.wr_id
        })
        .collect()
}

/// Receiver mode (the channel's data path): injected datagrams go to the receiver as a read
/// one does, sessions go dormant without traffic (`run_timers`), and wake for a new message or
/// a repeated old one.
#[test]
fn receiver_mode_peers_sleep_and_wake() {
    const PEERS: u32 = 64;
    let mut qp = RdQp::create(config(1)).unwrap();
    qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    qp.null_link();
    let ours = qp.qpn();
    let mut recv = Receiver::default();
    let mut f = handshake(&mut qp, PEERS, |qp, d, src| {
        qp.inject_datagram_with(&mut recv, d, src)
    });
    let now = Instant::now();
    let mut first = Vec::new();
    for k in 0..PEERS {
        let (msg, _) = message(k, ours, 1);
        f.sessions[k as usize].send(now, msg).unwrap();
        let d = f.transmit(k).pop().unwrap();
        qp.inject_datagram_with(&mut recv, &d, addr(k));
        first.push(d);
    }
    assert_eq!(recv.0.len(), PEERS as usize);
    for (src, payload) in &recv.0 {
        let k = (0..PEERS).find(|&k| addr(k) == *src).unwrap();
        assert_eq!(*payload, message(k, ours, 1).1);
    }
    qp.flush_acks();
    f.take_from(&mut qp);

    std::thread::sleep(QUIET);
    qp.run_timers();
    let s = qp.stats();
    assert_eq!(
        (s.dormant_peers, s.sessions_open),
        (PEERS as usize, 0),
        "{s:?}"
    );
    assert_eq!(qp.memory().active_peers, 0);

    // A new message from peer 3, then a copy of peer 5's first: one delivery, one ACK.
    recv.0.clear();
    let (msg, payload) = message(3, ours, 2);
    f.sessions[3].send(Instant::now(), msg).unwrap();
    for d in f.transmit(3) {
        qp.inject_datagram_with(&mut recv, &d, addr(3));
    }
    assert_eq!(recv.0, [(addr(3), payload)]);
    qp.take_sent();
    qp.inject_datagram_with(&mut recv, &first[5], addr(5));
    qp.flush_acks();
    assert_eq!(recv.0.len(), 1, "no second delivery");
    let sent = qp.take_sent();
    let to5: Vec<_> = sent.iter().filter(|(dst, _)| *dst == addr(5)).collect();
    assert!(!to5.is_empty(), "an ACK for the copy: {sent:?}");
    for (_, bytes) in to5 {
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.kind(), Ok(Kind::Ack));
        assert_eq!(p.ack().0, 1);
    }
    let s = qp.stats();
    assert_eq!((s.sessions_resumed, s.duplicates), (2, 1), "{s:?}");
    assert_eq!(s.dormant_peers, PEERS as usize - 2);
}

/// What a freeze and a resume cost the engine (printed; the bound only catches a pathology).
#[test]
fn freeze_and_resume_are_cheap() {
    let config = Arc::new(RdConfig::default());
    let ids = SessionIds {
        local_id: 1,
        local_epoch: 2,
        remote_id: 3,
        remote_epoch: 4,
    };
    let now = Instant::now();
    let mut s = Session::new(Arc::clone(&config), ids, now).unwrap();
    const ROUNDS: u32 = 100_000;
    let start = Instant::now();
    for _ in 0..ROUNDS {
        let d = s.freeze().expect("idle");
        s = Session::resume(Arc::clone(&config), ids, d, now).unwrap();
    }
    let ns = start.elapsed().as_nanos() / u128::from(ROUNDS);
    println!("freeze + resume: {ns} ns");
    assert!(ns < 100_000, "{ns} ns");
}

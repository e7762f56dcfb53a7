//! Two endpoints on loopback exchanging messages through the safe API, every byte checked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::verbs::{AddressHandle, QpConfig, QueuePair, RdQp, SendOpcode, SendWr};

use super::*;
use crate::av::AddressVector;
use crate::cq::{CompletionError, CompletionQueue};
use crate::endpoint::{Bind, Endpoint};
use crate::params::Config;
use crate::raw::mem::UserMem;
use crate::testutil::domain_with;

pub(super) struct Side {
    pub(super) ep: Arc<Endpoint>,
    pub(super) cq: Arc<CompletionQueue>,
}

/// Two enabled endpoints whose AVs hold both names: handle 0 is A, 1 is B.
pub(super) fn pair() -> (Side, Side) {
    pair_with(Config::default())
}

/// An endpoint (not yet enabled) and a tagged CQ for it.
pub(super) fn open_side(d: &Arc<crate::domain::Domain>) -> (Arc<Endpoint>, Arc<CompletionQueue>) {
    let v = crate::info::fi_version(1, 17);
    let ep = Endpoint::open(d, v, &d.info.clone()).unwrap();
    let cq = CompletionQueue::open(d, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0).unwrap();
    (ep, cq)
}

/// [`pair_with`] a peer timeout of `limit`.
pub(super) fn pair_with_peer_timeout(limit: Duration) -> (Side, Side) {
    pair_with(Config {
        peer_timeout: limit,
        ..Config::default()
    })
}

/// [`pair`] with datagrams cut to Ethernet's MTU, so that a chunk spans many.
pub(super) fn pair_at_ethernet_datagrams() -> (Side, Side) {
    pair_with(Config {
        datagram_size: Some(1472),
        ..Config::default()
    })
}

pub(super) fn pair_with(config: Config) -> (Side, Side) {
    let ((a, _), (b, _)) = pair_and_avs(config);
    (a, b)
}

/// [`pair_with`], and each side's AV.
pub(super) fn pair_and_avs(
    config: Config,
) -> ((Side, Arc<AddressVector>), (Side, Arc<AddressVector>)) {
    let d = domain_with(config);
    pair_in(&d, &d)
}

/// [`pair_and_avs`] with A's endpoint in domain `da` and B's in `db` (of one fabric or two).
pub(super) fn pair_in(
    da: &Arc<crate::domain::Domain>,
    db: &Arc<crate::domain::Domain>,
) -> ((Side, Arc<AddressVector>), (Side, Arc<AddressVector>)) {
    let (a, acq) = open_side(da);
    let (b, bcq) = open_side(db);
    let names: Vec<u8> = [a.name(), b.name()]
        .iter()
        .flat_map(|n| n.encode())
        .collect();
    let mut avs = Vec::new();
    for (ep, cq, d) in [(&a, &acq, da), (&b, &bcq, db)] {
        let av = AddressVector::open(d, FI_AV_TABLE, 2, 0, false, 0).unwrap();
        assert_eq!(av.insert(&names, 0).unwrap().count, 2);
        ep.bind(Bind::Av(av.clone()), 0).unwrap();
        ep.bind(Bind::Cq(cq.clone()), FI_TRANSMIT | FI_RECV)
            .unwrap();
        ep.enable().unwrap();
        avs.push(av);
    }
    let (bav, aav) = (avs.pop().unwrap(), avs.pop().unwrap());
    (
        (Side { ep: a, cq: acq }, aav),
        (Side { ep: b, cq: bcq }, bav),
    )
}

/// `body` behind the per-peer header of message `seq` from a peer outside the AV to `to`.
pub(super) fn forged(to: &EpName, seq: u32, body: &[u8]) -> Vec<u8> {
    let h = crate::peer::PeerHeader {
        flags: 0,
        seq,
        ack: 0,
        src_epoch: 0x5eed,
        dst_epoch: crate::peer::header::epoch(to.nonce),
    };
    let mut b = h.encode().to_vec();
    b.extend_from_slice(body);
    b
}

pub(super) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

pub(super) fn send(s: &Side, dest: u64, kind: Kind, tag: u64, bytes: Vec<u8>, ctx: usize) {
    let (mem, _) = UserMem::owned(bytes);
    s.ep.send(SendArgs {
        kind,
        dest,
        mem,
        tag,
        data: None,
        context: ctx,
        flags: FI_COMPLETION,
    })
    .unwrap();
}

pub(super) fn recv(
    s: &Side,
    src: u64,
    kind: Kind,
    tag: u64,
    len: usize,
    ctx: usize,
) -> Arc<parking_lot::Mutex<Vec<u8>>> {
    let (mem, v) = UserMem::owned(vec![0; len]);
    s.ep.recv(RecvArgs {
        kind,
        src,
        mem,
        tag,
        ignore: 0,
        context: ctx,
        flags: FI_COMPLETION,
    })
    .unwrap();
    v
}

pub(super) enum Got {
    Ok(Completion),
    Err(CompletionError),
}

/// Polls both sides until `s` yields a completion (or an error), within 10 s.
pub(super) fn next(s: &Side, other: &Side) -> Got {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut got = None;
        match s.cq.read(1, |_, c| got = Some(*c)) {
            Ok(_) => return Got::Ok(got.expect("one entry")),
            Err(e) if e.0 == FI_EAVAIL => return Got::Err(s.cq.read_err().unwrap()),
            Err(_) => {}
        }
        let _ = other.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "no completion within 10 s");
    }
}

/// Progresses `s` until nothing of its own waits for `other` (which polls meanwhile), within
/// 10 s; `what` names what waited.
pub(super) fn wait_idle(s: &Side, other: &Side, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.ep.with_data(|d| {
        d.progress();
        d.idle()
    }) {
        let _ = other.cq.read(0, |_, _| ());
        assert!(
            Instant::now() < deadline,
            "{what} not acknowledged within 10 s"
        );
    }
}

pub(super) fn ok(g: Got) -> Completion {
    match g {
        Got::Ok(c) => c,
        Got::Err(e) => panic!("error completion {e:?}"),
    }
}

#[test]
pub(super) fn eager_and_rendezvous_arrive_intact_in_order() {
    let (a, b) = pair();
    eager_and_rendezvous_intact_in_order((&a, &b));
}

/// At an Ethernet MTU every chunk spans many datagrams: they go straight into the receive.
#[test]
pub(super) fn eager_and_rendezvous_arrive_intact_in_order_at_ethernet_datagrams() {
    let (a, b) = pair_at_ethernet_datagrams();
    eager_and_rendezvous_intact_in_order((&a, &b));
}

pub(super) fn eager_and_rendezvous_intact_in_order((a, b): (&Side, &Side)) {
    let eager = Config::default().eager_size;
    let sizes = [0, 1, 4096, eager, eager + 1, 3 * CHUNK + 17, 5 << 20];
    let bufs: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| recv(b, 0, Kind::Tagged, 7, n, 100 + i))
        .collect();
    for (i, &n) in sizes.iter().enumerate() {
        send(a, 1, Kind::Tagged, 7, pattern(n, i as u8), i);
    }
    for (i, &n) in sizes.iter().enumerate() {
        let c = ok(next(b, a));
        assert_eq!(c.op_context, 100 + i, "receives complete in posting order");
        assert_eq!((c.len, c.tag, c.src), (n, 7, Some(0)));
        assert_eq!(c.flags, FI_RECV | FI_TAGGED);
        assert!(
            *bufs[i].lock() == pattern(n, i as u8),
            "message {i} ({n} B) intact"
        );
    }
    let mut done: Vec<usize> = (0..sizes.len())
        .map(|_| ok(next(a, b)).op_context)
        .collect();
    done.sort_unstable();
    assert_eq!(
        done,
        (0..sizes.len()).collect::<Vec<_>>(),
        "every send completes once"
    );
    // The eager copies went back to A's pool once acknowledged.
    assert!(a.ep.with_data(|d| d.memory().send_buffers) > 0);
}

/// Copied sends reuse pooled buffers as soon as the peer acknowledged them: many rounds of
/// eager messages of mixed sizes, several datagrams each at an Ethernet MTU, every byte checked
/// while later sends take the buffers of earlier ones.
#[test]
pub(super) fn reused_send_buffers_never_change_bytes_in_flight() {
    let (a, b) = pair_at_ethernet_datagrams();
    let eager = Config::default().eager_size;
    let sizes = [3000, eager, 9000, eager - 1, 2049, 20_000];
    for round in 0..20u8 {
        let bufs: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| recv(&b, 0, Kind::Tagged, 3, n, i))
            .collect();
        for (i, &n) in sizes.iter().enumerate() {
            send(&a, 1, Kind::Tagged, 3, pattern(n, round ^ i as u8), i);
        }
        for (i, &n) in sizes.iter().enumerate() {
            let c = ok(next(&b, &a));
            assert_eq!((c.op_context, c.len), (i, n));
            assert!(
                *bufs[i].lock() == pattern(n, round ^ i as u8),
                "round {round}: message {i} ({n} B) intact"
            );
        }
        for _ in &sizes {
            ok(next(&a, &b));
        }
    }
    assert!(a.ep.with_data(|d| d.memory().send_buffers) > 0);
}

#[test]
pub(super) fn unexpected_messages_wait_and_match_by_tag_and_source() {
    let (a, b) = pair();
    send(&a, 1, Kind::Tagged, 1, pattern(100, 1), 1);
    send(&a, 1, Kind::Tagged, 2, pattern(200_000, 2), 2);
    send(&a, 1, Kind::Msg, 0, pattern(50, 3), 3);
    // The eager sends complete once acknowledged; the rendezvous waits for a receive.
    let mut eager_done = [ok(next(&a, &b)).op_context, ok(next(&a, &b)).op_context];
    eager_done.sort_unstable();
    assert_eq!(eager_done, [1, 3]);
    // Tag 2 first, though it was sent second; an untagged receive never sees tagged messages.
    let m = recv(&b, 0, Kind::Msg, 0, 64, 30);
    let t2 = recv(&b, FI_ADDR_UNSPEC, Kind::Tagged, 2, 200_000, 20);
    let t1 = recv(&b, 0, Kind::Tagged, 1, 100, 10);
    let mut seen = vec![];
    for _ in 0..3 {
        let c = ok(next(&b, &a));
        seen.push(c.op_context);
        assert_eq!(c.src, Some(0));
    }
    seen.sort_unstable();
    assert_eq!(seen, [10, 20, 30]);
    assert!(*t1.lock() == pattern(100, 1));
    assert!(*t2.lock() == pattern(200_000, 2));
    assert_eq!(&m.lock()[..50], &pattern(50, 3)[..]);
    assert_eq!(ok(next(&a, &b)).op_context, 2);
}

#[test]
pub(super) fn truncation_reports_the_lost_bytes_for_both_protocols() {
    let (a, b) = pair();
    for (i, (len, room)) in [(1000, 10), (300_000, 70_000)].into_iter().enumerate() {
        let buf = recv(&b, 0, Kind::Tagged, 5, room, i);
        send(&a, 1, Kind::Tagged, 5, pattern(len, 9), i);
        match next(&b, &a) {
            Got::Err(e) => {
                assert_eq!(e.err, Errno::TRUNC);
                assert_eq!((e.completion.len, e.olen), (room, len - room));
            }
            Got::Ok(c) => panic!("truncation not reported: {c:?}"),
        }
        assert!(
            buf.lock()[..] == pattern(len, 9)[..room],
            "the part that fits is placed"
        );
        assert_eq!(ok(next(&a, &b)).op_context, i, "the send completes");
    }
}

/// Posts a bufferless tagged receive from handle 0 with `flags` (FI_PEEK and its companions).
pub(super) fn peek(s: &Side, tag: u64, ctx: usize, flags: u64) {
    s.ep.recv(RecvArgs {
        kind: Kind::Tagged,
        src: 0,
        mem: UserMem::owned(vec![]).0,
        tag,
        ignore: 0,
        context: ctx,
        flags,
    })
    .unwrap();
}

#[test]
pub(super) fn peek_miss_cancel_and_bad_addresses() {
    let (a, b) = pair();
    peek(&b, 3, 77, FI_PEEK);
    match next(&b, &a) {
        Got::Err(e) => assert_eq!((e.err, e.completion.op_context), (Errno::NOMSG, 77)),
        Got::Ok(c) => panic!("peek of nothing succeeded: {c:?}"),
    }
    let _buf = recv(&b, 0, Kind::Tagged, 4, 8, 88);
    b.ep.cancel(88).unwrap();
    match next(&b, &a) {
        Got::Err(e) => assert_eq!((e.err, e.completion.op_context), (Errno::CANCELED, 88)),
        Got::Ok(c) => panic!("cancelled receive completed: {c:?}"),
    }
    assert_eq!(b.ep.cancel(88), Err(Errno::NOENT));
    let (mem, _) = UserMem::owned(vec![1]);
    let bad = SendArgs {
        kind: Kind::Msg,
        dest: 9,
        mem,
        tag: 0,
        data: None,
        context: 0,
        flags: 0,
    };
    assert_eq!(a.ep.send(bad), Err(Errno::INVAL));
}

#[test]
pub(super) fn malformed_messages_are_counted_and_dropped() {
    let (a, b) = pair();
    let mut qp = RdQp::create(QpConfig::default()).unwrap();
    qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    let n = b.ep.name();
    let junk = [&b"\x09\0\0\0\0\0\0\0"[..], b"\x01", &[1u8; 40][..]];
    for (seq, junk) in (1..).zip(junk) {
        qp.post_send(SendWr {
            wr_id: 1,
            opcode: SendOpcode::Send,
            data: &forged(&n, seq, junk),
            ah: Some(AddressHandle::new(n.udp_addr(), n.qpn)),
            signaled: true,
        })
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wcs = vec![];
    // Shorter than the per-peer header; for an earlier incarnation of `b`.
    let stale = EpName {
        nonce: n.nonce ^ 1,
        ..n
    };
    for junk in [&b"\x01"[..], &forged(&stale, 4, &pattern(8, 1))] {
        qp.post_send(SendWr {
            wr_id: 1,
            opcode: SendOpcode::Send,
            data: junk,
            ah: Some(AddressHandle::new(n.udp_addr(), n.qpn)),
            signaled: true,
        })
        .unwrap();
    }
    let dropped = |b: &Side| {
        let p = b.ep.with_data(|d| d.peer_stats());
        (p.short, p.stale)
    };
    while b.ep.data_stats().malformed < 3 || dropped(&b) != (1, 1) {
        qp.poll_cq(&mut wcs, 8).unwrap();
        let _ = b.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "{:?}", b.ep.data_stats());
    }
    // The endpoint still works afterwards.
    let buf = recv(&b, 0, Kind::Msg, 0, 5, 1);
    send(&a, 1, Kind::Msg, 0, pattern(5, 4), 2);
    assert_eq!(ok(next(&b, &a)).len, 5);
    assert!(*buf.lock() == pattern(5, 4));
}

/// Polls `s` until its data path holds `n` rendezvous receives waiting for data.
pub(super) fn wait_rendezvous(s: &Side, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.ep.with_data(|d| d.expire_rendezvous_at(Instant::now())) != n {
        let _ = s.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "no rendezvous under way");
    }
}

pub(super) fn expect_eio(s: &Side, other: &Side, ctx: usize) {
    match next(s, other) {
        Got::Err(e) => {
            assert_eq!(e.err, Errno(FI_EIO as u32), "{e:?}");
            assert_eq!(e.completion.op_context, ctx);
            assert_eq!(e.completion.tag, 9);
        }
        Got::Ok(c) => panic!("the receive completed: {c:?}"),
    }
}

#[test]
pub(super) fn rendezvous_receive_fails_when_its_sender_is_gone_before_the_cts() {
    let (a, b) = pair_with_peer_timeout(Duration::from_millis(300));
    // Only the CTS's failure may end the receive here, not B's watch on silent senders.
    b.ep.with_data(|d| d.set_stall_limit(Duration::from_secs(600)));
    send(&a, 1, Kind::Tagged, 9, pattern(1 << 20, 3), 1);
    // The RTS is acknowledged (B holds it as unexpected); then A goes away.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.ep.with_data(|d| d.idle()) {
        let _ = b.cq.read(0, |_, _| ());
        let _ = a.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "the RTS was never acknowledged");
    }
    a.ep.shutdown();
    drop(a);
    // B matches the RTS and sends its CTS to a closed port: the CTS is never acknowledged,
    // the queue pair gives up after the peer timeout, and the receive fails instead of waiting.
    let started = Instant::now();
    let _buf = recv(&b, 0, Kind::Tagged, 9, 1 << 20, 42);
    expect_eio(&b, &b, 42);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(b.ep.data_stats().failed_recvs, 1);
}

#[test]
pub(super) fn rendezvous_receive_fails_when_its_sender_goes_silent() {
    let (a, b) = pair();
    let _buf = recv(&b, 0, Kind::Tagged, 9, 5 << 20, 42);
    send(&a, 1, Kind::Tagged, 9, pattern(5 << 20, 5), 1);
    wait_rendezvous(&b, 1);
    // Nothing for longer than the peer timeout (30 s by default), seen from 31 s later.
    let later = Instant::now() + Duration::from_secs(31);
    assert_eq!(b.ep.with_data(|d| d.expire_rendezvous_at(later)), 1);
    assert_eq!(b.ep.with_data(|d| d.expire_rendezvous_at(later)), 0);
    expect_eio(&b, &a, 42);
    assert_eq!(b.ep.data_stats().failed_recvs, 1);
    // A receive that hears from its sender in time is not touched.
    let buf = recv(&b, 0, Kind::Tagged, 9, 5 << 20, 43);
    send(&a, 1, Kind::Tagged, 9, pattern(5 << 20, 6), 2);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (43, 5 << 20));
    assert!(*buf.lock() == pattern(5 << 20, 6));
}

#[test]
pub(super) fn a_receive_waiting_behind_its_senders_other_transfer_is_not_failed() {
    // A's chunks leave in posting order: the second message's receive hears nothing of its
    // own until the first, much larger one is through, but it hears A all along. The verdict
    // is taken on B's own clock readings, not on how long anything took: once A was heard
    // after both receives last heard of their own, B looks from a moment that is more than the
    // limit after the receives' own news but less than it after A's. A receive that went by its
    // own news alone would fail there; on a loaded machine nothing depends on A keeping up.
    let (a, b) = pair();
    let limit = Duration::from_secs(60);
    b.ep.with_data(|d| d.set_stall_limit(limit));
    let big = 256 << 20;
    let first = recv(&b, 0, Kind::Tagged, 1, big, 41);
    let second = recv(&b, 0, Kind::Tagged, 2, 1 << 20, 42);
    let (p1, p2) = (pattern(big, 1), pattern(1 << 20, 2));
    send(&a, 1, Kind::Tagged, 1, p1, 1);
    send(&a, 1, Kind::Tagged, 2, p2, 2);
    let gap = Duration::from_millis(2);
    let deadline = Instant::now() + Duration::from_secs(30);
    let looked = loop {
        let looked = b.ep.with_data(|d| {
            d.progress();
            let times = d.rendezvous_heard();
            let own = times.iter().map(|&(last, _)| last).max()?;
            let heard = times.iter().filter_map(|&(_, h)| h).min()?;
            if times.len() < 2 || heard < own + gap {
                return None;
            }
            let at = heard + limit - gap / 2;
            d.expire_rendezvous_at(at);
            Some(at.saturating_duration_since(own))
        });
        if let Some(l) = looked {
            break l;
        }
        let _ = a.cq.read(0, |_, _| ());
        assert!(
            Instant::now() < deadline,
            "A was never heard after both receives began"
        );
    };
    assert!(
        looked > limit,
        "{looked:?}: the look did not test the receives' own news"
    );
    assert_eq!(
        b.ep.data_stats().failed_recvs,
        0,
        "a receive that heard its sender failed"
    );
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (41, big));
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.len), (42, 1 << 20));
    assert!(*first.lock() == pattern(big, 1));
    assert!(*second.lock() == pattern(1 << 20, 2));
    assert_eq!(b.ep.data_stats().failed_recvs, 0);
}

#[test]
pub(super) fn rendezvous_send_waits_for_a_live_receiver_and_fails_when_it_is_gone() {
    let (a, b) = pair_with_peer_timeout(Duration::from_millis(300));
    send(&a, 1, Kind::Tagged, 9, pattern(1 << 20, 7), 5);
    // B has not posted a receive: A keeps waiting (its probes are acknowledged) for three
    // peer timeouts without an error.
    let until = Instant::now() + Duration::from_millis(900);
    while Instant::now() < until {
        match a.cq.read(1, |_, c| panic!("completion {c:?}")) {
            Err(e) if e.0 == FI_EAVAIL => {
                panic!("the send failed while B was alive: {:?}", a.cq.read_err())
            }
            _ => {}
        }
        let _ = b.cq.read(0, |_, _| ());
    }
    assert_eq!(a.ep.data_stats().failed_sends, 0);
    // Now B goes away without ever posting it: the send fails instead of waiting forever.
    b.ep.shutdown();
    drop(b);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(10);
    let err = loop {
        if let Err(e) = a.cq.read(1, |_, c| panic!("completion {c:?}")) {
            if e.0 == FI_EAVAIL {
                break a.cq.read_err().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "the send never failed");
    };
    assert_eq!(err.err, Errno(FI_EIO as u32));
    assert_eq!(err.completion.op_context, 5);
    assert_eq!(a.ep.data_stats().failed_sends, 1);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// A rank that computes (never polls) still acknowledges what arrives, through its progress
/// thread, so a peer's send completes without waiting for the thread's tick, here 60 s.
#[test]
pub(super) fn a_rank_that_does_not_poll_acknowledges_what_arrives() {
    let (a, b) = pair();
    b.ep.set_tick(Duration::from_secs(60));
    // The thread is asleep on the old tick (10 ms) until it next looks.
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    for i in 0..3u8 {
        let bytes = pattern(4096, i);
        send(&a, 1, Kind::Tagged, 40 + u64::from(i), bytes, 7);
        let c = loop {
            let mut got = None;
            match a.cq.read(1, |_, c| got = Some(*c)) {
                Ok(_) => break got.expect("one entry"),
                Err(e) => assert_eq!(u64::from(e.0), FI_EAGAIN, "send failed"),
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "send {i} not acknowledged by a rank that does not poll"
            );
        };
        assert_eq!((c.op_context, c.flags & FI_SEND), (7, FI_SEND));
        // Quiet between sends, so each arrival finds the thread asleep.
        std::thread::sleep(Duration::from_millis(30));
    }
    for i in 0..3u8 {
        let buf = recv(&b, 0, Kind::Tagged, 40 + u64::from(i), 4096, 70);
        let c = ok(next(&b, &a));
        assert_eq!((c.op_context, c.tag, c.len), (70, 40 + u64::from(i), 4096));
        assert_eq!(*buf.lock(), pattern(4096, i));
    }
}

//! Behaviour of one session pair driven by hand: ACK policy, coalescing, placement without a
//! reorder buffer, back-pressure, RTT and memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reliability::header::{Kind, Packet, FLAG_ACKED, FLAG_ACK_REQ, FLAG_ACK_SOON, FLAG_DSACK};
use reliability::{
    Config, Delivery, Event, MsgId, Placement, SendError, Session, SessionIds, Sink,
};

#[derive(Default)]
struct Collect {
    placed: Vec<(MsgId, u32, u32, usize)>,
    delivered: Vec<(MsgId, Option<Vec<u8>>, u32)>,
}

impl Sink for Collect {
    fn place(&mut self, p: Placement<'_>) {
        self.placed
            .push((p.msg, p.offset, p.total_len, p.bytes.len()));
    }
    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        match d {
            Delivery::Inline(b) => self.delivered.push((msg, Some(b.to_vec()), b.len() as u32)),
            Delivery::Placed { len } => self.delivered.push((msg, None, len)),
        }
    }
}

const IDS: SessionIds = SessionIds {
    local_id: 7,
    local_epoch: 100,
    remote_id: 9,
    remote_epoch: 200,
};

fn pair(cfg: Config, now: Instant) -> (Session, Session) {
    let cfg = Arc::new(cfg);
    let a = Session::new(cfg.clone(), IDS, now).unwrap();
    let b = Session::new(cfg, IDS.mirrored(), now).unwrap();
    (a, b)
}

fn drain(s: &mut Session, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while s.poll_transmit(now, &mut buf).is_some() {
        out.push(buf.clone());
    }
    out
}

fn kind(d: &[u8]) -> Kind {
    Packet::new_checked(d).unwrap().kind().unwrap()
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn acks_batched_by_count_and_delay_and_piggybacked() {
    let t0 = Instant::now();
    let cfg = Config {
        ack_every: 4,
        ack_delay: Duration::from_micros(100),
        // Each message here is the last its sender has queued: see the next test.
        ack_soon_delay: Duration::from_micros(100),
        ..Config::default()
    };
    let (mut a, mut b) = pair(cfg, t0);
    let mut sink = Collect::default();
    for i in 0..3u8 {
        a.send(t0, vec![i]).unwrap();
        for d in drain(&mut a, t0) {
            b.handle_datagram(t0, &d, &mut sink).unwrap();
        }
    }
    // Three in order: below the batch, so no ACK yet, only a deadline.
    assert!(drain(&mut b, t0).is_empty());
    assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_micros(100)));
    let later = t0 + Duration::from_micros(100);
    timed_ack(&mut b, &mut a, later);
    let acked: Vec<_> = events(&mut a);
    assert_eq!(
        acked,
        vec![
            Event::SendAcked(MsgId(0)),
            Event::SendAcked(MsgId(1)),
            Event::SendAcked(MsgId(2))
        ]
    );
    // The fourth datagram completes a batch: an ACK goes out at once.
    for i in 3..7u8 {
        a.send(later, vec![i]).unwrap();
        for d in drain(&mut a, later) {
            b.handle_datagram(later, &d, &mut sink).unwrap();
        }
    }
    let acks = drain(&mut b, later);
    assert_eq!(acks.len(), 1);
    // Data going the other way carries the ACK: no separate ACK datagram.
    a.send(later, vec![9]).unwrap();
    let d = drain(&mut a, later);
    b.handle_datagram(later, &d[0], &mut sink).unwrap();
    b.send(later, vec![1, 2, 3]).unwrap();
    let out = drain(&mut b, later);
    assert_eq!(out.len(), 1);
    assert_eq!(kind(&out[0]), Kind::Single);
    a.handle_datagram(later, &out[0], &mut Collect::default())
        .unwrap();
    assert!(a.is_idle());
    assert_eq!(b.stats().acks_sent, 2);
    assert_eq!(sink.delivered.len(), 8);
}

/// Runs `from`'s timers at `t`, which must send exactly one bare ACK, and hands it to `to`.
fn timed_ack(from: &mut Session, to: &mut Session, t: Instant) {
    from.handle_timeout(t);
    let acks = drain(from, t);
    assert_eq!(acks.len(), 1);
    assert_eq!(kind(&acks[0]), Kind::Ack);
    to.handle_datagram(t, &acks[0], &mut Collect::default())
        .unwrap();
}

/// A pair acknowledging after 100 us, or 10 us when asked to (ACK_SOON).
fn ack_soon_pair(t0: Instant) -> (Session, Session) {
    let cfg = Config {
        ack_delay: Duration::from_micros(100),
        ack_soon_delay: Duration::from_micros(10),
        ..Config::default()
    };
    pair(cfg, t0)
}

#[test]
fn the_last_datagram_queued_is_acknowledged_after_the_short_delay() {
    // A sender blocked on its send's completion waits for the ACK: when nothing more is
    // queued behind a datagram, the receiver must not sit on the ACK for the full delay.
    let t0 = Instant::now();
    let (mut a, mut b) = ack_soon_pair(t0);
    let mut sink = Collect::default();
    a.send(t0, vec![7u8; 200_000]).unwrap();
    let out = drain(&mut a, t0);
    assert_eq!(out.len(), 4);
    let soon: Vec<bool> = out
        .iter()
        .map(|d| Packet::new_checked(&d[..]).unwrap().flags() & FLAG_ACK_SOON != 0)
        .collect();
    assert_eq!(soon, [false, false, false, true]);
    for d in &out[..3] {
        b.handle_datagram(t0, d, &mut sink).unwrap();
    }
    assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_micros(100)));
    let t1 = t0 + Duration::from_micros(3);
    b.handle_datagram(t1, &out[3], &mut sink).unwrap();
    assert_eq!(b.poll_timeout(), Some(t1 + Duration::from_micros(10)));
    assert!(
        drain(&mut b, t1).is_empty(),
        "a prompt reply may still carry it"
    );
    let t2 = t1 + Duration::from_micros(10);
    timed_ack(&mut b, &mut a, t2);
    assert_eq!(events(&mut a), vec![Event::SendAcked(MsgId(0))]);
    // The reply case: data going back before the deadline carries the ACK, none of its own.
    a.send(t2, vec![1u8]).unwrap();
    let d = drain(&mut a, t2);
    b.handle_datagram(t2, &d[0], &mut sink).unwrap();
    b.send(t2, vec![2u8]).unwrap();
    let reply = drain(&mut b, t2);
    assert_eq!(reply.len(), 1);
    assert_eq!(kind(&reply[0]), Kind::Single);
    let t3 = t2 + Duration::from_micros(10);
    b.handle_timeout(t3);
    assert!(drain(&mut b, t3).is_empty());
    assert_eq!(b.stats().acks_sent, 1);
}

#[test]
fn a_message_nobody_waits_on_leaves_its_ack_to_the_usual_delay() {
    // An injected send completed when it was copied: asking for an early ACK for it only adds
    // ACK datagrams (in collectives between 4 ranks on 2 cores, almost one per message).
    let t0 = Instant::now();
    let (mut a, mut b) = ack_soon_pair(t0);
    let mut sink = Collect::default();
    let flags = |d: &[u8]| Packet::new_checked(d).unwrap().flags() & FLAG_ACK_SOON != 0;
    let lazy = |a: &mut Session, t, n: u8| {
        a.send_parts(t, Bytes::new(), Bytes::from(vec![n; 100]), false)
            .unwrap()
    };
    lazy(&mut a, t0, 1);
    let d = drain(&mut a, t0);
    assert_eq!(d.len(), 1);
    assert!(!flags(&d[0]));
    // A second one while the first is unacknowledged does not ask either.
    lazy(&mut a, t0, 2);
    let d2 = drain(&mut a, t0);
    assert_eq!(d2.len(), 1);
    assert!(!flags(&d2[0]));
    for d in d.iter().chain(&d2) {
        b.handle_datagram(t0, d, &mut sink).unwrap();
    }
    assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_micros(100)));
    // An awaited message still unacknowledged: a later unawaited one, the last queued, asks
    // for the early ACK on its behalf (a cumulative ACK covers both).
    a.send(t0, vec![3u8; 100]).unwrap();
    lazy(&mut a, t0, 4);
    let d = drain(&mut a, t0);
    let soon: Vec<bool> = d.iter().map(|d| flags(d)).collect();
    // Coalesced into one datagram or not, only the last asks.
    assert_eq!(soon.last(), Some(&true));
    assert!(soon[..soon.len() - 1].iter().all(|s| !s));
    for d in &d {
        b.handle_datagram(t0, d, &mut sink).unwrap();
    }
    assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_micros(10)));
    let t1 = t0 + Duration::from_micros(10);
    timed_ack(&mut b, &mut a, t1);
    // Everything acknowledged: unawaited messages alone no longer ask.
    lazy(&mut a, t1, 5);
    let d = drain(&mut a, t1);
    assert_eq!(d.len(), 1);
    assert!(!flags(&d[0]));
    b.handle_datagram(t1, &d[0], &mut sink).unwrap();
    let got: Vec<u8> = sink
        .delivered
        .iter()
        .map(|(_, m, _)| m.as_ref().expect("inline")[0])
        .collect();
    assert_eq!(got, [1, 2, 3, 4, 5]);
}

#[test]
fn small_messages_behind_a_full_window_share_a_datagram() {
    let t0 = Instant::now();
    let cfg = Config {
        initial_credit: 1,
        recv_window: 1,
        ..Config::default()
    };
    let (mut a, mut b) = pair(cfg, t0);
    let mut sink = Collect::default();
    a.send(t0, &b"first"[..]).unwrap();
    // Nothing waits for company: the first message leaves alone, at once.
    let first = drain(&mut a, t0);
    assert_eq!(first.len(), 1);
    assert_eq!(kind(&first[0]), Kind::Single);
    for i in 0..9u8 {
        a.send(t0, vec![i; usize::from(i)]).unwrap();
    }
    assert!(drain(&mut a, t0).is_empty(), "window of one is full");
    b.handle_datagram(t0, &first[0], &mut sink).unwrap();
    for d in drain(&mut b, t0) {
        a.handle_datagram(t0, &d, &mut Collect::default()).unwrap();
    }
    let next = drain(&mut a, t0);
    assert_eq!(next.len(), 1, "nine queued messages, one datagram");
    assert_eq!(kind(&next[0]), Kind::Coalesced);
    b.handle_datagram(t0, &next[0], &mut sink).unwrap();
    let got: Vec<_> = sink
        .delivered
        .iter()
        .map(|(m, d, _)| (m.0, d.clone().unwrap()))
        .collect();
    assert_eq!(got[0], (0, b"first".to_vec()));
    for i in 0..9u8 {
        assert_eq!(
            got[usize::from(i) + 1],
            (u32::from(i) + 1, vec![i; usize::from(i)])
        );
    }
}

#[test]
fn large_message_is_placed_in_any_order_without_a_reorder_buffer() {
    let t0 = Instant::now();
    let cfg = Config {
        max_datagram_size: 1000,
        ..Config::default()
    };
    let (mut a, mut b) = pair(cfg.clone(), t0);
    let msg: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    a.send(t0, msg.clone()).unwrap();
    let mut datagrams = drain(&mut a, t0);
    let n = datagrams.len();
    assert_eq!(n, 20_000usize.div_ceil(cfg.segment_payload()).min(16));
    assert!(datagrams.iter().all(|d| kind(d) == Kind::Segment));
    datagrams.reverse();
    let mut sink = Collect::default();
    let mut dest = vec![0u8; msg.len()];
    for d in &datagrams {
        b.handle_datagram(t0, d, &mut sink).unwrap();
        // Segments are placed as they come, so nothing but small markers is held.
        assert!(b.memory().reorder < 2048, "{:?}", b.memory());
    }
    assert_eq!(sink.placed.len(), n, "every segment placed on arrival");
    assert!(sink.delivered.is_empty(), "the first segment is missing");
    // Keep going until the whole message is through (the initial credit is 16 datagrams).
    let mut now = t0;
    while sink.delivered.is_empty() {
        now += Duration::from_micros(10);
        for d in drain(&mut b, now) {
            a.handle_datagram(now, &d, &mut Collect::default()).unwrap();
        }
        for d in drain(&mut a, now) {
            b.handle_datagram(now, &d, &mut sink).unwrap();
        }
    }
    let offsets: std::collections::HashSet<u32> = sink.placed.iter().map(|p| p.1).collect();
    assert_eq!(offsets.len(), sink.placed.len(), "no offset placed twice");
    for &(m, off, total, len) in &sink.placed {
        assert_eq!((m, total), (MsgId(0), 20_000));
        dest[off as usize..off as usize + len].copy_from_slice(&msg[off as usize..][..len]);
    }
    assert_eq!(sink.delivered, vec![(MsgId(0), None, 20_000)]);
    assert_eq!(dest, msg);
    assert_eq!(b.memory().reorder, 0, "reorder state released");
}

#[test]
fn would_block_then_writable() {
    let t0 = Instant::now();
    let cfg = Config {
        max_send_buffer: 1000,
        ..Config::default()
    };
    let (mut a, mut b) = pair(cfg, t0);
    let mut sent = 0;
    let err = loop {
        match a.send(t0, vec![0u8; 200]) {
            Ok(_) => sent += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err, SendError::WouldBlock);
    assert!(sent >= 3);
    assert_eq!(a.stats().would_block, 1);
    // A refused message comes back to its owner intact, both parts.
    let refused = a
        .send_parts(
            t0,
            Bytes::from_static(b"head"),
            Bytes::from(vec![7u8; 300]),
            true,
        )
        .unwrap_err();
    assert_eq!(refused.error, SendError::WouldBlock);
    assert_eq!(&refused.head[..], b"head");
    assert_eq!(refused.body, vec![7u8; 300]);
    assert_eq!(a.stats().would_block, 2);
    for d in drain(&mut a, t0) {
        b.handle_datagram(t0, &d, &mut Collect::default()).unwrap();
    }
    let t1 = t0 + Duration::from_millis(1);
    b.handle_timeout(t1);
    for d in drain(&mut b, t1) {
        a.handle_datagram(t1, &d, &mut Collect::default()).unwrap();
    }
    let evs = events(&mut a);
    assert!(evs.contains(&Event::Writable), "{evs:?}");
    a.send(t1, vec![0u8; 200]).unwrap();
}

#[test]
fn rtt_is_measured_and_the_timeout_floored() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(Config::default(), t0);
    assert_eq!(a.rtt().srtt, None);
    a.send(t0, vec![1]).unwrap();
    let d = drain(&mut a, t0);
    let t1 = t0 + Duration::from_micros(3);
    b.handle_datagram(t1, &d[0], &mut Collect::default())
        .unwrap();
    let t2 = t1 + Duration::from_micros(100);
    b.handle_timeout(t2);
    let ack = drain(&mut b, t2);
    let t3 = t2 + Duration::from_micros(3);
    a.handle_datagram(t3, &ack[0], &mut Collect::default())
        .unwrap();
    let r = a.rtt();
    assert_eq!(r.srtt, Some(Duration::from_micros(106)));
    assert_eq!(r.rto, Config::default().min_rto);
}

#[test]
fn timeout_backs_off_and_karn_ignores_retransmissions() {
    let t0 = Instant::now();
    // The exact RFC 6298 schedule; `jittered_backoff_stays_within_a_quarter` has the default.
    let exact = Config {
        timer_jitter: false,
        ..Config::default()
    };
    let (mut a, _b) = pair(exact, t0);
    a.send(t0, vec![1]).unwrap();
    assert_eq!(drain(&mut a, t0).len(), 1);
    let mut deadlines = Vec::new();
    let mut now = t0;
    for _ in 0..4 {
        now = a.poll_timeout().unwrap();
        deadlines.push(now - t0);
        a.handle_timeout(now);
        let d = drain(&mut a, now);
        assert_eq!(d.len(), 1, "one datagram resent per expiry");
    }
    // 1 ms, then doubling: 1, 3, 7, 15 ms after the first send.
    let ms = |n| Duration::from_millis(n);
    assert_eq!(deadlines, vec![ms(1), ms(3), ms(7), ms(15)]);
    assert_eq!(a.stats().retransmits, 4);
    assert_eq!(a.stats().timeouts, 4);
    assert_eq!(
        a.rtt().srtt,
        None,
        "no sample from a retransmitted datagram"
    );
    let _ = now;
}

/// With the default jitter, each backed-off timeout is the exact one lengthened by at most a
/// quarter, never shortened, and sessions with other ids draw other fractions.
#[test]
fn jittered_backoff_stays_within_a_quarter() {
    let t0 = Instant::now();
    let mut schedules = Vec::new();
    for k in 0..8u32 {
        let ids = SessionIds {
            local_id: 7 + k,
            local_epoch: 1,
            remote_id: 9 + k,
            remote_epoch: 2,
        };
        let mut a = Session::new(Arc::new(Config::default()), ids, t0).unwrap();
        a.send(t0, vec![1]).unwrap();
        assert_eq!(drain(&mut a, t0).len(), 1);
        let (mut prev, mut gaps) = (t0, Vec::new());
        for exact in [1, 2, 4, 8, 16u32] {
            let now = a.poll_timeout().unwrap();
            let gap = now - prev;
            let exact = Duration::from_millis(u64::from(exact));
            assert!(
                gap >= exact && gap <= exact + exact / 4,
                "{gap:?} for {exact:?}"
            );
            gaps.push(gap);
            a.handle_timeout(now);
            assert_eq!(
                drain(&mut a, now).len(),
                1,
                "one datagram resent per expiry"
            );
            prev = now;
        }
        schedules.push(gaps);
    }
    schedules.sort();
    schedules.dedup();
    assert_eq!(schedules.len(), 8, "sessions share a schedule");
}

#[test]
fn idle_session_is_small() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(Config::default(), t0);
    let fresh = a.memory();
    assert!(fresh.total() <= 960, "{fresh:?}");
    eprintln!("idle session: {} bytes", fresh.total());
    for i in 0..50u32 {
        a.send(t0, vec![0u8; (i * 997 % 20_000) as usize]).unwrap();
    }
    let mut now = t0;
    for _ in 0..100 {
        now += Duration::from_micros(50);
        for d in drain(&mut a, now) {
            b.handle_datagram(now, &d, &mut Collect::default()).unwrap();
        }
        b.handle_timeout(now);
        for d in drain(&mut b, now) {
            a.handle_datagram(now, &d, &mut Collect::default()).unwrap();
        }
    }
    assert!(a.is_idle());
    let _ = events(&mut a);
    let _ = events(&mut b);
    // Back to the fixed part once idle for a while: queues, reorder slots and event queues
    // are given back (not at once, so that a ping-pong does not allocate per message).
    now += reliability::session::RELEASE_AFTER;
    a.handle_timeout(now);
    b.handle_timeout(now);
    assert_eq!(a.memory(), fresh);
    assert_eq!(b.memory(), fresh);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn rtt_ignores_datagrams_released_by_a_retransmission() {
    // 64 segments in flight; the first is lost twice. The receiver gets 1..63 at once, but its
    // SACK bitmap reaches only 32 past the hole, so 33..63 are reported only when the hole is
    // filled, a timeout later: that ACK answers the retransmission and must not be taken as the
    // round trip of 33..63.
    let cfg = Config {
        send_window: 64,
        recv_window: 64,
        initial_credit: 64,
        // No tail-loss probe: the timeout is what resends the hole here.
        min_pto: Duration::ZERO,
        ..Config::default()
    };
    let t0 = Instant::now();
    let (mut a, mut b) = pair(cfg, t0);
    a.send(t0, vec![7u8; 64 * 65_408]).unwrap();
    let d = drain(&mut a, t0);
    assert_eq!(d.len(), 64);
    let hop = Duration::from_micros(5);
    let mut now = t0 + hop;
    let mut sink = Collect::default();
    let mut acks = Vec::new();
    for dg in &d[1..] {
        b.handle_datagram(now, dg, &mut sink).unwrap();
        acks.extend(drain(&mut b, now));
    }
    now += hop;
    for ack in &acks {
        a.handle_datagram(now, ack, &mut Collect::default())
            .unwrap();
    }
    let before = a.rtt().srtt.expect("sampled from the SACKed datagrams");
    assert!(before < Duration::from_micros(50), "{before:?}");
    // Fast retransmit of the hole: lost again.
    let again = drain(&mut a, now);
    assert_eq!(again.len(), 1);
    // The timeout resends it; this copy gets through.
    now = a.poll_timeout().unwrap();
    a.handle_timeout(now);
    let retx = drain(&mut a, now);
    assert_eq!(retx.len(), 1);
    now += hop;
    b.handle_datagram(now, &retx[0], &mut sink).unwrap();
    let acks = drain(&mut b, now);
    now += hop;
    for ack in &acks {
        a.handle_datagram(now, ack, &mut Collect::default())
            .unwrap();
    }
    assert!(a.is_idle());
    let after = a.rtt().srtt.unwrap();
    assert_eq!(
        after, before,
        "no sample from an ACK a retransmission released"
    );
}

#[test]
fn a_lost_tail_is_probed_and_resent_before_the_timeout() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(Config::default(), t0);
    a.send(t0, vec![3u8; 4 * 65_408]).unwrap();
    let d = drain(&mut a, t0);
    assert_eq!(d.len(), 4);
    // The last two datagrams are lost; the first two arrive and are acknowledged after the
    // ACK delay.
    let hop = Duration::from_micros(5);
    let mut sink = Collect::default();
    for dg in &d[..2] {
        b.handle_datagram(t0 + hop, dg, &mut sink).unwrap();
    }
    let mut now = b.poll_timeout().unwrap();
    b.handle_timeout(now);
    let acks = drain(&mut b, now);
    now += hop;
    for ack in &acks {
        a.handle_datagram(now, ack, &mut Collect::default())
            .unwrap();
    }
    // The probe timer comes well before the retransmission timer.
    let probe_at = a.poll_timeout().unwrap();
    assert!(
        probe_at - t0 < Duration::from_micros(500),
        "{:?}",
        probe_at - t0
    );
    a.handle_timeout(probe_at);
    let probe = drain(&mut a, probe_at);
    assert_eq!(probe.len(), 1);
    assert_eq!(a.stats().tail_probes, 1);
    // The probe resent the newest datagram; its immediate ACK shows the hole before it.
    now = probe_at + hop;
    b.handle_datagram(now, &probe[0], &mut sink).unwrap();
    let acks = drain(&mut b, now);
    assert_eq!(acks.len(), 1, "the probe asked for an ACK at once");
    now += hop;
    a.handle_datagram(now, &acks[0], &mut Collect::default())
        .unwrap();
    assert_eq!(a.stats().tail_losses, 1);
    let resent = drain(&mut a, now);
    assert_eq!(resent.len(), 1, "only the hole is resent");
    now += hop;
    b.handle_datagram(now, &resent[0], &mut sink).unwrap();
    assert_eq!(sink.delivered.len(), 1);
    assert!(now - t0 < Duration::from_micros(600));
    assert_eq!(a.stats().timeouts, 0);
}

/// Datagrams cut for a 1500-byte MTU, with a window as wide as the receive side allows.
fn ethernet_sized() -> Config {
    Config {
        max_datagram_size: 1472,
        send_window: 128,
        recv_window: 128,
        initial_credit: 128,
        ..Config::default()
    }
}

/// A burst that takes the whole tail of a flight, longer than the SACK bitmap reaches (a GSO
/// run dropped at once is up to 44 datagrams): once the timer's retransmission of the head is
/// acknowledged, everything sent before it that the ACK could have reported is lost, and goes
/// at once; not one datagram per timeout.
#[test]
fn a_lost_tail_longer_than_the_sack_bitmap_comes_back_in_a_few_round_trips() {
    let cfg = ethernet_sized();
    let seg = cfg.segment_payload();
    let t0 = Instant::now();
    let (mut a, mut b) = pair(cfg, t0);
    let data: Vec<u8> = (0..48 * seg).map(|i| (i * 31 + i / 977) as u8).collect();
    a.send(t0, data.clone()).unwrap();
    let d = drain(&mut a, t0);
    assert_eq!(d.len(), 48);
    let hop = Duration::from_micros(20);
    // The first 8 arrive; the last 40 are lost in one burst.
    let mut sink = Collect::default();
    let mut to_a: Vec<(Instant, Vec<u8>)> = Vec::new();
    let mut to_b: Vec<(Instant, Vec<u8>)> = Vec::new();
    for dg in &d[..8] {
        b.handle_datagram(t0 + hop, dg, &mut sink).unwrap();
    }
    let mut now = t0 + hop;
    // From here on the network loses nothing: run both ends until the message is delivered.
    while sink.delivered.is_empty() {
        for dg in drain(&mut a, now) {
            to_b.push((now + hop, dg));
        }
        for dg in drain(&mut b, now) {
            to_a.push((now + hop, dg));
        }
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .chain(to_a.iter().chain(&to_b).map(|(t, _)| *t))
            .min()
            .expect("something to wait for");
        now = now.max(next);
        for (t, dg) in std::mem::take(&mut to_b) {
            if t <= now {
                b.handle_datagram(now, &dg, &mut sink).unwrap();
            } else {
                to_b.push((t, dg));
            }
        }
        for (t, dg) in std::mem::take(&mut to_a) {
            if t <= now {
                a.handle_datagram(now, &dg, &mut Collect::default())
                    .unwrap();
            } else {
                to_a.push((t, dg));
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        assert!(now - t0 < Duration::from_secs(5), "stuck: {:?}", a.stats());
    }
    let s = a.stats();
    assert_eq!(s.retransmits, 40, "only the lost ones: {s:?}");
    assert!(s.burst_losses > 0, "{s:?}");
    assert!(s.timeouts + s.tail_probes <= 3, "{s:?}");
    assert!(
        now - t0 < Duration::from_millis(5),
        "{:?} to recover: {s:?}",
        now - t0
    );
    assert_eq!(sink.delivered.len(), 1);
}

/// The same flight to a receiver that reads nothing for a while (it computes), then takes the
/// backlog one datagram at a time, acknowledging as it goes. The ACKs acknowledge the head's
/// original, not the timer's resend of it, whether they come long after the resend (5 ms) or
/// just after it (the receiver woke as the resend arrived): neither may declare the rest of
/// the flight lost.
#[test]
fn a_late_receiver_does_not_look_like_a_burst_loss() {
    for late in [None, Some(Duration::from_micros(10))] {
        let cfg = Config {
            ack_every: 4,
            ..ethernet_sized()
        };
        let seg = cfg.segment_payload();
        let t0 = Instant::now();
        let (mut a, mut b) = pair(cfg, t0);
        a.send(t0, vec![5u8; 40 * seg]).unwrap();
        let mut backlog = drain(&mut a, t0);
        assert_eq!(backlog.len(), 40);
        // The sender's timers fire into the silence; their resends join the backlog.
        let mut wake = t0 + Duration::from_millis(5);
        let mut last = t0;
        while let Some(t) = a.poll_timeout().filter(|&t| t < wake) {
            a.handle_timeout(t);
            backlog.extend(drain(&mut a, t));
            last = t;
        }
        assert!(a.stats().timeouts + a.stats().tail_probes > 0);
        if let Some(after) = late {
            wake = last + after;
        }
        let mut sink = Collect::default();
        let mut now = wake;
        for dg in &backlog {
            // The resends come after their originals: duplicates, refused as such.
            let _ = b.handle_datagram(now, dg, &mut sink);
            for ack in drain(&mut b, now) {
                a.handle_datagram(
                    now + Duration::from_micros(5),
                    &ack,
                    &mut Collect::default(),
                )
                .unwrap();
            }
            now += Duration::from_micros(1);
        }
        let s = a.stats();
        assert_eq!(
            s.burst_losses, 0,
            "woken {late:?} after the last resend: {s:?}"
        );
        assert_eq!(sink.delivered.len(), 1);
    }
}

/// Rounds of one 1000-byte message each from `a` to `b`; in round `i`, `b` looks at its
/// socket `lags[i]` after the send (zero: at once) and then acknowledges when due. Returns the
/// sender and its retransmissions per round; every message is checked.
fn lagging_rounds(lags: &[Duration]) -> (Session, Vec<u64>) {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(Config::default(), t0);
    let mut sink = Collect::default();
    let mut now = t0;
    let retx_per_round = run_lagging_rounds(&mut a, &mut b, &mut now, &mut sink, lags);
    assert_eq!(sink.delivered.len(), lags.len());
    for (round, (_, bytes, _)) in sink.delivered.iter().enumerate() {
        assert_eq!(bytes.as_deref(), Some(&vec![round as u8; 1000][..]));
    }
    (a, retx_per_round)
}

/// The rounds of [`lagging_rounds`] on a given pair, from `now` on.
fn run_lagging_rounds(
    a: &mut Session,
    b: &mut Session,
    now: &mut Instant,
    sink: &mut Collect,
    lags: &[Duration],
) -> Vec<u64> {
    let hop = Duration::from_micros(5);
    let mut retx_per_round = Vec::new();
    for (round, &lag) in lags.iter().enumerate() {
        let before = a.stats().retransmits;
        a.send(*now, vec![round as u8; 1000]).unwrap();
        // What `a` emits until `b` looks at its socket, `lag` later.
        let wake = *now + lag.max(hop);
        let mut queued = drain(a, *now);
        while let Some(t) = a.poll_timeout().filter(|&t| t < wake) {
            a.handle_timeout(t);
            queued.extend(drain(a, t));
        }
        *now = wake;
        // The resent copies are duplicates by now: refused, and reported to `a`.
        feed(b, *now, &queued, sink);
        b.input_drained(*now);
        // `b` is polling now: its ACK goes out when due, and `a` takes it a hop later.
        let (t, acks) = next_emission(b, *now);
        *now = t + hop;
        for ack in &acks {
            a.handle_datagram(*now, ack, &mut Collect::default())
                .unwrap();
        }
        assert!(a.is_idle(), "round {round}: acknowledged");
        retx_per_round.push(a.stats().retransmits - before);
        *now += Duration::from_millis(1);
    }
    retx_per_round
}

/// A receiver that computes instead of polling takes its datagrams, and acknowledges them,
/// milliseconds late. The first time, the sender's timers resend into the silence; once a
/// duplicate report proves that needless, the sender waits as long for later ACKs, and the
/// next exchanges cost no retransmission.
#[test]
fn a_receiver_that_acknowledges_late_is_waited_for() {
    let lag = Duration::from_millis(5);
    let (a, retx_per_round) = lagging_rounds(&[lag; 20]);
    assert!(
        retx_per_round[0] > 0,
        "the first late ACK is not known in advance"
    );
    assert_eq!(
        retx_per_round[1..].iter().sum::<u64>(),
        0,
        "retransmissions per round: {retx_per_round:?}"
    );
    assert!(a.rtt().ack_lag >= lag, "{:?}", a.rtt());
    assert!(a.stats().spurious_retransmits > 0);
}

/// The same once the sender knows the path's round trip (its probe then fires within
/// microseconds, and timers keep resending while the receiver computes), for lags of a few
/// timeouts: the lag is learnt from the first lagged round, whichever resend the duplicate
/// report answers.
#[test]
fn a_receiver_that_starts_acknowledging_late_is_waited_for() {
    for ms in [1.5f64, 3.5, 7.5, 16.0] {
        let lag = Duration::from_secs_f64(ms / 1000.0);
        let mut lags = vec![Duration::ZERO; 5];
        lags.extend([lag; 10]);
        let (a, retx) = lagging_rounds(&lags);
        assert_eq!(retx[..5].iter().sum::<u64>(), 0, "{ms} ms: {retx:?}");
        assert!(
            retx[5] > 0,
            "{ms} ms: the first late ACK is not known in advance"
        );
        assert_eq!(
            retx[6..].iter().sum::<u64>(),
            0,
            "{ms} ms: retransmissions per round: {retx:?}, {:?}",
            a.rtt()
        );
        assert!(a.rtt().ack_lag >= lag, "{ms} ms: {:?}", a.rtt());
    }
}

/// A receiver that computes and wakes just after a timer's resend answers it at once, as a
/// receiver whose ACK was lost would. Only the receiver can tell them apart (it had not
/// acknowledged the original), and says so: the sender learns the lag whenever the receiver
/// wakes. (Judged by timing alone, a resend answered within a probe timeout, such rounds were
/// taken for lost ACKs and retransmitted every time.)
#[test]
fn a_receiver_that_wakes_just_after_a_resend_is_waited_for() {
    for us in (150..3000).step_by(50) {
        let lag = Duration::from_micros(us);
        let mut lags = vec![Duration::ZERO; 5];
        lags.extend([lag; 6]);
        let (a, retx) = lagging_rounds(&lags);
        assert_eq!(
            retx[6..].iter().sum::<u64>(),
            0,
            "{us} us: retransmissions per round: {retx:?}, {:?}",
            a.rtt()
        );
        assert_eq!(a.stats().lost_acks, 0, "{us} us");
    }
}

/// Runs `s`'s timers until it emits something, from `now` on; returns when, and what.
fn next_emission(s: &mut Session, mut now: Instant) -> (Instant, Vec<Vec<u8>>) {
    loop {
        let out = drain(s, now);
        if !out.is_empty() {
            return (now, out);
        }
        now = s.poll_timeout().expect("something to emit");
        s.handle_timeout(now);
    }
}

/// `b`, having read everything at `now`, acknowledges it when due, and that ACK is lost. `b`
/// keeps polling (finding its socket empty) until `a`'s timer resends; it reads the copies and
/// answers. Returns when `a` took the answer, and the answer.
fn ack_lost_then_resent(
    a: &mut Session,
    b: &mut Session,
    now: Instant,
    sink: &mut Collect,
) -> (Instant, Vec<Vec<u8>>) {
    let hop = Duration::from_micros(5);
    b.input_drained(now);
    let (now, _lost) = next_emission(b, now);
    b.input_drained(now + hop);
    let (now, copies) = next_emission(a, now + hop);
    let now = now + hop;
    feed(b, now, &copies, sink);
    b.input_drained(now);
    let report = drain(b, now);
    feed(a, now + hop, &report, &mut Collect::default());
    (now + hop, report)
}

/// Hands `dgs` to `to` at `now`, whatever becomes of them.
fn feed(to: &mut Session, now: Instant, dgs: &[Vec<u8>], sink: &mut Collect) {
    for d in dgs {
        let _ = to.handle_datagram(now, d, sink);
    }
}

/// The duplicate reports of `dgs`, each with whether it says the duplicate had been
/// acknowledged before its copy came.
fn dsacks(dgs: &[Vec<u8>]) -> Vec<bool> {
    dgs.iter()
        .map(|d| Packet::new_checked(&d[..]).unwrap().flags())
        .filter(|f| f & FLAG_DSACK != 0)
        .map(|f| f & FLAG_ACKED != 0)
        .collect()
}

/// Three ways for a timer's resend to be needless, each told apart: the receiver's ACK was
/// lost (nothing to learn); the receiver was late (it read the copy in the same go as the
/// original, before its socket was empty: learn its lag); the sender was late (it resent after
/// the ACK had come, before reading it: not a lost ACK either).
#[test]
fn lost_acks_are_told_from_late_ones() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(Config::default(), t0);
    let hop = Duration::from_micros(5);
    let mut sink = Collect::default();

    // 1. The ACK is lost. The receiver keeps polling (its socket is found empty).
    a.send(t0, vec![1u8; 100]).unwrap();
    let orig = drain(&mut a, t0);
    let now = t0 + hop;
    feed(&mut b, now, &orig, &mut sink);
    let (now, report) = ack_lost_then_resent(&mut a, &mut b, now, &mut sink);
    assert_eq!(dsacks(&report), [true], "the receiver had acknowledged it");
    assert!(a.is_idle());
    assert_eq!(a.stats().spurious_retransmits, 1);
    assert_eq!(a.stats().lost_acks, 1);
    assert_eq!(
        a.rtt().ack_lag,
        Duration::ZERO,
        "nothing learnt from a lost ACK"
    );

    // 2. The receiver is late: the copy waits in its socket behind the original, and it
    // acknowledges the original between two batches of reads.
    let t1 = now + Duration::from_millis(5);
    a.send(t1, vec![2u8; 100]).unwrap();
    let mut queued = drain(&mut a, t1);
    let (t_copy, copy) = next_emission(&mut a, t1);
    queued.extend(copy);
    let now = t_copy + Duration::from_millis(2);
    feed(&mut b, now, &queued[..1], &mut sink);
    let (now, ack) = next_emission(&mut b, now);
    feed(&mut b, now, &queued[1..], &mut sink);
    b.input_drained(now);
    let report = drain(&mut b, now);
    assert_eq!(
        dsacks(&report),
        [false],
        "the copy came before the ACK left"
    );
    feed(&mut a, now + hop, &ack, &mut Collect::default());
    feed(&mut a, now + hop, &report, &mut Collect::default());
    assert!(a.is_idle());
    assert_eq!(a.stats().spurious_retransmits, 2);
    assert_eq!(a.stats().lost_acks, 1);
    assert!(a.rtt().ack_lag >= Duration::from_millis(2), "{:?}", a.rtt());

    // 3. The sender is late: its timer resends after the ACK came, before it reads it.
    let (mut a, mut b) = pair(Config::default(), t0);
    a.send(t0, vec![3u8; 100]).unwrap();
    let orig = drain(&mut a, t0);
    feed(&mut b, t0 + hop, &orig, &mut sink);
    b.input_drained(t0 + hop);
    let (now, ack) = next_emission(&mut b, t0 + hop);
    b.input_drained(now + hop);
    let (now, copy) = next_emission(&mut a, now + hop);
    let now = now + hop;
    feed(&mut b, now, &copy, &mut sink);
    let report = drain(&mut b, now);
    assert_eq!(dsacks(&report), [true]);
    feed(&mut a, now + hop, &ack, &mut Collect::default());
    feed(&mut a, now + hop, &report, &mut Collect::default());
    assert!(a.is_idle());
    assert_eq!(a.stats().spurious_retransmits, 1);
    assert_eq!(a.stats().lost_acks, 0, "the ACK came, late");
    assert_eq!(sink.delivered.len(), 3);
}

/// One lost ACK that covered several datagrams: the timer resends them, each is reported as a
/// duplicate the receiver had acknowledged, and the first report acknowledges them all. Each
/// report is still a lost ACK's: nothing is learnt. `head`: the datagrams the receiver gets
/// first, before the rest (reordered on the way).
fn one_lost_ack(cfg: Config, len: usize, head: std::ops::Range<usize>) -> Session {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(cfg, t0);
    let hop = Duration::from_micros(5);
    let mut sink = Collect::default();
    a.send(t0, vec![1u8; len]).unwrap();
    let orig = drain(&mut a, t0);
    let mut now = t0 + hop;
    if !head.is_empty() {
        feed(&mut b, now, &orig[head.clone()], &mut sink);
        b.input_drained(now);
        let (t, ack) = next_emission(&mut b, now);
        feed(&mut a, t + hop, &ack, &mut Collect::default());
        now = t + hop;
    }
    let rest: Vec<_> = (0..orig.len())
        .filter(|i| !head.contains(i))
        .map(|i| orig[i].clone())
        .collect();
    feed(&mut b, now, &rest, &mut sink);
    let (_, report) = ack_lost_then_resent(&mut a, &mut b, now, &mut sink);
    assert!(
        dsacks(&report).iter().all(|&acked| acked),
        "{:?}",
        dsacks(&report)
    );
    assert!(a.is_idle());
    assert_eq!(sink.delivered.len(), 1);
    a
}

#[test]
fn a_lost_ack_teaches_nothing_however_many_resends_it_caused() {
    // In order; before any RTT sample the timer resends the head and the holes below.
    let a = one_lost_ack(ethernet_sized(), 3000, 0..0);
    // Reordered, then the ACK lost: the first timeout resends the head and the hole.
    let no_probe = Config {
        min_pto: Duration::ZERO,
        ..ethernet_sized()
    };
    let b = one_lost_ack(no_probe, 3000, 2..3);
    for s in [a, b] {
        assert!(s.stats().spurious_retransmits > 0);
        assert_eq!(
            s.stats().lost_acks,
            s.stats().spurious_retransmits,
            "{:?}",
            s.stats()
        );
        assert_eq!(s.rtt().ack_lag, Duration::ZERO, "{:?}", s.rtt());
        assert_eq!(s.rtt().reo_wnd, Duration::ZERO, "{:?}", s.rtt());
    }
}

/// The original is lost, its fast retransmission gets through, and the ACK of that is lost:
/// the timer's copy is reported as acknowledged before. A lost ACK, not reordering.
#[test]
fn a_lost_ack_after_a_fast_retransmission_is_a_lost_ack() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(ethernet_sized(), t0);
    let hop = Duration::from_micros(5);
    let mut sink = Collect::default();
    a.send(t0, vec![1u8; 8000]).unwrap();
    let mut orig = drain(&mut a, t0);
    orig.remove(1);
    let now = t0 + hop;
    feed(&mut b, now, &orig, &mut sink);
    b.input_drained(now);
    let (now, ack) = next_emission(&mut b, now);
    let now = now + hop;
    feed(&mut a, now, &ack, &mut Collect::default());
    let (now, fast) = next_emission(&mut a, now);
    assert_eq!(a.stats().fast_retransmits, 1);
    let now = now + hop;
    feed(&mut b, now, &fast, &mut sink);
    let (_, report) = ack_lost_then_resent(&mut a, &mut b, now, &mut sink);
    assert_eq!(dsacks(&report), [true]);
    assert!(a.is_idle());
    assert_eq!(sink.delivered.len(), 1);
    assert_eq!(a.stats().lost_acks, 1, "{:?}", a.stats());
    assert_eq!(a.rtt().reo_wnd, Duration::ZERO, "{:?}", a.rtt());
    assert_eq!(a.rtt().ack_lag, Duration::ZERO, "{:?}", a.rtt());
}

/// The sender's probe resends a datagram just before it reads the ACK that selectively
/// acknowledged it: the receiver reports the copy as acknowledged before, yet that ACK was not
/// lost, it came (this side was late).
#[test]
fn a_selective_ack_read_after_the_resend_is_a_late_ack_not_a_lost_one() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(ethernet_sized(), t0);
    let hop = Duration::from_micros(5);
    let mut sink = Collect::default();
    let mut now = t0;
    run_lagging_rounds(&mut a, &mut b, &mut now, &mut sink, &[Duration::ZERO]);
    a.send(now, vec![4u8; 3000]).unwrap();
    let orig = drain(&mut a, now);
    assert_eq!(orig.len(), 3);
    // The first is lost; the receiver selectively acknowledges the other two.
    feed(&mut b, now + hop, &orig[1..], &mut sink);
    b.input_drained(now + hop);
    let (t_ack, sack) = next_emission(&mut b, now + hop);
    // The probe leaves after that ACK did, before it is read.
    let (t_probe, probe) = next_emission(&mut a, now);
    assert!(
        t_probe > t_ack && a.stats().tail_probes == 1,
        "{:?}",
        a.stats()
    );
    feed(&mut a, t_probe, &sack, &mut Collect::default());
    b.input_drained(t_probe);
    let (_, report) = {
        let t = t_probe + hop;
        feed(&mut b, t, &probe, &mut sink);
        (t, drain(&mut b, t))
    };
    assert_eq!(dsacks(&report), [true]);
    feed(&mut a, t_probe + 2 * hop, &report, &mut Collect::default());
    assert_eq!(a.stats().spurious_retransmits, 1);
    assert_eq!(a.stats().lost_acks, 0, "{:?}", a.stats());
}

/// One lost ACK, two timer resends (the head, and a hole below what was selectively
/// acknowledged); between the two reports the receiver sends data of its own, whose ACK fields
/// cover the second resend too. The first report already did: both are lost ACKs.
#[test]
fn an_ack_after_a_lost_acks_report_does_not_make_the_next_report_late() {
    let t0 = Instant::now();
    let no_probe = Config {
        min_pto: Duration::ZERO,
        ..ethernet_sized()
    };
    let (mut a, mut b) = pair(no_probe, t0);
    let hop = Duration::from_micros(5);
    let mut sink = Collect::default();
    a.send(t0, vec![5u8; 3000]).unwrap();
    let orig = drain(&mut a, t0);
    // The last overtakes the others, and its ACK comes through; theirs is lost.
    feed(&mut b, t0 + hop, &orig[2..], &mut sink);
    b.input_drained(t0 + hop);
    let (now, ack) = next_emission(&mut b, t0 + hop);
    feed(&mut a, now + hop, &ack, &mut Collect::default());
    feed(&mut b, now + hop, &orig[..2], &mut sink);
    b.input_drained(now + hop);
    let (now, _lost) = next_emission(&mut b, now + hop);
    b.input_drained(now + hop);
    let (now, copies) = next_emission(&mut a, now + hop);
    assert!(copies.len() >= 2, "{}", copies.len());
    let now = now + hop;
    feed(&mut b, now, &copies[..1], &mut sink);
    let first = drain(&mut b, now);
    b.send(now, vec![6u8; 100]).unwrap();
    let data = drain(&mut b, now);
    feed(&mut b, now, &copies[1..], &mut sink);
    b.input_drained(now);
    let rest = drain(&mut b, now);
    for dgs in [&first, &data, &rest] {
        feed(&mut a, now + hop, dgs, &mut sink);
    }
    assert_eq!(dsacks(&first), [true]);
    assert!(
        dsacks(&rest).iter().all(|&acked| acked),
        "{:?}",
        dsacks(&rest)
    );
    let s = a.stats();
    assert!(s.spurious_retransmits >= 2, "{s:?}");
    assert_eq!(s.lost_acks, s.spurious_retransmits, "{s:?}");
    assert_eq!(a.rtt().ack_lag, Duration::ZERO, "{:?}", a.rtt());
}

/// The receiver's side of the ACKED flag: a duplicate counts as acknowledged only by ACKs that
/// left before the socket was last found empty (what it reads after that came later), and an
/// ACK sent at the very moment of a drain is not before it.
#[test]
fn a_duplicate_is_acknowledged_only_by_acks_sent_before_the_last_drain() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(Config::default(), t0);
    let us = |n| Duration::from_micros(n);
    let mut sink = Collect::default();
    // X is acknowledged (the ACK is lost), then the socket is found empty.
    a.send(t0, vec![1u8; 10]).unwrap();
    let x = drain(&mut a, t0);
    feed(&mut b, t0 + us(5), &x, &mut sink);
    let (t1, _lost) = next_emission(&mut b, t0 + us(5));
    b.input_drained(t1 + us(1));
    // Y is acknowledged after that drain; then X's copy comes, before the next drain: the
    // ACK sent before the drain covered it.
    let t2 = t1 + us(10);
    a.send(t2, vec![2u8; 10]).unwrap();
    let y = drain(&mut a, t2);
    feed(&mut b, t2, &y, &mut sink);
    let (t3, _ack_y) = next_emission(&mut b, t2);
    feed(&mut b, t3, &x, &mut sink);
    assert_eq!(dsacks(&drain(&mut b, t3)), [true]);
    // Z is acknowledged at the moment of a drain; its copy, read before the next drain, may
    // have waited behind the original.
    let t4 = t3 + us(10);
    a.send(t4, vec![3u8; 10]).unwrap();
    let z = drain(&mut a, t4);
    feed(&mut b, t4, &z, &mut sink);
    let te = b.poll_timeout().expect("the ACK of Z is due");
    b.input_drained(te);
    b.handle_timeout(te);
    assert_eq!(drain(&mut b, te).len(), 1);
    feed(&mut b, te, &z, &mut sink);
    assert_eq!(dsacks(&drain(&mut b, te)), [false]);
    assert_eq!(sink.delivered.len(), 3);
}

/// A lag learnt from a late receiver lasts: a fast stream of promptly acknowledged datagrams
/// right after does not halve it within `LAG_MEMORY` (500 ms), and halves it after.
#[test]
fn a_learnt_ack_lag_is_kept_for_a_while() {
    let t0 = Instant::now();
    let (mut a, mut b) = pair(ethernet_sized(), t0);
    let mut sink = Collect::default();
    let mut now = t0;
    let lag = Duration::from_millis(5);
    run_lagging_rounds(&mut a, &mut b, &mut now, &mut sink, &[Duration::ZERO, lag]);
    let learnt = a.rtt().ack_lag;
    assert!(learnt >= lag, "{:?}", a.rtt());
    let retransmits = a.stats().retransmits;
    let stream = |a: &mut Session, b: &mut Session, now: &mut Instant, sink: &mut Collect| {
        // 3 MB in 1472-byte datagrams, each window acknowledged promptly.
        for _ in 0..32 {
            a.send(*now, vec![5u8; 100_000]).unwrap();
            while !a.is_idle() {
                let out = drain(a, *now);
                feed(b, *now, &out, sink);
                b.input_drained(*now);
                *now += Duration::from_micros(20);
                let (t, acks) = next_emission(b, *now);
                *now = t;
                feed(a, *now, &acks, &mut Collect::default());
            }
        }
    };
    stream(&mut a, &mut b, &mut now, &mut sink);
    assert_eq!(a.rtt().ack_lag, learnt, "halved within {:?}", now - t0);
    now += Duration::from_millis(500);
    stream(&mut a, &mut b, &mut now, &mut sink);
    assert!(a.rtt().ack_lag < learnt, "{:?}", a.rtt());
    assert_eq!(a.stats().retransmits, retransmits, "{:?}", a.stats());
    assert_eq!(sink.delivered.len(), 2 + 64);
}

#[test]
fn a_full_window_asks_for_an_ack_once_per_window_not_on_every_refill() {
    // A window-limited stream: the receiver takes datagrams one by one in order and answers by
    // count (every 8); every answer reaches the sender at once, which refills the window. Had
    // each refill that fills the window asked for an immediate ACK, the peer would answer every
    // few datagrams (an ACK per 3 in MPI's bw test at 1472-byte datagrams).
    let cfg = Config {
        max_datagram_size: 1472,
        send_window: 64,
        recv_window: 64,
        initial_credit: 64,
        ack_every: 8,
        ..Config::default()
    };
    let t0 = Instant::now();
    let (mut a, mut b) = pair(cfg, t0);
    let msg: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
    a.send(t0, msg.clone()).unwrap();
    let mut wire: std::collections::VecDeque<Vec<u8>> = drain(&mut a, t0).into();
    let (mut sent, mut asked) = (0usize, 0usize);
    let mut sink = Collect::default();
    let now = t0 + Duration::from_micros(5);
    while let Some(d) = wire.pop_front() {
        sent += 1;
        asked += usize::from(Packet::new_checked(&d[..]).unwrap().flags() & FLAG_ACK_REQ != 0);
        b.handle_datagram(now, &d, &mut sink).unwrap();
        for ack in drain(&mut b, now) {
            a.handle_datagram(now, &ack, &mut Collect::default())
                .unwrap();
            wire.extend(drain(&mut a, now));
        }
    }
    assert!(sent > 600, "{sent} datagrams");
    assert!(asked >= 1, "a full window still asks");
    assert!(
        asked <= sent / 64 + 1,
        "{asked} requests for {sent} datagrams"
    );
}

/// A flight whose probe goes unanswered: then the retransmission timer takes over and backs
/// off. (The timer had been armed for the original; finding the probe's resend not yet due, it
/// used to arm a new probe `pto` after that resend, a moment already past: each expiry brought
/// an extra probe at once, and a caller taking deadlines as they came went back in time.)
#[test]
fn an_unanswered_probe_leaves_the_rest_to_the_backed_off_timer() {
    let t0 = Instant::now();
    // Exact doubling is checked below; jitter would stretch each step by up to a quarter.
    let exact = Config {
        timer_jitter: false,
        ..Config::default()
    };
    let (mut a, mut b) = pair(exact, t0);
    let mut sink = Collect::default();
    let mut now = t0;
    // One exchange first: with an RTT sample, probes are armed well before the timer.
    run_lagging_rounds(&mut a, &mut b, &mut now, &mut sink, &[Duration::ZERO]);
    a.send(now, vec![1u8; 1000]).unwrap();
    assert_eq!(drain(&mut a, now).len(), 1);
    let mut last = now;
    let mut resent = Vec::new();
    while let Some(t) = a
        .poll_timeout()
        .filter(|&t| t < now + Duration::from_millis(100))
    {
        assert!(t >= last, "deadline {:?} after {:?}", t - now, last - now);
        last = t;
        a.handle_timeout(t);
        resent.extend(drain(&mut a, t).iter().map(|_| t - now));
    }
    assert_eq!(a.stats().tail_probes, 1, "{resent:?}");
    let gaps: Vec<_> = resent.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 5, "{resent:?}");
    for w in gaps.windows(2) {
        assert_eq!(w[1], w[0] * 2, "resent at {resent:?}");
    }
}

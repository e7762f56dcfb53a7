//! An endpoint driven by hand: `poll_transmit_gather` emits the same datagrams as
//! `poll_transmit`, in pieces; `flush_acks` sends an ACK owed at once.

use std::time::{Duration, Instant};

use reliability::header::{Kind, Packet};
use reliability::{Config, Delivery, Endpoint, MsgId, Placement, SessionIds, Sink};

#[derive(Default)]
struct Collect {
    placed: Vec<u8>,
    delivered: Vec<(MsgId, usize)>,
}

impl Sink for Collect {
    fn place(&mut self, p: Placement<'_>) {
        let end = p.offset as usize + p.bytes.len();
        if self.placed.len() < end {
            self.placed.resize(end, 0);
        }
        self.placed[p.offset as usize..end].copy_from_slice(p.bytes);
    }

    fn deliver(&mut self, msg: MsgId, d: Delivery<'_>) {
        let len = match d {
            Delivery::Inline(b) => b.len(),
            Delivery::Placed { len } => len as usize,
        };
        self.delivered.push((msg, len));
    }
}

fn pair(now: Instant) -> (Endpoint, Endpoint, SessionIds) {
    let ids = SessionIds {
        local_id: 1,
        local_epoch: 10,
        remote_id: 2,
        remote_epoch: 20,
    };
    let mut a = Endpoint::new(Config::default()).unwrap();
    let mut b = Endpoint::new(Config::default()).unwrap();
    a.open(ids, now);
    b.open(ids.mirrored(), now);
    (a, b, ids)
}

#[test]
fn gather_matches_the_copying_path() {
    let now = Instant::now();
    let (mut a, _, ids) = pair(now);
    let (mut c, _, _) = pair(now);
    let msg: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    a.send(ids.local_id, now, msg.clone()).unwrap();
    c.send(ids.local_id, now, msg).unwrap();
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        let mut header = [0u8; reliability::header::MAX_HEADER_LEN];
        let g = a.poll_transmit_gather(now, &mut header);
        let t = c.poll_transmit(now, &mut buf);
        let (Some((id, g)), Some((cid, t))) = (g, t) else {
            break;
        };
        assert_eq!((id, g.seq, g.retransmit), (cid, t.seq, t.retransmit));
        let mut whole = header[..g.header_len].to_vec();
        whole.extend_from_slice(&g.payload);
        whole.extend(g.trailer.iter().flatten());
        assert_eq!(whole.len(), g.size());
        assert_eq!(&whole[..], &buf[..t.size]);
        n += 1;
    }
    assert_eq!(n, 5, "300 000 bytes in 65 408-byte segments");
    assert!(a.poll_transmit_gather(now, &mut [0; 36]).is_none());
    assert!(c.poll_transmit(now, &mut buf).is_none());
}

#[test]
fn gathered_datagrams_deliver_and_acknowledge() {
    let mut now = Instant::now();
    let (mut a, mut b, ids) = pair(now);
    let msg: Vec<u8> = (0..200_000u32).map(|i| (i ^ (i >> 9)) as u8).collect();
    a.send(ids.local_id, now, msg.clone()).unwrap();
    let mut sink = Collect::default();
    for _ in 0..50 {
        let mut header = [0u8; reliability::header::MAX_HEADER_LEN];
        while let Some((_, g)) = a.poll_transmit_gather(now, &mut header) {
            let mut d = header[..g.header_len].to_vec();
            d.extend_from_slice(&g.payload);
            d.extend(g.trailer.iter().flatten());
            b.handle_datagram(now, &d, &mut sink, |_, _| None).unwrap();
        }
        let mut header = [0u8; reliability::header::MAX_HEADER_LEN];
        while let Some((_, g)) = b.poll_transmit_gather(now, &mut header) {
            let mut d = header[..g.header_len].to_vec();
            d.extend_from_slice(&g.payload);
            d.extend(g.trailer.iter().flatten());
            a.handle_datagram(now, &d, &mut (), |_, _| None).unwrap();
        }
        if a.session(ids.local_id).unwrap().is_idle() {
            break;
        }
        now += Duration::from_micros(200);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    assert!(a.session(ids.local_id).unwrap().is_idle());
    assert_eq!(sink.delivered, [(MsgId(0), 200_000)]);
    assert!(sink.placed == msg);
}

#[test]
fn parts_match_the_joined_message() {
    // A head in front of a body the caller handed over: the same datagrams as the joined
    // message, without joining them (the first segment gathers both).
    let now = Instant::now();
    for (head_len, body_len) in [(16usize, 300_000usize), (16, 5), (0, 70_000), (100, 65_392)] {
        let (mut a, _, ids) = pair(now);
        let (mut c, _, _) = pair(now);
        let head: Vec<u8> = (0..head_len as u32).map(|i| (i * 13 + 1) as u8).collect();
        let body: Vec<u8> = (0..body_len as u32).map(|i| (i * 7) as u8).collect();
        let mut joined = head.clone();
        joined.extend_from_slice(&body);
        a.send_parts(ids.local_id, now, head.into(), body.into(), true)
            .unwrap();
        c.send(ids.local_id, now, joined).unwrap();
        let mut buf = Vec::new();
        loop {
            let mut header = [0u8; reliability::header::MAX_HEADER_LEN];
            let g = a.poll_transmit_gather(now, &mut header);
            let t = c.poll_transmit(now, &mut buf);
            let (g, t) = match (g, t) {
                (Some((_, g)), Some((_, t))) => (g, t),
                (None, None) => break,
                _ => panic!("{head_len}+{body_len}: different datagram counts"),
            };
            let mut whole = header[..g.header_len].to_vec();
            whole.extend_from_slice(&g.payload);
            whole.extend_from_slice(&g.payload_tail);
            whole.extend(g.trailer.iter().flatten());
            assert_eq!(whole.len(), g.size());
            assert_eq!(&whole[..], &buf[..t.size], "{head_len}+{body_len}");
        }
    }
}

fn transmit(e: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while e.poll_transmit(now, &mut buf).is_some() {
        out.push(buf.clone());
    }
    out
}

#[test]
fn an_owed_ack_leaves_when_flushed() {
    let now = Instant::now();
    let (mut a, mut b, ids) = pair(now);
    // Four segments; the first two are neither a full batch nor the last queued.
    a.send(ids.local_id, now, vec![3u8; 200_000]).unwrap();
    let out = transmit(&mut a, now);
    assert_eq!(out.len(), 4);
    for d in &out[..2] {
        b.handle_datagram(now, d, &mut (), |_, _| None).unwrap();
    }
    assert!(
        transmit(&mut b, now).is_empty(),
        "the ACK waits for its delay"
    );
    b.flush_acks();
    let acks = transmit(&mut b, now);
    assert_eq!(acks.len(), 1);
    let p = Packet::new_checked(&acks[0][..]).unwrap();
    assert_eq!(p.kind().unwrap(), Kind::Ack);
    assert_eq!(p.ack().0, 2, "both segments acknowledged");
    // Nothing owed any more: a second flush sends nothing.
    b.flush_acks();
    assert!(transmit(&mut b, now).is_empty());
}

/// Datagrams handed over as runs (`handle_run`) do what one by one (`handle_datagram`) does:
/// the same bytes placed, the same deliveries, the same ACKs back. A datagram of another
/// session inside a run, and a run for a session that does not exist, are dropped and counted.
#[test]
fn a_run_of_datagrams_is_handled_as_one_by_one() {
    let now = Instant::now();
    let small = Config {
        max_datagram_size: 1472,
        initial_credit: 128,
        ..Config::default()
    };
    let open = |now| {
        let ids = SessionIds {
            local_id: 1,
            local_epoch: 10,
            remote_id: 2,
            remote_epoch: 20,
        };
        let mut a = Endpoint::new(small.clone()).unwrap();
        let mut b = Endpoint::new(small.clone()).unwrap();
        a.open(ids, now);
        b.open(ids.mirrored(), now);
        (a, b, ids)
    };
    let msg: Vec<u8> = (0..100_000u32).map(|i| (i * 13 + 5) as u8).collect();
    let (mut a, mut one, ids) = open(now);
    let (_, mut runs, _) = open(now);
    a.send(ids.local_id, now, msg.clone()).unwrap();
    a.send(ids.local_id, now, vec![9u8; 40]).unwrap();
    let datagrams = transmit(&mut a, now);
    assert!(datagrams.len() > 60, "{}", datagrams.len());
    let (mut s1, mut s2) = (Collect::default(), Collect::default());
    for d in &datagrams {
        one.handle_datagram(now, d, &mut s1, |_, _| None).unwrap();
    }
    let id = ids.remote_id;
    let mut taken = 0;
    for run in datagrams.chunks(44) {
        taken += runs.handle_run(now, id, run.iter().map(|d| &d[..]), &mut s2);
    }
    assert_eq!(taken, datagrams.len());
    assert_eq!(s1.delivered, s2.delivered);
    assert_eq!(s2.delivered, [(MsgId(0), 100_000), (MsgId(1), 40)]);
    assert!(s2.placed == msg);
    assert_eq!(
        transmit(&mut one, now),
        transmit(&mut runs, now),
        "the same ACKs"
    );
    // Another session's datagram in a run, and a run for no session.
    let mut stray = datagrams[0].clone();
    stray[4..8].copy_from_slice(&77u32.to_be_bytes());
    let before = *runs.stats();
    assert_eq!(runs.handle_run(now, id, [&stray[..]], &mut s2), 0);
    assert_eq!(
        runs.handle_run(now, 77, [&stray[..], &stray[..]], &mut s2),
        0
    );
    let after = runs.stats();
    assert_eq!(after.dropped_malformed - before.dropped_malformed, 1);
    assert_eq!(
        after.dropped_unknown_session - before.dropped_unknown_session,
        2
    );
}

/// Runs come from one session at a time, as long as the caller asks, then the next ready
/// session's, and the retransmission timer is armed once the run is out.
#[test]
fn runs_take_turns_by_session() {
    let now = Instant::now();
    let mut a = Endpoint::new(Config::default()).unwrap();
    let ids = |local_id, remote_id| SessionIds {
        local_id,
        local_epoch: 10,
        remote_id,
        remote_epoch: 20,
    };
    a.open(ids(1, 2), now);
    a.open(ids(3, 4), now);
    // Five and two datagrams' worth.
    a.send(1, now, vec![1u8; 300_000]).unwrap();
    a.send(3, now, vec![3u8; 100_000]).unwrap();
    // Only the silence limit of the sessions with work is timed before anything leaves.
    let before = a.poll_timeout().unwrap();
    let mut header = [0u8; reliability::header::MAX_HEADER_LEN];
    let mut runs = Vec::new();
    loop {
        let mut run = Vec::new();
        let got = a.poll_transmit_run(now, &mut header, |id, h, t| {
            let mut d = h[..t.header_len].to_vec();
            d.extend_from_slice(&t.payload);
            d.extend_from_slice(&t.payload_tail);
            d.extend(t.trailer.iter().flatten());
            let p = Packet::new_checked(&d[..]).unwrap();
            assert_eq!(p.session(), if id == 1 { 2 } else { 4 });
            assert!(t.payload.iter().all(|&b| b == id as u8));
            run.push((id, t.seq.unwrap().0));
            run.len() < 3
        });
        let Some(id) = got else { break };
        assert!(
            run.iter().all(|&(i, _)| i == id),
            "one session per run: {run:?}"
        );
        assert!(
            a.poll_timeout().unwrap() < before,
            "retransmission timer armed by the run"
        );
        runs.push(run.iter().map(|&(_, s)| s).collect::<Vec<_>>());
    }
    let isn = Config::default().initial_seq;
    let s = |k: u32| isn.wrapping_add(k);
    assert_eq!(
        runs,
        vec![vec![s(0), s(1), s(2)], vec![s(0), s(1)], vec![s(3), s(4)]],
        "session 1's first run stops at the caller's bound, session 3 runs dry"
    );
    let mut header = [0u8; reliability::header::MAX_HEADER_LEN];
    assert!(a.poll_transmit_gather(now, &mut header).is_none());
}

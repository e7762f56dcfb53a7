//! The memory ledger against the structures it charges: each account moves when its
//! structure grows, by what that structure holds within a stated tolerance, and the traffic
//! accounts come back down once the traffic is over. Per-peer state is measured by talking to
//! many peers and dividing.

use std::time::{Duration, Instant};

use iwarp::verbs::{AddressHandle, QpConfig, QueuePair, RdQp, SendOpcode, SendWr};
use policies::{Account, Scale};

use super::tests::{next, ok, pair, pattern, recv, send, wait_idle, Side};
use super::wire::Matching;
use super::*;
use crate::params::Config;
use crate::raw::mem::UserMem;

fn bytes(s: &Side, a: Account) -> usize {
    s.ep.sample_memory().get(a).bytes
}

/// A first message from `a` to `b`, checked and acknowledged: the session is open.
fn first_contact(a: &Side, b: &Side) {
    let first = recv(b, 0, Kind::Msg, 0, 8, 1);
    send(a, 1, Kind::Msg, 0, pattern(8, 1), 1);
    ok(next(b, a));
    assert!(*first.lock() == pattern(8, 1));
    wait_idle(a, b, "the first send");
}

/// Progresses `s` and reads nothing, until `done` holds (within 10 s).
fn progress_until(s: &Side, other: &Side, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        s.ep.with_data(|d| d.progress());
        other.ep.with_data(|d| d.progress());
        assert!(Instant::now() < deadline, "{what} within 10 s");
    }
}

/// Unexpected eager messages are charged their bytes and a record each; a rendezvous
/// request's pushed chunks are held in their own account; both go once receives take them.
#[test]
fn unexpected_and_held_pushes_move_with_what_waits() {
    let (a, b) = pair();
    let (u0, h0) = (
        bytes(&b, Account::Unexpected),
        bytes(&b, Account::HeldPushes),
    );
    const N: usize = 10;
    const LEN: usize = 20_000;
    const BIG: usize = 1 << 20;
    for i in 0..N {
        send(&a, 1, Kind::Tagged, i as u64, pattern(LEN, i as u8), i + 1);
    }
    send(&a, 1, Kind::Tagged, 99, pattern(BIG, 99), 99);
    let push = Config::default().push_size;
    progress_until(&b, &a, "unexpected messages held", || {
        bytes(&b, Account::Unexpected) >= u0 + N * LEN
            && bytes(&b, Account::HeldPushes) >= h0 + push
    });
    let du = bytes(&b, Account::Unexpected) - u0;
    // Tolerance: a matching record per message (well under 1 KiB).
    assert!(du <= N * LEN + (N + 1) * 1024, "unexpected grew {du}");
    let dh = bytes(&b, Account::HeldPushes) - h0;
    // Tolerance: the table of held messages.
    assert!(dh <= push + 4096, "held pushes grew {dh} for {push} pushed");
    let peak = b.ep.sample_memory().get(Account::Unexpected).peak;
    assert!(
        peak >= u0 + N * LEN,
        "the matcher's peak is reported: {peak}"
    );

    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Tagged, i as u64, LEN, 100 + i))
        .collect();
    let big = recv(&b, 0, Kind::Tagged, 99, BIG, 199);
    let mut done = 0;
    while done < N + 1 {
        ok(next(&b, &a));
        done += 1;
    }
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(LEN, i as u8), "message {i}");
    }
    assert!(*big.lock() == pattern(BIG, 99));
    wait_idle(&a, &b, "the sends");
    assert_eq!(
        bytes(&b, Account::Unexpected),
        u0,
        "every unexpected message taken"
    );
    assert!(
        bytes(&b, Account::HeldPushes) <= h0 + 1024,
        "pushed chunks released"
    );
}

/// Posted receives live in the matching structures: a slot each and their buckets.
#[test]
fn matching_grows_with_posted_receives() {
    let (a, b) = pair();
    let m0 = bytes(&b, Account::Matching);
    const N: usize = 1000;
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Tagged, i as u64, 8, i + 1))
        .collect();
    let dm = bytes(&b, Account::Matching) - m0;
    let each = std::mem::size_of::<Recv>();
    // Tolerance: slots and bucket tables grow by doubling, a bucket costs a few words.
    assert!(dm >= N * each, "{dm} for {N} receives of {each} bytes");
    assert!(
        dm <= 2 * N * (each + 128),
        "{dm} for {N} receives of {each} bytes"
    );
    send(&a, 1, Kind::Tagged, 7, pattern(8, 7), 1);
    assert_eq!(ok(next(&b, &a)).tag, 7);
    assert!(*bufs[7].lock() == pattern(8, 7));
}

/// Completions not yet read wait in the completion queue.
#[test]
fn completion_queues_hold_unread_completions() {
    let (a, b) = pair();
    let c0 = bytes(&b, Account::CompletionQueues);
    const N: usize = 300;
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Msg, 0, 16, i + 1))
        .collect();
    for i in 0..N {
        send(&a, 1, Kind::Msg, 0, pattern(16, i as u8), i + 1);
    }
    progress_until(&b, &a, "every message received", || {
        b.ep.data_stats().received >= N as u64
    });
    let dc = bytes(&b, Account::CompletionQueues) - c0;
    let each = std::mem::size_of::<Completion>();
    assert!(dc >= N * each, "{dc} for {N} completions of {each} bytes");
    assert!(dc <= 2 * N * each + 16 * 1024, "{dc} for {N} completions");
    let mut read = 0;
    while read < N {
        read += b.cq.read(64, |_, _| ()).unwrap_or(0);
    }
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(16, i as u8), "message {i}");
    }
}

/// Sends to a peer that stopped reading stay with the sender: sent and unacknowledged
/// (retransmit), or waiting for the window (send queue). Once the peer is back they go, and
/// both accounts return to their floor.
#[test]
fn retransmit_and_send_queue_hold_what_the_peer_has_not_acknowledged() {
    let (a, b) = pair();
    // Open the session first, so what follows is data, not a handshake.
    first_contact(&a, &b);
    let floor = |s: &Side| bytes(s, Account::Retransmit) + bytes(s, Account::SendQueue);
    let f0 = floor(&a);
    // B stops: its data path is held, so neither its thread nor anyone progresses it.
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (holding, held) = std::sync::mpsc::channel::<()>();
    let bep = Arc::clone(&b.ep);
    let stop = std::thread::spawn(move || {
        bep.with_data(|_| {
            holding.send(()).unwrap();
            let _ = wait.recv();
        })
    });
    held.recv().unwrap();
    const N: usize = 48;
    const LEN: usize = 30_000;
    for i in 0..N {
        send(&a, 1, Kind::Msg, 0, pattern(LEN, i as u8), 10 + i);
    }
    a.ep.with_data(|d| d.progress());
    let held = floor(&a) - f0;
    let r = bytes(&a, Account::Retransmit);
    assert!(r >= LEN, "something was sent and not acknowledged: {r}");
    // Tolerance: a reliability and DDP header per datagram, and the socket's batch.
    assert!(held >= N * LEN, "{held} held for {} sent", N * LEN);
    assert!(
        held <= N * LEN + N * 256 + 64 * 1024,
        "{held} held for {} sent",
        N * LEN
    );
    drop(release);
    stop.join().unwrap();
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Msg, 0, LEN, 100 + i))
        .collect();
    for _ in 0..N {
        ok(next(&b, &a));
    }
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(LEN, i as u8), "message {i}");
    }
    wait_idle(&a, &b, "the sends");
    assert_eq!(bytes(&a, Account::Retransmit), 0);
    // What the sends borrowed goes back as the data path runs on (not within the very poll
    // that saw the last acknowledgement, on a busy machine): within a bounded time.
    let deadline = Instant::now() + Duration::from_secs(5);
    while floor(&a) > f0 && Instant::now() < deadline {
        a.ep.with_data(|d| d.progress());
        let _ = b.cq.read(0, |_, _| ());
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(floor(&a) <= f0, "back to the floor: {} > {f0}", floor(&a));
}

/// Copied sends return their buffers to the pool, which keeps them (bounded) for reuse.
#[test]
fn send_pool_keeps_copies_for_reuse() {
    let (a, b) = pair();
    let p0 = bytes(&a, Account::SendPool);
    const N: usize = 64;
    const LEN: usize = 30_000;
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Msg, 0, LEN, i + 1))
        .collect();
    for i in 0..N {
        send(&a, 1, Kind::Msg, 0, pattern(LEN, i as u8), i + 1);
    }
    for _ in 0..N {
        ok(next(&b, &a));
    }
    wait_idle(&a, &b, "the sends");
    let dp = bytes(&a, Account::SendPool).saturating_sub(p0);
    assert!(dp >= LEN, "a copy kept for reuse: {dp}");
    assert!(dp <= 8 << 20, "the pool's bound: {dp}");
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(LEN, i as u8), "message {i}");
    }
}

/// A rendezvous send waits for its answer in the operations' tables.
#[test]
fn rendezvous_tables_hold_sends_waiting_for_their_answer() {
    let (a, b) = pair();
    let r0 = bytes(&a, Account::Rendezvous);
    const N: usize = 200;
    for i in 0..N {
        send(
            &a,
            1,
            Kind::Tagged,
            i as u64,
            pattern(100_000, i as u8),
            i + 1,
        );
    }
    let dr = bytes(&a, Account::Rendezvous) - r0;
    let each = std::mem::size_of::<ops::PendingSend>();
    assert!(dr >= N * each, "{dr} for {N} sends of {each} bytes");
    // Tolerance: the tables grow by doubling; requests queued behind the window.
    assert!(dr <= 4 * N * (each + 256), "{dr} for {N} sends");
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Tagged, i as u64, 100_000, 1000 + i))
        .collect();
    for _ in 0..N {
        ok(next(&b, &a));
    }
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(100_000, i as u8), "message {i}");
    }
}

/// Registered regions are the application's; the table that names them is ours.
#[test]
fn rma_charges_the_region_table() {
    let (a, _b) = pair();
    let r0 = bytes(&a, Account::Rma);
    const N: usize = 100;
    for k in 0..N {
        let (mem, _) = UserMem::owned(vec![0; 1 << 16]);
        a.ep.domain.mrs.insert(1000 + k as u64, mem, 0).unwrap();
    }
    let dr = bytes(&a, Account::Rma) - r0;
    assert!(dr >= N * 16, "{dr} for {N} regions");
    assert!(
        dr <= N * 1024,
        "{dr} for {N} regions: the regions' bytes are not ours"
    );
}

/// The receive ring is sized once, at open: traffic does not grow it.
#[test]
fn receive_ring_is_fixed() {
    let (a, b) = pair();
    let ring = bytes(&b, Account::ReceiveRing);
    assert!(ring >= 64 * 1024, "{ring}");
    let buf = recv(&b, 0, Kind::Msg, 0, 1 << 20, 1);
    send(&a, 1, Kind::Msg, 0, pattern(1 << 20, 3), 1);
    ok(next(&b, &a));
    assert!(*buf.lock() == pattern(1 << 20, 3));
    assert_eq!(bytes(&b, Account::ReceiveRing), ring);
}

/// Per-peer state: N queue pairs each send the endpoint one message, and the per-peer
/// accounts' growth divided by N is what an idle datagram peer costs after first contact.
#[test]
fn per_peer_state_of_idle_datagram_peers() {
    let (a, b) = pair();
    // Peers' messages match receives from any source (they are not in the AV).
    const N: usize = 32;
    let per_peer = |s: &Side| {
        let m = s.ep.sample_memory();
        [Account::PeerState, Account::Engine]
            .iter()
            .map(|&acc| m.get(acc).bytes)
            .sum::<usize>()
    };
    let p0 = per_peer(&b);
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, FI_ADDR_UNSPEC, Kind::Tagged, 5, 8, i + 1))
        .collect();
    let n = b.ep.name();
    let mut qps: Vec<RdQp> = (0..N)
        .map(|i| {
            let mut qp = RdQp::create(QpConfig::default()).unwrap();
            qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
            let mut msg = Vec::new();
            let m = Matching {
                kind: Kind::Tagged,
                tag: 5,
                data: None,
                len: 8,
            };
            wire::eager(&mut msg, qp.qpn(), &m);
            msg.extend_from_slice(&pattern(8, i as u8));
            qp.post_send(SendWr {
                wr_id: 1,
                opcode: SendOpcode::Send,
                data: &super::tests::forged(&n, 1, &msg),
                ah: Some(AddressHandle::new(n.udp_addr(), n.qpn)),
                signaled: true,
            })
            .unwrap();
            qp
        })
        .collect();
    let mut got = 0;
    let mut wcs = vec![];
    let deadline = Instant::now() + Duration::from_secs(20);
    while got < N {
        for qp in &mut qps {
            qp.poll_cq(&mut wcs, 8).unwrap();
        }
        got += b.cq.read(64, |_, _| ()).unwrap_or(0);
        assert!(Instant::now() < deadline, "{got} of {N} messages");
    }
    for qp in &mut qps {
        qp.poll_cq(&mut wcs, 8).unwrap();
    }
    let mut seen: Vec<Vec<u8>> = bufs.iter().map(|b| b.lock().clone()).collect();
    seen.sort();
    let mut want: Vec<Vec<u8>> = (0..N).map(|i| pattern(8, i as u8)).collect();
    want.sort();
    assert_eq!(seen, want, "every peer's message, once");
    let ledger = b.ep.sample_memory();
    let peers = ledger.get(Account::PeerState).peers.unwrap();
    assert_eq!(peers, N, "the {N} queue pairs (A never sent)");
    let each = (per_peer(&b) - p0) / N;
    eprintln!(
        "per-peer state of an idle datagram peer: {each} bytes (peer_state {}, engine {} over {peers} peers)",
        ledger.get(Account::PeerState).bytes,
        ledger.get(Account::Engine).bytes
    );
    // The session alone is most of a kilobyte (reliability's `Session`); tables grow by
    // doubling, so N peers may cost up to twice their entries.
    assert!(
        each >= std::mem::size_of::<reliability::Session>(),
        "{each}"
    );
    assert!(each <= 8 * 1024, "{each} bytes per peer");
    drop(a);
}

/// The address vector charges a slot and a reverse-map entry per name.
#[test]
fn address_vector_grows_per_name() {
    let (a, _b) = pair();
    let av_usage = |s: &Side| {
        let u = s.ep.sample_memory().get(Account::AddressVector);
        (u.bytes, u.peers.unwrap_or(0))
    };
    let (av0, names0) = av_usage(&a);
    let av = a.ep.bound_av().unwrap();
    const N: usize = 1000;
    let names: Vec<u8> = (0..N)
        .flat_map(|i| {
            let mut n = a.ep.name();
            n.udp_port = 20_000 + i as u16;
            n.encode()
        })
        .collect();
    assert_eq!(av.insert(&names, 0).unwrap().count, N);
    let (av1, names1) = av_usage(&a);
    assert_eq!(names1 - names0, N);
    let each = (av1 - av0) / N;
    // A slot (a name and a count) and a map entry (an address and a handle), tables doubling.
    assert!((32..=256).contains(&each), "{each} bytes per name");
}

/// Every account has a test above or in its layer; this keeps the list honest.
#[test]
fn every_account_scales_as_documented() {
    for &acc in Account::ALL {
        let scale = acc.scale();
        let per_peer = matches!(
            acc,
            Account::PeerState | Account::AddressVector | Account::Engine
        );
        assert_eq!(scale == Scale::Peers, per_peer, "{acc:?}");
    }
}

/// Runs test `name` (ignored in ordinary runs) alone in a fresh process of this test program:
/// the provider's heap is counted process-wide, and other tests would move it.
fn alone(name: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            name,
            "--exact",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} failed:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    eprintln!("{text}");
}

#[test]
fn the_ledger_explains_the_heap_and_closing_gives_it_back() {
    alone("data::ledger_tests::heap_alone");
}

/// The traffic of [`unexpected_and_held_pushes_move_with_what_waits`] and more, between two
/// endpoints: the ledger's growth explains at least 90 % of the heap's (the whole process's
/// here, both endpoints included), the traffic accounts go back to their floor once it is
/// over, and closing both endpoints gives back every byte they took.
#[test]
#[ignore = "run alone, in a process of its own, by the_ledger_explains_the_heap_and_closing_gives_it_back"]
fn heap_alone() {
    use crate::raw::heap::provider_heap;
    // Lazily built statics (logging, parameters) are taken by a first pair.
    drop(pair());
    let h0 = provider_heap();
    let (a, b) = pair();
    let ledgers = |x: &Side, y: &Side| x.ep.sample_memory().total() + y.ep.sample_memory().total();
    const N: usize = 40;
    // The application's buffers are in the heap too: made before the measure, and kept
    // (an eager send's completes once copied, and the application may free it).
    let out: Vec<_> = (0..N)
        .map(|i| {
            let (small, kept_small) = UserMem::owned(pattern(30_000, i as u8));
            let (large, kept_large) = UserMem::owned(pattern(200_000, i as u8));
            (small, large, (kept_small, kept_large))
        })
        .collect();
    let floor: Vec<_> = [&a, &b].map(|s| s.ep.sample_memory()).into();
    let (h1, l1) = (provider_heap(), ledgers(&a, &b));
    let mut kept = Vec::new();
    for (i, (small, large, k)) in out.into_iter().enumerate() {
        for (s, dest, mem) in [(&a, 1, small), (&b, 0, large)] {
            s.ep.send(SendArgs {
                kind: Kind::Tagged,
                dest,
                mem,
                tag: i as u64,
                data: None,
                context: i + 1,
                flags: FI_COMPLETION,
            })
            .unwrap();
        }
        kept.push(k);
    }
    progress_until(&b, &a, "unexpected messages held", || {
        bytes(&b, Account::Unexpected) >= N * 30_000
    });
    let (h2, l2) = (provider_heap(), ledgers(&a, &b));
    for (s, f) in [&a, &b].into_iter().zip(&floor) {
        let now = s.ep.sample_memory();
        let moved: Vec<_> = Account::ALL
            .iter()
            .map(|&acc| {
                (
                    acc.name(),
                    now.get(acc).bytes as i64 - f.get(acc).bytes as i64,
                )
            })
            .filter(|&(_, d)| d != 0)
            .collect();
        eprintln!("accounts moved: {moved:?}");
    }
    let (grew, explained) = (h2 as f64 - h1 as f64, l2 as f64 - l1 as f64);
    eprintln!(
        "heap grew {grew} bytes, the ledgers {explained}: {:.3}",
        explained / grew
    );
    assert!(grew > (N * 30_000) as f64, "{grew}");
    assert!(
        explained >= 0.9 * grew && explained <= 1.1 * grew,
        "{explained} of {grew}"
    );
    let bufs: Vec<_> = (0..N)
        .flat_map(|i| {
            [
                (
                    i,
                    recv(&b, 0, Kind::Tagged, i as u64, 30_000, 100 + i),
                    30_000,
                ),
                (
                    i,
                    recv(&a, 1, Kind::Tagged, i as u64, 200_000, 100 + i),
                    200_000,
                ),
            ]
        })
        .collect();
    let (mut at_a, mut at_b) = (0, 0);
    while at_a < 2 * N || at_b < 2 * N {
        at_a += a.cq.read(16, |_, _| ()).unwrap_or(0);
        at_b += b.cq.read(16, |_, _| ()).unwrap_or(0);
    }
    for (i, buf, len) in &bufs {
        assert!(
            *buf.lock() == pattern(*len, *i as u8),
            "message {i} of {len}"
        );
    }
    wait_idle(&a, &b, "A's sends");
    wait_idle(&b, &a, "B's sends");
    for (s, f) in [&a, &b].into_iter().zip(&floor) {
        let now = s.ep.sample_memory();
        // The socket's batch keeps its capacity (a few KiB): the rest holds data only.
        let sq = now.get(Account::SendQueue).bytes;
        assert!(
            sq <= f.get(Account::SendQueue).bytes + 8192,
            "send queue {sq}"
        );
        for acc in [
            Account::Retransmit,
            Account::Staged,
            Account::Unexpected,
            Account::FaultLayer,
        ] {
            assert!(
                now.get(acc).bytes <= f.get(acc).bytes,
                "{acc:?}: {:?} after, {:?} before",
                now.get(acc),
                f.get(acc)
            );
        }
    }
    a.ep.shutdown();
    b.ep.shutdown();
    drop((a, b, bufs, kept));
    let h3 = provider_heap();
    eprintln!("heap: {h0} before, {h1} open, {h2} in traffic, {h3} closed");
    // Tolerance: the test harness's own output buffers.
    assert!(
        h3 <= h0 + 4096,
        "closing kept {} bytes",
        h3 as i64 - h0 as i64
    );
}

/// Random datagrams sprayed at an endpoint's socket change nothing in its traffic, and the
/// report says what became of them: each one is counted as refused somewhere.
#[test]
fn sprayed_datagrams_are_counted_in_the_report() {
    let (a, b) = pair();
    let target = b.ep.name().udp_addr();
    let stranger = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger.set_nonblocking(true).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next_u64 = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    const N: u64 = 20_000;
    let read_before = b.ep.with_data(|d| d.datagrams_read());
    let mut sent = 0;
    while sent < N {
        let len = (next_u64() % 1500) as usize;
        let junk: Vec<u8> = (0..len).map(|_| next_u64() as u8).collect();
        match stranger.send_to(&junk, target) {
            Ok(_) => sent += 1,
            // The receiver's buffer is full: let it read.
            Err(_) => b.ep.with_data(|d| d.progress()),
        }
    }
    // Until nothing more comes: what the socket could not hold, the kernel dropped.
    let mut last = (0, Instant::now());
    while last.1.elapsed() < Duration::from_millis(100) {
        let now = b.ep.with_data(|d| {
            d.progress();
            d.datagrams_read()
        });
        if now != last.0 {
            last = (now, Instant::now());
        }
    }
    let read = last.0 - read_before;
    // Real traffic still works, every byte checked.
    let buf = recv(&b, 0, Kind::Tagged, 3, 70_000, 1);
    send(&a, 1, Kind::Tagged, 3, pattern(70_000, 5), 1);
    let c = ok(next(&b, &a));
    assert_eq!((c.tag, c.len), (3, 70_000));
    assert!(*buf.lock() == pattern(70_000, 5));
    let report = crate::testutil::valid_report(&b.ep.memory_report("running"));
    let qp = &report["counters"]["queue_pair"];
    let data = &report["counters"]["data"];
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}"));
    let refused = n(qp, "dropped_control")
        + n(qp, "dropped_malformed")
        + n(qp, "dropped_unknown_session")
        + n(qp, "dropped")
        + n(qp, "protocol_errors")
        + n(data, "malformed")
        + n(data, "stray");
    let kernel_drops = n(&report["kernel"], "drops");
    eprintln!("sprayed {N}: read {read}, the kernel dropped {kernel_drops}; {qp}");
    assert_eq!(
        read + kernel_drops,
        N,
        "every sprayed datagram read or dropped by the kernel"
    );
    assert_eq!(
        refused, read,
        "every one read was refused and counted: {qp} {data}"
    );
}

/// With a small FI_DIWARP_MEM_BUDGET, the pools traffic grows stay within their shares:
/// pushed chunks held for unexpected messages, spare send buffers. Nothing is lost: the
/// refused pushes come again after the answer, every byte checked.
#[test]
fn a_small_budget_bounds_held_pushes_and_spare_buffers() {
    let total = super::budget::MIN;
    let budget = Budget::new(total);
    let (a, b) = super::tests::pair_with(Config {
        mem_budget: total,
        ..Config::default()
    });
    const N: usize = 12;
    const BIG: usize = 1 << 20;
    for i in 0..N {
        send(&a, 1, Kind::Tagged, i as u64, pattern(BIG, i as u8), i + 1);
    }
    progress_until(&b, &a, "every request in", || {
        b.ep.sample_memory().get(Account::Unexpected).bytes > 0
            && b.ep.data_stats().push_parked + b.ep.data_stats().push_dropped
                >= (N * Config::default().push_size / CHUNK) as u64
    });
    let held = b.ep.sample_memory().get(Account::HeldPushes);
    assert!(
        held.peak <= budget.held_pushes,
        "{held:?} over {}",
        budget.held_pushes
    );
    assert!(
        b.ep.data_stats().push_dropped > 0,
        "{N} messages' pushes cannot all be held"
    );
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Tagged, i as u64, BIG, 100 + i))
        .collect();
    for _ in 0..N {
        ok(next(&b, &a));
    }
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(BIG, i as u8), "message {i}");
    }
    // Eager copies: many sizes, so that every buffer class fills.
    let bufs: Vec<_> = (0..400)
        .map(|i| recv(&b, 0, Kind::Msg, 0, 32 * 1024, 1000 + i))
        .collect();
    for i in 0..400 {
        let len = 2048 << (i % 5);
        // Past the budget a send answers FI_EAGAIN until the peer acknowledges: as MPI does,
        // make progress and try again.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (mem, _) = crate::raw::mem::UserMem::owned(pattern(len, i as u8));
            let args = SendArgs {
                kind: Kind::Msg,
                dest: 1,
                mem,
                tag: 0,
                data: None,
                context: 1000 + i,
                flags: FI_COMPLETION,
            };
            match a.ep.send(args) {
                Ok(()) => break,
                Err(e) if e == Errno::AGAIN && Instant::now() < deadline => {
                    let _ = a.cq.read(0, |_, _| ());
                    let _ = b.cq.read(0, |_, _| ());
                }
                Err(e) => panic!("send {i}: {e:?}"),
            }
        }
    }
    for _ in 0..400 {
        ok(next(&b, &a));
    }
    wait_idle(&a, &b, "the copies");
    let spare = a.ep.sample_memory().get(Account::SendPool).bytes;
    assert!(spare <= budget.spare, "{spare} spare over {}", budget.spare);
    assert!(spare > 0);
    for (i, buf) in bufs.iter().enumerate() {
        let len = 2048 << (i % 5);
        assert!(buf.lock()[..len] == pattern(len, i as u8)[..], "copy {i}");
    }
}

/// A burst grows a peer's queues; once it has drained, the peer's state is back to what one
/// message left (a peer met once in an all-to-all does not keep its burst's room).
#[test]
fn per_peer_state_shrinks_back_after_a_burst() {
    let (a, b) = pair();
    first_contact(&a, &b);
    let quiet = bytes(&a, Account::PeerState);
    const N: usize = 200;
    let bufs: Vec<_> = (0..N)
        .map(|i| recv(&b, 0, Kind::Msg, 0, 4096, 10 + i))
        .collect();
    for i in 0..N {
        send(&a, 1, Kind::Msg, 0, pattern(4096, i as u8), 10 + i);
    }
    let during = bytes(&a, Account::PeerState);
    for _ in 0..N {
        ok(next(&b, &a));
    }
    wait_idle(&a, &b, "the burst");
    for (i, buf) in bufs.iter().enumerate() {
        assert!(*buf.lock() == pattern(4096, i as u8), "message {i}");
    }
    // The engine gives its session's queues back once the session has been idle a while
    // (20 ms at the least; longer on a loaded machine, where progress comes late).
    let start = Instant::now();
    let mut after;
    loop {
        a.ep.with_data(|d| d.progress());
        b.ep.with_data(|d| d.progress());
        after = bytes(&a, Account::PeerState);
        let waited = start.elapsed();
        if waited >= Duration::from_secs(2)
            || (waited >= Duration::from_millis(20) && after <= quiet + 256)
        {
            break;
        }
    }
    eprintln!("peer state: {quiet} quiet, {during} in the burst, {after} after it");
    assert!(
        during > quiet,
        "the burst queued sends ({during} vs {quiet})"
    );
    assert!(
        after <= quiet + 256,
        "{after} after the burst, {quiet} before"
    );
}

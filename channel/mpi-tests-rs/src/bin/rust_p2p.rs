//! Point-to-point through rsmpi: blocking ping-pong and exchanges with every byte, source, tag
//! and count checked; wildcard source and tag with per-sender order; probe, immediate probe,
//! matched probe (mprobe) and its immediate form; immediate sends and receives completed by
//! wait_all, wait_any, wait_some, test_any and one by one; a derived datatype (a struct with
//! padding, an array and a tuple) sent point-to-point and broadcast.
use mpi::point_to_point as p2p;
use mpi::point_to_point::MatchedReceiveVec;
use mpi::request::{multiple_scope, scope};
use mpi::traits::*;
use mpi_tests_rs::{filled, mix64, Digest, Test};

const GUARD: u8 = 0xA5;

/// The size of message `seq` from `src` to `dst`: 60 % up to 64 B, some up to 4 KiB, a few up
/// to 200 KiB (over MPICH's eager limit, so that rendezvous messages are among them).
fn size_of(t: &Test, salt: u64, src: i32, dst: i32, seq: u64) -> usize {
    let r = mix64(mpi_tests_rs::msg_seed(t.seed, salt ^ 0x5153, src, dst, seq));
    match r % 10 {
        0..=5 => (r >> 8) as usize % 65,
        6..=8 => (r >> 8) as usize % 4097,
        _ => (r >> 8) as usize % 200_001,
    }
}

fn pingpong(t: &Test, d: &mut Digest) {
    let sizes = [
        0usize,
        1,
        7,
        8,
        15,
        16,
        17,
        100,
        1023,
        1024,
        1025,
        4095,
        4096,
        4097,
        65535,
        65536,
        65537,
        262_147,
        1 << 20,
    ];
    let peer = t.rank ^ 1;
    if peer >= t.size {
        return;
    }
    let other = t.world.process_at_rank(peer);
    let even = t.rank % 2 == 0;
    for (s, &n) in sizes.iter().enumerate() {
        let seq = s as u64;
        let tag = 100 + s as i32;
        t.phase(&format!("ping-pong of {n} bytes with {peer}"));
        let mut buf = filled(n + 64, GUARD);
        for turn in 0..2 {
            if (turn == 0) == even {
                t.waiting(&format!("send of {n} bytes to {peer}"));
                other.send_with_tag(&t.msg(1, t.rank, peer, seq, n)[..], tag);
            } else {
                t.waiting(&format!("receive of {n} bytes from {peer}"));
                let st = other.receive_into_with_tag(&mut buf[..], tag);
                t.check_status::<u8>(&st, "ping-pong receive", peer, tag, n);
                t.msg_check(&buf[..n], 1, peer, t.rank, seq, "ping-pong");
                t.check(buf[n..].iter().all(|&b| b == GUARD), || {
                    format!("ping-pong of {n} bytes: bytes after the message were written")
                });
                d.add(peer, tag, &buf[..n]);
            }
        }
        // Both directions at once.
        t.phase(&format!("sendrecv of {n} bytes with {peer}"));
        buf.fill(GUARD);
        t.waiting(&format!("send_receive of {n} bytes with {peer}"));
        let st = p2p::send_receive_into_with_tags(
            &t.msg(2, t.rank, peer, seq, n)[..],
            &other,
            tag + 1000,
            &mut buf[..],
            &other,
            tag + 1000,
        );
        t.check_status::<u8>(&st, "send_receive", peer, tag + 1000, n);
        t.msg_check(&buf[..n], 2, peer, t.rank, seq, "send_receive");
        t.check(buf[n..].iter().all(|&b| b == GUARD), || {
            format!("send_receive of {n} bytes: bytes after the message were written")
        });
        d.add(peer, tag + 1000, &buf[..n]);
    }
}

/// Every rank but the root sends `k` messages; the root receives them with ANY_SOURCE and
/// ANY_TAG, then by tag (2, 1, 0) from any source, then from each source with ANY_TAG. Each
/// message must be its sender's next one among those the receive can match.
fn wildcard(t: &Test, d: &mut Digest, root: i32, k: u64) {
    let salt = 10 + root as u64;
    let tag_of = |seq: u64| (seq % 3) as i32;
    let max = 200_001;
    for (part, how) in ["ANY_SOURCE, ANY_TAG", "ANY_SOURCE, tag", "source, ANY_TAG"]
        .iter()
        .enumerate()
    {
        let salt = salt * 8 + part as u64;
        t.phase(&format!("wildcard receives ({how}) at root {root}"));
        if t.rank != root {
            let msgs: Vec<Vec<u8>> = (0..k)
                .map(|s| t.msg(salt, t.rank, root, s, size_of(t, salt, t.rank, root, s)))
                .collect();
            let dst = t.world.process_at_rank(root);
            multiple_scope(msgs.len(), |sc, coll| {
                for (s, m) in msgs.iter().enumerate() {
                    coll.add(dst.immediate_send_with_tag(sc, &m[..], tag_of(s as u64)));
                }
                t.waiting(&format!("wait_all of {k} sends to root {root}"));
                let mut out = vec![];
                coll.wait_all(&mut out);
            });
        } else {
            let mut buf = filled(max, 0);
            // What each sender's next message is, per tag class (0..3) or overall (3).
            let mut next = vec![[0u64; 4]; t.size as usize];
            let mut take = |st: &mpi::point_to_point::Status, buf: &[u8], class: usize| {
                let src = st.source_rank();
                t.check(src >= 0 && src < t.size && src != root, || {
                    format!("received from {src}")
                });
                let seq = if class == 3 {
                    next[src as usize][3]
                } else {
                    // The next of this sender's messages with tag `class`.
                    let mut s = next[src as usize][class];
                    while tag_of(s) != class as i32 {
                        s += 1;
                    }
                    s
                };
                t.check(seq < k, || format!("one message too many from {src}"));
                let n = size_of(t, salt, src, root, seq);
                t.check_status::<u8>(st, how, src, tag_of(seq), n);
                t.msg_check(&buf[..n], salt, src, root, seq, how);
                d.add(src, st.tag(), &buf[..n]);
                if class == 3 {
                    next[src as usize][3] = seq + 1;
                } else {
                    next[src as usize][class] = seq + 1;
                }
            };
            let total = (t.size as u64 - 1) * k;
            match part {
                0 => {
                    for i in 0..total {
                        t.waiting(&format!("receive (ANY_SOURCE, ANY_TAG) {i} of {total}"));
                        let st = t.world.any_process().receive_into(&mut buf[..]);
                        take(&st, &buf, 3);
                    }
                }
                1 => {
                    for tag in [2, 1, 0] {
                        let per = (0..k).filter(|&s| tag_of(s) == tag).count() as u64;
                        for i in 0..per * (t.size as u64 - 1) {
                            t.waiting(&format!("receive (ANY_SOURCE, tag {tag}) {i}"));
                            let st = t
                                .world
                                .any_process()
                                .receive_into_with_tag(&mut buf[..], tag);
                            take(&st, &buf, tag as usize);
                        }
                    }
                }
                _ => {
                    for src in (0..t.size).rev().filter(|&s| s != root) {
                        for i in 0..k {
                            t.waiting(&format!("receive ({src}, ANY_TAG) {i} of {k}"));
                            let st = t.world.process_at_rank(src).receive_into(&mut buf[..]);
                            take(&st, &buf, 3);
                        }
                    }
                }
            }
        }
        t.waiting("barrier after the wildcard part");
        t.world.barrier();
    }
}

/// `m` messages from every rank to every other, received by five kinds of probe in turn.
fn probes(t: &Test, d: &mut Digest, m: u64) {
    let salt = 30;
    // Distinct per sender for m up to 428.
    let tag_of = |src: i32, seq: u64| 1000 + ((seq * 7 + src as u64) % 3000) as i32;
    t.phase("probe: sends posted");
    let peers: Vec<i32> = (0..t.size).filter(|&p| p != t.rank).collect();
    let msgs: Vec<(i32, u64, Vec<u8>)> = peers
        .iter()
        .flat_map(|&p| (0..m).map(move |s| (p, s)))
        .map(|(p, s)| {
            (
                p,
                s,
                t.msg(salt, t.rank, p, s, size_of(t, salt, t.rank, p, s)),
            )
        })
        .collect();
    multiple_scope(msgs.len(), |sc, coll| {
        for (p, s, b) in &msgs {
            let dst = t.world.process_at_rank(*p);
            coll.add(dst.immediate_send_with_tag(sc, &b[..], tag_of(t.rank, *s)));
        }
        let mut next = vec![0u64; t.size as usize];
        let total = peers.len() as u64 * m;
        let check =
            |next: &mut Vec<u64>, src: i32, tag: i32, buf: &[u8], d: &mut Digest, how: &str| {
                t.check(src >= 0 && src < t.size && src != t.rank, || {
                    format!("{how}: from {src}")
                });
                let seq = next[src as usize];
                t.check(seq < m, || {
                    format!("{how}: one message too many from {src}")
                });
                let n = size_of(t, salt, src, t.rank, seq);
                t.check_eq(
                    &format!("{how}: tag of message {seq} from {src}"),
                    tag_of(src, seq),
                    tag,
                );
                t.check_eq(
                    &format!("{how}: bytes of message {seq} from {src}"),
                    n,
                    buf.len(),
                );
                t.msg_check(buf, salt, src, t.rank, seq, how);
                d.add(src, tag, buf);
                next[src as usize] += 1;
            };
        for i in 0..total {
            let method = i % 5;
            t.phase(&format!("probe: receive {i} of {total} by method {method}"));
            match method {
                0 => {
                    t.waiting("probe (ANY_SOURCE, ANY_TAG)");
                    let st = t.world.any_process().probe();
                    let (src, tag) = (st.source_rank(), st.tag());
                    let n = st.count(u8::equivalent_datatype()) as usize;
                    t.waiting(&format!("second probe ({src}, {tag})"));
                    let st2 = t.world.process_at_rank(src).probe_with_tag(tag);
                    t.check_status::<u8>(&st2, "a second probe", src, tag, n);
                    let mut buf = filled(n, 0);
                    t.waiting(&format!("receive ({src}, {tag}) of the probed {n} bytes"));
                    let st3 = t
                        .world
                        .process_at_rank(src)
                        .receive_into_with_tag(&mut buf[..], tag);
                    t.check_status::<u8>(&st3, "probe + receive", src, tag, n);
                    check(&mut next, src, tag, &buf, d, "probe + receive");
                }
                1 => {
                    t.waiting("immediate_probe (ANY_SOURCE, ANY_TAG) polling");
                    let st = loop {
                        if let Some(st) = t.world.any_process().immediate_probe() {
                            break st;
                        }
                    };
                    let (src, tag) = (st.source_rank(), st.tag());
                    let mut buf = filled(st.count(u8::equivalent_datatype()) as usize, 0);
                    t.waiting(&format!("receive ({src}, {tag}) after immediate_probe"));
                    t.world
                        .process_at_rank(src)
                        .receive_into_with_tag(&mut buf[..], tag);
                    check(&mut next, src, tag, &buf, d, "immediate_probe + receive");
                }
                2 => {
                    t.waiting("matched_probe (ANY_SOURCE, ANY_TAG)");
                    let (msg, st) = t.world.any_process().matched_probe();
                    let (src, tag) = (st.source_rank(), st.tag());
                    let n = st.count(u8::equivalent_datatype()) as usize;
                    // The claimed message is no longer visible to a probe (a sender's tags are
                    // all distinct).
                    if let Some(other) = t.world.process_at_rank(src).immediate_probe_with_tag(tag)
                    {
                        t.fail(&format!(
                            "immediate_probe saw the message matched_probe claimed ({} bytes, tag {})",
                            other.count(u8::equivalent_datatype()),
                            other.tag()
                        ));
                    }
                    let mut buf = filled(n, 0);
                    t.waiting(&format!("matched_receive_into ({src}, {tag}) of {n} bytes"));
                    let st2 = msg.matched_receive_into(&mut buf[..]);
                    t.check_status::<u8>(&st2, "matched_probe + matched_receive", src, tag, n);
                    check(
                        &mut next,
                        src,
                        tag,
                        &buf,
                        d,
                        "matched_probe + matched_receive",
                    );
                }
                3 => {
                    t.waiting("immediate_matched_probe (ANY_SOURCE, ANY_TAG) polling");
                    let got = loop {
                        if let Some(got) = t.world.any_process().immediate_matched_probe() {
                            break got;
                        }
                    };
                    let (src, tag) = (got.1.source_rank(), got.1.tag());
                    t.waiting(&format!("matched_receive_vec ({src}, {tag})"));
                    let (buf, st) = got.matched_receive_vec::<u8>();
                    t.check_eq("immediate_matched_probe: source", src, st.source_rank());
                    check(
                        &mut next,
                        src,
                        tag,
                        &buf,
                        d,
                        "immediate_matched_probe + matched_receive_vec",
                    );
                }
                _ => {
                    // (source, ANY_TAG): the first peer with a message still to come.
                    let src = *peers.iter().find(|&&p| next[p as usize] < m).unwrap();
                    t.waiting(&format!("probe ({src}, ANY_TAG)"));
                    let st = t.world.process_at_rank(src).probe();
                    t.check_eq("probe (source, ANY_TAG): source", src, st.source_rank());
                    let tag = st.tag();
                    let mut buf = filled(st.count(u8::equivalent_datatype()) as usize, 0);
                    t.waiting(&format!("receive ({src}, {tag})"));
                    t.world
                        .process_at_rank(src)
                        .receive_into_with_tag(&mut buf[..], tag);
                    check(
                        &mut next,
                        src,
                        tag,
                        &buf,
                        d,
                        "probe (source, ANY_TAG) + receive",
                    );
                }
            }
        }
        t.phase("probe: sends complete");
        t.waiting("wait_all of the probe test's sends");
        let mut out = vec![];
        coll.wait_all(&mut out);
    });
    t.check(t.world.any_process().immediate_probe().is_none(), || {
        "a message is left over after the probe test".to_string()
    });
    t.waiting("barrier after the probe test");
    t.world.barrier();
}

/// Each round: a receive from and a send to every peer, all in flight at once, completed by a
/// different method per round; receives posted before the sends in even rounds, after them in
/// odd ones. Every buffer is 8 bytes longer than its message, and those must stay untouched.
fn nonblocking(t: &Test, d: &mut Digest, rounds: u64) {
    let peers: Vec<i32> = (0..t.size).filter(|&p| p != t.rank).collect();
    for round in 0..rounds {
        let salt = 40 + round;
        let method = round % 5;
        t.phase(&format!("nonblocking round {round}, method {method}"));
        let tag = 7 + round as i32;
        let sends: Vec<Vec<u8>> = peers
            .iter()
            .map(|&p| t.msg(salt, t.rank, p, round, size_of(t, salt, t.rank, p, round)))
            .collect();
        let mut recvs: Vec<Vec<u8>> = peers
            .iter()
            .map(|&p| filled(size_of(t, salt, p, t.rank, round) + 8, GUARD))
            .collect();
        let mut statuses = vec![None; peers.len()];
        let np = peers.len();
        if method == 4 {
            // Requests waited for one by one, the sends' first.
            scope(|sc| {
                let rr: Vec<_> = recvs
                    .iter_mut()
                    .zip(&peers)
                    .map(|(b, &p)| {
                        t.world.process_at_rank(p).immediate_receive_into_with_tag(
                            sc,
                            &mut b[..],
                            tag,
                        )
                    })
                    .collect();
                let sr: Vec<_> = sends
                    .iter()
                    .zip(&peers)
                    .map(|(b, &p)| {
                        t.world
                            .process_at_rank(p)
                            .immediate_send_with_tag(sc, &b[..], tag)
                    })
                    .collect();
                for r in sr {
                    t.waiting("wait of one send");
                    r.wait();
                }
                for (k, r) in rr.into_iter().enumerate() {
                    t.waiting(&format!("wait of the receive from {}", peers[k]));
                    statuses[k] = Some(r.wait());
                }
            });
        } else {
            multiple_scope(2 * np, |sc, coll| {
                let recv_first = round % 2 == 0;
                // Indices: receives first when posted first; `base` says where they start.
                let base = if recv_first { 0 } else { np };
                let mut recvs = Some(recvs.iter_mut());
                for pass in 0..2 {
                    if (pass == 0) != recv_first {
                        for (b, &p) in sends.iter().zip(&peers) {
                            coll.add(t.world.process_at_rank(p).immediate_send_with_tag(
                                sc,
                                &b[..],
                                tag,
                            ));
                        }
                    } else {
                        for (b, &p) in recvs.take().into_iter().flatten().zip(&peers) {
                            coll.add(t.world.process_at_rank(p).immediate_receive_into_with_tag(
                                sc,
                                &mut b[..],
                                tag,
                            ));
                        }
                    }
                }
                let mut done = vec![];
                t.waiting(&format!(
                    "completion of {} requests by method {method}",
                    2 * np
                ));
                match method {
                    0 => coll.wait_all(&mut done),
                    1 => {
                        // rsmpi 0.8's wait_any panics once nothing is left (MPI_UNDEFINED).
                        while coll.incomplete() > 0 {
                            done.extend(coll.wait_any());
                        }
                    }
                    2 => {
                        let mut some = vec![];
                        while coll.incomplete() > 0 {
                            coll.wait_some(&mut some);
                            t.check(!some.is_empty(), || {
                                "wait_some completed nothing".to_string()
                            });
                            done.append(&mut some);
                        }
                    }
                    _ => {
                        while coll.incomplete() > 0 {
                            if let Some(x) = coll.test_any() {
                                done.push(x);
                            }
                        }
                    }
                }
                t.check_eq("requests completed", 2 * np, done.len());
                for (i, st, _) in done {
                    // rsmpi 0.8's wait_some returns for the request at index idx the status at
                    // index idx, where MPI_Waitsome wrote the status of the idx-th completed
                    // request instead: its statuses are not checked.
                    if i >= base && i < base + np && method != 2 {
                        statuses[i - base] = Some(st);
                    }
                }
            });
        }
        for (k, &p) in peers.iter().enumerate() {
            let n = recvs[k].len() - 8;
            match statuses[k] {
                Some(st) => t.check_status::<u8>(&st, "nonblocking receive", p, tag, n),
                None if method == 2 => {}
                None => t.fail(&format!("no status for the receive from {p}")),
            }
            t.msg_check(
                &recvs[k][..n],
                salt,
                p,
                t.rank,
                round,
                "nonblocking receive",
            );
            t.check(recvs[k][n..].iter().all(|&b| b == GUARD), || {
                format!("nonblocking receive from {p}: bytes after the message were written")
            });
            d.add(p, tag, &recvs[k][..n]);
        }
    }
}

/// A struct with padding between its fields, an array and a tuple: rsmpi describes it to MPI
/// as a struct datatype, so MPI (not Rust) lays the fields out on the wire.
#[derive(Equivalence, Clone, Copy, Debug, PartialEq, Default)]
struct Particle {
    id: u64,
    kind: u8,
    pos: [f64; 3],
    charge: i32,
    cell: (u16, i8),
}

fn particle(t: &Test, src: i32, i: u64) -> Particle {
    let r = mix64(mpi_tests_rs::msg_seed(t.seed, 50, src, 0, i));
    Particle {
        id: r,
        kind: (r >> 7) as u8,
        pos: [
            (r % 1000) as f64 * 0.5,
            -(((r >> 10) % 777) as f64),
            (i as f64) * 1.25,
        ],
        charge: (r >> 20) as i32,
        cell: ((r >> 40) as u16, (r >> 56) as i8),
    }
}

fn add_particles(d: &mut Digest, src: i32, tag: i32, ps: &[Particle]) {
    let mut b = Vec::with_capacity(ps.len() * 40);
    for p in ps {
        b.extend(p.id.to_le_bytes());
        b.push(p.kind);
        p.pos.iter().for_each(|x| b.extend(x.to_le_bytes()));
        b.extend(p.charge.to_le_bytes());
        b.extend(p.cell.0.to_le_bytes());
        b.push(p.cell.1 as u8);
    }
    d.add(src, tag, &b);
}

fn derived(t: &Test, d: &mut Digest) {
    let next = (t.rank + 1) % t.size;
    let prev = (t.rank + t.size - 1) % t.size;
    for (round, n) in [1usize, 3, 100, 2000].into_iter().enumerate() {
        t.phase(&format!("derived datatype: {n} particles around the ring"));
        let mine: Vec<Particle> = (0..n as u64)
            .map(|i| particle(t, t.rank, i + 10_000 * round as u64))
            .collect();
        let mut got = vec![Particle::default(); n + 1];
        let tag = 60 + round as i32;
        t.waiting(&format!("send_receive of {n} particles"));
        let st = p2p::send_receive_into_with_tags(
            &mine[..],
            &t.world.process_at_rank(next),
            tag,
            &mut got[..],
            &t.world.process_at_rank(prev),
            tag,
        );
        t.check_status::<Particle>(&st, "particles", prev, tag, n);
        for (i, g) in got[..n].iter().enumerate() {
            t.check_eq(
                &format!("particle {i} from {prev}"),
                particle(t, prev, i as u64 + 10_000 * round as u64),
                *g,
            );
        }
        t.check_eq(
            "the particle after the message",
            Particle::default(),
            got[n],
        );
        add_particles(d, prev, tag, &got[..n]);
    }
    for root in 0..t.size {
        t.phase(&format!(
            "derived datatype: broadcast of 17 particles from {root}"
        ));
        let mut ps = [Particle::default(); 17];
        if t.rank == root {
            ps.iter_mut()
                .enumerate()
                .for_each(|(i, p)| *p = particle(t, root, 900 + i as u64));
        }
        t.waiting(&format!("broadcast from {root}"));
        t.world.process_at_rank(root).broadcast_into(&mut ps[..]);
        for (i, p) in ps.iter().enumerate() {
            t.check_eq(
                &format!("broadcast particle {i} from {root}"),
                particle(t, root, 900 + i as u64),
                *p,
            );
        }
        add_particles(d, root, -1, &ps);
    }
}

fn main() {
    let t = Test::init("rust_p2p");
    let mut d = Digest::default();
    pingpong(&t, &mut d);
    wildcard(&t, &mut d, 0, 60);
    wildcard(&t, &mut d, t.size - 1, 60);
    probes(&t, &mut d, 30);
    nonblocking(&t, &mut d, 10);
    derived(&t, &mut d);
    t.finish(d);
}

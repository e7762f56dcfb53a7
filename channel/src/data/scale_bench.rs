//! What one small message costs an endpoint against the number of peers it talks to. Forged
//! peers (real RD queue pairs on a null link, as in `scale_tests`, a batch of peers each)
//! first make contact; then messages go round-robin over every peer, one tagged message each
//! way per visit, through the endpoint's real queue pair, engine, peer table, promotion
//! policy and matcher. Only the endpoint's own calls are timed (posting, progress, datagrams
//! in and out, completions); the far side's work is not. Every payload, tag and source is
//! checked both ways.
//!
//! Run alone by `scripts/peer-scale` (the figures) and, up to 2^10 peers, by `scripts/test`.
//! `DIWARP_PEER_SCALE_MAX` is the largest N (default 2^20), `DIWARP_PEER_SCALE_OUT` a CSV
//! file for the rows, `DIWARP_PEER_SCALE_DORMANT_MS` the dormancy (0: off; default as
//! `FI_DIWARP_DORMANT_MS`'s), `DIWARP_PEER_SCALE_STATS` prints the queue pair's counters, `DIWARP_PEER_SCALE_ONLY=N` runs N
//! alone (to profile it).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::{
    AddressHandle, QueuePair, RecvWr, SendOpcode, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

use super::scale_tests::{alias, fake, index, name, Far, BATCH};
use super::tests::{pair_and_avs, recv, send, Side};
use super::*;
use crate::addr::EpName;
use crate::params::Config;
use crate::peer::PeerHeader;

/// Messages each way in one step: posted together, then carried until all complete.
const WINDOW: usize = 64;
/// Timed passes per N; the median is reported.
const PASSES: usize = 5;
/// Messages each way in one pass, at least (a pass visits every peer at least once).
const PASS_MIN: usize = 1 << 14;
const TO_ENDPOINT: u64 = 5;
const TO_PEER: u64 = 6;

/// The forged peers: far-side queue pairs of a batch each, and each peer's message counts.
struct Peers {
    fars: Vec<Far>,
    /// The endpoint's name, as every forged peer addresses it.
    n: EpName,
    /// Per peer: the per-peer sequence of its next message to the endpoint, and the last of
    /// the endpoint's messages it received (its acknowledgement).
    seq: Vec<u32>,
    acked: Vec<u32>,
    wcs: Vec<WorkCompletion>,
    /// Far sides outside the step that were handed datagrams (the endpoint's retransmissions
    /// to a batch visited earlier): what they answer must reach the endpoint too, or it would
    /// retransmit until it gave the peer up.
    answering: BTreeSet<usize>,
}

impl Peers {
    fn new(count: usize, n: EpName) -> Peers {
        Peers {
            fars: (0..count.div_ceil(BATCH))
                .map(|_| Far::new(BATCH))
                .collect(),
            n,
            seq: vec![1; count],
            acked: vec![0; count],
            wcs: Vec::new(),
            answering: BTreeSet::new(),
        }
    }

    fn far(&mut self, p: usize) -> &mut Far {
        &mut self.fars[p / BATCH]
    }

    /// Peer `p` sends the endpoint a tagged 8-byte message carrying `p`, acknowledging what
    /// it received, and posts a receive for the endpoint's next message to it.
    fn send(&mut self, p: usize) {
        let (seq, acked) = (self.seq[p], self.acked[p]);
        self.seq[p] += 1;
        let to = crate::peer::header::epoch(self.n.nonce);
        let qpn = self.n.qpn;
        let far = self.far(p);
        let mut msg = PeerHeader {
            flags: 0,
            seq,
            ack: acked,
            // The epoch of the name the endpoint's address vector holds for `p`.
            src_epoch: crate::peer::header::epoch(name(p, 0).nonce),
            dst_epoch: to,
        }
        .encode()
        .to_vec();
        msg.extend_from_slice(&far.tagged(TO_ENDPOINT, p));
        far.qp
            .post_recv(RecvWr {
                wr_id: p as u64,
                buf: vec![0; 256],
            })
            .unwrap();
        far.qp
            .post_send(SendWr {
                wr_id: p as u64,
                opcode: SendOpcode::Send,
                data: &msg,
                ah: Some(AddressHandle::new(alias(p), qpn)),
                signaled: true,
            })
            .unwrap();
    }

    /// What the far side sent since the last call, each with the forged peer it came from.
    fn take_sent(&mut self, touched: &BTreeSet<usize>) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        let answering = std::mem::take(&mut self.answering);
        for &f in touched.union(&answering) {
            for (dst, dg) in self.fars[f].qp.take_sent() {
                out.push((index(dst), dg));
            }
        }
        out
    }

    /// Hands the endpoint's datagrams to the peers they were for; returns how many of the
    /// peers' sends were acknowledged and how many of the endpoint's messages they received,
    /// checking each (peer `p` gets the endpoint's message carrying `p`, tag `TO_PEER`).
    fn deliver(
        &mut self,
        back: Vec<(SocketAddr, Vec<u8>)>,
        touched: &BTreeSet<usize>,
    ) -> std::result::Result<(usize, usize), String> {
        for (dst, dg) in &back {
            let p = index(*dst);
            self.far(p).qp.inject_datagram(dg, alias(p));
            if !touched.contains(&(p / BATCH)) {
                self.answering.insert(p / BATCH);
            }
        }
        let (mut acked, mut got) = (0, 0);
        for &f in touched {
            loop {
                self.wcs.clear();
                let n = self.fars[f].qp.poll_cq(&mut self.wcs, 256).unwrap();
                for wc in &self.wcs {
                    let p = wc.wr_id as usize;
                    if wc.status != WcStatus::Success {
                        panic!(
                            "peer {p}: {wc:?}; its queue pair: {:?}",
                            self.fars[f].qp.stats()
                        );
                    }
                    if wc.opcode != WcOpcode::Recv {
                        acked += 1;
                        continue;
                    }
                    got += 1;
                    let buf = &wc.buf.as_ref().unwrap()[..wc.byte_len];
                    let (h, body) = crate::peer::header::split(buf).unwrap();
                    let Ok((_, wire::Msg::Eager { m, payload })) = wire::parse(body) else {
                        panic!("peer {p}: not an eager message");
                    };
                    assert_eq!((m.tag, m.len), (TO_PEER, 8), "peer {p}");
                    // The receive posted for peer p may take any of its messages: the
                    // payload names the peer it was sent to, the source the one it came to.
                    let q = u64::from_le_bytes(payload.try_into().unwrap()) as usize;
                    assert_eq!(wc.src.map(index), Some(q), "peer {q}'s message");
                    assert!(
                        h.seq == self.acked[q].wrapping_add(1) || self.acked[q] == 0,
                        "peer {q}: message {} after {} ({h:?}, wc {wc:?})",
                        h.seq,
                        self.acked[q]
                    );
                    self.acked[q] = h.seq;
                }
                if n < 256 {
                    break;
                }
            }
        }
        Ok((acked, got))
    }
}

/// The endpoint and the time its own calls took.
struct Timed<'a> {
    b: &'a Side,
    spent: Duration,
    /// Datagrams the endpoint read and sent.
    datagrams: usize,
}

impl Timed<'_> {
    fn run<R>(&mut self, f: impl FnOnce(&Side) -> R) -> R {
        let t = Instant::now();
        let r = f(self.b);
        self.spent += t.elapsed();
        r
    }
}

/// One step: peers `visit` each send the endpoint a message and get one from it (a peer
/// visited twice sends and gets two); returns when every message of the step completed on
/// both sides.
fn step(b: &mut Timed<'_>, peers: &mut Peers, handle0: u64, visit: &[usize]) {
    let bufs: Vec<_> = b.run(|b| {
        let bufs = (0..visit.len())
            .map(|j| recv(b, FI_ADDR_UNSPEC, Kind::Tagged, TO_ENDPOINT, 8, 1 + j))
            .collect();
        for (j, &p) in visit.iter().enumerate() {
            let bytes = (p as u64).to_le_bytes().to_vec();
            send(
                b,
                handle0 + p as u64,
                Kind::Tagged,
                TO_PEER,
                bytes,
                (1 << 40) + j,
            );
        }
        bufs
    });
    let touched: BTreeSet<usize> = visit.iter().map(|&p| p / BATCH).collect();
    for &p in visit {
        peers.send(p);
    }
    let (mut far_acked, mut far_got, mut sent, mut received) = (0, 0, 0, 0);
    let mut sources = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while far_acked < visit.len()
        || far_got < visit.len()
        || sent < visit.len()
        || received < visit.len()
    {
        let out = peers.take_sent(&touched);
        b.datagrams += out.len();
        let back = b.run(|b| {
            b.ep.with_data(|d| {
                for (p, dg) in &out {
                    d.inject(dg, fake(*p));
                }
                d.progress();
                d.take_sent()
            })
        });
        b.datagrams += back.len();
        let (a, g) = peers.deliver(back, &touched).unwrap_or_else(|e| {
            let st = b.b.ep.with_data(|d| d.rd_stats());
            panic!("{e}\nthe endpoint's queue pair: {st:?}")
        });
        far_acked += a;
        far_got += g;
        b.run(|b| {
            while let Ok(1..) = b.cq.read(256, |_, c| {
                if c.op_context >= 1 << 40 {
                    sent += 1;
                } else {
                    assert_eq!((c.tag, c.len), (TO_ENDPOINT, 8));
                    sources.push(c.src);
                    received += 1;
                }
            }) {}
        });
        assert!(
            Instant::now() < deadline,
            "step of {}: peers acked {far_acked}, got {far_got}; endpoint sent {sent}, received {received}",
            visit.len()
        );
    }
    let mut want: Vec<usize> = visit.to_vec();
    let mut got: Vec<usize> = bufs
        .iter()
        .map(|b| u64::from_le_bytes(b.lock()[..8].try_into().unwrap()) as usize)
        .collect();
    let mut from: Vec<usize> = sources
        .iter()
        .map(|s| (s.expect("source handle") - handle0) as usize)
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    from.sort_unstable();
    assert_eq!(got, want, "payloads received");
    assert_eq!(from, want, "sources of the messages received");
}

/// One N: contact, a warm-up pass, then [`PASSES`] timed passes.
fn measure(count: usize) -> Row {
    // FI_DIWARP_DORMANT_MS's default unless DIWARP_PEER_SCALE_DORMANT_MS says (0: never).
    let dormant_after =
        match std::env::var("DIWARP_PEER_SCALE_DORMANT_MS").map(|v| v.parse::<u64>()) {
            Ok(Ok(0)) => None,
            Ok(Ok(ms)) => Some(Duration::from_millis(ms)),
            _ => Config::default().dormant_after,
        };
    let ((_a, _), (b, bav)) = pair_and_avs(Config {
        dormant_after,
        ..Config::default()
    });
    let n = b.ep.name();
    b.ep.with_data(|d| d.null_link());
    let base = b.ep.sample_memory().total() as f64;
    let mut peers = Peers::new(count, n);
    let handle0 = bav.insertions() as u64;
    for chunk in (0..count).collect::<Vec<_>>().chunks(1 << 16) {
        let names: Vec<u8> = chunk
            .iter()
            .flat_map(|&i| name(i, peers.far(i).qp.qpn()).encode())
            .collect();
        assert_eq!(bav.insert(&names, 0).unwrap().count, chunk.len());
    }
    let mut t = Timed {
        b: &b,
        spent: Duration::ZERO,
        datagrams: 0,
    };
    let order: Vec<usize> = (0..count.max(PASS_MIN)).map(|k| k % count).collect();
    // Contact and warm-up: every peer has a session and a peer slot, each way.
    for visit in order.chunks(WINDOW) {
        step(&mut t, &mut peers, handle0, visit);
    }
    let mut per_msg = Vec::new();
    t.datagrams = 0;
    for _ in 0..PASSES {
        t.spent = Duration::ZERO;
        for visit in order.chunks(WINDOW) {
            step(&mut t, &mut peers, handle0, visit);
        }
        per_msg.push(t.spent.as_nanos() as f64 / (2 * order.len()) as f64);
    }
    if std::env::var_os("DIWARP_PEER_SCALE_STATS").is_some() {
        let st = b.ep.with_data(|d| d.rd_stats());
        eprintln!("{count} peers: {st:?}");
    }
    Row {
        peers: count,
        ns: median(&per_msg),
        datagrams: t.datagrams as f64 / (2 * PASSES * order.len()) as f64,
        ledger: (b.ep.sample_memory().total() as f64 - base) / count as f64,
        passes: per_msg,
    }
}

/// One N's figures: the median of the passes' ns per message, datagrams per message, and the
/// endpoint ledger's growth since before first contact per peer, at the end (peers active
/// within the last pass, not idle ones as in `scale_tests`).
struct Row {
    peers: usize,
    ns: f64,
    datagrams: f64,
    ledger: f64,
    passes: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

#[test]
#[ignore = "a benchmark: scripts/peer-scale runs it (scripts/test up to 2^10 peers)"]
fn per_message_cost_against_the_number_of_peers() {
    let max: usize = std::env::var("DIWARP_PEER_SCALE_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20);
    let only: Option<usize> = std::env::var("DIWARP_PEER_SCALE_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut rows: Vec<Row> = Vec::new();
    for count in [1, 1 << 4, 1 << 10, 1 << 16, 1 << 20] {
        if count > max {
            break;
        }
        if only.is_some_and(|o| o != count) {
            continue;
        }
        let started = Instant::now();
        let r = measure(count);
        eprintln!(
            "{count:>8} peers: {:.0} ns per message (passes {:.0?}), {:.2} datagrams per message, {:.0} ledger bytes per peer ({} s)",
            r.ns,
            r.passes,
            r.datagrams,
            r.ledger,
            started.elapsed().as_secs()
        );
        rows.push(r);
    }
    if let Ok(path) = std::env::var("DIWARP_PEER_SCALE_OUT") {
        let (one, kilo) = (rows[0].ns, rows.get(2).map_or(f64::NAN, |r| r.ns));
        let mut csv = String::from(
            "peers,ns_per_message,ratio_to_1,ratio_to_1024,datagrams_per_message,ledger_bytes_per_peer,passes_ns\n",
        );
        for r in &rows {
            let passes: Vec<String> = r.passes.iter().map(|p| format!("{p:.0}")).collect();
            csv += &format!(
                "{},{:.0},{:.2},{:.2},{:.2},{:.0},{}\n",
                r.peers,
                r.ns,
                r.ns / one,
                r.ns / kilo,
                r.datagrams,
                r.ledger,
                passes.join(" ")
            );
        }
        std::fs::write(path, csv).unwrap();
    }
}

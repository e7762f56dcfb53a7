//! A million peers on one endpoint. Forged peers, each a real RD queue pair's peer entry and
//! engine session on the far side, make first contact with the endpoint (HELLO, one tagged
//! message, its acknowledgement) through the real queue pair, engine, peer table, promotion
//! policy and matcher; no datagram touches a socket (the endpoint's queue pair runs on a null
//! link, and the test carries datagrams both ways). Once every peer is quiet, the counting
//! allocator's growth divided by the peers is what an idle peer costs, summed over every layer.
//!
//! Run alone (`scripts/test` does): the allocator counts the whole process, and other tests
//! running beside this one would be counted too.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::{AddressHandle, QpConfig, QueuePair, RdQp, SendOpcode, SendWr, WcStatus};

use super::tests::{forged, pair_and_avs, recv, Side};
use super::wire::Matching;
use super::*;
use crate::addr::EpName;
use crate::params::Config;
use crate::raw::heap::provider_heap;

/// Forged peers per far-side queue pair: each batch's queue pair is dropped before the next,
/// so the far side's memory does not grow with the peers.
pub(super) const BATCH: usize = 4096;
/// Where the figures are reported.
const CHECKPOINTS: [usize; 4] = [1, 1 << 10, 1 << 16, 1 << 20];
/// The bounds this build holds: an idle peer after first contact (the target), and an
/// address-vector entry never contacted (the target is 64 bytes; what stands between is in
/// `channel/BENCHMARKS.md`, "A million peers").
const PEER_MAX: usize = 256;
const AV_ENTRY_MAX: usize = 96;
pub(super) const DORMANT: Duration = Duration::from_millis(50);

/// Forged peer `i`'s address, as the endpoint sees it (loopback: no CRC is asked for).
pub(super) fn fake(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 1 + (i >> 16) as u8, (i >> 8) as u8, i as u8], 9))
}

/// The endpoint's address as forged peer `i`'s queue pair knows it: one per peer, so that one
/// far-side queue pair holds a batch of distinct peers.
pub(super) fn alias(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 64 + (i >> 16) as u8, (i >> 8) as u8, i as u8], 9))
}

/// The peer behind a fake or alias address.
pub(super) fn index(a: SocketAddr) -> usize {
    let SocketAddr::V4(v4) = a else {
        panic!("{a}: not forged")
    };
    let [_, hi, mid, lo] = v4.ip().octets();
    ((usize::from(hi) & 63) - usize::from(hi < 64)) << 16 | usize::from(mid) << 8 | usize::from(lo)
}

pub(super) fn name(i: usize, qpn: u32) -> EpName {
    let a = fake(i);
    EpName {
        ip: a.ip(),
        udp_port: a.port(),
        qpn,
        tcp_port: 0,
        nonce: 0x5eed_0000_0000 + i as u64,
        more: crate::addr::MoreRails::NONE,
    }
}

/// The far side: one RD queue pair on a null link standing for a batch of forged peers,
/// each of which knows the endpoint by its own alias address.
pub(super) struct Far {
    pub(super) qp: RdQp,
    wcs: Vec<iwarp::verbs::WorkCompletion>,
}

impl Far {
    pub(super) fn new(peers: usize) -> Far {
        let mut qp = RdQp::create(QpConfig {
            crc: false,
            max_send_wr: 2 * peers.max(BATCH),
            max_recv_wr: 2 * BATCH,
            ..QpConfig::default()
        })
        .unwrap();
        qp.bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
        qp.null_link();
        Far {
            qp,
            wcs: Vec::new(),
        }
    }

    /// The data path's part of forged peer `i`'s tagged message: the eager header (tag `tag`,
    /// 8 bytes) from this queue pair, and `i` as the payload.
    pub(super) fn tagged(&self, tag: u64, i: usize) -> Vec<u8> {
        let m = Matching {
            kind: Kind::Tagged,
            tag,
            data: None,
            len: 8,
        };
        let mut msg = Vec::new();
        wire::eager(&mut msg, self.qp.qpn(), &m);
        msg.extend_from_slice(&(i as u64).to_le_bytes());
        msg
    }

    /// Forged peer `i` sends `b` (named `n`) a tagged message carrying `i`, its `nth` to `b`.
    pub(super) fn send(&mut self, n: &EpName, i: usize, nth: u32) {
        let msg = self.tagged(5, i);
        self.qp
            .post_send(SendWr {
                wr_id: i as u64,
                opcode: SendOpcode::Send,
                data: &forged(n, nth, &msg),
                ah: Some(AddressHandle::new(alias(i), n.qpn)),
                signaled: true,
            })
            .unwrap();
    }

    /// Carries datagrams both ways between `b` and the forged peers once; returns the far
    /// side's completions (sends acknowledged, messages received).
    pub(super) fn pump(&mut self, b: &Side) -> &[iwarp::verbs::WorkCompletion] {
        let out = self.qp.take_sent();
        let back = b.ep.with_data(|d| {
            for (dst, dg) in &out {
                d.inject(dg, fake(index(*dst)));
            }
            d.progress();
            d.take_sent()
        });
        for (dst, dg) in &back {
            self.qp.inject_datagram(dg, alias(index(*dst)));
        }
        self.wcs.clear();
        self.qp.poll_cq(&mut self.wcs, 256).unwrap();
        &self.wcs
    }
}

/// Reads `b`'s completions until `count` receives of forged peers `from..to` completed
/// (tag 5, 8 bytes, from the peer's handle when the entry names one).
pub(super) fn received(b: &Side, count: usize, from: usize, to: usize, handle0: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut done = 0;
    while done < count {
        let n =
            b.cq.read(256, |_, c| {
                assert_eq!((c.tag, c.len), (5, 8));
                if let Some(src) = c.src {
                    let i = (src - handle0) as usize;
                    assert!((from..to).contains(&i), "source handle {src}");
                }
            })
            .unwrap_or(0);
        done += n;
        assert!(
            Instant::now() < deadline,
            "{done} of {count} receives completed"
        );
    }
}

/// Peers `from..to` make first contact with `b` (whose name is `n`) and send it one tagged
/// message each, which `b` receives and checks: every payload once, from the right handle.
fn contact(b: &Side, n: &EpName, from: usize, to: usize, handle0: u64) {
    let bufs: Vec<_> = (from..to)
        .map(|i| recv(b, FI_ADDR_UNSPEC, Kind::Tagged, 5, 8, i + 1))
        .collect();
    let mut far = Far::new(to - from);
    for i in from..to {
        far.send(n, i, 1);
    }
    let mut acked = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked < to - from {
        for wc in far.pump(b) {
            assert_eq!(wc.status, WcStatus::Success, "peer {}'s send", wc.wr_id);
            acked += 1;
        }
        assert!(
            Instant::now() < deadline,
            "peers {from}..{to}: {acked} sends acknowledged"
        );
    }
    received(b, to - from, from, to, handle0);
    let mut got = vec![false; to - from];
    for buf in &bufs {
        let i = u64::from_le_bytes(buf.lock()[..8].try_into().unwrap()) as usize;
        assert!(
            (from..to).contains(&i) && !got[i - from],
            "payload of peer {i}"
        );
        got[i - from] = true;
    }
}

/// Lets every peer fall quiet and go dormant, then reads the provider's heap.
pub(super) fn settle(b: &Side) -> usize {
    std::thread::sleep(DORMANT * 4);
    for _ in 0..3 {
        b.ep.with_data(|d| {
            d.progress();
            assert!(d.take_sent().is_empty(), "quiet peers owe nothing");
        });
        std::thread::sleep(DORMANT);
    }
    provider_heap()
}

#[test]
#[ignore = "run alone, as scripts/test does: the counting allocator counts the whole process"]
fn a_million_idle_peers_cost_a_few_hundred_bytes_each() {
    let ((_a, _), (b, bav)) = pair_and_avs(Config {
        dormant_after: Some(DORMANT),
        ..Config::default()
    });
    let n = b.ep.name();
    b.ep.with_data(|d| d.null_link());
    let total = *CHECKPOINTS.last().unwrap();
    let before_av = settle(&b);
    let handle0 = bav.insertions() as u64;
    for chunk in (0..total).collect::<Vec<_>>().chunks(1 << 16) {
        let names: Vec<u8> = chunk.iter().flat_map(|&i| name(i, 1).encode()).collect();
        assert_eq!(bav.insert(&names, 0).unwrap().count, chunk.len());
    }
    let base = settle(&b);
    let ledger0 = b.ep.sample_memory();
    let layers0 = b.ep.with_data(|d| d.peer_layers());
    let av_each = (base - before_av) as f64 / total as f64;
    eprintln!("address vector: {av_each:.1} bytes per entry never contacted ({total} entries)");

    let mut rows = Vec::new();
    let mut accounts: Vec<(&str, f64)> = Vec::new();
    let mut layers = [("", 0); 4];
    let mut done = 0;
    let started = Instant::now();
    for &k in &CHECKPOINTS {
        while done < k {
            let to = (done + BATCH).min(k);
            contact(&b, &n, done, to, handle0);
            done = to;
        }
        let heap = settle(&b);
        let m = b.ep.sample_memory();
        let each = (heap - base) as f64 / k as f64;
        // Where the bytes are, by the ledger's accounts: their growth since the names went in.
        accounts = policies::Account::ALL
            .iter()
            .map(|&a| {
                (
                    a.name(),
                    (m.get(a).bytes as f64 - ledger0.get(a).bytes as f64) / k as f64,
                )
            })
            .filter(|&(_, b)| b.abs() >= 0.05)
            .collect();
        // And the peer state by layer.
        layers = b.ep.with_data(|d| d.peer_layers());
        for (l, l0) in layers.iter_mut().zip(layers0) {
            l.1 = (l.1 - l0.1) / k;
        }
        let shown: Vec<String> = accounts
            .iter()
            .map(|(n, b)| format!("{n} {b:.1}"))
            .chain(layers.iter().map(|(n, b)| format!("[{n} {b}]")))
            .collect();
        eprintln!(
            "{k:>8} peers: {each:.1} bytes per idle peer ({} s so far; by account: {})",
            started.elapsed().as_secs(),
            shown.join(", "),
        );
        rows.push((k, each));
    }
    if let Ok(path) = std::env::var("DIWARP_SCALE_OUT") {
        let json = serde_json::json!({
            "av_entry_bytes": av_each,
            "idle_peer_bytes": rows.iter().map(|&(k, b)| serde_json::json!({"peers": k, "bytes": b})).collect::<Vec<_>>(),
            "peer_state_by_layer": layers.iter().map(|&(n, b)| (n.to_string(), serde_json::json!(b))).collect::<serde_json::Map<_, _>>(),
            "ledger_accounts_per_peer": accounts.iter().map(|&(n, b)| (n.to_string(), serde_json::json!(b))).collect::<serde_json::Map<_, _>>(),
        });
        std::fs::write(path, format!("{json}\n")).unwrap();
    }
    assert!(
        av_each <= AV_ENTRY_MAX as f64,
        "{av_each} bytes per AV entry"
    );
    // At 1K the tables' first allocations still weigh; from 64K on the bound holds.
    for &(k, each) in &rows[2..] {
        assert!(each <= PEER_MAX as f64, "{each} bytes per idle peer at {k}");
    }
    let (at64k, at1m) = (rows[2].1, rows[3].1);
    assert!(
        at1m <= at64k * 1.25,
        "cost per peer grows with N: {at64k} -> {at1m}"
    );
}

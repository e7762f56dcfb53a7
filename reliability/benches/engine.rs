//! The engine alone, no sockets: datagrams per second per core, out (send + poll_transmit)
//! and in (handle_datagram + the ACKs it causes), for small messages and full 64 KiB segments;
//! and at Ethernet's MTU, a stream's 1472-byte segments taken one by one or in the runs a
//! receive offload hands over (`Endpoint::handle_run`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use reliability::{Config, Delivery, Endpoint, MsgId, Placement, Session, SessionIds, Sink};

const N: usize = 1024;

const IDS: SessionIds = SessionIds {
    local_id: 1,
    local_epoch: 10,
    remote_id: 2,
    remote_epoch: 20,
};

fn config(checksum: bool) -> Arc<Config> {
    Arc::new(Config {
        send_window: u16::MAX,
        recv_window: u16::MAX,
        initial_credit: u16::MAX,
        max_send_buffer: usize::MAX / 2,
        checksum,
        ..Config::default()
    })
}

struct Count(u64);

impl Sink for Count {
    fn place(&mut self, p: Placement<'_>) {
        self.0 += p.bytes.len() as u64;
    }
    fn deliver(&mut self, _: MsgId, d: Delivery<'_>) {
        if let Delivery::Inline(b) = d {
            self.0 += b.len() as u64;
        }
    }
}

/// One datagram per message: send then poll, so nothing gets coalesced.
fn produce(cfg: &Arc<Config>, len: usize, now: Instant) -> Vec<Vec<u8>> {
    let mut s = Session::new(cfg.clone(), IDS, now).unwrap();
    let msg = bytes::Bytes::from(vec![0x5au8; len]);
    let mut buf = Vec::new();
    (0..N)
        .map(|_| {
            s.send(now, msg.clone()).unwrap();
            s.poll_transmit(now, &mut buf).unwrap();
            buf.clone()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let now = Instant::now();
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(N as u64));
    g.measurement_time(Duration::from_secs(3));
    for (name, len, checksum) in [
        ("64B", 64usize, true),
        ("64B_nocrc", 64, false),
        ("64KiB", 65_408, true),
        ("64KiB_nocrc", 65_408, false),
    ] {
        let cfg = config(checksum);
        let msg = bytes::Bytes::from(vec![0x5au8; len]);
        g.bench_function(format!("out_{name}"), |b| {
            b.iter_batched_ref(
                || Session::new(cfg.clone(), IDS, now).unwrap(),
                |s| {
                    let mut buf = Vec::with_capacity(len + 64);
                    for _ in 0..N {
                        s.send(now, msg.clone()).unwrap();
                        s.poll_transmit(now, &mut buf).unwrap();
                    }
                },
                BatchSize::LargeInput,
            )
        });
        let datagrams = produce(&cfg, len, now);
        g.bench_function(format!("in_{name}"), |b| {
            b.iter_batched_ref(
                || Session::new(cfg.clone(), IDS.mirrored(), now).unwrap(),
                |s| {
                    let mut sink = Count(0);
                    let mut buf = Vec::new();
                    for d in &datagrams {
                        s.handle_datagram(now, d, &mut sink).unwrap();
                        // The ACKs a receiver owes are part of its cost.
                        while s.poll_transmit(now, &mut buf).is_some() {}
                    }
                    sink.0
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
    bench_mtu(c, now);
}

/// A GRO run at MTU 1500: as many 1472-byte datagrams as fit in 64 KiB.
const RUN: usize = 44;

/// The segments of 1 MiB messages cut into 1472-byte datagrams, as a stream's receiver gets
/// them (every one carrying the same ACK fields).
fn produce_mtu(cfg: &Arc<Config>, now: Instant) -> Vec<Vec<u8>> {
    let mut s = Session::new(cfg.clone(), IDS, now).unwrap();
    let msg = bytes::Bytes::from(vec![0x5au8; 1 << 20]);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < N {
        s.send(now, msg.clone()).unwrap();
        while s.poll_transmit(now, &mut buf).is_some() {
            out.push(buf.clone());
        }
    }
    out.truncate(N - N % RUN);
    out
}

fn bench_mtu(c: &mut Criterion, now: Instant) {
    let cfg = Arc::new(Config {
        max_datagram_size: 1472,
        checksum: false,
        ..(*config(false)).clone()
    });
    let datagrams = produce_mtu(&cfg, now);
    let receiver = || {
        let mut ep = Endpoint::new((*cfg).clone()).unwrap();
        ep.open(IDS.mirrored(), now);
        ep
    };
    let id = IDS.mirrored().local_id;
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(datagrams.len() as u64));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("in_1472_each", |b| {
        b.iter_batched_ref(
            receiver,
            |ep| {
                let mut sink = Count(0);
                for d in &datagrams {
                    ep.handle_datagram(now, d, &mut sink, |_, _| None).unwrap();
                }
                sink.0
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("in_1472_runs", |b| {
        b.iter_batched_ref(
            receiver,
            |ep| {
                let mut sink = Count(0);
                for run in datagrams.chunks(RUN) {
                    let taken = ep.handle_run(now, id, run.iter().map(|d| &d[..]), &mut sink);
                    assert_eq!(taken, run.len());
                }
                sink.0
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

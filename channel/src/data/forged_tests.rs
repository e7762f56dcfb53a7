//! A peer that sends nonsense: well-formed messages with arbitrary ids, offsets, lengths and
//! keys, whole or cut into datagrams, from the real peer's address and from a stranger's. Nothing may panic, no buffer is
//! written past its end, and the endpoint serves real traffic afterwards, every byte checked.

use std::net::SocketAddr;

use proptest::prelude::*;

use super::tests::{next, ok, pair_with_peer_timeout, pattern, recv, send, wait_idle, Got, Side};
use super::wire::Matching;
use super::*;
use crate::raw::mem::UserMem;

/// B's region, open to remote reads and writes.
const KEY: u64 = 5;
const REGION: usize = 4096;

#[derive(Debug, Clone)]
enum Forged {
    Eager {
        m: Matching,
        payload: usize,
    },
    Rts {
        m: Matching,
        handle: u64,
        pushed: bool,
    },
    Cts {
        handle: u64,
        recv_id: u64,
        wanted: u64,
        taken: bool,
    },
    Data {
        recv_id: Option<u64>,
        handle: u64,
        offset: u64,
        payload: usize,
    },
    Ping,
    Write {
        key: u64,
        addr: u64,
        id: u64,
        last: bool,
        payload: usize,
    },
    Read {
        id: u64,
        key: u64,
        addr: u64,
        len: u64,
    },
    ReadData {
        id: u64,
        offset: u64,
        payload: usize,
    },
    RmaAnswer {
        id: u64,
        errno: u64,
        last: bool,
    },
    Junk(Vec<u8>),
}

impl Forged {
    /// Whether B answers it (to a stranger, an answer would wait for its peer timeout).
    fn answered(&self) -> bool {
        matches!(
            self,
            Forged::Rts { .. } | Forged::Read { .. } | Forged::Write { .. }
        )
    }

    fn encode(&self, qpn: u32) -> Vec<u8> {
        let mut b = Vec::new();
        let fill = |b: &mut Vec<u8>, n: usize| b.extend((0..n).map(|i| i as u8 ^ 0xA5));
        match *self {
            Forged::Eager { m, payload } => {
                wire::eager(&mut b, qpn, &m);
                fill(&mut b, payload);
            }
            Forged::Rts { m, handle, pushed } => wire::rts(&mut b, qpn, &m, handle, pushed),
            Forged::Cts {
                handle,
                recv_id,
                wanted,
                taken,
            } => wire::cts(&mut b, qpn, handle, recv_id, wanted, taken),
            Forged::Data {
                recv_id,
                handle,
                offset,
                payload,
            } => {
                wire::data(&mut b, qpn, recv_id, handle, offset);
                fill(&mut b, payload);
            }
            Forged::Ping => wire::ping(&mut b, qpn),
            Forged::Write {
                key,
                addr,
                id,
                last,
                payload,
            } => {
                wire::write(&mut b, qpn, key, addr, id, last);
                fill(&mut b, payload);
            }
            Forged::Read { id, key, addr, len } => wire::read(&mut b, qpn, id, key, addr, len),
            Forged::ReadData {
                id,
                offset,
                payload,
            } => {
                wire::read_data(&mut b, qpn, id, offset);
                fill(&mut b, payload);
            }
            Forged::RmaAnswer { id, errno, last } => wire::rma_answer(&mut b, qpn, id, errno, last),
            Forged::Junk(ref j) => b.extend_from_slice(j),
        }
        b
    }
}

/// Ids, offsets and lengths: the small ones real state uses, the edges, anything.
fn num() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..20,
        1 => REGION as u64 - 8..REGION as u64 + 8,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 3),
        1 => Just(1u64 << 32),
        2 => any::<u64>(),
    ]
}

/// Ids of B's own receives and reads (small: B counts them from 2).
fn id() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..16, 1 => num()]
}

/// Offsets and lengths about the ends of B's buffers (10, 50, 300, 4096, 100 000 bytes).
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..400,
        1 => 99_900u64..100_100,
        1 => 4000u64..4200,
        1 => num(),
    ]
}

fn payload() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..64, 1 => Just(CHUNK), 1 => 100usize..70_000]
}

fn matching() -> impl Strategy<Value = Matching> {
    (
        any::<bool>(),
        0u64..6,
        proptest::option::of(num()),
        offset(),
    )
        .prop_map(|(tagged, tag, data, len)| Matching {
            kind: if tagged { Kind::Tagged } else { Kind::Msg },
            tag,
            data,
            len,
        })
}

fn forged() -> impl Strategy<Value = Forged> {
    prop_oneof![
        // Mostly with the length the payload has, so they get as far as matching.
        (matching(), payload(), 0u8..4).prop_map(|(mut m, payload, honest)| {
            if honest > 0 {
                m.len = payload as u64;
            }
            Forged::Eager { m, payload }
        }),
        (matching(), num(), any::<bool>()).prop_map(|(m, handle, pushed)| Forged::Rts {
            m,
            handle,
            pushed
        }),
        (num(), num(), offset(), any::<bool>()).prop_map(|(handle, recv_id, wanted, taken)| {
            Forged::Cts {
                handle,
                recv_id,
                wanted,
                taken,
            }
        }),
        (proptest::option::of(id()), num(), offset(), payload()).prop_map(
            |(recv_id, handle, offset, payload)| Forged::Data {
                recv_id,
                handle,
                offset,
                payload
            }
        ),
        Just(Forged::Ping),
        (
            prop_oneof![Just(KEY), num()],
            offset(),
            num(),
            any::<bool>(),
            payload()
        )
            .prop_map(|(key, addr, id, last, payload)| Forged::Write {
                key,
                addr,
                id,
                last,
                payload
            }),
        (num(), prop_oneof![Just(KEY), num()], offset(), offset())
            .prop_map(|(id, key, addr, len)| Forged::Read { id, key, addr, len }),
        (num(), num(), payload()).prop_map(|(id, offset, payload)| Forged::ReadData {
            id,
            offset,
            payload
        }),
        (num(), num(), any::<bool>()).prop_map(|(id, errno, last)| Forged::RmaAnswer {
            id,
            errno,
            last
        }),
        proptest::collection::vec(any::<u8>(), 0..80).prop_map(Forged::Junk),
    ]
}

/// Guard bytes on each side of every buffer the forgeries may reach.
const GUARD: usize = 64;

/// `len` zero bytes between guards; the whole allocation is returned to check both.
fn guarded(len: usize) -> (UserMem, Arc<parking_lot::Mutex<Vec<u8>>>) {
    let mut v = vec![0x77; len + 2 * GUARD];
    v[GUARD..GUARD + len].fill(0);
    let (mem, shown) = UserMem::owned(v);
    (mem.slice(GUARD, len), shown)
}

fn guards_intact(v: &[u8]) -> bool {
    let n = v.len();
    v[..GUARD].iter().chain(&v[n - GUARD..]).all(|&b| b == 0x77)
}

/// B's receives before the forgeries: eager-sized and rendezvous-sized, from A and from
/// anyone, tagged and not.
fn post_targets(b: &Side) -> Vec<Arc<parking_lot::Mutex<Vec<u8>>>> {
    let mut bufs = vec![];
    for (i, &(src, kind, tag, len)) in [
        (0, Kind::Tagged, 1, 10),
        (0, Kind::Tagged, 2, 100_000),
        (FI_ADDR_UNSPEC, Kind::Tagged, 3, 300),
        (0, Kind::Msg, 0, 100_000),
        (FI_ADDR_UNSPEC, Kind::Msg, 0, 50),
    ]
    .iter()
    .enumerate()
    {
        let (mem, shown) = guarded(len);
        b.ep.recv(RecvArgs {
            kind,
            src,
            mem,
            tag,
            ignore: 0,
            context: 500 + i,
            flags: FI_COMPLETION,
        })
        .unwrap();
        bufs.push(shown);
    }
    bufs
}

/// Waits until A has taken every answer B gave the forgeries. A has nothing of its own in
/// flight yet, so they are strays to it, none mistaken for an answer to its real traffic
/// (forged handles are A's own ids, which its next sends will take).
fn answers_taken(a: &Side, b: &Side) {
    wait_idle(b, a, "B's answers to the forgeries");
}

/// Real traffic both ways after the forgeries, on tags they never use.
fn still_serves(a: &Side, b: &Side) {
    answers_taken(a, b);
    let small = recv(b, 0, Kind::Tagged, 1000, 100, 1);
    let large = recv(b, 0, Kind::Tagged, 1001, 300_000, 2);
    send(a, 1, Kind::Tagged, 1000, pattern(100, 1), 3);
    send(a, 1, Kind::Tagged, 1001, pattern(300_000, 2), 4);
    let back = recv(a, 1, Kind::Tagged, 1002, 200_000, 5);
    send(b, 0, Kind::Tagged, 1002, pattern(200_000, 3), 6);
    let mut want = vec![1, 2];
    // B's own completions, after any the forgeries left.
    while !want.is_empty() {
        match next(b, a) {
            Got::Ok(c) if want.contains(&c.op_context) => {
                let (len, tag) = if c.op_context == 1 {
                    (100, 1000)
                } else {
                    (300_000, 1001)
                };
                assert_eq!((c.len, c.tag), (len, tag), "{c:?}");
                want.retain(|&w| w != c.op_context);
            }
            Got::Ok(c) if c.op_context == 6 => {}
            Got::Ok(c) => assert!((500..505).contains(&c.op_context), "{c:?}"),
            Got::Err(e) => assert!((500..505).contains(&e.completion.op_context), "{e:?}"),
        }
    }
    assert!(*small.lock() == pattern(100, 1));
    assert!(*large.lock() == pattern(300_000, 2));
    let mut a_want = vec![3, 4, 5];
    while !a_want.is_empty() {
        let c = ok(next(a, b));
        assert!(a_want.contains(&c.op_context), "{c:?}");
        a_want.retain(|&w| w != c.op_context);
    }
    assert!(*back.lock() == pattern(200_000, 3));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn forged_messages_never_panic_or_overrun_and_the_endpoint_still_serves(
        msgs in proptest::collection::vec(
            (forged(), 0u8..8, proptest::collection::vec(0usize..70_000, 0..3)),
            1..40,
        )
    ) {
        let (a, b) = pair_with_peer_timeout(Duration::from_secs(2));
        let (mem, region) = guarded(REGION);
        b.ep.domain.mrs.insert(KEY, mem, FI_REMOTE_READ | FI_REMOTE_WRITE).unwrap();
        let targets = post_targets(&b);
        let peer = a.ep.name();
        let stranger: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for (m, who, cuts) in &msgs {
            // One in eight from a stranger, unless B would answer it.
            let src = if *who == 0 && !m.answered() { stranger } else { peer.udp_addr() };
            let bytes = m.encode(peer.qpn);
            // Some whole, some cut into datagrams (as below an MTU).
            b.ep.with_data(|d| match cuts.is_empty() {
                true => d.feed(src, &bytes),
                false => d.feed_segments(src, &bytes, cuts),
            });
        }
        // Nothing was written past either end of a buffer.
        prop_assert!(guards_intact(&region.lock()), "the region's guard bytes changed");
        for buf in &targets {
            prop_assert!(guards_intact(&buf.lock()), "a receive's guard bytes changed");
        }
        still_serves(&a, &b);
    }
}

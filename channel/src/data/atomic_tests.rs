//! Atomics between two endpoints on loopback (and to an endpoint's own region): each result
//! checked against the same operations applied in order to a copy of the region, every
//! fetched value checked, and refusals.

use proptest::prelude::*;

use super::tests::{next, ok, pair, pair_with, Got, Side};
use super::*;
use crate::atomic::{self, AtomicOp, Datatype};
use crate::params::Config;
use crate::raw::mem::UserMem;

const KEY: u64 = 1 << 63 | 0x3b;

/// Registers `len` zero bytes of `s`'s under `key`; returns what they hold.
fn region(s: &Side, key: u64, len: usize, access: u64) -> Arc<parking_lot::Mutex<Vec<u8>>> {
    let (mem, shown) = UserMem::owned(vec![0; len]);
    s.ep.domain.mrs.insert(key, mem, access).unwrap();
    shown
}

#[allow(clippy::too_many_arguments)] // the operation's own fields
fn args(
    dest: u64,
    dt: Datatype,
    op: AtomicOp,
    count: usize,
    operands: Vec<u8>,
    result: Option<UserMem>,
    addr: u64,
    ctx: usize,
) -> AtomicArgs {
    AtomicArgs {
        dest,
        datatype: dt,
        op,
        count,
        operands,
        result,
        addr,
        key: KEY,
        context: ctx,
        flags: FI_COMPLETION,
    }
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// `k` fetch-and-adds of 1 from each side on B's counter (A over the network, B on its own
/// region): every value fetched once, the counter at the total.
fn fetch_adds_count_once((a, b): (Side, Side), k: usize) {
    let counter = region(&b, KEY, 8, FI_REMOTE_READ | FI_REMOTE_WRITE);
    let mut results = vec![];
    for i in 0..k {
        for s in [&a, &b] {
            let (mem, got) = UserMem::owned(vec![0xee; 8]);
            let one = args(
                1,
                Datatype::U64,
                AtomicOp::Sum,
                1,
                u64s(&[1]),
                Some(mem),
                0,
                i,
            );
            s.ep.atomic(one).unwrap();
            results.push(got);
        }
    }
    for _ in 0..k {
        for (s, other) in [(&a, &b), (&b, &a)] {
            let c = ok(next(s, other));
            assert_eq!(c.flags, FI_ATOMIC | FI_READ);
        }
    }
    let mut fetched: Vec<u64> = results
        .iter()
        .map(|r| u64::from_ne_bytes(r.lock()[..].try_into().unwrap()))
        .collect();
    fetched.sort_unstable();
    assert_eq!(fetched, (0..2 * k as u64).collect::<Vec<_>>());
    assert_eq!(counter.lock()[..], (2 * k as u64).to_ne_bytes());
    assert_eq!(b.ep.data_stats().atomics_in, k as u64);
}

#[test]
fn fetch_and_add_from_a_peer_and_from_itself_counts_each_once() {
    fetch_adds_count_once(pair(), 200);
}

#[test]
fn fetch_and_add_over_a_connection_counts_each_once() {
    let mode = policies::promote::Config {
        mode: policies::promote::Mode::Rc,
        ..policies::promote::Config::default()
    };
    let sides = pair_with(Config {
        promote: mode,
        rc_datagram_max: 65_507,
        ..Config::default()
    });
    let (a, b) = (&sides.0, &sides.1);
    // A message first: the connection comes up on first use.
    let buf = super::tests::recv(b, 0, crate::matching::Kind::Tagged, 1, 10, 1);
    super::tests::send(a, 1, crate::matching::Kind::Tagged, 1, vec![7; 10], 2);
    ok(next(b, a));
    ok(next(a, b));
    assert_eq!(buf.lock()[..], [7; 10]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while a.ep.with_data(|d| d.connections()) == 0 || b.ep.with_data(|d| d.connections()) == 0 {
        let _ = a.cq.read(0, |_, _| ());
        let _ = b.cq.read(0, |_, _| ());
        assert!(std::time::Instant::now() < until, "no connection");
    }
    let a = sides.0.ep.clone();
    fetch_adds_count_once(sides, 200);
    assert!(a.with_data(|d| d.path_stats().0.rc_messages) > 0);
}

/// One random operation: (datatype, op, count, element offset, fetching).
fn op_case() -> impl Strategy<Value = (Datatype, AtomicOp, usize, usize, bool)> {
    let dts = [
        Datatype::I8,
        Datatype::U16,
        Datatype::I32,
        Datatype::U64,
        Datatype::F64,
    ];
    (0..dts.len(), 0..19u8, 1..6usize, 0..4usize, any::<bool>()).prop_filter_map(
        "an operation the call takes",
        move |(d, o, n, at, fetch)| {
            let (dt, op) = (dts[d], AtomicOp::from_code(o)?);
            atomic::max_count(atomic::Call::of(op, fetch), dt, op)?;
            Some((dt, op, n, at, fetch || op.compares()))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// A run of operations, each waited for, gives the region and the fetched values that
    /// the same operations applied in order to a copy give.
    #[test]
    fn operations_match_a_sequential_model(
        ops in prop::collection::vec(op_case(), 1..40),
        seed in any::<u8>(),
    ) {
        let (a, b) = pair();
        let init: Vec<u8> = (0..96u8).map(|i| i.wrapping_mul(37).wrapping_add(seed) % 7).collect();
        let shown = region(&b, KEY, init.len(), FI_REMOTE_READ | FI_REMOTE_WRITE);
        shown.lock().copy_from_slice(&init);
        let mut model = init.clone();
        for (i, &(dt, op, n, at, fetch)) in ops.iter().enumerate() {
            let len = n * dt.size();
            let addr = at * dt.size();
            let operand: Vec<u8> = (0..len).map(|j| ((i + j) % 5) as u8).collect();
            let compare: Vec<u8> = if op.compares() {
                model[addr..addr + len].iter().enumerate()
                    .map(|(j, &t)| if (i + j) % 3 == 0 { t } else { t ^ 1 }).collect()
            } else {
                vec![]
            };
            let operand = if op == AtomicOp::Read { vec![] } else { operand };
            let before = model[addr..addr + len].to_vec();
            atomic::apply(dt, op, &mut model[addr..addr + len], &operand, &compare);
            let (result, got) = if fetch {
                let (m, g) = UserMem::owned(vec![0xee; len]);
                (Some(m), Some(g))
            } else {
                (None, None)
            };
            let operands = [operand, compare].concat();
            a.ep.atomic(args(1, dt, op, n, operands, result, addr as u64, i)).unwrap();
            let c = ok(next(&a, &b));
            let dir = if fetch { FI_READ } else { FI_WRITE };
            prop_assert_eq!((c.flags, c.op_context), (FI_ATOMIC | dir, i));
            if let Some(g) = got {
                prop_assert_eq!(&g.lock()[..], &before[..], "op {} {:?} {:?}", i, dt, op);
            }
            prop_assert_eq!(&shown.lock()[..], &model[..], "op {} {:?} {:?}", i, dt, op);
        }
    }
}

fn expect_err(s: &Side, other: &Side, ctx: usize, want: Errno) {
    match next(s, other) {
        Got::Err(e) => assert_eq!((e.err, e.completion.op_context), (want, ctx), "{e:?}"),
        Got::Ok(c) => panic!("completed: {c:?}"),
    }
}

#[test]
fn refused_atomics_fail_and_leave_the_region_alone() {
    let (a, b) = pair();
    let shown = region(&b, KEY, 16, FI_REMOTE_READ);
    let add = |addr, ctx| {
        args(
            1,
            Datatype::U32,
            AtomicOp::Sum,
            2,
            vec![1; 8],
            None,
            addr,
            ctx,
        )
    };
    // No remote write granted.
    a.ep.atomic(add(0, 1)).unwrap();
    expect_err(&a, &b, 1, Errno::ACCES);
    // A read is granted.
    let (m, got) = UserMem::owned(vec![0xee; 8]);
    let read = args(1, Datatype::U32, AtomicOp::Read, 2, vec![], Some(m), 4, 2);
    a.ep.atomic(read).unwrap();
    assert_eq!(ok(next(&a, &b)).op_context, 2);
    assert_eq!(got.lock()[..], [0; 8]);
    b.ep.domain.mrs.remove(KEY);
    region(&b, KEY, 16, FI_REMOTE_READ | FI_REMOTE_WRITE);
    // Past the region's end; no such key.
    a.ep.atomic(add(12, 3)).unwrap();
    expect_err(&a, &b, 3, Errno::ACCES);
    a.ep.atomic(AtomicArgs {
        key: 7,
        ..add(0, 4)
    })
    .unwrap();
    expect_err(&a, &b, 4, Errno::ACCES);
    assert!(shown.lock().iter().all(|&x| x == 0));
    assert_eq!(b.ep.data_stats().rma_refused, 3);
    // Refused at the call: bitwise on floats, too many elements, operands of the wrong size,
    // a compare operation without its compare operand's room.
    let bits = args(1, Datatype::F64, AtomicOp::Bor, 1, vec![0; 8], None, 0, 5);
    assert_eq!(a.ep.atomic(bits).err(), Some(Errno::OPNOTSUPP));
    let many = atomic::MAX_BYTES / 4 + 1;
    let big = args(
        1,
        Datatype::U32,
        AtomicOp::Sum,
        many,
        vec![0; 4 * many],
        None,
        0,
        6,
    );
    assert_eq!(a.ep.atomic(big).err(), Some(Errno::INVAL));
    assert_eq!(
        a.ep.atomic(add(0, 7).with_operands(vec![1; 7])).err(),
        Some(Errno::INVAL)
    );
    let (m, _) = UserMem::owned(vec![0; 4]);
    let cas = args(
        1,
        Datatype::U32,
        AtomicOp::Cswap,
        1,
        vec![0; 4],
        Some(m),
        0,
        8,
    );
    assert_eq!(a.ep.atomic(cas).err(), Some(Errno::INVAL));
}

impl AtomicArgs {
    fn with_operands(self, operands: Vec<u8>) -> AtomicArgs {
        AtomicArgs { operands, ..self }
    }
}

/// A peer that asks for an operation we do not take (a foreign or newer build) is answered
/// with an error, not left waiting: the forged peer here is a plain UDP socket, and the
/// answer's first datagram (the queue pair's session set-up) reaches it.
#[test]
fn an_operation_the_target_does_not_take_is_answered() {
    let (_a, b) = pair();
    region(&b, KEY, 16, FI_REMOTE_READ | FI_REMOTE_WRITE);
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut bytes = vec![];
    let r = wire::AtomicRequest {
        id: 5,
        key: KEY,
        addr: 0,
        count: 1,
        datatype: Datatype::F64.code(),
        op: AtomicOp::Bxor.code(),
        fetch: false,
        operands: &[0; 8],
    };
    wire::atomic(&mut bytes, 1, &r);
    bytes.extend_from_slice(r.operands);
    b.ep.with_data(|d| d.feed(peer.local_addr().unwrap(), &bytes));
    let mut buf = [0; 2048];
    assert!(peer.recv(&mut buf).unwrap() > 0, "answered");
    let st = b.ep.data_stats();
    assert_eq!((st.malformed, st.atomics_in), (1, 0));
}

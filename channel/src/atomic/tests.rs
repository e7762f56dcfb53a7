//! The operations against a model written differently: integers as raw bits in a u128 (wrapping
//! by masking, signed ones compared after sign extension), floats computed in their own type.

use proptest::prelude::*;

use super::*;

const INTS: [Datatype; 8] = [
    Datatype::I8,
    Datatype::U8,
    Datatype::I16,
    Datatype::U16,
    Datatype::I32,
    Datatype::U32,
    Datatype::I64,
    Datatype::U64,
];

fn signed(dt: Datatype) -> bool {
    matches!(
        dt,
        Datatype::I8 | Datatype::I16 | Datatype::I32 | Datatype::I64
    )
}

fn mask(dt: Datatype) -> u128 {
    (1u128 << (8 * dt.size())) - 1
}

/// The element's value, for comparisons.
fn value(dt: Datatype, raw: u128) -> i128 {
    let bits = 8 * dt.size() as u32;
    if signed(dt) && raw >> (bits - 1) & 1 == 1 {
        raw as i128 - (1i128 << bits)
    } else {
        raw as i128
    }
}

fn model_int(dt: Datatype, op: AtomicOp, t: u128, x: u128, c: u128) -> u128 {
    let m = mask(dt);
    let (vt, vx, vc) = (value(dt, t), value(dt, x), value(dt, c));
    let b = |v: bool| u128::from(v);
    let swap_if = |hit: bool| if hit { x } else { t };
    match op {
        AtomicOp::Min => swap_if(vx < vt),
        AtomicOp::Max => swap_if(vx > vt),
        AtomicOp::Sum => t.wrapping_add(x) & m,
        AtomicOp::Prod => t.wrapping_mul(x) & m,
        AtomicOp::Lor => b(t != 0 || x != 0),
        AtomicOp::Land => b(t != 0 && x != 0),
        AtomicOp::Lxor => b((t != 0) ^ (x != 0)),
        AtomicOp::Bor => t | x,
        AtomicOp::Band => t & x,
        AtomicOp::Bxor => t ^ x,
        AtomicOp::Read => t,
        AtomicOp::Write => x,
        AtomicOp::Cswap => swap_if(vc == vt),
        AtomicOp::CswapNe => swap_if(vc != vt),
        AtomicOp::CswapLe => swap_if(vc <= vt),
        AtomicOp::CswapLt => swap_if(vc < vt),
        AtomicOp::CswapGe => swap_if(vc >= vt),
        AtomicOp::CswapGt => swap_if(vc > vt),
        AtomicOp::Mswap => (x & c) | (t & !c & m),
    }
}

fn bytes(dt: Datatype, raws: &[u128]) -> Vec<u8> {
    raws.iter()
        .flat_map(|r| r.to_le_bytes()[..dt.size()].to_vec())
        .collect()
}

fn int_case() -> impl Strategy<Value = (Datatype, AtomicOp, Vec<(u128, u128, u128)>)> {
    (0..INTS.len(), 0..OPS.len(), 1..20usize).prop_flat_map(|(d, o, n)| {
        let dt = INTS[d];
        let m = mask(dt);
        // Small values and the extremes, so that comparisons tie and sums wrap.
        let v = prop_oneof![
            0u128..4,
            Just(m),
            Just(m >> 1),
            Just((m >> 1) + 1),
            any::<u128>()
        ]
        .prop_map(move |r| r & m);
        (
            Just(dt),
            Just(OPS[o]),
            prop::collection::vec((v.clone(), v.clone(), v), n),
        )
    })
}

proptest! {
    #[test]
    fn integer_operations_match_the_model((dt, op, elems) in int_case()) {
        let ts: Vec<u128> = elems.iter().map(|e| e.0).collect();
        let xs: Vec<u128> = elems.iter().map(|e| e.1).collect();
        let cs: Vec<u128> = elems.iter().map(|e| e.2).collect();
        let mut target = bytes(dt, &ts);
        let compare = if op.compares() { bytes(dt, &cs) } else { vec![] };
        apply(dt, op, &mut target, &bytes(dt, &xs), &compare);
        let want: Vec<u128> = elems
            .iter()
            .map(|&(t, x, c)| model_int(dt, op, t, x, c))
            .collect();
        prop_assert_eq!(target, bytes(dt, &want), "{:?} {:?}", dt, op);
    }

    #[test]
    fn float_operations_match_the_model(
        ts in prop::collection::vec(-4.0f64..4.0, 1..10),
        o in 0..OPS.len(),
    ) {
        let op = OPS[o];
        prop_assume!(max_count(Call::Fetch, Datatype::F64, op).is_some()
            || max_count(Call::Compare, Datatype::F64, op).is_some());
        let xs: Vec<f64> = ts.iter().map(|t| (t * 3.0).round() / 2.0).collect();
        let cs: Vec<f64> = ts.iter().map(|t| t.round()).collect();
        let enc = |v: &[f64]| v.iter().flat_map(|f| f.to_ne_bytes()).collect::<Vec<u8>>();
        let mut target = enc(&ts);
        apply(Datatype::F64, op, &mut target, &enc(&xs), &enc(&cs));
        for (i, got) in target.chunks_exact(8).enumerate() {
            let (t, x, c) = (ts[i], xs[i], cs[i]);
            let want = match op {
                AtomicOp::Min => t.min(x),
                AtomicOp::Max => t.max(x),
                AtomicOp::Sum => t + x,
                AtomicOp::Prod => t * x,
                AtomicOp::Read => t,
                AtomicOp::Write => x,
                AtomicOp::Cswap => if c == t { x } else { t },
                AtomicOp::CswapNe => if c != t { x } else { t },
                AtomicOp::CswapLe => if c <= t { x } else { t },
                AtomicOp::CswapLt => if c < t { x } else { t },
                AtomicOp::CswapGe => if c >= t { x } else { t },
                AtomicOp::CswapGt => if c > t { x } else { t },
                other => unreachable!("{other:?} is not offered on floats"),
            };
            prop_assert_eq!(f64::from_ne_bytes(got.try_into().unwrap()), want, "{:?}", op);
        }
    }
}

#[test]
fn hand_checked_cases() {
    let mut t = [127u8];
    apply(Datatype::I8, AtomicOp::Sum, &mut t, &[1], &[]);
    assert_eq!(t, [128], "127 + 1 wraps to -128");
    // 200 is -56 as a signed byte: the minimum depends on the type.
    let mut t = [200u8];
    apply(Datatype::U8, AtomicOp::Min, &mut t, &[100], &[]);
    assert_eq!(t, [100]);
    let mut t = [200u8];
    apply(Datatype::I8, AtomicOp::Min, &mut t, &[100], &[]);
    assert_eq!(t, [200]);
    let mut t = 1.5f32.to_ne_bytes();
    apply(
        Datatype::F32,
        AtomicOp::Min,
        &mut t,
        &f32::NAN.to_ne_bytes(),
        &[],
    );
    assert_eq!(
        f32::from_ne_bytes(t),
        1.5,
        "a NaN operand leaves the target"
    );
    let mut t = 0xf0f0u16.to_ne_bytes();
    let (x, m) = (0x1234u16.to_ne_bytes(), 0xff00u16.to_ne_bytes());
    apply(Datatype::U16, AtomicOp::Mswap, &mut t, &x, &m);
    assert_eq!(u16::from_ne_bytes(t), 0x12f0);
    // Two elements: only the first compares equal.
    let mut t: Vec<u8> = [5u32, 6].iter().flat_map(|v| v.to_ne_bytes()).collect();
    let x: Vec<u8> = [9u32, 9].iter().flat_map(|v| v.to_ne_bytes()).collect();
    let c: Vec<u8> = [5u32, 5].iter().flat_map(|v| v.to_ne_bytes()).collect();
    apply(Datatype::U32, AtomicOp::Cswap, &mut t, &x, &c);
    assert_eq!(t[..4], 9u32.to_ne_bytes());
    assert_eq!(t[4..], 6u32.to_ne_bytes());
    // ATOMIC_READ carries no operand and changes nothing.
    let mut t = 7i64.to_ne_bytes();
    apply(Datatype::I64, AtomicOp::Read, &mut t, &[], &[]);
    assert_eq!(i64::from_ne_bytes(t), 7);
}

#[test]
fn each_call_takes_its_own_operations_and_types() {
    use AtomicOp::*;
    for dt in INTS {
        for op in OPS {
            let want = |call| match call {
                Call::Write => !op.compares() && op != Read,
                Call::Fetch => !op.compares(),
                Call::Compare => op.compares(),
            };
            for call in [Call::Write, Call::Fetch, Call::Compare] {
                assert_eq!(
                    max_count(call, dt, op),
                    want(call).then(|| MAX_BYTES / dt.size()),
                    "{call:?} {dt:?} {op:?}"
                );
            }
        }
    }
    for dt in [Datatype::F32, Datatype::F64] {
        for op in [Bor, Band, Bxor, Mswap, Lor, Land, Lxor] {
            for call in [Call::Write, Call::Fetch, Call::Compare] {
                assert_eq!(max_count(call, dt, op), None, "{call:?} {dt:?} {op:?}");
            }
        }
        assert_eq!(max_count(Call::Write, dt, Sum), Some(MAX_BYTES / dt.size()));
        assert_eq!(
            max_count(Call::Compare, dt, CswapGt),
            Some(MAX_BYTES / dt.size())
        );
    }
    // libfabric's codes, both ways; the complex types and long double are not offered.
    for (i, op) in OPS.iter().enumerate() {
        assert_eq!(AtomicOp::from_fi(i as u32), Some(*op));
        assert_eq!(AtomicOp::from_code(op.code()), Some(*op));
    }
    assert_eq!(AtomicOp::from_fi(19), None);
    assert_eq!(Datatype::from_fi(9), Some(Datatype::F64));
    assert_eq!(Datatype::from_fi(10), None);
    assert_eq!(
        Datatype::from_code(Datatype::U16.code()),
        Some(Datatype::U16)
    );
}

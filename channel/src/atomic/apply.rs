//! One atomic operation on a run of elements, in the target's (native) byte order. Integer
//! arithmetic wraps, as C's unsigned arithmetic and the two's-complement hardware MPI runs on
//! do; MIN and MAX keep the target where a float comparison is false (a NaN operand).

use super::{AtomicOp, Datatype};

/// What every element type gives the operations.
trait Elem: Copy + PartialOrd {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn sum(self, o: Self) -> Self;
    fn prod(self, o: Self) -> Self;
    fn truth(self) -> bool;
    fn of_truth(t: bool) -> Self;
    /// OR, AND, XOR and MSWAP's `(o & mask) | (self & !mask)`; integers only (never asked of
    /// a float: `max_count` refuses those pairs).
    fn bits(self, op: AtomicOp, o: Self, mask: Self) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("one element"))
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes());
            }
            fn sum(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn prod(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn truth(self) -> bool {
                self != 0
            }
            fn of_truth(t: bool) -> Self {
                <$t>::from(t)
            }
            fn bits(self, op: AtomicOp, o: Self, mask: Self) -> Self {
                match op {
                    AtomicOp::Bor => self | o,
                    AtomicOp::Band => self & o,
                    AtomicOp::Bxor => self ^ o,
                    _ => (o & mask) | (self & !mask),
                }
            }
        }
    )*};
}

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("one element"))
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes());
            }
            fn sum(self, o: Self) -> Self {
                self + o
            }
            fn prod(self, o: Self) -> Self {
                self * o
            }
            fn truth(self) -> bool {
                self != 0.0
            }
            fn of_truth(t: bool) -> Self {
                if t { 1.0 } else { 0.0 }
            }
            fn bits(self, _: AtomicOp, _: Self, _: Self) -> Self {
                self
            }
        }
    )*};
}

int_elem!(i8, u8, i16, u16, i32, u32, i64, u64);
float_elem!(f32, f64);

/// One element's new value.
fn one<T: Elem>(op: AtomicOp, t: T, x: T, c: Option<T>) -> T {
    let cmp = |hit: fn(&T, &T) -> bool| match c {
        Some(c) if hit(&c, &t) => x,
        _ => t,
    };
    match op {
        AtomicOp::Min => {
            if x < t {
                x
            } else {
                t
            }
        }
        AtomicOp::Max => {
            if x > t {
                x
            } else {
                t
            }
        }
        AtomicOp::Sum => t.sum(x),
        AtomicOp::Prod => t.prod(x),
        AtomicOp::Lor => T::of_truth(t.truth() || x.truth()),
        AtomicOp::Land => T::of_truth(t.truth() && x.truth()),
        AtomicOp::Lxor => T::of_truth(t.truth() != x.truth()),
        AtomicOp::Bor | AtomicOp::Band | AtomicOp::Bxor => t.bits(op, x, x),
        AtomicOp::Mswap => t.bits(op, x, c.unwrap_or(t)),
        AtomicOp::Read => t,
        AtomicOp::Write => x,
        AtomicOp::Cswap => cmp(|c, t| c == t),
        AtomicOp::CswapNe => cmp(|c, t| c != t),
        AtomicOp::CswapLe => cmp(|c, t| c <= t),
        AtomicOp::CswapLt => cmp(|c, t| c < t),
        AtomicOp::CswapGe => cmp(|c, t| c >= t),
        AtomicOp::CswapGt => cmp(|c, t| c > t),
    }
}

fn run<T: Elem>(op: AtomicOp, target: &mut [u8], operand: &[u8], compare: &[u8]) {
    for (i, t) in target.chunks_exact_mut(T::SIZE).enumerate() {
        let at = i * T::SIZE..(i + 1) * T::SIZE;
        // ATOMIC_READ carries no operand.
        let x = operand.get(at.clone()).map_or_else(|| T::load(t), T::load);
        let c = compare.get(at).map(T::load);
        one(op, T::load(t), x, c).store(t);
    }
}

/// Applies `op` to each element of `target` with the matching element of `operand` (and of
/// `compare`, for the compare family). `target` holds whole elements; `operand` and `compare`
/// as many (or none: ATOMIC_READ's operand, and `compare` outside the compare family).
pub fn apply(dt: Datatype, op: AtomicOp, target: &mut [u8], operand: &[u8], compare: &[u8]) {
    match dt {
        Datatype::I8 => run::<i8>(op, target, operand, compare),
        Datatype::U8 => run::<u8>(op, target, operand, compare),
        Datatype::I16 => run::<i16>(op, target, operand, compare),
        Datatype::U16 => run::<u16>(op, target, operand, compare),
        Datatype::I32 => run::<i32>(op, target, operand, compare),
        Datatype::U32 => run::<u32>(op, target, operand, compare),
        Datatype::I64 => run::<i64>(op, target, operand, compare),
        Datatype::U64 => run::<u64>(op, target, operand, compare),
        Datatype::F32 => run::<f32>(op, target, operand, compare),
        Datatype::F64 => run::<f64>(op, target, operand, compare),
    }
}

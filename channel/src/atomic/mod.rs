//! Atomic operations on typed elements, as fi_atomic(3) defines them: what each operation
//! does to one element of a peer's memory, which datatypes each call family takes, and how
//! many elements one operation may carry. Sans-IO: the data path (`data/atomic.rs`) carries
//! the operands to the target and the fetched values back.

mod apply;
#[cfg(test)]
mod tests;

pub use apply::apply;

use crate::sys::{fi_datatype, fi_op};

/// The element types offered: the integers and the two IEEE floats (not the complex types,
/// `long double` or the 128-bit integers, which MPI's one-sided paths do not need here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

const DATATYPES: [Datatype; 10] = [
    Datatype::I8,
    Datatype::U8,
    Datatype::I16,
    Datatype::U16,
    Datatype::I32,
    Datatype::U32,
    Datatype::I64,
    Datatype::U64,
    Datatype::F32,
    Datatype::F64,
];

impl Datatype {
    /// libfabric's datatype, if offered.
    pub fn from_fi(dt: fi_datatype) -> Option<Datatype> {
        DATATYPES.get(usize::try_from(dt).ok()?).copied()
    }

    /// The wire's code: libfabric's enum value.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<Datatype> {
        DATATYPES.get(usize::from(c)).copied()
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Datatype::I8 | Datatype::U8 => 1,
            Datatype::I16 | Datatype::U16 => 2,
            Datatype::I32 | Datatype::U32 | Datatype::F32 => 4,
            Datatype::I64 | Datatype::U64 | Datatype::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Datatype::F32 | Datatype::F64)
    }
}

/// fi_atomic(3)'s operations, in libfabric's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    Min,
    Max,
    Sum,
    Prod,
    Lor,
    Land,
    Bor,
    Band,
    Lxor,
    Bxor,
    Read,
    Write,
    Cswap,
    CswapNe,
    CswapLe,
    CswapLt,
    CswapGe,
    CswapGt,
    Mswap,
}

const OPS: [AtomicOp; 19] = [
    AtomicOp::Min,
    AtomicOp::Max,
    AtomicOp::Sum,
    AtomicOp::Prod,
    AtomicOp::Lor,
    AtomicOp::Land,
    AtomicOp::Bor,
    AtomicOp::Band,
    AtomicOp::Lxor,
    AtomicOp::Bxor,
    AtomicOp::Read,
    AtomicOp::Write,
    AtomicOp::Cswap,
    AtomicOp::CswapNe,
    AtomicOp::CswapLe,
    AtomicOp::CswapLt,
    AtomicOp::CswapGe,
    AtomicOp::CswapGt,
    AtomicOp::Mswap,
];

impl AtomicOp {
    /// libfabric's operation, if a point-to-point one.
    pub fn from_fi(op: fi_op) -> Option<AtomicOp> {
        OPS.get(usize::try_from(op).ok()?).copied()
    }

    /// The wire's code: libfabric's enum value.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<AtomicOp> {
        OPS.get(usize::from(c)).copied()
    }

    /// Whether it takes a compare operand (`fi_compare_atomic`).
    pub fn compares(self) -> bool {
        matches!(
            self,
            AtomicOp::Cswap
                | AtomicOp::CswapNe
                | AtomicOp::CswapLe
                | AtomicOp::CswapLt
                | AtomicOp::CswapGe
                | AtomicOp::CswapGt
                | AtomicOp::Mswap
        )
    }

    fn bitwise(self) -> bool {
        matches!(
            self,
            AtomicOp::Bor | AtomicOp::Band | AtomicOp::Bxor | AtomicOp::Mswap
        )
    }

    fn logical(self) -> bool {
        matches!(self, AtomicOp::Lor | AtomicOp::Land | AtomicOp::Lxor)
    }
}

/// The call families, each with the operations it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `fi_atomic`: the target is updated, nothing comes back.
    Write,
    /// `fi_fetch_atomic`: the target's values before the update come back.
    Fetch,
    /// `fi_compare_atomic`: as a fetch, with a compare operand (or MSWAP's mask).
    Compare,
}

impl Call {
    /// The family of `op`, fetching the values from before or not.
    pub fn of(op: AtomicOp, fetch: bool) -> Call {
        match (op.compares(), fetch) {
            (true, _) => Call::Compare,
            (false, true) => Call::Fetch,
            (false, false) => Call::Write,
        }
    }
}

/// Most operand bytes one operation carries (its compare operand as many again), so that a
/// request and its answer each fit in one message.
pub const MAX_BYTES: usize = 16 * 1024;

/// How many elements of `dt` one `call` of `op` takes, or `None` if it does not take them:
/// bitwise operations and MSWAP are for integers only, and logical ones are not offered on
/// floats (MPI defines them for integers and its logical type alone).
pub fn max_count(call: Call, dt: Datatype, op: AtomicOp) -> Option<usize> {
    let family = match call {
        Call::Write => !op.compares() && op != AtomicOp::Read,
        Call::Fetch => !op.compares(),
        Call::Compare => op.compares(),
    };
    let typed = !(dt.is_float() && (op.bitwise() || op.logical()));
    (family && typed).then(|| MAX_BYTES / dt.size())
}

//! Wrapping 32-bit sequence numbers and message ids, compared with serial-number arithmetic
//! (RFC 1982): `a` is before `b` when `b - a`, taken modulo 2^32, lies in `1..2^31`.
//!
//! Neither type implements `Ord`: serial numbers are not totally ordered, and a derived `<` would
//! silently give the wrong answer across the wrap.

use core::fmt;

/// A datagram sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// `self + n`, wrapping.
    #[inline]
    #[must_use]
    pub const fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }

    /// `self - n`, wrapping.
    #[inline]
    #[must_use]
    pub const fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }

    /// Distance from `base` forward to `self`, modulo 2^32.
    #[inline]
    pub const fn since(self, base: Seq) -> u32 {
        self.0.wrapping_sub(base.0)
    }

    /// Signed serial difference `self - other`; negative when `self` is before `other`.
    #[inline]
    pub const fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// `self` comes strictly before `other`.
    #[inline]
    pub const fn before(self, other: Seq) -> bool {
        self.diff(other) < 0
    }

    /// `self` comes strictly after `other`.
    #[inline]
    pub const fn after(self, other: Seq) -> bool {
        self.diff(other) > 0
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seq({})", self.0)
    }
}

/// A message id: the sender numbers its messages 0, 1, 2, … (from [`Config::initial_seq`]),
/// wrapping, and the receiver reports the same numbers, so both sides name a message alike.
///
/// [`Config::initial_seq`]: crate::Config::initial_seq
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MsgId(pub u32);

impl MsgId {
    /// The id after this one.
    #[inline]
    #[must_use]
    pub const fn next(self) -> MsgId {
        MsgId(self.0.wrapping_add(1))
    }

    /// `self + n`, wrapping.
    #[inline]
    #[must_use]
    pub const fn add(self, n: u32) -> MsgId {
        MsgId(self.0.wrapping_add(n))
    }

    /// Distance from `base` forward to `self`, modulo 2^32.
    #[inline]
    pub const fn since(self, base: MsgId) -> u32 {
        self.0.wrapping_sub(base.0)
    }
}

impl fmt::Debug for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MsgId({})", self.0)
    }
}

/// The messages `start, start+1, …` (wrapping), `len` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgRange {
    /// First message of the range.
    pub start: MsgId,
    /// How many messages.
    pub len: u32,
}

impl MsgRange {
    /// Whether the range holds no message.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `id` is one of the range's messages.
    pub const fn contains(&self, id: MsgId) -> bool {
        id.since(self.start) < self.len
    }

    /// The ids, in order.
    pub fn iter(&self) -> impl Iterator<Item = MsgId> {
        let start = self.start;
        (0..self.len).map(move |i| start.add(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        let a = Seq(u32::MAX);
        let b = a.add(1);
        assert_eq!(b, Seq(0));
        assert!(a.before(b));
        assert!(b.after(a));
        assert_eq!(b.since(a), 1);
        assert_eq!(a.diff(b), -1);
    }

    #[test]
    fn half_space() {
        let a = Seq(7);
        assert!(a.before(a.add(0x7fff_ffff)));
        // Exactly half way is "after" in two's complement; never rely on it.
        assert!(!a.before(a));
        assert!(!a.after(a));
    }

    #[test]
    fn msg_range() {
        let r = MsgRange {
            start: MsgId(u32::MAX - 1),
            len: 3,
        };
        let ids: Vec<_> = r.iter().collect();
        assert_eq!(ids, vec![MsgId(u32::MAX - 1), MsgId(u32::MAX), MsgId(0)]);
        assert!(r.contains(MsgId(0)));
        assert!(!r.contains(MsgId(1)));
    }
}

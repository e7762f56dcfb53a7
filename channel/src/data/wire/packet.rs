//! The bytes of a message: operation codes, flags, header lengths and the view [`Packet`].

pub(super) const EAGER: u8 = 1;
pub(super) const RTS: u8 = 2;
pub(super) const CTS: u8 = 3;
pub(super) const DATA: u8 = 4;
pub(super) const PING: u8 = 5;
pub(super) const PUSH: u8 = 6;
pub(super) const WRITE: u8 = 7;
pub(super) const READ: u8 = 8;
pub(super) const READ_DATA: u8 = 9;
pub(super) const RMA_ANSWER: u8 = 10;
pub(super) const ATOMIC: u8 = 11;
pub(super) const ATOMIC_ANSWER: u8 = 12;

pub(super) const F_TAGGED: u8 = 1;
pub(super) const F_CQ_DATA: u8 = 2;
/// RTS: PUSH chunks follow it.
pub(super) const F_PUSHED: u8 = 4;
/// CTS: the receiver keeps the pushed chunks; the sender sends the rest after them.
pub(super) const F_TAKEN: u8 = 1;
/// WRITE: the write's last; RMA_ANSWER: answers a write's last WRITE.
pub(super) const F_LAST: u8 = 1;
/// ATOMIC: the values from before the operation are wanted back.
pub(super) const F_FETCH: u8 = 1;

/// Header bytes of EAGER and RTS.
pub const MATCH_HEADER: usize = 40;
/// Header bytes of CTS.
pub const CTS_HEADER: usize = 32;
/// Header bytes of DATA and PUSH.
pub const DATA_HEADER: usize = 24;
/// Bytes of a PING.
pub const PING_LEN: usize = 8;
/// Header bytes of WRITE.
pub const WRITE_HEADER: usize = 32;
/// Bytes of READ.
pub const READ_LEN: usize = 40;
/// Bytes of RMA_ANSWER.
pub const RMA_ANSWER_LEN: usize = 24;
/// Header bytes of ATOMIC and of ATOMIC_ANSWER.
pub const ATOMIC_HEADER: usize = 40;
pub const ATOMIC_ANSWER_HEADER: usize = 24;

/// Why a message was dropped (each is counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message shorter than its header")]
    Short,
    #[error("unknown operation {0}")]
    Op(u8),
    #[error("reserved bits set")]
    Reserved,
    #[error("eager length {len} disagrees with the {payload} bytes carried")]
    Length { len: u64, payload: usize },
}

/// Bytes every message starts with: op, flags, two zero bytes, the sender's QP number.
const PREFIX_LEN: usize = 8;

mod field {
    use core::ops::Range;

    pub const OP: usize = 0;
    pub const FLAGS: usize = 1;
    pub const RESERVED: Range<usize> = 2..4;
    pub const QPN: Range<usize> = 4..8;
    /// Word `i` of a kind's fields is `WORDS + 8 * i..`.
    pub const WORDS: usize = super::PREFIX_LEN;
    /// ATOMIC's fourth word, split.
    pub const ATOMIC_COUNT: Range<usize> = 32..36;
    pub const ATOMIC_DATATYPE: usize = 36;
    pub const ATOMIC_OP: usize = 37;
    pub const ATOMIC_RESERVED: Range<usize> = 38..40;
}

/// Header bytes of a message of operation `op`; `None` for an operation this build does not
/// know.
pub const fn header_len_for(op: u8) -> Option<usize> {
    Some(match op {
        EAGER | RTS => MATCH_HEADER,
        CTS => CTS_HEADER,
        DATA | PUSH | READ_DATA => DATA_HEADER,
        PING => PING_LEN,
        WRITE => WRITE_HEADER,
        READ => READ_LEN,
        RMA_ANSWER => RMA_ANSWER_LEN,
        ATOMIC => ATOMIC_HEADER,
        ATOMIC_ANSWER => ATOMIC_ANSWER_HEADER,
        _ => return None,
    })
}

/// The flags operation `op` may set.
pub(super) const fn allowed_flags(op: u8) -> u8 {
    match op {
        EAGER => F_TAGGED | F_CQ_DATA,
        RTS => F_TAGGED | F_CQ_DATA | F_PUSHED,
        CTS => F_TAKEN,
        WRITE | RMA_ANSWER => F_LAST,
        ATOMIC => F_FETCH,
        _ => 0,
    }
}

/// A view of a message.
///
/// After [`Packet::new_checked`] every field of the message's own operation is in bounds; the
/// fields of another operation, or any field after [`Packet::new_unchecked`] on a short buffer,
/// may panic. Parsing goes through the check, so it never does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that its zero bytes are zero, that its operation is known and
    /// that it holds that operation's whole header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check()?;
        Ok(packet)
    }

    /// The checks of [`Packet::new_checked`], in the order whose first failure names the
    /// drop: short, reserved, unknown operation, short for that operation.
    pub fn check(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < PREFIX_LEN {
            return Err(WireError::Short);
        }
        if self.reserved() != 0 {
            return Err(WireError::Reserved);
        }
        let need = header_len_for(self.op()).ok_or(WireError::Op(self.op()))?;
        if len < need {
            return Err(WireError::Short);
        }
        Ok(())
    }

    /// The operation.
    pub fn op(&self) -> u8 {
        self.buffer.as_ref()[field::OP]
    }

    /// The operation's flags.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Bytes 2..4, zero from this build.
    pub fn reserved(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::RESERVED];
        u16::from_le_bytes([b[0], b[1]])
    }

    /// The sender's QP number.
    pub fn qpn(&self) -> u32 {
        u32::from_le_bytes(
            self.buffer.as_ref()[field::QPN]
                .try_into()
                .expect("4 bytes"),
        )
    }

    fn word(&self, i: usize) -> u64 {
        let at = field::WORDS + 8 * i;
        u64::from_le_bytes(
            self.buffer.as_ref()[at..at + 8]
                .try_into()
                .expect("8 bytes"),
        )
    }

    /// ATOMIC: how many elements.
    pub fn atomic_count(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::ATOMIC_COUNT];
        u32::from_le_bytes(b.try_into().expect("4 bytes"))
    }

    /// ATOMIC: their datatype, libfabric's code.
    pub fn atomic_datatype(&self) -> u8 {
        self.buffer.as_ref()[field::ATOMIC_DATATYPE]
    }

    /// ATOMIC: the operation, libfabric's code.
    pub fn atomic_op(&self) -> u8 {
        self.buffer.as_ref()[field::ATOMIC_OP]
    }

    /// ATOMIC: the two bytes after the operation, zero from this build.
    pub fn atomic_reserved(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ATOMIC_RESERVED];
        u16::from_le_bytes([b[0], b[1]])
    }

    /// The header's length by the operation (the prefix alone for an unknown one).
    pub fn header_len(&self) -> usize {
        header_len_for(self.op()).unwrap_or(PREFIX_LEN)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the operation.
    pub fn set_op(&mut self, v: u8) {
        self.buffer.as_mut()[field::OP] = v;
    }

    /// Sets the flags.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    /// Sets bytes 2..4 (for tests; senders leave them zero).
    pub fn set_reserved(&mut self, v: u16) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&v.to_le_bytes());
    }

    /// Sets the sender's QP number.
    pub fn set_qpn(&mut self, v: u32) {
        self.buffer.as_mut()[field::QPN].copy_from_slice(&v.to_le_bytes());
    }

    fn set_word(&mut self, i: usize, v: u64) {
        let at = field::WORDS + 8 * i;
        self.buffer.as_mut()[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// Sets ATOMIC's element count.
    pub fn set_atomic_count(&mut self, v: u32) {
        self.buffer.as_mut()[field::ATOMIC_COUNT].copy_from_slice(&v.to_le_bytes());
    }

    /// Sets ATOMIC's datatype.
    pub fn set_atomic_datatype(&mut self, v: u8) {
        self.buffer.as_mut()[field::ATOMIC_DATATYPE] = v;
    }

    /// Sets ATOMIC's operation.
    pub fn set_atomic_op(&mut self, v: u8) {
        self.buffer.as_mut()[field::ATOMIC_OP] = v;
    }

    /// Sets ATOMIC's two reserved bytes (for tests; senders leave them zero).
    pub fn set_atomic_reserved(&mut self, v: u16) {
        self.buffer.as_mut()[field::ATOMIC_RESERVED].copy_from_slice(&v.to_le_bytes());
    }

    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let at = self.header_len();
        &mut self.buffer.as_mut()[at..]
    }
}

/// Each operation's fields are little-endian u64 words after the prefix: one getter and one
/// setter per word, named for the operations that use it.
macro_rules! words {
    ($($(#[$doc:meta])* $get:ident, $set:ident: $word:literal;)*) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $($(#[$doc])* pub fn $get(&self) -> u64 {
                self.word($word)
            })*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $($(#[$doc])* pub fn $set(&mut self, v: u64) {
                self.set_word($word, v)
            })*
        }
    };
}

words! {
    /// EAGER, RTS: the tag.
    tag, set_tag: 0;
    /// EAGER, RTS: the CQ data, if flagged `F_CQ_DATA` (zero otherwise).
    cq_data, set_cq_data: 1;
    /// EAGER, RTS: the message's length.
    msg_len, set_msg_len: 2;
    /// RTS: the sender's handle; EAGER: zero.
    rts_handle, set_rts_handle: 3;
    /// CTS: the sender's handle from the RTS.
    cts_handle, set_cts_handle: 0;
    /// CTS: the receive the DATA chunks name.
    cts_recv_id, set_cts_recv_id: 1;
    /// CTS: how many bytes the receiver takes.
    cts_wanted, set_cts_wanted: 2;
    /// DATA: the receive id; PUSH: the sender's handle; READ_DATA: the read id.
    chunk_id, set_chunk_id: 0;
    /// DATA, PUSH, READ_DATA: where the chunk goes in its message.
    chunk_offset, set_chunk_offset: 1;
    /// WRITE: the target's memory region.
    write_key, set_write_key: 0;
    /// WRITE: where in it the payload goes.
    write_addr, set_write_addr: 1;
    /// WRITE: the write, echoed by its answer.
    write_id, set_write_id: 2;
    /// READ: the read, named by its READ_DATA chunks.
    read_id, set_read_id: 0;
    /// READ: the target's memory region.
    read_key, set_read_key: 1;
    /// READ: where in it the read starts.
    read_addr, set_read_addr: 2;
    /// READ: how many bytes.
    read_len, set_read_len: 3;
    /// RMA_ANSWER, ATOMIC_ANSWER: the write, read or request answered.
    answer_id, set_answer_id: 0;
    /// RMA_ANSWER, ATOMIC_ANSWER: a libfabric errno, 0 if it was done.
    answer_errno, set_answer_errno: 1;
    /// ATOMIC: the request, echoed by its answer.
    atomic_id, set_atomic_id: 0;
    /// ATOMIC: the target's memory region.
    atomic_key, set_atomic_key: 1;
    /// ATOMIC: where in it the elements are.
    atomic_addr, set_atomic_addr: 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_the_layout_says() {
        let mut b = [0u8; ATOMIC_HEADER + 1];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_op(ATOMIC);
        p.set_flags(F_FETCH);
        p.set_qpn(0x0403_0201);
        p.set_atomic_id(0x11);
        p.set_atomic_key(0x22);
        p.set_atomic_addr(0x33);
        p.set_atomic_count(0x0807_0605);
        p.set_atomic_datatype(0x09);
        p.set_atomic_op(0x0a);
        p.payload_mut()[0] = 0xcc;
        let mut want = [0u8; ATOMIC_HEADER + 1];
        want[..8].copy_from_slice(&[ATOMIC, F_FETCH, 0, 0, 1, 2, 3, 4]);
        want[8] = 0x11;
        want[16] = 0x22;
        want[24] = 0x33;
        want[32..38].copy_from_slice(&[5, 6, 7, 8, 9, 10]);
        want[40] = 0xcc;
        assert_eq!(b, want);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), ATOMIC_HEADER);
        assert_eq!((p.atomic_count(), p.atomic_op()), (0x0807_0605, 0x0a));
        assert_eq!(p.payload(), &[0xcc]);
    }

    #[test]
    fn checks_refuse_in_order() {
        let mut b = [0u8; MATCH_HEADER];
        b[0] = RTS;
        assert!(Packet::new_checked(&b[..]).is_ok());
        assert_eq!(Packet::new_checked(&b[..7]).err(), Some(WireError::Short));
        assert_eq!(
            Packet::new_checked(&b[..MATCH_HEADER - 1]).err(),
            Some(WireError::Short)
        );
        b[0] = 0xee;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(WireError::Op(0xee)));
        // The zero bytes are checked before the operation is looked up.
        b[2] = 1;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(WireError::Reserved));
    }
}

/// Why a frame or header was rejected. Decoders return these and never panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("buffer too short: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("length field says {0}, which does not fit the frame")]
    BadLength(usize),
    #[error("CRC32c mismatch: computed {computed:#010x}, received {received:#010x}")]
    BadCrc { computed: u32, received: u32 },
    #[error("DDP version {0}, expected 1")]
    BadDdpVersion(u8),
    #[error("RDMAP version {0}, expected 1")]
    BadRdmapVersion(u8),
    #[error("unknown RDMAP opcode {0:#x}")]
    UnknownOpcode(u8),
    #[error("reserved bits set in {0}")]
    ReservedBits(&'static str),
    #[error("{0}")]
    Malformed(&'static str),
    #[error("bad MPA key (not a request or reply frame)")]
    BadMpaKey,
    #[error("unsupported MPA revision {0}")]
    BadMpaRevision(u8),
    #[error("MPA private data of {0} bytes exceeds 512")]
    PrivateDataTooLong(usize),
    #[error("MPA marker at stream offset {offset} is malformed")]
    BadMarker { offset: u64 },
    #[error("value out of range: {0}")]
    OutOfRange(&'static str),
    #[error("MPA Reply rejected the connection (R flag)")]
    MpaRejected,
}

pub type Result<T> = core::result::Result<T, Error>;

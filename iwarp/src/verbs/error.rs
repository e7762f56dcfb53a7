use std::borrow::Cow;

use super::QpState;

/// Why a verb failed. Failures of work already accepted are reported as completions instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    #[error("{op} is not allowed in state {state:?}")]
    InvalidState { op: &'static str, state: QpState },
    #[error("invalid argument: {0}")]
    InvalidArgument(Cow<'static, str>),
    #[error("message of {len} bytes exceeds the maximum of {max}")]
    MessageTooLarge { len: usize, max: usize },
    #[error("work queue full")]
    QueueFull,
    #[error("a UD send needs an address handle")]
    MissingAddressHandle,
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("wire: {0}")]
    Mpa(#[from] crate::wire::Error),
    #[error("MPA start-up: {0}")]
    Startup(&'static str),
    #[error("the peer rejected the connection ({} bytes of private data)", private_data.len())]
    Rejected { private_data: Vec<u8> },
    #[error("timed out")]
    Timeout,
    #[error("the peer closed the connection")]
    PeerClosed,
    #[error("protocol violation: {0}")]
    Protocol(&'static str),
    /// Authenticated mode: the peer did not prove the job's key.
    #[error("authentication failed: {0}")]
    Unauthenticated(&'static str),
}

impl From<nix::errno::Errno> for VerbsError {
    fn from(e: nix::errno::Errno) -> Self {
        VerbsError::Io(e.into())
    }
}

//! Where completions go: the bound CQs and counters, with selective completion applied.

use std::sync::Arc;

use crate::cntr::Counter;
use crate::cq::{Completion, CompletionError, CompletionQueue};
use crate::error::Errno;
use crate::matching::Kind;
use crate::sys::*;

use super::ops::INJECT_CALL;

/// What an endpoint had bound when it was enabled.
#[derive(Debug, Default)]
pub struct Outputs {
    pub tx_cq: Option<Arc<CompletionQueue>>,
    pub rx_cq: Option<Arc<CompletionQueue>>,
    pub tx_selective: bool,
    pub rx_selective: bool,
    pub cntrs: Vec<(Arc<Counter>, u64)>,
}

pub fn kind_flag(kind: Kind) -> u64 {
    match kind {
        Kind::Msg => FI_MSG,
        Kind::Tagged => FI_TAGGED,
    }
}

impl Outputs {
    fn count(&self, event: u64, ok: bool) {
        for (c, flags) in &self.cntrs {
            if flags & event != 0 {
                if ok {
                    c.add(1);
                } else {
                    c.add_err(1);
                }
            }
        }
    }

    /// A send, write or read completed, counted as `event` (FI_SEND, FI_WRITE or FI_READ)
    /// whatever its flags (MPICH counts its injected and unsignaled writes); `op_flags` are
    /// the operation's.
    pub fn tx_done(&self, c: Completion, op_flags: u64, event: u64) {
        self.count(event, true);
        if op_flags & INJECT_CALL != 0 || (self.tx_selective && op_flags & FI_COMPLETION == 0) {
            return;
        }
        if let Some(cq) = &self.tx_cq {
            cq.push(c);
        }
    }

    /// A send, write or read failed (errors are always reported).
    pub fn tx_failed(&self, c: Completion, err: Errno, event: u64) {
        self.count(event, false);
        push_error(&self.tx_cq, c, err, 0);
    }

    /// A receive (or peek) completed.
    pub fn recv_done(&self, c: Completion, op_flags: u64) {
        self.count(FI_RECV, true);
        if self.rx_selective && op_flags & FI_COMPLETION == 0 {
            return;
        }
        if let Some(cq) = &self.rx_cq {
            cq.push(c);
        }
    }

    /// A receive ended in error: truncation (`olen` bytes lost), cancellation, peek miss.
    pub fn recv_failed(&self, c: Completion, err: Errno, olen: usize) {
        self.count(FI_RECV, false);
        push_error(&self.rx_cq, c, err, olen);
    }
}

fn push_error(cq: &Option<Arc<CompletionQueue>>, c: Completion, err: Errno, olen: usize) {
    if let Some(cq) = cq {
        cq.push_error(CompletionError {
            completion: c,
            olen,
            err,
            prov_errno: 0,
        });
    }
}

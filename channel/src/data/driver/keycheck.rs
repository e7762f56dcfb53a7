//! A rank with another job key, said on stderr: handshakes with it fail (and its own
//! datagrams, if it sends any, fail authentication). Operations to it fail with FI_EIO, and
//! an MPI aborts on the first without saying why (its message names an I/O error); this line
//! is the why, said before the first failure is reported.

use std::time::{Duration, Instant};

use super::RdRails;

/// How often the counters are read (a sum over every session: not once per progress pass).
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct KeyCheck {
    /// `None`: not in authenticated mode, or already said.
    next: Option<Instant>,
}

impl KeyCheck {
    pub(super) fn new(auth: bool, now: Instant) -> KeyCheck {
        KeyCheck {
            next: auth.then_some(now + EVERY),
        }
    }

    /// Reads the counters once a second, or at once when a send is about to be reported
    /// failed (`failing`), so that the line comes before what the MPI prints as it aborts.
    pub(super) fn check(&mut self, rails: &RdRails, now: Instant, failing: bool) {
        if self.next.is_none_or(|t| now < t && !failing) {
            return;
        }
        self.next = Some(now + EVERY);
        let s = rails.stats();
        let (failed, refused) = (s.handshake_failures, s.dropped_unauthenticated);
        if failed == 0 {
            return;
        }
        self.next = None;
        let why = if refused > 0 {
            format!("while {refused} datagrams failed authentication: a rank of this job probably")
        } else {
            "within FI_DIWARP_PEER_TIMEOUT_MS: it is not running, cannot be reached, or".into()
        };
        crate::log::misconfigured(
            crate::log::Subsys::EpData,
            module_path!(),
            line!(),
            format_args!(
                "authenticated mode: {failed} peer(s) never answered the handshake {why} has \
                 another key (FI_DIWARP_AUTH_KEY / FI_DIWARP_AUTH_KEY_FILE). Operations to it \
                 fail with FI_EIO"
            ),
        );
    }
}

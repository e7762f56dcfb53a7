//! The promotion policy's settings (`FI_DIWARP_MODE`, `FI_DIWARP_RC_MAX` and the thresholds).

use std::time::Duration;

/// Which paths peers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every peer on the datagram path (RD).
    Ud,
    /// Every peer on an RC connection from its first message, no cap: the connection-oriented
    /// baseline.
    Rc,
    /// Datagrams for all, RC connections for the hottest peers, up to the cap.
    Hybrid,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "ud" => Some(Mode::Ud),
            "rc" => Some(Mode::Rc),
            "hybrid" => Some(Mode::Hybrid),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Ud => "ud",
            Mode::Rc => "rc",
            Mode::Hybrid => "hybrid",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub mode: Mode,
    /// RC connections per rank, those being set up or closed included (hybrid only).
    pub cap: usize,
    /// A peer is hot when its decayed message count reaches this...
    pub promote_messages: f64,
    /// ... or its decayed byte count reaches this.
    pub promote_bytes: f64,
    /// What one rendezvous message counts for, in messages: bulk transfers gain most from a
    /// connection (MVAPICH2 counts only its zero-copy rendezvous transfers).
    pub rendezvous_weight: f64,
    /// The traffic counts halve every this long.
    pub half_life: Duration,
    /// An RC peer is not demoted for a hotter one before it has been connected and idle this
    /// long.
    pub hysteresis: Duration,
    /// An RC peer idle this long is demoted (hybrid only; at least `hysteresis`).
    pub idle_limit: Duration,
    /// After a refusal or a failed connect, the peer is not asked again for this long,
    /// doubling with each refusal in a row up to `backoff_max`.
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// Whether this side asks hot peers for connections (hybrid). Off, it only accepts what
    /// peers ask: where its datagrams carry bulk data as well as a connection would.
    pub initiate: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Hybrid,
            cap: 16,
            promote_messages: 64.0,
            promote_bytes: 4.0 * 1024.0 * 1024.0,
            rendezvous_weight: 8.0,
            half_life: Duration::from_millis(200),
            hysteresis: Duration::from_millis(100),
            idle_limit: Duration::from_secs(2),
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            initiate: true,
        }
    }
}

impl Config {
    /// The cap in force: none in `rc` mode, none used in `ud` mode.
    pub fn effective_cap(&self) -> usize {
        match self.mode {
            Mode::Ud => 0,
            Mode::Rc => usize::MAX,
            Mode::Hybrid => self.cap,
        }
    }

    /// The idle limit, raised to the hysteresis (a peer demoted for idling before the
    /// hysteresis ended would be promoted and demoted within it).
    pub fn idle_limit(&self) -> Duration {
        self.idle_limit.max(self.hysteresis)
    }
}

//! The `FI_DIWARP_*` provider parameters: their names, types and help text (registered with
//! `fi_param_define`, so `fi_info -e` lists them) and the validated [`Config`] read from them.

use std::time::Duration;

use crate::diag;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Str,
    /// A string never read through `fi_param_get`, which logs the values it reads: the
    /// provider takes it from the environment itself.
    Secret,
    Int,
    Bool,
    Size,
}

/// One parameter. `name` is lower case without prefix; libfabric exposes it as `FI_DIWARP_<NAME>`.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    pub help: &'static str,
    pub default: ParamDefault,
}

/// A parameter's value when it is not set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamDefault {
    /// A value, spelled as the environment variable would be (a test checks that the provider
    /// takes it for its default).
    Value(&'static str),
    /// Chosen at run time; how, in words.
    Derived(&'static str),
}

impl ParamDefault {
    /// The value, or how it is chosen, as the docs show it.
    pub fn text(self) -> &'static str {
        match self {
            ParamDefault::Value(v) | ParamDefault::Derived(v) => v,
        }
    }
}

impl ParamSpec {
    /// `FI_DIWARP_<NAME>`.
    pub fn env_name(&self) -> String {
        format!("FI_DIWARP_{}", self.name.to_uppercase())
    }

    /// The help text with the default, as `fi_info -e` and the man page show it.
    pub fn help_with_default(&self) -> String {
        format!("{} (default: {})", self.help, self.default.text())
    }
}

pub const IFACE: &str = "iface";
pub const EAGER_SIZE: &str = "eager_size";
pub const LINGER_MS: &str = "linger_ms";
pub const PEER_TIMEOUT_MS: &str = "peer_timeout_ms";
pub const DORMANT_MS: &str = "dormant_ms";
pub const RAIL_TIMEOUT_MS: &str = "rail_timeout_ms";
pub const RAIL_THREADS: &str = "rail_threads";
pub const MEM_REPORT: &str = "mem_report";
pub const MEM_REPORT_MS: &str = "mem_report_ms";
pub const MEM_BUDGET: &str = "mem_budget";
pub const CRC: &str = "crc";
pub const DATAGRAM_SIZE: &str = "datagram_size";
pub const CONNECTED_PEERS: &str = "connected_peers";
pub const PUSH_SIZE: &str = "push_size";
pub const MODE: &str = "mode";
pub const RC_MAX: &str = "rc_max";
pub const RC_MESSAGES: &str = "rc_messages";
pub const RC_BYTES: &str = "rc_bytes";
pub const RC_HALF_LIFE_MS: &str = "rc_half_life_ms";
pub const RC_HYSTERESIS_MS: &str = "rc_hysteresis_ms";
pub const RC_IDLE_MS: &str = "rc_idle_ms";
pub const RC_DATAGRAM_MAX: &str = "rc_datagram_max";
pub const AUTH: &str = "auth";
pub const AUTH_KEY: &str = "auth_key";
pub const AUTH_KEY_FILE: &str = "auth_key_file";
pub const PORT_RANGE: &str = "port_range";

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: IFACE,
        kind: ParamKind::Str,
        help: "Network interfaces or IP addresses the endpoint binds, comma-separated: one \
               rail each (at most 4), with its own UDP socket; rendezvous data is striped \
               across the rails a pair of ranks shares, by measured rate. Rails pair by \
               position: every host lists its interfaces in one order",
        default: ParamDefault::Derived("the first interface that is up and not loopback, else 127.0.0.1"),
    },
    ParamSpec {
        name: PORT_RANGE,
        kind: ParamKind::Str,
        help: "Local ports the endpoint listens on, LOW-HIGH (e.g. 50000-50099), for a host \
               firewall that opens only those: one UDP port per rail and one TCP port (the RC \
               listener, on the first rail; none in ud mode) per rank, each on the rail's \
               address. A range with no free port left, or a malformed one, keeps the \
               endpoint from opening, with a message naming this variable. Outgoing RC \
               connections and per-peer UDP sockets keep ephemeral source ports",
        default: ParamDefault::Derived("unset: any port the kernel picks"),
    },
    ParamSpec {
        name: EAGER_SIZE,
        kind: ParamKind::Size,
        help: "Largest message sent eagerly; larger ones use rendezvous, placed directly \
               into the posted receive buffer",
        default: ParamDefault::Value("32768"),
    },
    ParamSpec {
        name: LINGER_MS,
        kind: ParamKind::Int,
        help: "How long closing an endpoint waits for its sent data to be acknowledged, \
               in milliseconds",
        default: ParamDefault::Value("2000"),
    },
    ParamSpec {
        name: PEER_TIMEOUT_MS,
        kind: ParamKind::Int,
        help: "A peer that stays silent this long fails its pending operations with FI_EIO \
               instead of hanging, in milliseconds: sends it does not acknowledge (rendezvous \
               sends are probed), and rendezvous receives whose sender goes silent",
        default: ParamDefault::Value("30000"),
    },
    ParamSpec {
        name: RAIL_TIMEOUT_MS,
        kind: ParamKind::Int,
        help: "With several rails: a rail on which a peer stays silent this long while messages \
               to it are unacknowledged is taken as down for that peer; what it carried goes \
               again, in order, over the peer's other rails, and the rail is greeted until it \
               answers and then used again. In milliseconds, below FI_DIWARP_PEER_TIMEOUT_MS; \
               a peer silent on every rail still fails with FI_EIO after the peer timeout",
        default: ParamDefault::Value("1000"),
    },
    ParamSpec {
        name: RAIL_THREADS,
        kind: ParamKind::Bool,
        help: "With several rails: 1 gives each rail a progress thread of its own, woken by \
               that rail's arrivals and timers (the connections and the endpoint's own timers \
               go with the first rail's); 0 keeps one progress thread over every rail. The \
               threads share the endpoint's data path, so they wake apart but never make \
               progress at once (figures: channel/BENCHMARKS.md, \"Rails\")",
        default: ParamDefault::Value("0"),
    },
    ParamSpec {
        name: DORMANT_MS,
        kind: ParamKind::Int,
        help: "A datagram peer with nothing in flight or owed that stays quiet this long folds \
               into its dormant form (a few words: ids, epochs, sequence numbers) and gives \
               back the rest; its next message wakes it with no extra round trip. In \
               milliseconds; 0 keeps every peer awake",
        default: ParamDefault::Value("1000"),
    },
    ParamSpec {
        name: MEM_REPORT,
        kind: ParamKind::Str,
        help: "Write this rank's memory report (one JSON object per line: the ledger's \
               accounts, /proc, heap, kernel socket memory, every counter) at finalize to this \
               path ('-' for stderr, '%p' becomes the process id); unset: no report",
        default: ParamDefault::Derived("unset: no report"),
    },
    ParamSpec {
        name: MEM_BUDGET,
        kind: ParamKind::Size,
        help: "Bounds what traffic grows the endpoint's memory by: copied sends held for the \
               peers, queued or unacknowledged, up to this many bytes (past it a send answers \
               FI_EAGAIN, which both MPIs retry); a further quarter of it for pushed chunks held \
               for unexpected messages (past it a message's pushes are refused, and its sender \
               sends them after the answer) and an eighth for spare send buffers kept for reuse \
               (values below 4194304 are raised to it)",
        default: ParamDefault::Value("67108864"),
    },
    ParamSpec {
        name: MEM_REPORT_MS,
        kind: ParamKind::Int,
        help: "With FI_DIWARP_MEM_REPORT, also write a report every this many milliseconds \
               while running (0: at finalize only)",
        default: ParamDefault::Value("0"),
    },
    ParamSpec {
        name: AUTH,
        kind: ParamKind::Str,
        help: "Authenticated mode, on or off: every datagram carries a tag from the job's key \
               (AES-128-GCM-SIV) in place of the CRC32c, and one without it (forged, altered, \
               or from another job) is dropped and counted (dropped_unauthenticated). RC \
               connections prove the key at MPA start-up and keep the FPDU CRC. No \
               confidentiality: data is not encrypted",
        default: ParamDefault::Derived(
            "on if FI_DIWARP_AUTH_KEY or FI_DIWARP_AUTH_KEY_FILE is set, or the application \
             hands the domain an auth_key",
        ),
    },
    ParamSpec {
        name: AUTH_KEY,
        kind: ParamKind::Secret,
        help: "The job's key for authenticated mode: at least 16 bytes, the same on every rank \
               (diwarp run --auth makes a fresh one per job)",
        default: ParamDefault::Value(""),
    },
    ParamSpec {
        name: AUTH_KEY_FILE,
        kind: ParamKind::Str,
        help: "A file holding the job's key (a line end is not part of it); refused unless \
               its owner is the user and only the owner can read it (chmod 600)",
        default: ParamDefault::Value(""),
    },
    ParamSpec {
        name: CRC,
        kind: ParamKind::Bool,
        help: "Ask for a CRC32c on every datagram (datagram-iWARP's trailer). Two ranks use \
               it both ways if either asks (MPA's rule). Unset, it is not asked of ranks on \
               this host, whose datagrams the kernel copies from memory to memory (it \
               checksums neither UDP nor TCP on loopback). 1: asked of every rank. 0: asked of none, which leaves integrity to the UDP checksum and the \
               link's, and saves a pass over every byte at each end. A rank with the fault \
               layer on (DIWARP_FAULTS) always asks, unless this is 0",
        default: ParamDefault::Derived("asked of ranks on other hosts, not of ranks on this one"),
    },
    ParamSpec {
        name: DATAGRAM_SIZE,
        kind: ParamKind::Size,
        help: "Largest UDP datagram in bytes, 512 to 65507 (runs of datagrams to one peer go \
               through the kernel in one call each way with UDP GSO/GRO). Above the MTU the \
               kernel sends IP fragments, and a lost fragment loses the whole datagram",
        default: ParamDefault::Derived("what the interface's MTU carries unfragmented: 1472 on Ethernet, 65507 on loopback"),
    },
    ParamSpec {
        name: CONNECTED_PEERS,
        kind: ParamKind::Size,
        help: "How many peers get a UDP socket of their own, connected to them, for what \
               this endpoint sends them: the kernel keeps their route instead of looking it \
               up per datagram (about 0.4 us per small message on loopback). Each costs a \
               file descriptor (at most a quarter of the process's limit go to them); later \
               peers share the endpoint's socket, which also receives everything. 0: none; \
               use it behind a host firewall that admits only UDP replies to flows the host \
               began, since data then comes from another port than the handshake",
        default: ParamDefault::Value("64"),
    },
    ParamSpec {
        name: PUSH_SIZE,
        kind: ParamKind::Size,
        help: "Bytes of a rendezvous message sent right behind its request, before the \
               receiver answers: a posted receive takes them at once, and an unexpected \
               message's are held (up to 16 MiB per endpoint, else dropped and sent again \
               after the answer). Saves a round trip per message above the eager size \
               (four 60 KiB chunks by default; 0: wait for the answer)",
        default: ParamDefault::Value("245760"),
    },
    ParamSpec {
        name: MODE,
        kind: ParamKind::Str,
        help: "Which paths peers use. ud: every peer over the endpoint's one UDP socket \
               (reliable datagrams). rc: every peer over a TCP connection of its own (iWARP \
               over MPA), set up on first use, no cap. hybrid: datagrams for all, and a TCP \
               connection for each of the peers this rank talks to most, up to \
               FI_DIWARP_RC_MAX; a connection idle for FI_DIWARP_RC_IDLE_MS closes. \
               Ranks in different modes still talk: over datagrams",
        default: ParamDefault::Value("hybrid"),
    },
    ParamSpec {
        name: RC_MAX,
        kind: ParamKind::Size,
        help: "hybrid: TCP connections per rank at most, those being set up or closed \
               included; a rank at its cap refuses more, and the peer stays on datagrams",
        default: ParamDefault::Value("16"),
    },
    ParamSpec {
        name: RC_MESSAGES,
        kind: ParamKind::Int,
        help: "hybrid: a peer gets a connection when its recent traffic reaches this many \
               messages (sent and received, counts halving every FI_DIWARP_RC_HALF_LIFE_MS; a \
               rendezvous message counts 8) or FI_DIWARP_RC_BYTES bytes",
        default: ParamDefault::Value("64"),
    },
    ParamSpec {
        name: RC_BYTES,
        kind: ParamKind::Size,
        help: "hybrid: a peer gets a connection when its recent traffic reaches this many \
               bytes",
        default: ParamDefault::Value("4194304"),
    },
    ParamSpec {
        name: RC_HALF_LIFE_MS,
        kind: ParamKind::Int,
        help: "hybrid: recent traffic counts halve every this many milliseconds",
        default: ParamDefault::Value("200"),
    },
    ParamSpec {
        name: RC_HYSTERESIS_MS,
        kind: ParamKind::Int,
        help: "hybrid: a connected peer is not demoted for a hotter one before it has been \
               connected and idle this many milliseconds",
        default: ParamDefault::Value("100"),
    },
    ParamSpec {
        name: RC_IDLE_MS,
        kind: ParamKind::Int,
        help: "hybrid: a connection idle this many milliseconds closes, and its peer goes \
               back to datagrams",
        default: ParamDefault::Value("2000"),
    },
    ParamSpec {
        name: RC_DATAGRAM_MAX,
        kind: ParamKind::Size,
        help: "hybrid: this rank asks its hot peers for connections only while its datagrams \
               (FI_DIWARP_DATAGRAM_SIZE, or what the interface's MTU allows) are at most this \
               many bytes. Larger datagrams, as on loopback (65507) or with jumbo frames, carry \
               bulk data as fast as a connection does, for a datagram's per-peer cost; such a \
               rank still accepts the connections its peers ask for. 65507: always ask",
        default: ParamDefault::Value("4096"),
    },
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamValue {
    Str(String),
    Int(i64),
    Bool(bool),
    Size(usize),
}

impl ParamValue {
    /// `s` read as libfabric reads a parameter of `kind` from the environment: integers in
    /// decimal or `0x` hex, booleans as 0/1, yes/no, true/false, on/off. `None`: not a `kind`.
    pub fn parse(kind: ParamKind, s: &str) -> Option<ParamValue> {
        let t = s.trim();
        let int = || match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => i128::from_str_radix(hex, 16).ok(),
            None => t.parse::<i128>().ok(),
        };
        match kind {
            ParamKind::Str | ParamKind::Secret => Some(ParamValue::Str(s.to_owned())),
            ParamKind::Int => int()
                .and_then(|v| i32::try_from(v).ok())
                .map(|v| ParamValue::Int(v.into())),
            ParamKind::Size => int()
                .and_then(|v| usize::try_from(v).ok())
                .map(ParamValue::Size),
            ParamKind::Bool => match t.to_ascii_lowercase().as_str() {
                "1" | "yes" | "true" | "on" => Some(ParamValue::Bool(true)),
                "0" | "no" | "false" | "off" => Some(ParamValue::Bool(false)),
                _ => None,
            },
        }
    }
}

/// Where parameter values come from: libfabric's `fi_param_get` in the provider, the
/// environment for the `diwarp` command, a map in tests.
pub trait ParamSource {
    /// The value of a parameter that is set, or `None` if it is unset.
    fn get(&self, spec: &ParamSpec) -> Option<ParamValue>;
}

/// The process environment, read as libfabric reads it (for tools outside the provider).
pub struct EnvParams;

impl ParamSource for EnvParams {
    fn get(&self, spec: &ParamSpec) -> Option<ParamValue> {
        let raw = std::env::var(spec.env_name()).ok()?;
        ParamValue::parse(spec.kind, &raw)
    }
}

/// The provider's settings, validated; out-of-range values fall back to the default with a warning.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub iface: Option<String>,
    /// Where the endpoint's sockets listen; `Err`: a malformed `FI_DIWARP_PORT_RANGE`
    /// (the endpoint refuses to open rather than listen where a firewall may block it).
    pub port_range: Result<Option<crate::ports::PortRange>, String>,
    pub eager_size: usize,
    pub linger: Duration,
    pub peer_timeout: Duration,
    /// With several rails, a peer silent on one this long while messages are outstanding
    /// there is taken to other rails (capped below `peer_timeout`).
    pub rail_timeout: Duration,
    /// With several rails, a progress thread per rail rather than one for all.
    pub rail_threads: bool,
    /// Quiet datagram peers fold into their dormant form after this long (`None`: never).
    pub dormant_after: Option<Duration>,
    pub mem_report: Option<String>,
    /// Also report while running, this often.
    pub mem_report_every: Option<Duration>,
    /// What traffic may grow the endpoint's pools by (`data::Budget`).
    pub mem_budget: usize,
    pub crc: bool,
    /// Ask ranks on this host for the CRC too (only if `crc`).
    pub crc_same_host: bool,
    /// `None`: follow the interface's MTU.
    pub datagram_size: Option<usize>,
    pub connected_peers: usize,
    pub push_size: usize,
    /// Which peers get RC connections, and when (`FI_DIWARP_MODE`, `FI_DIWARP_RC_*`).
    pub promote: policies::promote::Config,
    /// hybrid: ask for connections only with datagrams at most this large.
    pub rc_datagram_max: usize,
    /// Authenticated mode's settings as given ...
    pub auth: crate::auth::AuthParams,
    /// ... and its key, once the fabric has read them (`None`: the mode is off).
    pub job_key: Option<std::sync::Arc<iwarp::auth::JobKey>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            iface: None,
            port_range: Ok(None),
            eager_size: crate::info::INJECT_SIZE,
            linger: Duration::from_millis(2000),
            peer_timeout: Duration::from_millis(30_000),
            rail_timeout: RAIL_TIMEOUT,
            rail_threads: false,
            dormant_after: Some(DORMANT_AFTER),
            mem_report: None,
            mem_report_every: None,
            mem_budget: crate::data::budget::DEFAULT,
            crc: true,
            crc_same_host: false,
            datagram_size: None,
            connected_peers: 64,
            push_size: 4 * crate::data::wire::CHUNK,
            promote: policies::promote::Config::default(),
            rc_datagram_max: 4096,
            auth: crate::auth::AuthParams::default(),
            job_key: None,
        }
    }
}

const EAGER_MAX: usize = 1 << 30;
const LINGER_MAX_MS: i64 = 600_000;
const PEER_TIMEOUT_MS_RANGE: std::ops::RangeInclusive<i64> = 100..=86_400_000;
/// Long enough that a rank descheduled on a busy host is not taken for a dead link each time
/// (a false alarm costs a resend and a handshake, nothing lost), short against the peer
/// timeout.
const RAIL_TIMEOUT: Duration = Duration::from_millis(1000);
const RAIL_TIMEOUT_MS_RANGE: std::ops::RangeInclusive<i64> = 10..=86_400_000;
/// A peer quiet this long wakes at most once a second: a wake allocates its session again
/// (reliability's recommendation; `channel/BENCHMARKS.md`, "A million peers").
const DORMANT_AFTER: Duration = Duration::from_millis(1000);
const DORMANT_MS_MAX: i64 = 86_400_000;
const DATAGRAM_SIZE_RANGE: std::ops::RangeInclusive<usize> = 512..=65_507;
/// Beyond this many, descriptors run out before the peers do (1024 is a common soft limit).
const CONNECTED_PEERS_MAX: usize = 4096;
/// The chunk window holds 16 chunks: more than that ahead of the answer only waits.
const PUSH_SIZE_MAX: usize = 16 * crate::data::wire::CHUNK;

fn spec(name: &str) -> &'static ParamSpec {
    PARAMS.iter().find(|p| p.name == name).expect("listed")
}

/// Takes size parameter `name` into `field` if it is at most `max`; else warns and keeps the
/// default.
fn size_at_most(src: &dyn ParamSource, name: &str, max: usize, field: &mut usize) {
    if let Some(ParamValue::Size(n)) = src.get(spec(name)) {
        if n <= max {
            *field = n;
        } else {
            diag!(
                Warn,
                Core,
                "FI_DIWARP_{}={n} exceeds {max}; using {}",
                name.to_uppercase(),
                *field
            );
        }
    }
}

/// Takes milliseconds parameter `name` into `field` if it is within `range`; else warns and
/// keeps the default.
fn millis_in(
    src: &dyn ParamSource,
    name: &str,
    range: std::ops::RangeInclusive<i64>,
    field: &mut Duration,
) {
    if let Some(ParamValue::Int(ms)) = src.get(spec(name)) {
        if range.contains(&ms) {
            *field = Duration::from_millis(ms as u64);
        } else {
            diag!(
                Warn,
                Core,
                "FI_DIWARP_{}={ms} is outside {range:?}; using {:?}",
                name.to_uppercase(),
                *field
            );
        }
    }
}

impl Config {
    pub fn from_source(src: &dyn ParamSource) -> Config {
        let mut c = Config::default();
        if let Some(ParamValue::Str(s)) = src.get(spec(IFACE)) {
            if !s.is_empty() {
                c.iface = Some(s);
            }
        }
        if let Some(ParamValue::Str(s)) = src.get(spec(PORT_RANGE)) {
            c.port_range = crate::ports::PortRange::parse(&s).map_err(|e| format!("{s:?}: {e}"));
        }
        size_at_most(src, EAGER_SIZE, EAGER_MAX, &mut c.eager_size);
        millis_in(src, LINGER_MS, 0..=LINGER_MAX_MS, &mut c.linger);
        millis_in(
            src,
            PEER_TIMEOUT_MS,
            PEER_TIMEOUT_MS_RANGE,
            &mut c.peer_timeout,
        );
        millis_in(
            src,
            RAIL_TIMEOUT_MS,
            RAIL_TIMEOUT_MS_RANGE,
            &mut c.rail_timeout,
        );
        // Past the peer timeout a rail would never be left before its peer failed.
        c.rail_timeout = c.rail_timeout.min(c.peer_timeout / 2);
        if let Some(ParamValue::Bool(on)) = src.get(spec(RAIL_THREADS)) {
            c.rail_threads = on;
        }
        if let Some(ParamValue::Int(ms)) = src.get(spec(DORMANT_MS)) {
            match ms {
                0 => c.dormant_after = None,
                1..=DORMANT_MS_MAX => c.dormant_after = Some(Duration::from_millis(ms as u64)),
                _ => diag!(
                    Warn,
                    Core,
                    "FI_DIWARP_DORMANT_MS={ms} is outside 0..={DORMANT_MS_MAX}; using {:?}",
                    c.dormant_after
                ),
            }
        }
        if let Some(ParamValue::Str(s)) = src.get(spec(MEM_REPORT)) {
            if !s.is_empty() {
                c.mem_report = Some(s);
            }
        }
        if let Some(ParamValue::Size(n)) = src.get(spec(MEM_BUDGET)) {
            let min = crate::data::budget::MIN;
            if n < min {
                diag!(
                    Warn,
                    Core,
                    "FI_DIWARP_MEM_BUDGET={n} is below {min}; using {min}"
                );
            }
            c.mem_budget = n.max(min);
        }
        if let Some(ParamValue::Int(ms)) = src.get(spec(MEM_REPORT_MS)) {
            if (0..=LINGER_MAX_MS * 100).contains(&ms) {
                c.mem_report_every = (ms > 0).then(|| Duration::from_millis(ms as u64));
            } else {
                diag!(
                    Warn,
                    Core,
                    "FI_DIWARP_MEM_REPORT_MS={ms} is negative or too large; ignored"
                );
            }
        }
        if let Some(ParamValue::Bool(on)) = src.get(spec(CRC)) {
            c.crc = on;
            c.crc_same_host = on;
        }
        if let Some(ParamValue::Size(n)) = src.get(spec(DATAGRAM_SIZE)) {
            if DATAGRAM_SIZE_RANGE.contains(&n) {
                c.datagram_size = Some(n);
            } else {
                diag!(
                    Warn,
                    Core,
                    "FI_DIWARP_DATAGRAM_SIZE={n} is outside {DATAGRAM_SIZE_RANGE:?}; following \
                     the interface's MTU"
                );
            }
        }
        size_at_most(
            src,
            CONNECTED_PEERS,
            CONNECTED_PEERS_MAX,
            &mut c.connected_peers,
        );
        size_at_most(src, PUSH_SIZE, PUSH_SIZE_MAX, &mut c.push_size);
        c.promote = promote_from(src);
        size_at_most(
            src,
            RC_DATAGRAM_MAX,
            *DATAGRAM_SIZE_RANGE.end(),
            &mut c.rc_datagram_max,
        );
        c.auth = auth_from(src);
        c
    }
}

fn auth_from(src: &dyn ParamSource) -> crate::auth::AuthParams {
    let text = |name: &str| match src.get(spec(name)) {
        Some(ParamValue::Str(s)) if !s.trim().is_empty() => Some(s),
        _ => None,
    };
    let mode = text(AUTH).map(|s| match s.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "yes" | "true" => true,
        "off" | "0" | "no" | "false" => false,
        _ => {
            // Fails closed: a misspelt "on" must not leave a job open.
            diag!(
                Warn,
                Core,
                "FI_DIWARP_AUTH={s} is not on or off; taking it as on"
            );
            true
        }
    });
    crate::auth::AuthParams {
        mode,
        key: text(AUTH_KEY),
        key_file: text(AUTH_KEY_FILE),
    }
}

/// Most RC connections a rank may keep: each is a file descriptor.
const RC_MAX_MAX: usize = 65_536;
const RC_MS_RANGE: std::ops::RangeInclusive<i64> = 1..=3_600_000;

fn promote_from(src: &dyn ParamSource) -> policies::promote::Config {
    use policies::promote::Mode;
    let mut p = policies::promote::Config::default();
    if let Some(ParamValue::Str(s)) = src.get(spec(MODE)) {
        match Mode::parse(s.trim()) {
            Some(m) => p.mode = m,
            None if s.is_empty() => {}
            None => diag!(
                Warn,
                Core,
                "FI_DIWARP_MODE={s} is not ud, rc or hybrid; using {}",
                p.mode.name()
            ),
        }
    }
    let mut cap = p.cap;
    size_at_most(src, RC_MAX, RC_MAX_MAX, &mut cap);
    p.cap = cap;
    let mut bytes = p.promote_bytes as usize;
    size_at_most(src, RC_BYTES, usize::MAX, &mut bytes);
    p.promote_bytes = bytes as f64;
    let ms = |name: &str, field: &mut std::time::Duration| {
        if let Some(ParamValue::Int(v)) = src.get(spec(name)) {
            if RC_MS_RANGE.contains(&v) {
                *field = Duration::from_millis(v as u64);
            } else {
                diag!(
                    Warn,
                    Core,
                    "FI_DIWARP_{}={v} is outside {RC_MS_RANGE:?}; using {field:?}",
                    name.to_uppercase()
                );
            }
        }
    };
    ms(RC_HALF_LIFE_MS, &mut p.half_life);
    ms(RC_HYSTERESIS_MS, &mut p.hysteresis);
    ms(RC_IDLE_MS, &mut p.idle_limit);
    if let Some(ParamValue::Int(n)) = src.get(spec(RC_MESSAGES)) {
        if n >= 1 {
            p.promote_messages = n as f64;
        } else {
            diag!(
                Warn,
                Core,
                "FI_DIWARP_RC_MESSAGES={n} is below 1; using {}",
                p.promote_messages
            );
        }
    }
    p
}

#[cfg(test)]
mod tests;

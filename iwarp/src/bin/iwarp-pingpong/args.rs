use std::net::SocketAddr;

use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Datagram-iWARP unreliable datagram QP over UDP.
    Ud,
    /// Datagram-iWARP reliable datagram QP: UD's socket under the reliability engine.
    Rd,
    /// iWARP reliable connection QP over TCP (MPA framing).
    Rc,
    /// Plain UDP socket, no iWARP framing: the datagram floor. Unconnected (`sendto` and
    /// `recvfrom`), like the UD and RD queue pairs, whose one socket serves any number of peers.
    RawUdp,
    /// Plain UDP socket connected to the peer (`send` and `recv`): the floor for a socket per
    /// peer, which connectionless queue pairs cannot use.
    RawUdpConn,
    /// Plain TCP socket (TCP_NODELAY), no iWARP framing: the stream floor.
    RawTcp,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::RawUdp,
        Kind::RawUdpConn,
        Kind::Ud,
        Kind::Rd,
        Kind::RawTcp,
        Kind::Rc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ud => "ud",
            Kind::Rd => "rd",
            Kind::Rc => "rc",
            Kind::RawUdp => "raw-udp",
            Kind::RawUdpConn => "raw-udp-conn",
            Kind::RawTcp => "raw-tcp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

impl OnOff {
    pub fn on(self) -> bool {
        self == OnOff::On
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Initiator,
    Responder,
}

/// Verbs-level latency and bandwidth on loopback, iWARP queue pairs against raw sockets.
#[derive(Debug, Clone, Parser)]
#[command(name = "iwarp-pingpong", args_override_self = true)]
pub struct Args {
    /// Queue pair kind to measure.
    #[arg(long, value_enum, default_value = "ud")]
    pub qp: Kind,
    /// Measure every kind side by side and print each one's ratio to raw-udp.
    #[arg(long)]
    pub all: bool,
    /// Message sizes in bytes, comma separated (suffixes K and M allowed).
    #[arg(long, value_delimiter = ',', value_parser = parse_size,
          default_value = "1,64,1024,16384,65536")]
    pub sizes: Vec<usize>,
    /// Round trips per run (fewer for large messages, so a run moves at most --max-bytes).
    #[arg(long, default_value_t = 2000, value_parser = at_least_one)]
    pub iters: usize,
    /// Repeated runs per size; the report gives the median.
    #[arg(long, default_value_t = 5, value_parser = at_least_one)]
    pub runs: usize,
    /// Warm-up round trips before each size.
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// Messages in flight per window in the bandwidth test.
    #[arg(long, default_value_t = 16, value_parser = at_least_one)]
    pub window: usize,
    /// Upper bound of bytes one run moves in one direction.
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    pub max_bytes: usize,
    /// MPA markers on RC (negotiated per RFC 5044).
    #[arg(long, value_enum, default_value = "off")]
    pub markers: OnOff,
    /// CRC32c on UD and RC, and on RD sessions that cross a wire (or run under the fault
    /// layer, `DIWARP_FAULTS`).
    #[arg(long, value_enum, default_value = "on")]
    pub crc: OnOff,
    /// RD: with `--crc on`, carry the CRC32c between queue pairs on this host too. Off by
    /// default, as the provider has it: on loopback the kernel checksums neither UDP nor TCP,
    /// so the floors carry none either. The fault layer turns it on regardless.
    #[arg(long)]
    pub crc_same_host: bool,
    /// RD: post sends with the borrowing `post_send`, which copies each message, instead of
    /// handing the buffer over with `post_send_owned`.
    #[arg(long)]
    pub rd_copy: bool,
    /// RD: largest datagram in bytes (IP fragments if above the link's MTU). Default: what the
    /// link carries unfragmented, up to 65507.
    #[arg(long, value_parser = parse_size)]
    pub datagram_size: Option<usize>,
    /// Raw floors: receive each message into a buffer of its own (window + 1 message-sized
    /// buffers in turn, as RD's posted receives are), instead of one reused 1 MiB scratch buffer
    /// (64 KiB for UDP) that stays in cache whatever the message size.
    #[arg(long)]
    pub raw_dest: bool,
    /// Check every payload byte at both ends.
    #[arg(long)]
    pub verify: bool,
    /// Seconds any single wait may take before the run fails (no hangs).
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// Also write the results as CSV to this file.
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
    /// Address this side's sockets bind to.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Address the responder's sockets bind to (default: --bind).
    #[arg(long)]
    pub responder_bind: Option<std::net::IpAddr>,
    /// Command prefix that starts the responder, e.g. "ip netns exec h2" for another test host.
    #[arg(long)]
    pub responder_wrap: Option<String>,
    #[arg(long, value_enum, default_value = "initiator", hide = true)]
    pub role: Role,
    #[arg(long, hide = true)]
    pub control: Option<SocketAddr>,
}

impl Args {
    pub fn kinds(&self) -> Vec<Kind> {
        if self.all {
            Kind::ALL.to_vec()
        } else {
            vec![self.qp]
        }
    }

    /// Round trips for one run at `size`, so large sizes stay bounded in time.
    pub fn iters_for(&self, size: usize) -> usize {
        let cap = self.max_bytes / size.max(1);
        self.iters.min(cap).max(10)
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout)
    }
}

fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .map_err(|e| format!("bad size {s:?}: {e}"))?
        .checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

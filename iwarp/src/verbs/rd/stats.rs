//! Counters of an RD queue pair.

use std::time::Duration;

use reliability::Stats;

/// What an RD queue pair did since its creation: the reliability engine's counters summed over
/// all its sessions (closed ones included), and the queue pair's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RdStats {
    /// Datagrams emitted by the engine, of every kind.
    pub datagrams_sent: u64,
    /// Datagrams the engine accepted.
    pub datagrams_received: u64,
    /// Datagrams read off the socket, whatever became of them.
    pub datagrams_read: u64,
    /// Data datagrams sent for the first time.
    pub data_sent: u64,
    /// Data datagrams sent again.
    pub retransmits: u64,
    /// Retransmissions the peer reported as needless (the original was only late).
    pub spurious_retransmits: u64,
    /// Of those, the ones the peer had acknowledged before the copy came (the ACK was lost).
    pub lost_acks: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Tail-loss probes sent (a quiet flight's newest datagram resent early).
    pub tail_probes: u64,
    /// Data datagrams received twice (dropped).
    pub duplicates: u64,
    /// Data datagrams that arrived ahead of a gap.
    pub out_of_order: u64,
    /// Datagrams the engine refused, for any reason but duplication.
    pub dropped: u64,
    /// ... of which for a bad CRC32c.
    pub dropped_checksum: u64,
    /// ACK-only datagrams emitted.
    pub acks_sent: u64,
    /// Data datagrams that filled the window or the peer's credit (the sender then waited).
    pub window_full: u64,
    /// Sends the engine refused for a full send buffer (kept queued, sent later).
    pub would_block: u64,
    /// Messages the peers acknowledged.
    pub messages_acked: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// The largest smoothed RTT among the live sessions (in reports, `srtt_us`).
    #[serde(rename = "srtt_us", serialize_with = "micros")]
    pub srtt: Option<Duration>,
    /// Peers known (handshaking or established).
    pub peers: usize,
    /// Of those, the ones whose datagrams leave from a socket connected to them (each costs
    /// the kernel a socket and this process a descriptor).
    pub connected_peers: usize,
    /// Peers whose session carries a CRC32c on every datagram (either end asked for it).
    pub crc_peers: usize,
    /// Of those, the ones whose idle session the engine froze (`dormant_after`): they keep its
    /// few words and cost the engine nothing until resumed.
    pub dormant_peers: usize,
    /// Engine sessions open: established peers less the dormant ones.
    pub sessions_open: usize,
    /// Sessions the engine froze.
    pub sessions_frozen: u64,
    /// Frozen sessions resumed (for a send, or a datagram of theirs).
    pub sessions_resumed: u64,
    /// HELLO and HELLO-ACK datagrams sent.
    pub control_sent: u64,
    /// HELLO and HELLO-ACK datagrams accepted.
    pub control_received: u64,
    /// Datagrams refused before the engine: bad or foreign control datagrams, empty ones.
    pub dropped_control: u64,
    /// Datagrams the engine refused before any session: too short to name one.
    pub dropped_malformed: u64,
    /// Authenticated mode: datagrams without the job's tag (forged, altered, redirected, or
    /// from another job), dropped before anything read them.
    pub dropped_unauthenticated: u64,
    /// ... or naming no session of ours (stale, foreign, forged).
    pub dropped_unknown_session: u64,
    /// Handshakes abandoned after the peer stayed silent past the limit.
    pub handshake_failures: u64,
    /// Sessions failed by the engine (a peer silent past the limit).
    pub peer_failures: u64,
    /// Sessions reported silent past `stall_after` with sends outstanding.
    pub stalls: u64,
    /// Sends handed back whole when their session ended (hand-back on).
    pub sends_handed_back: u64,
    /// Datagrams set aside unread until receives were posted.
    pub parked: u64,
    /// Datagrams refused before the engine saw them, for lack of receives with the set-aside
    /// datagrams at their bound; unacknowledged, they come again.
    pub refused: u64,
    /// Small messages copied for lack of a posted receive.
    pub stashed: u64,
    /// Messages whose DDP header was wrong (their receive went back to the queue).
    pub protocol_errors: u64,
    /// Datagrams the kernel refused other than for a full buffer.
    pub send_errors: u64,
    /// Datagrams that left from a peer's connected socket.
    pub connected_sends: u64,
    /// Runs of datagrams to one peer handed to the kernel in one call (UDP GSO).
    pub gso_sends: u64,
    /// Reads that took a run of datagrams the kernel coalesced (UDP GRO).
    pub gro_runs: u64,
    /// The largest datagram this queue pair cuts (the link's MTU may have lowered it).
    pub max_datagram_size: usize,
}

impl RdStats {
    pub(crate) fn add_session(&mut self, s: &Stats) {
        self.datagrams_sent += s.datagrams_sent;
        self.datagrams_received += s.datagrams_received;
        self.data_sent += s.data_sent;
        self.retransmits += s.retransmits;
        self.spurious_retransmits += s.spurious_retransmits;
        self.lost_acks += s.lost_acks;
        self.timeouts += s.timeouts;
        self.tail_probes += s.tail_probes;
        self.duplicates += s.duplicates;
        self.out_of_order += s.out_of_order;
        self.dropped += s.dropped();
        self.dropped_checksum += s.dropped_checksum;
        self.acks_sent += s.acks_sent;
        self.window_full += s.window_full;
        self.would_block += s.would_block;
        self.messages_acked += s.messages_acked;
        self.messages_delivered += s.messages_delivered;
    }
}

/// Several queue pairs' counters as one (an endpoint's rails): sums, the largest RTT, and the
/// smallest datagram any of them cuts.
impl std::ops::AddAssign for RdStats {
    fn add_assign(&mut self, o: RdStats) {
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.datagrams_read += o.datagrams_read;
        self.data_sent += o.data_sent;
        self.retransmits += o.retransmits;
        self.spurious_retransmits += o.spurious_retransmits;
        self.lost_acks += o.lost_acks;
        self.timeouts += o.timeouts;
        self.tail_probes += o.tail_probes;
        self.duplicates += o.duplicates;
        self.out_of_order += o.out_of_order;
        self.dropped += o.dropped;
        self.dropped_checksum += o.dropped_checksum;
        self.acks_sent += o.acks_sent;
        self.window_full += o.window_full;
        self.would_block += o.would_block;
        self.messages_acked += o.messages_acked;
        self.messages_delivered += o.messages_delivered;
        self.peers += o.peers;
        self.connected_peers += o.connected_peers;
        self.crc_peers += o.crc_peers;
        self.dormant_peers += o.dormant_peers;
        self.sessions_open += o.sessions_open;
        self.sessions_frozen += o.sessions_frozen;
        self.sessions_resumed += o.sessions_resumed;
        self.control_sent += o.control_sent;
        self.control_received += o.control_received;
        self.dropped_control += o.dropped_control;
        self.dropped_malformed += o.dropped_malformed;
        self.dropped_unauthenticated += o.dropped_unauthenticated;
        self.dropped_unknown_session += o.dropped_unknown_session;
        self.handshake_failures += o.handshake_failures;
        self.peer_failures += o.peer_failures;
        self.stalls += o.stalls;
        self.sends_handed_back += o.sends_handed_back;
        self.parked += o.parked;
        self.refused += o.refused;
        self.stashed += o.stashed;
        self.protocol_errors += o.protocol_errors;
        self.send_errors += o.send_errors;
        self.connected_sends += o.connected_sends;
        self.gso_sends += o.gso_sends;
        self.gro_runs += o.gro_runs;
        self.srtt = self.srtt.max(o.srtt);
        self.max_datagram_size = match (self.max_datagram_size, o.max_datagram_size) {
            (0, n) | (n, 0) => n,
            (a, b) => a.min(b),
        };
    }
}

fn micros<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&d.map(|d| d.as_micros() as u64), s)
}

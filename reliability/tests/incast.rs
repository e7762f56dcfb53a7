//! Incast at scale: N simulated senders, each a `Session` of its own (one rank's session to the
//! root), into one receiving `Endpoint` whose receive budget is shared among them as credit,
//! over a simulated network with 1 % independent loss each way and a bounded receive queue
//! (the root's socket buffer, drained at a finite rate). Every message is checked byte by byte,
//! in per-sender order and exactly once; the test counts what the network destroyed and what
//! the engine resent, and checks each sender against the credit the receiver granted.
//!
//! The simulation is in `incast_sim/`. Summary lines:
//! `cargo test --release -p reliability --test incast -- --nocapture`.

mod incast_sim;

use incast_sim::{config, incast, sized, Counts, BUDGET, SERVICE};
use reliability::Config;

/// What every run must show, whatever N.
fn common(c: &Counts, n: usize) {
    // The engine's promise, per session: once a sender has heard from the root it never sends
    // a new datagram past the root's newest cumulative ACK plus the credit that came with it.
    assert_eq!(
        c.beyond_granted, 0,
        "a sender ran past the credit it was granted"
    );
    // No storm: no datagram is resent without bound, timers fire O(data) times, not
    // O(data x backlog), and the root's timer heap and ready lists stay O(N) (its heap is
    // rebuilt past 4N + 64 entries).
    assert!(
        c.max_transmissions <= 32,
        "one datagram sent {} times",
        c.max_transmissions
    );
    assert!(
        c.timer_firings <= 4 * (c.data + n as u64),
        "timer firings {} for {} data datagrams",
        c.timer_firings,
        c.data
    );
    assert!(
        c.root_tables <= 256 * n + 4096,
        "root tables {} bytes",
        c.root_tables
    );
    assert_eq!(c.sender_acks, 0, "senders receive no data and owe no ACKs");
}

/// The credit the root grants in all: `set_recv_budget`'s share, at least 1, times N.
fn granted(n: usize) -> u64 {
    n as u64 * u64::from((BUDGET / n as u32).max(1))
}

/// Every retransmission answers a datagram the network destroyed: data lost on the way or
/// dropped at the full socket, or an ACK lost on the way back (with a credit of one datagram
/// that leaves the sender nothing but its timers). Spurious ones (a datagram still queued when
/// a timer fired, an ACK merely late) may add half as many again.
fn retransmits_bounded(c: &Counts) {
    assert!(
        c.retransmits * 2 <= c.destroyed() * 3,
        "retransmits {} > 1.5 x destroyed {} ({} data lost, {} ACKs lost, {} overflow)",
        c.retransmits,
        c.destroyed(),
        c.data_lost,
        c.acks_lost,
        c.overflow
    );
}

/// 1,023 senders: the budget's share is one datagram each, and the credits, 1,023 in all,
/// fit the 1,024-datagram socket. With `initial_credit` at that share (each rank can compute
/// it from the job size at startup) and timer floors above the socket's drain time (`sized`),
/// no sender has more on the way than the root granted, and the socket never overflows.
#[test]
fn incast_1023_senders() {
    let n = 1023;
    let c = incast(1, n, sized(config(1)));
    common(&c, n);
    retransmits_bounded(&c);
    assert_eq!(c.pre_ack_excess, 0);
    // Data on the way to the root or in its socket never exceeds the credit it granted.
    assert!(
        c.peak_in_flight <= granted(n),
        "in flight {}",
        c.peak_in_flight
    );
    assert_eq!(
        c.overflow, 0,
        "the socket overflowed though the credits fit it"
    );
}

/// The same with the default `initial_credit` (16): before a sender has heard from the root it
/// assumes 16 datagrams of credit, so the first burst of 1,023 senders is up to 16 times what
/// the root grants and overflows the socket. Everything is still delivered, once, and every
/// retransmission answers a destroyed datagram.
#[test]
fn incast_1023_senders_default_initial_credit() {
    let n = 1023;
    let c = incast(2, n, sized(config(Config::default().initial_credit)));
    common(&c, n);
    // What was sent on assumed credit and lost waits for the granted credit to reach it
    // before it is resent, rather than overrunning the socket again.
    assert_eq!(c.resent_beyond_granted, 0, "resent past the credit granted");
    retransmits_bounded(&c);
    assert!(c.pre_ack_excess > 0 && c.overflow > 0);
    assert!(c.peak_in_flight <= granted(n) + c.pre_ack_excess);
}

/// The default timer floors (RTO 1 ms, probe 100 µs) against a socket that takes 1.024 ms to
/// drain: timers fire for datagrams still queued, the spurious resends take socket room the
/// credits did not grant, and the socket overflows although the credits fit it. Jitter does not
/// help: a sender's first RTT sample is taken while the socket is still filling (tens of
/// microseconds), its next datagram waits behind a full socket, and no rule at the sender can
/// know that before one long round trip; the ACK lag is learnt from the first spurious resend,
/// which is one per sender too many.
#[test]
#[ignore = "fails: 2.3 retransmissions per destroyed datagram, 400 overflow drops (timer \
            floors below the socket's drain time)"]
fn incast_1023_senders_default_timers() {
    let n = 1023;
    let c = incast(1, n, config(1));
    common(&c, n);
    retransmits_bounded(&c);
    assert_eq!(c.overflow, 0);
}

/// 16,383 senders into the same 1,024-datagram socket. The share is floored at one datagram
/// (so that no sender ever needs a persist timer), so the credits granted sum to 16,383, 16
/// times the socket: `set_recv_budget` cannot keep more senders than its budget from
/// overrunning it, and the overflow is measured, not ruled out. What holds: each sender keeps
/// to its credit, every message arrives once and intact, every retransmission answers a
/// destroyed datagram, and there is no storm: the jittered timers spread the senders that a
/// full socket dropped together, so the transfer takes a small multiple of the root's reading
/// time (each data datagram read once) and no datagram is sent more than a handful of times.
/// (Without jitter: 17 synchronised waves, the last ones `max_rto` apart, 5.5 s where 0.1 s of
/// reading would do, one datagram sent 19 times.)
#[test]
fn incast_16383_senders() {
    let n = 16383;
    let c = incast(3, n, sized(config(1)));
    common(&c, n);
    retransmits_bounded(&c);
    assert_eq!(c.pre_ack_excess, 0);
    // Data on the way to the root or in its socket never exceeds the credit it granted (which
    // is what overruns the socket here).
    assert!(
        c.peak_in_flight <= granted(n),
        "in flight {}",
        c.peak_in_flight
    );
    let reading = SERVICE * u32::try_from(c.data).expect("small");
    assert!(
        c.sim_time <= 4 * reading,
        "{:?} for {reading:?} of reading",
        c.sim_time
    );
    assert!(
        c.max_transmissions <= 10,
        "one datagram sent {} times",
        c.max_transmissions
    );
}

/// What a receive budget should give 16,383 senders: no socket overrun, and a transfer paced
/// by the root's reading (each data datagram read once: `data x SERVICE`), not by backed-off
/// timers. The credit floor of one datagram per session rules the first out once the sessions
/// outnumber the budget: every sender always has a datagram on the way, so the socket is
/// offered 16 times what it holds, and the jittered timers only spread the drops (0.9 per
/// data datagram, in 23 waves). Honouring the budget needs credits of zero and a grant that
/// rotates among the sessions (README, "Flow control").
#[test]
#[ignore = "fails: credits floored at 1 datagram sum to 16x the socket; 89k overflow drops \
            in 23 waves"]
fn incast_16383_senders_within_budget() {
    let n = 16383;
    let c = incast(3, n, sized(config(1)));
    assert!(
        c.overflow * 10 <= c.data,
        "overflow {} for {} data",
        c.overflow,
        c.data
    );
    let reading = SERVICE * u32::try_from(c.data).expect("small");
    assert!(
        c.sim_time <= 4 * reading,
        "{:?} for {reading:?} of reading",
        c.sim_time
    );
}

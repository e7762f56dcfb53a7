//! Incast: several senders, one receiver with a small socket buffer. Credits keep the senders
//! from overrunning it; back-pressure reaches the senders' callers as `WouldBlock`; nothing the
//! callers handed over is lost.

mod util;

use std::time::Duration;

use reliability::Config;
use util::{assert_idle, small_config, Faults, MsgGen, RxQueue, Sim};

const SENDERS: usize = 6;

fn incast(seed: u64, budget: Option<u32>, sender_credit: u16) -> Sim {
    let receiver = small_config(300);
    let sender = Config {
        initial_credit: sender_credit,
        max_send_buffer: 4096,
        ..small_config(300)
    };
    let configs = std::iter::once(receiver).chain(std::iter::repeat_n(sender, SENDERS));
    let gen = MsgGen {
        seed,
        max_len: 1200,
        tiny: 0.3,
        small: 0.3,
        small_len: 100,
    };
    let faults = Faults {
        loss: 0.01,
        rate: Some(1_000_000_000),
        ..Faults::none()
    };
    let mut sim = Sim::new(seed, faults, gen, configs);
    // The receiver's socket buffer holds 24 datagrams and it reads one every 2 µs, slower
    // than the senders together can send.
    sim.net.set_rx_queue(
        0,
        RxQueue {
            cap: 24,
            service: Duration::from_micros(2),
        },
    );
    if let Some(b) = budget {
        sim.nodes[0].ep.set_recv_budget(b);
    }
    for s in 1..=SENDERS {
        sim.connect(s, 0);
        sim.flow(s, 0, 300);
    }
    sim.run(Duration::from_secs(30));
    assert_idle(&sim);
    sim
}

#[test]
fn credits_prevent_overrun() {
    for seed in 0..20 {
        // 18 datagrams of credit shared by 6 senders: 3 each, 18 in flight at most, so the
        // 24-datagram buffer never overflows.
        let sim = incast(seed, Some(18), 3);
        let credit = sim.nodes[0].ep.sessions().map(|(_, s)| s.credit()).max();
        assert_eq!(credit, Some(3));
        assert_eq!(
            sim.net.stats.overflowed, 0,
            "seed {seed}: {:?}",
            sim.net.stats
        );
        for s in 1..=SENDERS {
            let ob = &sim.nodes[s].outboxes[0];
            assert!(ob.would_block > 0, "seed {seed}: sender {s} never blocked");
            assert_eq!(ob.acked, 300);
        }
        assert!(sim.total(|s| s.would_block) > 0);
    }
}

#[test]
fn without_credits_the_buffer_overflows_but_nothing_is_lost() {
    // The contrast that shows the credits matter: full windows overrun the receiver, and the
    // reliability layer has to recover what the socket buffer dropped.
    let mut overflowed = 0;
    for seed in 0..5 {
        let sim = incast(seed, None, 64);
        overflowed += sim.net.stats.overflowed;
    }
    assert!(overflowed > 0);
}

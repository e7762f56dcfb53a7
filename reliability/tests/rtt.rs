//! The RTT estimate under loss: a bulk flow with a window wider than the SACK bitmap reaches,
//! through 1% loss. Recovering a hole releases datagrams the receiver got long before but could
//! not report; if those fed the estimator, SRTT would climb to the recovery time (tens of ms
//! seen on loopback) and drag every later timeout with it.

mod util;

use std::time::Duration;

use reliability::Config;
use util::{session_id, small_config, Faults, MsgGen, Sim};

#[test]
fn srtt_stays_near_the_path_under_loss() {
    let config = Config {
        send_window: 64,
        recv_window: 64,
        initial_credit: 64,
        // Without tail-loss probes more holes wait for a timeout: the case that inflated SRTT.
        min_pto: Duration::ZERO,
        ..small_config(1200)
    };
    let gen = MsgGen {
        seed: 1,
        max_len: 40_000,
        tiny: 0.0,
        small: 0.0,
        small_len: 100,
    };
    for seed in 0..8 {
        let faults = Faults {
            loss: 0.01,
            latency: Duration::from_micros(5),
            rate: Some(2_000_000_000),
            ..Faults::none()
        };
        let mut sim = Sim::new(seed, faults, gen.clone(), [config.clone(), config.clone()]);
        sim.connect(0, 1);
        sim.flow(0, 1, 300);
        sim.flow(1, 0, 300);
        sim.run(Duration::from_secs(60));
        let s = sim.nodes[0].ep.session(session_id(0, 1)).unwrap();
        let srtt = s.rtt().srtt.unwrap();
        assert!(s.stats().retransmits > 0, "seed {seed}: no loss to recover");
        // The path: 2 × 5 µs, 64 datagrams of 1.2 kB queued at 2 GB/s (38 µs), the 100 µs
        // ACK delay. Recoveries take a timeout of 1 ms or more.
        assert!(
            srtt < Duration::from_micros(400),
            "seed {seed}: srtt {srtt:?} ({:?})",
            s.stats()
        );
    }
}

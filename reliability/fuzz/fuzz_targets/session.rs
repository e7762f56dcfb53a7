//! Arbitrary datagrams and clock steps into a session that has data of its own in flight.
//! It must never panic, and the memory it reports must stay within the bounds its
//! configuration sets, however hostile the input.
//!
//! Input: one flag byte, then frames of `[len:u8][step:u8][bytes…]`. With flag bit 0 the
//! session and epoch fields of each frame are overwritten with the expected ones (and
//! checksums are off), so frames get past demultiplexing into the protocol logic.
#![no_main]

use std::sync::Arc;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use reliability::{Config, Session, SessionIds};

const IDS: SessionIds = SessionIds {
    local_id: 0x0102_0304,
    local_epoch: 7,
    remote_id: 0x0a0b_0c0d,
    remote_epoch: 0x0506_0708,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let deep = flags & 1 != 0;
    let cfg = Config {
        checksum: !deep,
        initial_seq: if flags & 2 != 0 { u32::MAX - 3 } else { 0 },
        recv_window: 32,
        max_held_bytes: 8192,
        max_send_buffer: 16 * 1024,
        ..Config::default()
    };
    let mut now = Instant::now();
    let mut s = Session::new(Arc::new(cfg.clone()), IDS, now).unwrap();
    for i in 0..4u8 {
        let _ = s.send(now, vec![i; 300 * usize::from(i)]);
    }
    let mut buf = Vec::new();
    while s.poll_transmit(now, &mut buf).is_some() {}
    let mut frame = Vec::new();
    while rest.len() >= 2 {
        let len = usize::from(rest[0]) * 2;
        let step = rest[1];
        rest = &rest[2..];
        let take = len.min(rest.len());
        frame.clear();
        frame.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if deep && frame.len() >= 24 {
            frame[0] = 0x10 | (frame[0] & 0x0f);
            frame[1] &= 0x05;
            frame[4..8].copy_from_slice(&IDS.local_id.to_be_bytes());
            frame[8..12].copy_from_slice(&IDS.remote_epoch.to_be_bytes());
        }
        now += Duration::from_micros(u64::from(step) * 20);
        let _ = s.handle_datagram(now, &frame, &mut ());
        if step & 1 == 0 {
            s.handle_timeout(now);
        }
        while s.poll_transmit(now, &mut buf).is_some() {}
        while s.poll_event().is_some() {}
        let m = s.memory();
        assert!(m.reorder <= cfg.max_held_bytes + usize::from(cfg.recv_window) * 64);
        assert!(m.send_queue + m.retransmit <= 16 * 1024);
        assert!(m.total() < 64 * 1024, "{m:?}");
    }
});

//! The reliability layer: its header, and a session fed hostile datagrams.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reliability::header::Repr;
use reliability::{Config, Session, SessionIds};

/// Arbitrary bytes into the header parser: no panic, and whatever parses emits back
/// identically.
pub fn header(data: &[u8]) -> usize {
    if let Ok((repr, payload)) = Repr::parse(data) {
        let mut buf = vec![0u8; repr.header_len()];
        repr.emit(&mut buf);
        assert_eq!(&buf[..], &data[..repr.header_len()]);
        assert!(payload.len() <= data.len());
    }
    data.len()
}

/// The session [`session`] drives; its peer is `IDS` seen from the other end.
pub const IDS: SessionIds = SessionIds {
    local_id: 0x0102_0304,
    local_epoch: 7,
    remote_id: 0x0a0b_0c0d,
    remote_epoch: 0x0506_0708,
};

/// Arbitrary datagrams and clock steps into a session that has data of its own in flight.
/// It must never panic, and the memory it reports must stay within the bounds its
/// configuration sets, however hostile the input.
///
/// Input: one flag byte, then frames of `[len:u8][step:u8][bytes…]` (up to `2 * len` bytes).
/// With flag bit 0 the session and epoch fields of each frame are overwritten with the
/// expected ones (and checksums are off), so frames get past demultiplexing into the protocol
/// logic.
pub fn session(data: &[u8]) -> usize {
    let Some((&flags, mut rest)) = data.split_first() else {
        return 0;
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
    data.len()
}

/// Sessions [`endpoint`] opens on first contact, at most.
const MAX_OPENED: usize = 4;

/// Arbitrary datagrams into an endpoint with [`IDS`]' session open, which opens a session on
/// first contact for an odd id (up to [`MAX_OPENED`]): the demultiplexing every datagram of an
/// RD queue pair goes through. Input as [`session`]'s; with flag bit 0 the frames' session
/// field is one of the endpoint's ids. Every datagram refused for its header or its id is
/// counted, and the endpoint's memory stays bounded.
pub fn endpoint(data: &[u8]) -> usize {
    let Some((&flags, mut rest)) = data.split_first() else {
        return 0;
    };
    let cfg = Config {
        checksum: flags & 1 == 0,
        recv_window: 32,
        max_held_bytes: 8192,
        max_send_buffer: 16 * 1024,
        ..Config::default()
    };
    let mut now = Instant::now();
    let mut ep = reliability::Endpoint::new(cfg).unwrap();
    ep.open(IDS, now);
    let (mut malformed, mut unknown) = (0u64, 0u64);
    let (mut frame, mut buf) = (Vec::new(), Vec::new());
    while rest.len() >= 2 {
        let len = usize::from(rest[0]) * 2;
        let step = rest[1];
        rest = &rest[2..];
        let take = len.min(rest.len());
        frame.clear();
        frame.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if flags & 1 != 0 && frame.len() >= 24 {
            let id = [IDS.local_id, 3, 5, 7][usize::from(step) % 4];
            frame[4..8].copy_from_slice(&id.to_be_bytes());
        }
        now += Duration::from_micros(u64::from(step) * 20);
        let open = ep.len();
        let accept = |id: u32, epoch: u32| {
            (id & 1 == 1 && open <= MAX_OPENED).then_some(SessionIds {
                local_id: id,
                local_epoch: 1,
                remote_id: id ^ 0x8000_0000,
                remote_epoch: epoch,
            })
        };
        let r = if step & 2 == 0 {
            ep.handle_datagram(now, &frame, &mut (), accept)
        } else {
            // A run, as receive offload hands one over: only for a session already open.
            let id = reliability::Endpoint::peek_session_id(&frame).unwrap_or(0);
            let taken = ep.handle_run(now, id, [&frame[..]], &mut ());
            assert!(taken <= 1);
            Ok(id)
        };
        match r {
            // The endpoint counts what cannot name a session; a session, a bad checksum.
            Err(reliability::DropReason::Malformed(_))
                if reliability::Endpoint::peek_session_id(&frame).is_none() =>
            {
                malformed += 1
            }
            Err(reliability::DropReason::UnknownSession(_)) => unknown += 1,
            _ => {}
        }
        if step & 1 == 0 {
            ep.handle_timeout(now);
        }
        while ep.poll_transmit(now, &mut buf).is_some() {}
        while ep.poll_event().is_some() {}
        assert!(ep.len() <= 1 + MAX_OPENED + 1);
        assert!(ep.memory().total() < (2 + MAX_OPENED) * 64 * 1024);
    }
    let stats = ep.stats();
    assert_eq!(stats.dropped_malformed, malformed);
    assert!(stats.dropped_unknown_session >= unknown);
    data.len()
}

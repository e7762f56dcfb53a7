//! Property tests: serial-number arithmetic across the wrap, header round trips, arbitrary
//! input never panicking nor growing memory without bound, and whole transfers whose sequence
//! numbers and message ids wrap.

mod util;

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use reliability::header::{push_entry, Body, Repr, CRC_LEN};
use reliability::{Config, MsgId, Seq, Session, SessionIds};
use util::{assert_idle, small_config, Faults, MsgGen, Sim};

const IDS: SessionIds = SessionIds {
    local_id: 5,
    local_epoch: 50,
    remote_id: 6,
    remote_epoch: 60,
};

fn near_wrap() -> impl Strategy<Value = u32> {
    prop_oneof![u32::MAX - 1000..=u32::MAX, 0u32..1000, any::<u32>()]
}

proptest! {
    #[test]
    fn serial_arithmetic(a in near_wrap(), d in 0u32..0x7fff_ffff) {
        let x = Seq(a);
        let y = x.add(d);
        prop_assert_eq!(y.since(x), d);
        prop_assert_eq!(y.sub(d), x);
        prop_assert_eq!(x.before(y), d > 0);
        prop_assert_eq!(y.after(x), d > 0);
        prop_assert!(!(x.before(y) && y.before(x)));
        prop_assert_eq!(y.diff(x), d as i32);
        prop_assert_eq!(MsgId(a).add(d).since(MsgId(a)), d);
    }

    #[test]
    fn header_round_trip(
        session in any::<u32>(), epoch in any::<u32>(), seq in any::<u32>(), ack in any::<u32>(),
        sack in any::<u32>(), credit in any::<u16>(), ack_req in any::<bool>(),
        checksum in any::<bool>(), msg in any::<u32>(), kind in 0u8..4,
        entries in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6),
        offset in 0u32..1000, extra in 0u32..1000, dsack in any::<bool>(),
        ack_soon in any::<bool>(), acked in any::<bool>(),
    ) {
        let mut payload = Vec::new();
        let body = match kind {
            0 => Body::Ack,
            1 => { payload = entries[0].clone(); Body::Single { msg: MsgId(msg) } }
            2 => {
                payload = entries[0].clone();
                payload.push(1);
                let total_len = offset + payload.len() as u32 + extra;
                Body::Segment { msg: MsgId(msg), offset, total_len }
            }
            _ => {
                for e in &entries { push_entry(&mut payload, e); }
                Body::Coalesced { msg: MsgId(msg), count: entries.len() as u16 }
            }
        };
        let repr = Repr {
            session, epoch, seq: Seq(seq), ack: Seq(ack), sack, credit, ack_req, ack_soon,
            checksum, dsack: dsack && kind == 0, dsack_acked: acked && dsack && kind == 0, body,
        };
        let mut buf = vec![0u8; repr.header_len()];
        repr.emit(&mut buf);
        let header_len = buf.len();
        buf.extend_from_slice(&payload);
        if checksum {
            let crc = reliability::header::checksum(&buf[..header_len], &payload);
            buf.extend_from_slice(&crc);
        }
        let (back, p) = Repr::parse(&buf).unwrap();
        prop_assert_eq!(back, repr);
        prop_assert_eq!(p, &payload[..]);
        if checksum {
            // Any single flipped bit is caught, except the one that clears the CHECKSUM flag
            // itself; a session with checksums on refuses such a datagram for lacking one.
            let i = (seq as usize) % buf.len();
            buf[i] ^= 1 << (ack % 8);
            match Repr::parse(&buf) {
                Err(_) => {}
                Ok((r, _)) => prop_assert!(!r.checksum && i == 1),
            }
            prop_assert_eq!(buf.len() - CRC_LEN - header_len, payload.len());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        datagrams in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..20),
        checksum in any::<bool>(),
    ) {
        let cfg = Config { checksum, ..Config::default() };
        let mut s = Session::new(Arc::new(cfg), IDS, Instant::now()).unwrap();
        let now = Instant::now();
        for d in &datagrams {
            let _ = s.handle_datagram(now, d, &mut ());
        }
        let mut buf = Vec::new();
        while s.poll_transmit(now, &mut buf).is_some() {}
        prop_assert_eq!(s.stats().datagrams_received, 0, "random bytes accepted");
    }

    /// Well-formed headers with arbitrary field values, for this session and epoch, reach the
    /// protocol logic; it must neither panic nor hold more than its bounds allow.
    #[test]
    fn hostile_headers_stay_bounded(
        frames in prop::collection::vec(
            (any::<u32>(), any::<u32>(), any::<u32>(), any::<u16>(), 0u8..4, any::<u32>(),
             0u32..100_000, prop::collection::vec(any::<u8>(), 0..300), any::<bool>()),
            1..60),
        base in near_wrap(),
    ) {
        let cfg = Config {
            checksum: false,
            initial_seq: base,
            max_held_bytes: 4096,
            recv_window: 64,
            ..Config::default()
        };
        let now = Instant::now();
        let mut s = Session::new(Arc::new(cfg.clone()), IDS, now).unwrap();
        // Have something in flight, so that ACKs can be valid.
        for i in 0..5u8 {
            s.send(now, vec![i; 100]).unwrap();
        }
        let mut buf = Vec::new();
        while s.poll_transmit(now, &mut buf).is_some() {}
        for (k, (seq_off, ack_off, sack, credit, kind, msg, offset, payload, ack_req)) in
            frames.into_iter().enumerate()
        {
            let t = now + Duration::from_micros(k as u64 * 50);
            let body = match kind {
                0 => Body::Ack,
                1 => Body::Single { msg: MsgId(msg) },
                2 => Body::Segment {
                    msg: MsgId(msg),
                    offset,
                    total_len: offset + payload.len() as u32 + (msg % 3),
                },
                _ => Body::Coalesced { msg: MsgId(msg), count: 1 },
            };
            let mut data = payload.clone();
            if kind == 3 {
                data.clear();
                push_entry(&mut data, &payload);
            }
            if kind == 0 {
                data.clear();
            }
            let repr = Repr {
                session: IDS.local_id, epoch: IDS.remote_epoch,
                seq: Seq(base.wrapping_add(seq_off % 200)),
                ack: Seq(base.wrapping_add(ack_off % 8)),
                sack, credit, ack_req, ack_soon: ack_req, checksum: false, dsack: false,
                dsack_acked: false, body,
            };
            let mut d = vec![0u8; repr.header_len()];
            repr.emit(&mut d);
            d.extend_from_slice(&data);
            let _ = s.handle_datagram(t, &d, &mut ());
            s.handle_timeout(t);
            while s.poll_transmit(t, &mut buf).is_some() {}
            while s.poll_event().is_some() {}
            let m = s.memory();
            prop_assert!(m.reorder <= cfg.max_held_bytes + usize::from(cfg.recv_window) * 64,
                "{:?}", m);
            prop_assert!(m.send_queue + m.retransmit <= 5 * (100 + 2));
        }
    }

    /// Whole transfers starting just below the wrap of sequence numbers and message ids.
    #[test]
    fn transfers_across_the_wrap(start in u32::MAX - 200..=u32::MAX, seed in any::<u64>()) {
        let cfg = Config { initial_seq: start, ..small_config(300) };
        let gen = MsgGen { seed, max_len: 900, tiny: 0.4, small: 0.3, small_len: 100 };
        let faults = Faults {
            loss: 0.2,
            reorder: 0.2,
            reorder_delay: Duration::from_micros(50),
            ..Faults::none()
        };
        let mut sim = Sim::new(seed, faults, gen, [cfg.clone(), cfg]);
        sim.connect(0, 1);
        sim.flow(0, 1, 150);
        sim.flow(1, 0, 50);
        sim.run(Duration::from_secs(10));
        assert_idle(&sim);
    }
}

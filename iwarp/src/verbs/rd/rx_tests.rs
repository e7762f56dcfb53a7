//! Tests of the receive state and the receiver sinks (apart from rx.rs, which is long enough).

use super::*;

/// Takes nothing early, records whole messages.
#[derive(Default)]
struct Record(Vec<Vec<u8>>);

impl RdReceiver for Record {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        false
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        self.0.push(payload.to_vec());
    }
}

fn sink<'a>(
    rx: &'a mut PeerRx,
    recv: &'a mut dyn RdReceiver,
    stats: &'a mut RdStats,
) -> ReceiverSink<'a> {
    ReceiverSink {
        rx,
        recv,
        src: "127.0.0.1:1".parse().unwrap(),
        qpn: 1,
        stats,
    }
}

#[test]
fn reassembly_buffers_count_in_the_memory_ledger() {
    let mut rx = PeerRx::new(MsgId(0));
    let mut stats = RdStats::default();
    let mut recv = Record::default();
    let base = rx.memory_bytes();
    let mut sink = sink(&mut rx, &mut recv, &mut stats);
    // A middle segment of message 1, ahead of message 0: it waits in a reassembly buffer.
    sink.place(Placement {
        msg: MsgId(1),
        offset: 1000,
        total_len: 60_000,
        bytes: &[7; 1000],
    });
    assert!(rx.memory_bytes() >= base + 60_000, "{}", rx.memory_bytes());
}

#[test]
fn a_staged_message_is_rebuilt_whatever_order_its_segments_come_in() {
    let qn = datagram::qn_for(1, Opcode::Send.queue());
    let mut msg = [0u8; DDP_HEADER].to_vec();
    SegmentRepr::untagged(Opcode::Send, true, qn, 0, 0)
        .emit(&mut msg)
        .unwrap();
    msg.extend((0..5000u32).map(|i| (i * 7 + i / 256) as u8));
    let total = msg.len() as u32;
    let cuts = [(3000, msg.len()), (1000, 3000), (0, 1000)];
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
        let mut rx = PeerRx::new(MsgId(0));
        let mut stats = RdStats::default();
        let mut recv = Record::default();
        let mut sink = sink(&mut rx, &mut recv, &mut stats);
        for &k in &order {
            let (from, to) = cuts[k];
            sink.place(Placement {
                msg: MsgId(0),
                offset: from as u32,
                total_len: total,
                bytes: &msg[from..to],
            });
        }
        sink.deliver(MsgId(0), Delivery::Placed { len: total });
        assert_eq!(stats.protocol_errors, 0, "{order:?}");
        assert_eq!(recv.0, [msg[DDP_HEADER..].to_vec()], "{order:?}");
    }
}

#[test]
fn fill_takes_segments_in_any_order_and_refuses_one_past_the_end() {
    let mut buf = Vec::with_capacity(10);
    assert!(fill(&mut buf, 4, &[1, 2], 10));
    assert_eq!(buf, [0, 0, 0, 0, 1, 2]);
    assert!(fill(&mut buf, 0, &[9; 4], 10));
    assert!(fill(&mut buf, 6, &[3; 4], 10));
    assert_eq!(buf, [9, 9, 9, 9, 1, 2, 3, 3, 3, 3]);
    assert!(!fill(&mut buf, 8, &[5; 3], 10));
    assert!(!fill(&mut buf, usize::MAX, &[5], 10));
    assert_eq!(buf.len(), 10);
}

#[test]
fn empty_messages_count_against_the_stash_limit() {
    let mut stash = Stash::default();
    let src = "127.0.0.1:1".parse().unwrap();
    let n = STASH_LIMIT / 16;
    for _ in 0..n {
        stash.push(src, &[]);
    }
    assert!(stash.bytes() >= STASH_LIMIT, "{}", stash.bytes());
}

/// A receiver of messages up to 100 bytes.
struct Small;

impl RdReceiver for Small {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        false
    }
    fn message(&mut self, _: SocketAddr, _: &[u8]) {}
    fn max_message(&self) -> usize {
        100
    }
}

#[test]
fn a_segment_announcing_a_message_longer_than_the_receiver_takes_is_dropped_unstaged() {
    let mut rx = PeerRx::new(MsgId(0));
    let mut stats = RdStats::default();
    let mut recv = Small;
    let base = rx.memory_bytes();
    let mut sink = sink(&mut rx, &mut recv, &mut stats);
    // A peer's word for a 4 GiB message: nothing of that size is allocated.
    for (msg, total_len) in [(1, u32::MAX), (2, (DDP_HEADER + 101) as u32)] {
        sink.place(Placement {
            msg: MsgId(msg),
            offset: 50,
            total_len,
            bytes: &[7; 50],
        });
    }
    // The longest message it takes is staged.
    sink.place(Placement {
        msg: MsgId(3),
        offset: 50,
        total_len: (DDP_HEADER + 100) as u32,
        bytes: &[7; 50],
    });
    assert_eq!(stats.protocol_errors, 2);
    let held = rx.memory_bytes() - base;
    assert!((DDP_HEADER + 100..4096).contains(&held), "{held}");
}

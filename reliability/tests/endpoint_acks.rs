//! `Endpoint::flush_acks`: an ACK owed leaves at once, instead of after its batch or delay.

use std::time::Instant;

use reliability::header::{Kind, Packet};
use reliability::{Config, Delivery, Endpoint, MsgId, Placement, SessionIds, Sink};

struct Ignore;

impl Sink for Ignore {
    fn place(&mut self, _: Placement<'_>) {}
    fn deliver(&mut self, _: MsgId, _: Delivery<'_>) {}
}

fn transmit(e: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while e.poll_transmit(now, &mut buf).is_some() {
        out.push(buf.clone());
    }
    out
}

#[test]
fn an_owed_ack_leaves_when_flushed() {
    let now = Instant::now();
    let ids = SessionIds {
        local_id: 1,
        local_epoch: 10,
        remote_id: 2,
        remote_epoch: 20,
    };
    let mut a = Endpoint::new(Config::default()).unwrap();
    let mut b = Endpoint::new(Config::default()).unwrap();
    a.open(ids, now);
    b.open(ids.mirrored(), now);
    // Four segments; the first two are neither a full batch nor the last queued.
    a.send(ids.local_id, now, vec![3u8; 200_000]).unwrap();
    let out = transmit(&mut a, now);
    assert_eq!(out.len(), 4);
    for d in &out[..2] {
        b.handle_datagram(now, d, &mut Ignore, |_, _| None).unwrap();
    }
    assert!(
        transmit(&mut b, now).is_empty(),
        "the ACK waits for its delay"
    );
    b.flush_acks();
    let acks = transmit(&mut b, now);
    assert_eq!(acks.len(), 1);
    let p = Packet::new_checked(&acks[0][..]).unwrap();
    assert_eq!(p.kind().unwrap(), Kind::Ack);
    assert_eq!(p.ack().0, 2, "both segments acknowledged");
    // Nothing owed any more: a second flush sends nothing.
    b.flush_acks();
    assert!(transmit(&mut b, now).is_empty());
}

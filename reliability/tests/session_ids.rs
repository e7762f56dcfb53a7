//! Demultiplexing by receiver-chosen session id, and refusal of foreign sessions and of other
//! incarnations of the peer.

use std::sync::Arc;
use std::time::Instant;

use reliability::{
    Config, Delivery, DropReason, Endpoint, MsgId, Placement, Session, SessionIds, Sink,
};

#[derive(Default)]
struct Got(Vec<Vec<u8>>);

impl Sink for Got {
    fn place(&mut self, _: Placement<'_>) {}
    fn deliver(&mut self, _: MsgId, d: Delivery<'_>) {
        if let Delivery::Inline(b) = d {
            self.0.push(b.to_vec());
        }
    }
}

const A: SessionIds = SessionIds {
    local_id: 0x11,
    local_epoch: 1,
    remote_id: 0x22,
    remote_epoch: 2,
};

fn one_datagram(s: &mut Session, now: Instant, msg: &[u8]) -> Vec<u8> {
    s.send_slice(now, msg).unwrap();
    let mut buf = Vec::new();
    s.poll_transmit(now, &mut buf).unwrap();
    buf
}

#[test]
fn foreign_session_and_stale_epoch_are_refused_and_counted() {
    let now = Instant::now();
    let cfg = Arc::new(Config::default());
    let mut b = Session::new(cfg.clone(), A.mirrored(), now).unwrap();

    // A sender that stamps an id `b` never gave out.
    let mut stranger = Session::new(
        cfg.clone(),
        SessionIds {
            remote_id: 0x99,
            ..A
        },
        now,
    )
    .unwrap();
    let d = one_datagram(&mut stranger, now, b"who?");
    assert_eq!(
        b.handle_datagram(now, &d, &mut Got::default()),
        Err(DropReason::ForeignSession(0x99))
    );
    assert_eq!(b.stats().dropped_foreign, 1);

    // The peer restarted: same ids, new incarnation. Its datagrams are refused.
    let mut restarted = Session::new(
        cfg.clone(),
        SessionIds {
            local_epoch: 3,
            ..A
        },
        now,
    )
    .unwrap();
    let d = one_datagram(&mut restarted, now, b"i'm back");
    assert_eq!(
        b.handle_datagram(now, &d, &mut Got::default()),
        Err(DropReason::StaleEpoch(3))
    );
    assert_eq!(b.stats().dropped_stale_epoch, 1);

    // The genuine peer still gets through, and the refused datagrams left no trace.
    let mut a = Session::new(cfg, A, now).unwrap();
    let d = one_datagram(&mut a, now, b"hello");
    let mut got = Got::default();
    b.handle_datagram(now, &d, &mut got).unwrap();
    assert_eq!(got.0, vec![b"hello".to_vec()]);
    assert_eq!(b.stats().datagrams_received, 1);
    assert_eq!(b.stats().dropped(), 2);
}

#[test]
fn endpoint_opens_sessions_on_first_contact_only_when_asked() {
    let now = Instant::now();
    let mut ep = Endpoint::new(Config::default()).unwrap();
    let mut a = Session::new(Arc::new(Config::default()), A, now).unwrap();
    let d = one_datagram(&mut a, now, b"first contact");
    assert_eq!(Endpoint::peek_session_id(&d), Some(0x22));

    // Declined: dropped and counted, nothing allocated.
    let r = ep.handle_datagram(now, &d, &mut Got::default(), |_, _| None);
    assert_eq!(r, Err(DropReason::UnknownSession(0x22)));
    assert_eq!(ep.stats().dropped_unknown_session, 1);
    assert!(ep.is_empty());

    // Accepted: the session is created from the ids the caller knows for that id.
    let mut got = Got::default();
    let r = ep.handle_datagram(now, &d, &mut got, |id, epoch| {
        assert_eq!((id, epoch), (0x22, 1));
        Some(A.mirrored())
    });
    assert_eq!(r, Ok(0x22));
    assert_eq!(got.0, vec![b"first contact".to_vec()]);
    assert_eq!(ep.len(), 1);
    assert_eq!(ep.stats().sessions_opened, 1);

    // Garbage too short to name a session is counted at the endpoint.
    assert!(ep
        .handle_datagram(now, &[1, 2, 3], &mut Got::default(), |_, _| None)
        .is_err());
    assert_eq!(ep.stats().dropped_malformed, 1);
}

#[test]
fn datagrams_without_the_agreed_checksum_are_refused() {
    let now = Instant::now();
    let plain = Arc::new(Config {
        checksum: false,
        ..Config::default()
    });
    let mut a = Session::new(plain, A, now).unwrap();
    let mut b = Session::new(Arc::new(Config::default()), A.mirrored(), now).unwrap();
    let d = one_datagram(&mut a, now, b"unprotected");
    assert_eq!(
        b.handle_datagram(now, &d, &mut Got::default()),
        Err(DropReason::Malformed(
            reliability::header::HeaderError::ChecksumMissing
        ))
    );
    assert_eq!(b.stats().dropped_malformed, 1);
    // A corrupted one is refused for its CRC.
    let mut a = Session::new(Arc::new(Config::default()), A, now).unwrap();
    let mut d = one_datagram(&mut a, now, b"protected");
    d[30] ^= 0x40;
    assert!(b.handle_datagram(now, &d, &mut Got::default()).is_err());
    assert_eq!(b.stats().dropped_checksum, 1);
}

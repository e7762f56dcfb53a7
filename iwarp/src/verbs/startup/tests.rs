//! The start-up machine without sockets: two ends joined by byte pipes cut anywhere, every
//! outcome checked (settings, private data, the stream bytes that follow), and the failures:
//! silence past the deadline, garbage, a closed peer, a rejection.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::wire::mpa::{FrameKind, StartupRepr};

const T: Duration = Duration::from_secs(5);

fn config(markers: bool, crc: bool, rev: u8) -> QpConfig {
    QpConfig {
        markers,
        crc,
        mpa_revision: rev,
        ..QpConfig::default()
    }
}

/// Moves up to `cut` bytes of `from`'s output to `to`, appending `extra` (stream bytes the
/// sender writes right behind its frame) once the frame is all out.
fn pipe(from: &mut Startup, to: &mut Startup, cut: usize, extra: &mut Option<Vec<u8>>) {
    let out = from.pending_output();
    let n = out.len().min(cut.max(1));
    if n == 0 {
        return;
    }
    let bytes = out[..n].to_vec();
    from.written(n);
    to.handle_input(&bytes);
    if from.pending_output().is_empty() {
        if let Some(e) = extra.take() {
            to.handle_input(&e);
        }
    }
}

proptest! {
    /// Any settings each side wants, any cuts of the bytes: both ends settle the same
    /// exchange, the private data crosses, and what follows each frame is the next bytes.
    #[test]
    fn both_ends_agree_however_the_bytes_are_cut(
        (am, ac, ar) in (any::<bool>(), any::<bool>(), 1u8..=2),
        (bm, bc, br) in (any::<bool>(), any::<bool>(), 1u8..=2),
        pa in proptest::collection::vec(any::<u8>(), 0..64),
        pb in proptest::collection::vec(any::<u8>(), 0..64),
        cuts in proptest::collection::vec(1usize..40, 1..64),
        fa in proptest::collection::vec(any::<u8>(), 0..100),
        fb in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        let now = Instant::now();
        let mut a = Startup::initiator(&config(am, ac, ar), &pa, now, T).unwrap();
        let mut b = Startup::responder(&config(bm, bc, br), &pb, now, T);
        let (mut xa, mut xb) = (Some(fa.clone()), Some(fb.clone()));
        let (mut ra, mut rb) = (None, None);
        for (i, &cut) in cuts.iter().cycle().take(2000).enumerate() {
            pipe(&mut a, &mut b, cut, &mut xa);
            if i % 2 == 0 {
                // The responder's stream bytes may only follow its Reply.
                pipe(&mut b, &mut a, cut, &mut xb);
            }
            if ra.is_none() {
                match a.poll() {
                    Outcome::Pending => {}
                    Outcome::Established(e) => ra = Some(e),
                    Outcome::Failed(e) => panic!("initiator: {e}"),
                }
            }
            if rb.is_none() {
                match b.poll() {
                    Outcome::Pending => {}
                    Outcome::Established(e) => rb = Some(e),
                    Outcome::Failed(e) => panic!("responder: {e}"),
                }
            }
            if ra.is_some() && rb.is_some() && xa.is_none() && xb.is_none() {
                break;
            }
        }
        let (mut ea, mut eb) = (ra.expect("the initiator settled"), rb.expect("the responder settled"));
        prop_assert_eq!(&ea.peer_private_data, &pb);
        prop_assert_eq!(&eb.peer_private_data, &pa);
        prop_assert_eq!(ea.revision, ar.min(br));
        prop_assert_eq!(eb.revision, ar.min(br));
        prop_assert_eq!(ea.negotiated.crc, ac || bc);
        prop_assert_eq!(eb.negotiated.crc, ac || bc);
        prop_assert_eq!((ea.negotiated.markers_tx, ea.negotiated.markers_rx), (bm, am));
        prop_assert_eq!((eb.negotiated.markers_tx, eb.negotiated.markers_rx), (am, bm));
        // Whatever followed the frames before the result was taken is at the front of what
        // the other end saw.
        ea.leftover.truncate(fb.len());
        eb.leftover.truncate(fa.len());
        prop_assert!(fb.starts_with(&ea.leftover));
        prop_assert!(fa.starts_with(&eb.leftover));
    }
}

#[test]
fn stream_bytes_behind_the_request_are_handed_over() {
    let now = Instant::now();
    let mut a = Startup::initiator(&config(false, true, 2), b"hi", now, T).unwrap();
    let mut b = Startup::responder(&config(false, false, 2), b"yo", now, T);
    let mut bytes = a.pending_output().to_vec();
    a.written(bytes.len());
    bytes.extend_from_slice(b"FPDU");
    b.handle_input(&bytes);
    // Established only once the Reply is written out.
    assert!(matches!(b.poll(), Outcome::Pending));
    let reply = b.pending_output().to_vec();
    b.written(reply.len());
    b.handle_input(b"MORE");
    match b.poll() {
        Outcome::Established(e) => {
            assert_eq!(e.leftover, b"FPDUMORE");
            assert_eq!(e.peer_private_data, b"hi");
            assert!(e.negotiated.crc);
        }
        _ => panic!("the responder settled"),
    }
    a.handle_input(&reply);
    assert!(
        matches!(a.poll(), Outcome::Established(e) if e.peer_private_data == b"yo" && e.leftover.is_empty())
    );
}

#[test]
fn silence_fails_at_the_deadline_not_before() {
    let now = Instant::now();
    let mut b = Startup::responder(&QpConfig::default(), b"", now, T);
    assert_eq!(b.poll_timeout(), Some(now + T));
    b.handle_timeout(now + T - Duration::from_millis(1));
    assert!(matches!(b.poll(), Outcome::Pending));
    b.handle_timeout(now + T);
    assert!(matches!(b.poll(), Outcome::Failed(VerbsError::Timeout)));
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn garbage_and_a_closed_peer_fail() {
    let now = Instant::now();
    let mut b = Startup::responder(&QpConfig::default(), b"", now, T);
    b.handle_input(&[0x55; 40]);
    assert!(matches!(b.poll(), Outcome::Failed(VerbsError::Mpa(_))));
    let mut a = Startup::initiator(&QpConfig::default(), b"", now, T).unwrap();
    let n = a.pending_output().len();
    a.written(n);
    a.handle_input(&[]);
    a.handle_closed();
    assert!(matches!(a.poll(), Outcome::Failed(VerbsError::PeerClosed)));
}

#[test]
fn a_request_where_a_reply_belongs_fails_both_ways() {
    let now = Instant::now();
    let mut a = Startup::initiator(&QpConfig::default(), b"", now, T).unwrap();
    let mut other = Startup::initiator(&QpConfig::default(), b"", now, T).unwrap();
    let req = other.pending_output().to_vec();
    other.written(req.len());
    a.written(a.pending_output().len());
    a.handle_input(&req);
    assert!(matches!(a.poll(), Outcome::Failed(VerbsError::Startup(_))));
}

#[test]
fn a_rejecting_reply_fails_the_initiator_with_its_private_data() {
    let now = Instant::now();
    let mut a = Startup::initiator(&QpConfig::default(), b"", now, T).unwrap();
    a.written(a.pending_output().len());
    let reject = StartupRepr {
        kind: FrameKind::Reply,
        markers: false,
        crc: true,
        reject: true,
        revision: 1,
        ird_ord: None,
        private_data: b"full".to_vec(),
    };
    a.handle_input(&reject.emit().unwrap());
    match a.poll() {
        Outcome::Failed(VerbsError::Rejected { private_data }) => assert_eq!(private_data, b"full"),
        _ => panic!("rejected"),
    }
}

#[test]
fn a_settled_exchange_outlives_its_deadline() {
    let now = Instant::now();
    let mut a = Startup::initiator(&QpConfig::default(), b"", now, T).unwrap();
    let mut b = Startup::responder(&QpConfig::default(), b"", now, T);
    let req = a.pending_output().to_vec();
    a.written(req.len());
    b.handle_input(&req);
    assert!(
        !b.wants_input(),
        "the Request is in: the rest is the stream's"
    );
    let reply = b.pending_output().to_vec();
    b.written(reply.len());
    // Reply written, result not yet taken: the deadline passing changes nothing.
    b.handle_timeout(now + 2 * T);
    assert!(matches!(b.poll(), Outcome::Established(_)));
    // The initiator's Reply never came: its deadline fails it.
    a.handle_timeout(now + T);
    assert!(matches!(a.poll(), Outcome::Failed(VerbsError::Timeout)));
}

/// A deciding responder shows the Request's private data and answers as its owner says:
/// accepted with the owner's private data, or rejected with a reason the initiator reads.
#[test]
fn a_deciding_responder_accepts_or_rejects_as_told() {
    for accept in [true, false] {
        let now = Instant::now();
        let mut a = Startup::initiator(&QpConfig::default(), b"me", now, T).unwrap();
        let mut b = Startup::deciding_responder(&QpConfig::default(), now, T);
        let req = a.pending_output().to_vec();
        a.written(req.len());
        assert_eq!(b.request_private_data(), None);
        b.handle_input(&req);
        assert_eq!(b.request_private_data(), Some(&b"me"[..]));
        assert!(matches!(b.poll(), Outcome::Pending), "waits for the owner");
        assert!(b.pending_output().is_empty());
        if accept {
            b.accept(b"you");
        } else {
            b.reject(b"cap");
        }
        assert_eq!(b.request_private_data(), None);
        let reply = b.pending_output().to_vec();
        b.written(reply.len());
        a.handle_input(&reply);
        match (a.poll(), b.poll(), accept) {
            (Outcome::Established(ea), Outcome::Established(eb), true) => {
                assert_eq!(ea.peer_private_data, b"you");
                assert_eq!(eb.peer_private_data, b"me");
                assert_eq!(ea.negotiated.crc, eb.negotiated.crc);
            }
            (
                Outcome::Failed(VerbsError::Rejected { private_data: pa }),
                Outcome::Failed(VerbsError::Rejected { private_data: pb }),
                false,
            ) => assert_eq!((pa, pb), (b"cap".to_vec(), b"cap".to_vec())),
            _ => panic!("accept {accept}: unexpected outcomes"),
        }
    }
}

#[test]
fn an_owner_that_never_answers_fails_at_the_deadline() {
    let now = Instant::now();
    let a = Startup::initiator(&QpConfig::default(), b"me", now, T).unwrap();
    let mut b = Startup::deciding_responder(&QpConfig::default(), now, T);
    b.handle_input(a.pending_output());
    b.handle_timeout(now + T / 2);
    assert!(matches!(b.poll(), Outcome::Pending));
    b.handle_timeout(now + T);
    assert!(matches!(b.poll(), Outcome::Failed(VerbsError::Timeout)));
}

//! The authenticated start-up without sockets: both ends with the job's key settle however
//! the bytes are cut, and every way a stranger or a wrong key can take part fails: a key that
//! differs, a replayed Request, a replayed proof, a Reply or proof altered anywhere, an end
//! not in authenticated mode, markers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::proof::{self, PROOF_FRAME_LEN};
use super::*;
use crate::auth::JobKey;

const T: Duration = Duration::from_secs(5);

fn config(key: Option<u8>) -> QpConfig {
    QpConfig {
        auth: key.map(|k| Arc::new(JobKey::new(&[k; 32]).unwrap())),
        ..QpConfig::default()
    }
}

/// An initiator and a responder whose nonces are fixed, so that each repeats its bytes.
fn fixed(now: Instant) -> (Startup, Startup) {
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    a.fix_nonce([0xa; 16]);
    b.fix_nonce([0xb; 16]);
    (a, b)
}

/// Takes everything `m` has to send.
fn take(m: &mut Startup) -> Vec<u8> {
    let out = m.pending_output().to_vec();
    m.written(out.len());
    out
}

fn established(o: Outcome) -> Established {
    match o {
        Outcome::Established(e) => e,
        Outcome::Failed(e) => panic!("failed: {e}"),
        Outcome::Pending => panic!("still pending"),
    }
}

fn unauthenticated(o: Outcome, why: &str) {
    match o {
        Outcome::Failed(VerbsError::Unauthenticated(w)) => assert_eq!(w, why),
        Outcome::Failed(e) => panic!("failed otherwise: {e}"),
        _ => panic!("not failed"),
    }
}

/// One whole exchange; returns the Request, the Reply and the proof frame as sent.
fn exchange(a: &mut Startup, b: &mut Startup) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let request = take(a);
    b.handle_input(&request);
    let reply = take(b);
    a.handle_input(&reply);
    let proof = take(a);
    b.handle_input(&proof);
    (request, reply, proof)
}

proptest! {
    /// Both ends settle, the ULP's private data crosses without the nonces and proof, the
    /// proof FPDU is not handed over as stream data, and what follows it is.
    #[test]
    fn ends_with_the_jobs_key_settle_however_the_bytes_are_cut(
        crc in any::<bool>(),
        pa in proptest::collection::vec(any::<u8>(), 0..64),
        pb in proptest::collection::vec(any::<u8>(), 0..64),
        cut in 1usize..50,
        stream in proptest::collection::vec(any::<u8>(), 1..100),
    ) {
        let now = Instant::now();
        let mut ca = config(Some(1));
        ca.crc = crc;
        let mut a = Startup::initiator(&ca, &pa, now, T).unwrap();
        let mut b = Startup::responder(&config(Some(1)), &pb, now, T);
        let request = take(&mut a);
        for c in request.chunks(cut) {
            prop_assert!(b.wants_input());
            b.handle_input(c);
        }
        let reply = take(&mut b);
        prop_assert!(b.wants_input(), "the responder waits for the proof");
        prop_assert!(matches!(b.poll(), Outcome::Pending));
        for c in reply.chunks(cut) {
            a.handle_input(c);
        }
        let ea = established(match a.poll() {
            Outcome::Pending => {
                // Established only once the proof is written out.
                let mut sent = take(&mut a);
                prop_assert_eq!(sent.len(), PROOF_FRAME_LEN);
                sent.extend_from_slice(&stream);
                for c in sent.chunks(cut) {
                    b.handle_input(c);
                }
                a.poll()
            }
            o => o,
        });
        let eb = established(b.poll());
        prop_assert_eq!(&ea.peer_private_data, &pb);
        prop_assert_eq!(&eb.peer_private_data, &pa);
        prop_assert_eq!(ea.negotiated.crc, eb.negotiated.crc);
        // The bytes after the proof up to the moment the responder settled are the stream's.
        prop_assert!(stream.starts_with(&eb.leftover));
        prop_assert!(!eb.leftover.is_empty() || stream.len() <= cut);
    }
}

#[test]
fn a_deciding_responder_sees_the_ulps_private_data_only() {
    let now = Instant::now();
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::deciding_responder(&config(Some(1)), now, T);
    b.handle_input(&take(&mut a));
    assert_eq!(b.request_private_data(), Some(&b"me"[..]));
    b.accept(b"you");
    a.handle_input(&take(&mut b));
    b.handle_input(&take(&mut a));
    assert_eq!(established(a.poll()).peer_private_data, b"you");
    assert_eq!(established(b.poll()).peer_private_data, b"me");
}

#[test]
fn a_responder_with_another_key_is_found_out_by_the_initiator() {
    let now = Instant::now();
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(2)), b"you", now, T);
    b.handle_input(&take(&mut a));
    a.handle_input(&take(&mut b));
    assert!(a.pending_output().is_empty(), "no proof for a stranger");
    unauthenticated(a.poll(), proof::BAD_REPLY);
    // The responder hears nothing more; the initiator's close ends it.
    b.handle_closed();
    assert!(matches!(b.poll(), Outcome::Failed(VerbsError::PeerClosed)));
}

/// A stranger replays a captured Request and the proof that followed it to a responder: the
/// responder's fresh nonce makes the old proof worthless.
#[test]
fn a_replayed_request_and_proof_fail() {
    let now = Instant::now();
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    let (request, _, proof) = exchange(&mut a, &mut b);
    established(b.poll());
    let mut again = Startup::responder(&config(Some(1)), b"you", now, T);
    again.handle_input(&request);
    assert!(!again.pending_output().is_empty(), "the Reply is sent");
    take(&mut again);
    again.handle_input(&proof);
    unauthenticated(again.poll(), proof::BAD_PROOF);
}

/// A replayed Reply (to a new Request) is refused by the initiator: its nonce is fresh.
#[test]
fn a_replayed_reply_fails() {
    let now = Instant::now();
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    let (_, reply, _) = exchange(&mut a, &mut b);
    let mut again = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    take(&mut again);
    again.handle_input(&reply);
    unauthenticated(again.poll(), proof::BAD_REPLY);
}

/// Every flipped bit of the proof frame fails the responder (the frame's own parse, or the
/// proof's check).
#[test]
fn every_altered_bit_of_the_proof_fails() {
    let now = Instant::now();
    let (mut a, mut b) = fixed(now);
    let (request, _, proof) = exchange(&mut a, &mut b);
    established(b.poll());
    for i in 0..proof.len() * 8 {
        let (_, mut c) = fixed(now);
        c.handle_input(&request);
        take(&mut c);
        let mut p = proof.clone();
        p[i / 8] ^= 1 << (i % 8);
        c.handle_input(&p);
        assert!(matches!(c.poll(), Outcome::Failed(_)), "bit {i}");
    }
}

/// Every flipped bit of a Reply to the initiator's own Request fails it: the proof covers the
/// flags, the revision, IRD/ORD, the private data, the nonce, and is itself checked.
#[test]
fn every_altered_bit_of_the_reply_fails() {
    let now = Instant::now();
    let (mut a, mut b) = fixed(now);
    let (_, reply, _) = exchange(&mut a, &mut b);
    established(a.poll());
    for i in 0..reply.len() * 8 {
        let (mut a, _) = fixed(now);
        take(&mut a);
        let mut r = reply.clone();
        r[i / 8] ^= 1 << (i % 8);
        a.handle_input(&r);
        // A longer PD_Length leaves the frame incomplete: the peer's close ends it.
        a.handle_closed();
        assert!(matches!(a.poll(), Outcome::Failed(_)), "bit {i}");
    }
}

#[test]
fn an_end_not_in_authenticated_mode_fails_against_one_that_is() {
    let now = Instant::now();
    // An initiator without a key and short private data: no nonce, refused at once.
    let mut a = Startup::initiator(&config(None), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    b.handle_input(&take(&mut a));
    // Refused with a rejecting Reply; failed once it is out.
    let rejection = take(&mut b);
    unauthenticated(b.poll(), proof::NO_NONCE);
    a.handle_input(&rejection);
    assert!(matches!(
        a.poll(),
        Outcome::Failed(VerbsError::Rejected { .. })
    ));
    // With private data long enough to pass for a nonce: it settles (it checks nothing) and
    // its stream is not a proof.
    let mut a = Startup::initiator(&config(None), &[9; 40], now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    b.handle_input(&take(&mut a));
    a.handle_input(&take(&mut b));
    established(a.poll());
    b.handle_input(&[0u8; PROOF_FRAME_LEN]);
    unauthenticated(b.poll(), proof::BAD_PROOF);
    // A responder without a key: its Reply proves nothing.
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(None), b"you", now, T);
    b.handle_input(&take(&mut a));
    a.handle_input(&take(&mut b));
    unauthenticated(a.poll(), proof::BAD_REPLY);
}

#[test]
fn markers_are_refused_in_authenticated_mode() {
    let now = Instant::now();
    let mut marked = config(Some(1));
    marked.markers = true;
    let mut a = Startup::initiator(&marked, b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    b.handle_input(&take(&mut a));
    let rejection = take(&mut b);
    unauthenticated(b.poll(), proof::MARKERS);
    a.handle_input(&rejection);
    assert!(matches!(a.poll(), Outcome::Failed(_)));
}

#[test]
fn a_responder_that_never_gets_the_proof_fails_at_the_deadline() {
    let now = Instant::now();
    let mut a = Startup::initiator(&config(Some(1)), b"me", now, T).unwrap();
    let mut b = Startup::responder(&config(Some(1)), b"you", now, T);
    b.handle_input(&take(&mut a));
    take(&mut b);
    b.handle_input(&[0u8; PROOF_FRAME_LEN - 1]);
    b.handle_timeout(now + T / 2);
    assert!(matches!(b.poll(), Outcome::Pending));
    b.handle_timeout(now + T);
    assert!(matches!(b.poll(), Outcome::Failed(VerbsError::Timeout)));
}

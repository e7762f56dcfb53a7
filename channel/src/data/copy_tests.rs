//! Copied and injected sends: when they complete, and how many bytes of copies are held.

use std::time::{Duration, Instant};

use super::*;
use crate::params::Config;
use crate::raw::mem::UserMem;

use super::tests::*;

#[test]
fn an_inject_above_the_eager_size_is_copied_at_once() {
    // The caller may reuse an injected buffer as soon as the call returns, so an inject larger
    // than the eager size must not go by rendezvous, which reads the buffer later.
    let (a, b) = pair_with(Config {
        eager_size: 1024,
        ..Config::default()
    });
    let want = pattern(crate::info::INJECT_SIZE, 5);
    let (mem, backing) = UserMem::owned(want.clone());
    let inject = |mem| SendArgs {
        kind: Kind::Tagged,
        dest: 1,
        mem,
        tag: 12,
        data: None,
        context: 0,
        flags: FI_INJECT | INJECT_CALL,
    };
    a.ep.send(inject(mem)).unwrap();
    backing.lock().fill(0xEE);
    let buf = recv(&b, 0, Kind::Tagged, 12, want.len(), 90);
    let c = ok(next(&b, &a));
    assert_eq!((c.op_context, c.tag, c.len), (90, 12, want.len()));
    assert!(*buf.lock() == want, "the receiver got the reused buffer");
    let (big, _) = UserMem::owned(vec![0; crate::info::INJECT_SIZE + 1]);
    assert_eq!(a.ep.send(inject(big)).unwrap_err(), Errno::INVAL);
}

#[test]
fn copies_held_for_a_peer_that_does_not_answer_are_bounded_in_bytes() {
    let eager = Config::default().eager_size;
    copies_bounded(COPIED_MAX, eager);
    copies_bounded(budget::MIN, eager);
    // Short messages, which the queue pair copies behind their header.
    copies_bounded(budget::MIN, 4096);
}

/// Copied sends complete at once; what the peer has not acknowledged stays with us. Past the
/// budget's share for copies a send is refused with FI_EAGAIN (MPI retries it), not queued
/// without end.
fn copies_bounded(total: usize, n: usize) {
    let copied_max = Budget::new(total).copies;
    let (a, b) = pair_with(Config {
        mem_budget: total,
        ..Config::default()
    });
    b.ep.shutdown();
    drop(b);
    let most = copied_max / n + 1;
    let mut sent = 0;
    let refused = loop {
        let (mem, _) = UserMem::owned(pattern(n, sent as u8));
        match a.ep.send(SendArgs {
            kind: Kind::Tagged,
            dest: 1,
            mem,
            tag: 4,
            data: None,
            context: sent,
            flags: 0,
        }) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(
            sent <= most,
            "{sent} sends of {n} B taken for a silent peer"
        );
    };
    assert_eq!(refused, Errno::AGAIN);
    assert!(
        sent * n >= copied_max / 2,
        "refused after only {sent} sends"
    );
    let held = a.ep.with_data(|d| d.memory().queue_pair.total());
    assert!(
        held <= copied_max + (8 << 20),
        "the queue pair holds {held} B"
    );
}

#[test]
fn an_unacknowledged_inject_keeps_the_endpoint_busy() {
    // An inject completes once copied and is posted without a completion of its own; the
    // linger at close must still wait for its acknowledgement, or a rank's last messages
    // could vanish with it (MPICH does no barrier at finalize for unknown providers).
    let (a, b) = pair();
    b.ep.shutdown();
    drop(b);
    let (mem, _) = UserMem::owned(pattern(64, 1));
    a.ep.send(SendArgs {
        kind: Kind::Tagged,
        dest: 1,
        mem,
        tag: 3,
        data: None,
        context: 0,
        flags: FI_INJECT | INJECT_CALL,
    })
    .unwrap();
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        let _ = a.cq.read(0, |_, _| ());
        assert!(
            !a.ep.with_data(|d| d.idle()),
            "an unacknowledged inject was forgotten"
        );
    }
}

#[test]
fn a_copied_send_completes_at_once_unless_asked_to_wait_for_the_peer() {
    // A peer that never answers: only a send asked for no completion level completes (its
    // bytes are copied and kept for the queue pair); one asked for the peer's acknowledgement
    // (FI_TRANSMIT_COMPLETE) or its placement (FI_DELIVERY_COMPLETE) waits.
    let (a, b) = pair();
    b.ep.shutdown();
    drop(b);
    for (i, level) in [0, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE]
        .into_iter()
        .enumerate()
    {
        let (mem, backing) = UserMem::owned(pattern(4096, i as u8));
        a.ep.send(SendArgs {
            kind: Kind::Tagged,
            dest: 1,
            mem,
            tag: 7,
            data: None,
            context: 500 + i,
            flags: FI_COMPLETION | level,
        })
        .unwrap();
        backing.lock().fill(0);
    }
    let mut done = Vec::new();
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        let _ = a.cq.read(8, |_, c| done.push(c.op_context));
    }
    assert_eq!(
        done,
        [500],
        "only the send that asked for no level completed"
    );
    assert!(
        !a.ep.with_data(|d| d.idle()),
        "the copied send's bytes were forgotten before an acknowledgement"
    );
}

/// FI_INJECT in a `*msg` call's flags means only that the buffer is copied: the send still
/// completes. An `fi_inject*` call (INJECT_CALL) generates no completion.
#[test]
fn an_injected_send_completes_unless_it_came_from_an_inject_call() {
    let (a, b) = pair();
    for (ctx, flags) in [
        (61, FI_INJECT | FI_COMPLETION),
        (62, FI_INJECT | INJECT_CALL),
    ] {
        let (mem, _) = UserMem::owned(pattern(100, ctx as u8));
        a.ep.send(SendArgs {
            kind: Kind::Tagged,
            dest: 1,
            mem,
            tag: ctx as u64,
            data: None,
            context: ctx,
            flags,
        })
        .unwrap();
    }
    for ctx in [61u64, 62] {
        let buf = recv(&b, 0, Kind::Tagged, ctx, 100, 0);
        assert_eq!(ok(next(&b, &a)).tag, ctx);
        assert!(*buf.lock() == pattern(100, ctx as u8));
    }
    let mut done = Vec::new();
    let until = Instant::now() + Duration::from_millis(100);
    while Instant::now() < until {
        let _ = a.cq.read(8, |_, c| done.push(c.op_context));
        let _ = b.cq.read(0, |_, _| ());
    }
    assert_eq!(
        done,
        [61],
        "the *msg inject completes, the inject call does not"
    );
}

#[test]
fn a_copied_send_its_peer_never_acknowledges_fails_without_a_context() {
    // The caller heard of these sends when they were copied; when the peer never
    // acknowledges them the failure still reaches it, as an error with no context (libfabric's
    // way for operations that had no completion), within the peer timeout. Without it, a rank
    // whose peer cannot hear it (another job key) waits for an answer forever.
    let (a, b) = pair_with_peer_timeout(Duration::from_millis(300));
    b.ep.shutdown();
    drop(b);
    let started = Instant::now();
    for (ctx, flags) in [(0, FI_INJECT | INJECT_CALL), (77, FI_COMPLETION)] {
        let (mem, _) = UserMem::owned(pattern(64, 2));
        a.ep.send(SendArgs {
            kind: Kind::Tagged,
            dest: 1,
            mem,
            tag: 3,
            data: None,
            context: ctx,
            flags,
        })
        .unwrap();
    }
    let (mut done, mut errors) = (Vec::new(), Vec::new());
    let deadline = started + Duration::from_secs(10);
    while errors.len() < 2 {
        match a.cq.read(8, |_, c| done.push(c.op_context)) {
            Err(e) if e.0 == FI_EAVAIL => errors.push(a.cq.read_err().unwrap()),
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "copied sends to a peer that is gone never failed: {errors:?}"
        );
    }
    assert_eq!(done, [77], "the buffered send completed when it was copied");
    for e in &errors {
        assert_eq!(e.err, Errno(FI_EIO as u32), "{e:?}");
        assert_eq!(e.completion.op_context, 0, "{e:?}");
        assert_eq!(e.completion.flags, FI_SEND | FI_TAGGED, "{e:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(a.ep.data_stats().failed_sends, 2);
    // Nothing more: each send failed once.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        if let Err(e) = a.cq.read(8, |_, c| panic!("completion {c:?}")) {
            assert_ne!(e.0, FI_EAVAIL, "{:?}", a.cq.read_err());
        }
    }
}

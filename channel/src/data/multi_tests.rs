//! FI_MULTI_RECV buffers holding rendezvous messages: the buffer goes back to the application
//! (FI_MULTI_RECV, or its cancellation) only after the last message placed in it is complete.

use super::tests::{next, ok, pair_with, pattern, send, wait_rendezvous, Got, Side};
use super::*;
use crate::params::Config;
use crate::raw::mem::UserMem;

const BUF: usize = 300 * 1024;
const LONG: usize = 280_000;
const SHORT: usize = 16_000;
const CTX: usize = 0x5151;

/// A pair whose rendezvous messages send nothing before the CTS, so that their data comes a
/// round trip after the eager messages sent behind them.
fn pair_without_pushes() -> (Side, Side) {
    pair_with(Config {
        push_size: 0,
        ..Config::default()
    })
}

fn post_multi(s: &Side) -> Arc<parking_lot::Mutex<Vec<u8>>> {
    let (mem, buf) = UserMem::owned(vec![0; BUF]);
    s.ep.recv(RecvArgs {
        kind: Kind::Msg,
        src: FI_ADDR_UNSPEC,
        mem,
        tag: 0,
        ignore: 0,
        context: CTX,
        flags: FI_COMPLETION | FI_MULTI_RECV,
    })
    .unwrap();
    buf
}

#[test]
fn a_buffer_filled_while_a_rendezvous_arrives_is_released_with_its_last_message() {
    let (a, b) = pair_without_pushes();
    let buf = post_multi(&b);
    let long = pattern(LONG, 1);
    let short = pattern(SHORT, 2);
    // The long message takes offset 0 and leaves 27 200 bytes; the short one, behind it,
    // leaves less than FI_OPT_MIN_MULTI_RECV (16 KiB) and so releases the buffer, while the
    // long one's data is still to come.
    send(&a, 1, Kind::Msg, 0, long.clone(), 1);
    send(&a, 1, Kind::Msg, 0, short.clone(), 2);
    let mut got = Vec::new();
    while got.len() < 2 {
        let c = ok(next(&b, &a));
        assert_eq!(c.op_context, CTX);
        let released = c.flags & FI_MULTI_RECV != 0;
        if released {
            // The application may now reuse the buffer: both messages must be in it.
            let v = buf.lock();
            assert!(
                v[..LONG] == long[..],
                "the long message is not complete at release"
            );
            assert!(v[LONG..LONG + SHORT] == short[..]);
        }
        got.push((c.len, released));
    }
    assert_eq!(
        got,
        [(SHORT, false), (LONG, true)],
        "release before the last message"
    );
}

#[test]
fn a_buffer_cancelled_while_a_rendezvous_arrives_is_handed_back_after_it() {
    let (a, b) = pair_without_pushes();
    // A sends its chunks only when the test polls it (once the pair's sessions are up): on a
    // loaded machine its progress thread could send them all, and B take them, before B is
    // seen waiting for them.
    let warm = super::tests::recv(&b, 0, Kind::Tagged, 99, 1, 77);
    send(&a, 1, Kind::Tagged, 99, vec![5], 78);
    assert_eq!(ok(next(&b, &a)).op_context, 77);
    assert_eq!(ok(next(&a, &b)).op_context, 78);
    assert_eq!(*warm.lock(), [5]);
    a.ep.stop_progress_thread();
    let buf = post_multi(&b);
    let long = pattern(LONG, 3);
    send(&a, 1, Kind::Msg, 0, long.clone(), 1);
    // B binds the message (and answers the RTS); A has not read the answer yet.
    wait_rendezvous(&b, 1);
    b.ep.cancel(CTX).unwrap();
    let c = ok(next(&b, &a));
    assert_eq!(
        (c.op_context, c.len, c.flags & FI_MULTI_RECV),
        (CTX, LONG, 0)
    );
    assert!(buf.lock()[..LONG] == long[..]);
    match next(&b, &a) {
        Got::Err(e) => {
            assert_eq!((e.err, e.completion.op_context), (Errno::CANCELED, CTX));
            assert_ne!(e.completion.flags & FI_MULTI_RECV, 0);
        }
        Got::Ok(c) => panic!("a second completion instead of the cancellation: {c:?}"),
    }
}

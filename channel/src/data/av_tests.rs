//! The peer table follows the AV: a send finds its peer by handle, a message's sender is
//! known by its handle, and both are looked up again once the AV removes or remaps a handle.

use super::*;
use crate::params::Config;

use super::tests::*;

/// One tagged message from `from` to handle `dest`, received at `to`: the source handle its
/// completion gives, every byte checked.
fn exchange(from: &Side, dest: u64, to: &Side, tag: u64) -> Option<u64> {
    send(from, dest, Kind::Tagged, tag, pattern(100, tag as u8), 1);
    let got = recv(to, FI_ADDR_UNSPEC, Kind::Tagged, tag, 100, 2);
    let c = ok(next(to, from));
    assert_eq!(c.op_context, 2);
    assert_eq!(c.tag, tag);
    assert!(*got.lock() == pattern(100, tag as u8));
    assert_eq!(ok(next(from, to)).op_context, 1);
    c.src
}

#[test]
fn handles_are_looked_up_again_after_the_av_removes_or_remaps_them() {
    let ((a, aav), (b, bav)) = pair_and_avs(Config::default());
    assert_eq!(exchange(&a, 1, &b, 1), Some(0));
    assert_eq!(exchange(&a, 1, &b, 2), Some(0), "the remembered handle");

    // B's AV forgets A and takes it again under a new handle: A's messages come from it.
    bav.remove(&[0], 0).unwrap();
    let again = bav.insert(&a.ep.name().encode(), 0).unwrap();
    assert_eq!(again.handles, vec![2]);
    assert_eq!(exchange(&a, 1, &b, 3), Some(2));
    // And B sends to A by the new handle; the removed one is refused.
    assert_eq!(exchange(&b, 2, &a, 4), Some(1));
    let (mem, _) = crate::raw::mem::UserMem::owned(vec![0; 8]);
    let to_removed = b.ep.send(SendArgs {
        kind: Kind::Tagged,
        dest: 0,
        mem,
        tag: 5,
        data: None,
        context: 9,
        flags: FI_COMPLETION,
    });
    assert_eq!(to_removed, Err(Errno::INVAL));

    // A's AV forgets B after A sent to it: the send the peer table would have routed fails.
    aav.remove(&[1], 0).unwrap();
    let (mem, _) = crate::raw::mem::UserMem::owned(vec![0; 8]);
    let gone = a.ep.send(SendArgs {
        kind: Kind::Tagged,
        dest: 1,
        mem,
        tag: 6,
        data: None,
        context: 9,
        flags: FI_COMPLETION,
    });
    assert_eq!(gone, Err(Errno::INVAL));
}

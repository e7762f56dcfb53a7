//! RMA between two endpoints on loopback: every byte written and read back checked, and
//! refused accesses.

use std::time::{Duration, Instant};

use super::tests::{
    next, ok, pair, pair_at_ethernet_datagrams, pair_with_peer_timeout, pattern, wait_idle, Got,
    Side,
};
use super::*;
use crate::raw::mem::UserMem;

const KEY: u64 = 1 << 63 | 0x2a;

fn rma(s: &Side, write: bool, mem: UserMem, addr: u64, key: u64, ctx: usize, flags: u64) {
    s.ep.rma(
        write,
        RmaArgs {
            dest: 1,
            mem,
            addr,
            key,
            context: ctx,
            flags,
        },
    )
    .unwrap();
}

/// Registers `len` zero bytes of B's under `key`; returns what they hold.
fn region(b: &Side, key: u64, len: usize, access: u64) -> Arc<parking_lot::Mutex<Vec<u8>>> {
    let (mem, shown) = UserMem::owned(vec![0; len]);
    b.ep.domain.mrs.insert(key, mem, access).unwrap();
    shown
}

fn expect_rma(g: Got, dir: u64, ctx: usize) {
    let c = ok(g);
    assert_eq!((c.flags, c.op_context), (FI_RMA | dir, ctx));
}

fn expect_eacces(s: &Side, other: &Side, ctx: usize) {
    match next(s, other) {
        Got::Err(e) => {
            assert_eq!(e.err, Errno::ACCES, "{e:?}");
            assert_eq!(e.completion.op_context, ctx);
        }
        Got::Ok(c) => panic!("completed: {c:?}"),
    }
}

const SIZES: [usize; 8] = [0, 1, 100, 32768, 32769, CHUNK, CHUNK + 1, 300_000];

fn writes_and_reads_intact((a, b): (Side, Side)) {
    let span: usize = SIZES.iter().map(|n| n + 3).sum();
    let shown = region(&b, KEY, span, FI_REMOTE_READ | FI_REMOTE_WRITE);
    let mut at = 0;
    for (i, &n) in SIZES.iter().enumerate() {
        let (mem, _) = UserMem::owned(pattern(n, i as u8));
        // Unaligned offsets, and a gap after each that nothing may touch.
        rma(&a, true, mem, at as u64 + 1, KEY, 10 + i, FI_COMPLETION);
        expect_rma(next(&a, &b), FI_WRITE, 10 + i);
        let v = shown.lock();
        assert_eq!(
            &v[at + 1..at + 1 + n],
            &pattern(n, i as u8)[..],
            "write of {n}"
        );
        assert_eq!(
            (v[at], v[at + 1 + n]),
            (0, 0),
            "bytes around the write of {n}"
        );
        drop(v);
        at += n + 3;
    }
    // Read every range back, all at once.
    let mut reads = vec![];
    at = 0;
    for (i, &n) in SIZES.iter().enumerate() {
        let (mem, got) = UserMem::owned(vec![0xEE; n]);
        rma(&a, false, mem, at as u64 + 1, KEY, 100 + i, FI_COMPLETION);
        reads.push(got);
        at += n + 3;
    }
    let mut done = vec![false; SIZES.len()];
    for _ in SIZES {
        let c = ok(next(&a, &b));
        assert_eq!(c.flags, FI_RMA | FI_READ);
        done[c.op_context - 100] = true;
    }
    assert!(done.iter().all(|&d| d));
    for (i, &n) in SIZES.iter().enumerate() {
        assert_eq!(*reads[i].lock(), pattern(n, i as u8), "read of {n}");
    }
    let st = b.ep.data_stats();
    assert_eq!(
        (st.rma_writes_in >= SIZES.len() as u64, st.rma_reads_in),
        (true, SIZES.len() as u64)
    );
    assert_eq!(st.rma_refused, 0);
}

#[test]
fn writes_and_reads_of_every_size_arrive_intact() {
    writes_and_reads_intact(pair());
}

#[test]
fn writes_and_reads_of_every_size_arrive_intact_at_ethernet_datagrams() {
    writes_and_reads_intact(pair_at_ethernet_datagrams());
}

/// A peer reading a large region queues one entry at the target, not one per chunk: the
/// target's backlog (which bounds its own sends) stays short while the answer goes out.
#[test]
fn a_large_read_takes_one_backlog_entry_at_its_target() {
    let (a, b) = pair();
    let n = 200 * CHUNK + 7;
    let shown = region(&b, KEY, n, FI_REMOTE_READ);
    shown.lock().copy_from_slice(&pattern(n, 9));
    let (mem, got) = UserMem::owned(vec![0; n]);
    rma(&a, false, mem, 0, KEY, 5, FI_COMPLETION);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut longest = 0;
    let mut done = None;
    while done.is_none() {
        assert!(
            Instant::now() < deadline,
            "the read did not complete within 10 s"
        );
        let _ = a.cq.read(1, |_, c| done = Some(*c));
        longest = longest.max(b.ep.with_data(|d| {
            d.progress();
            d.backlog_len()
        }));
    }
    expect_rma(Got::Ok(done.unwrap()), FI_READ, 5);
    assert_eq!(*got.lock(), pattern(n, 9));
    assert!(longest <= 2, "the target's backlog held {longest} entries");
    assert_eq!(b.ep.data_stats().rma_reads_in, 1);
    // The chunks' copies came from the send-buffer pool and went back to it once
    // acknowledged: freed instead, a window of them hands the heap's top back to the kernel,
    // and the next read pays a page fault per 4 KiB.
    wait_idle(&b, &a, "the read's chunks");
    let spare = b.ep.with_data(|d| d.memory().send_buffers);
    assert!(spare >= CHUNK, "{spare} bytes of spare send buffers");
}

#[test]
fn an_injected_write_lands_without_a_completion_and_its_buffer_is_free_at_once() {
    let (a, b) = pair();
    let shown = region(&b, KEY, 64, 0);
    let (mem, src) = UserMem::owned(pattern(40, 3));
    rma(&a, true, mem, 8, KEY, 0, FI_INJECT | INJECT_CALL);
    src.lock().fill(0); // the caller's again
    let deadline = Instant::now() + Duration::from_secs(10);
    while shown.lock()[8..48] != pattern(40, 3)[..] {
        let _ = a.cq.read(1, |_, c| panic!("an inject completed: {c:?}"));
        let _ = b.cq.read(0, |_, _| ());
        assert!(Instant::now() < deadline, "the write never landed");
    }
    let big = UserMem::owned(vec![0; INJECT_SIZE + 1]).0;
    let args = |mem| RmaArgs {
        dest: 1,
        mem,
        addr: 0,
        key: KEY,
        context: 0,
        flags: FI_INJECT | INJECT_CALL,
    };
    assert_eq!(a.ep.rma(true, args(big)), Err(Errno::INVAL));
    let small = UserMem::owned(vec![0; 8]).0;
    assert_eq!(
        a.ep.rma(false, args(small)),
        Err(Errno::INVAL),
        "no injected reads"
    );
}

#[test]
fn refused_accesses_are_counted_and_reads_fail_with_eacces() {
    let (a, b) = pair();
    let shown = region(&b, KEY, 1000, FI_REMOTE_READ);
    // Out of bounds, unknown key, and a region with no remote write: nothing is touched.
    for (addr, key, ctx) in [(990, KEY, 1), (0, KEY + 1, 2)] {
        let (mem, got) = UserMem::owned(vec![0xEE; 20]);
        rma(&a, false, mem, addr, key, ctx, FI_COMPLETION);
        expect_eacces(&a, &b, ctx);
        assert_eq!(*got.lock(), vec![0xEE; 20], "a refused read writes nothing");
    }
    // Writes into a region without remote write: one datagram, several chunks, none at all.
    for (n, ctx) in [(20, 3), (3 * CHUNK + 5, 4), (0, 5)] {
        let (mem, _) = UserMem::owned(pattern(n, 1));
        rma(&a, true, mem, 0, KEY, ctx, FI_COMPLETION);
        expect_eacces(&a, &b, ctx);
    }
    // Two reads, then writes of 1, 4 and 1 messages.
    assert_eq!(b.ep.data_stats().rma_refused, 2 + 1 + 4 + 1);
    assert_eq!(
        *shown.lock(),
        vec![0; 1000],
        "a refused write writes nothing"
    );
    // A region closed while a read is under way: the read fails, it does not hang.
    assert!(b.ep.domain.mrs.remove(KEY));
    let (mem, _) = UserMem::owned(vec![0; 10]);
    rma(&a, false, mem, 0, KEY, 6, FI_COMPLETION);
    expect_eacces(&a, &b, 6);
    // A range past the end of the address space is refused before anything is sent.
    let wraps = RmaArgs {
        dest: 1,
        mem: UserMem::owned(vec![0; 2 * CHUNK]).0,
        addr: u64::MAX - 10,
        key: KEY,
        context: 0,
        flags: 0,
    };
    assert_eq!(a.ep.rma(true, wraps), Err(Errno::INVAL));
}

#[test]
fn rma_to_the_endpoint_itself_lands_and_is_checked() {
    let (a, b) = pair();
    let shown = region(&b, KEY, 100, FI_REMOTE_READ | FI_REMOTE_WRITE);
    // A itself (handle 0): the region is the domain's, which A shares with B here.
    let args = |mem, addr, ctx| RmaArgs {
        dest: 0,
        mem,
        addr,
        key: KEY,
        context: ctx,
        flags: FI_COMPLETION,
    };
    a.ep.rma(true, args(UserMem::owned(pattern(30, 4)).0, 10, 1))
        .unwrap();
    expect_rma(next(&a, &b), FI_WRITE, 1);
    assert_eq!(&shown.lock()[10..40], &pattern(30, 4)[..]);
    let (mem, got) = UserMem::owned(vec![0; 30]);
    a.ep.rma(false, args(mem, 10, 2)).unwrap();
    expect_rma(next(&a, &b), FI_READ, 2);
    assert_eq!(*got.lock(), pattern(30, 4));
    a.ep.rma(false, args(UserMem::owned(vec![0; 30]).0, 90, 3))
        .unwrap();
    expect_eacces(&a, &b, 3);
}

#[test]
fn a_read_fails_when_its_target_is_gone() {
    let (a, b) = pair_with_peer_timeout(Duration::from_millis(300));
    region(&b, KEY, 1 << 20, 0);
    b.ep.shutdown();
    let (mem, _) = UserMem::owned(vec![0; 1 << 20]);
    rma(&a, false, mem, 0, KEY, 7, FI_COMPLETION);
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        if let Err(e) = a.cq.read(1, |_, c| panic!("completion {c:?}")) {
            if e.0 == FI_EAVAIL {
                break a.cq.read_err().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "the read never failed");
    };
    assert_eq!(
        (err.err, err.completion.op_context),
        (Errno(FI_EIO as u32), 7)
    );
    assert_eq!(err.completion.flags, FI_RMA | FI_READ);
}

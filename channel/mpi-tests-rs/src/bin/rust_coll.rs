//! Collectives through rsmpi, every element checked: barrier (a late rank holds the others
//! back), broadcast, reduce and allreduce (i64 sum/max/min, u64 bxor, f64 sum; up to 5000 elements), alltoall,
//! alltoallv (random counts with zeros; the gaps between blocks stay untouched), allgather,
//! gather with varying counts and scatter. Every root is used. They run on the world, then on
//! split halves whose ranks are reversed.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use mpi_tests_rs::{filled, mix64, msg_seed, Digest, Test};

const GUARD: u8 = 0xA5;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn barrier(t: &Test, c: &SimpleCommunicator, what: &str) {
    t.phase(&format!("{what}: 30 quick barriers"));
    for i in 0..30 {
        t.waiting(&format!("barrier {i}"));
        c.barrier();
    }
    // No rank may leave before the late one has entered (one clock: the ranks share a kernel).
    for late in 0..c.size().min(3) {
        t.phase(&format!("{what}: barrier with rank {late} 150 ms late"));
        let mut entered = [0u64];
        if c.rank() == late {
            t.waiting("nothing: this rank is late on purpose (150 ms)");
            std::thread::sleep(Duration::from_millis(150));
            entered[0] = now_us();
        }
        t.waiting("barrier with a late rank");
        c.barrier();
        let left = now_us();
        c.process_at_rank(late).broadcast_into(&mut entered[..]);
        t.check(left >= entered[0], || {
            format!(
                "left the barrier {} us before rank {late} entered it",
                entered[0] - left
            )
        });
    }
}

fn bcast(t: &Test, c: &SimpleCommunicator, d: &mut Digest, what: &str) {
    for root in 0..c.size() {
        for (s, n) in [0usize, 1, 100, 4097, 70_000, 300_000]
            .into_iter()
            .enumerate()
        {
            t.phase(&format!("{what}: broadcast of {n} bytes from {root}"));
            let mut buf = if c.rank() == root {
                t.msg(70, root, -1, s as u64, n)
            } else {
                filled(n, GUARD)
            };
            t.waiting(&format!("broadcast of {n} bytes from {root}"));
            c.process_at_rank(root).broadcast_into(&mut buf[..]);
            t.msg_check(&buf, 70, root, -1, s as u64, "broadcast");
            d.add(root, -1, &buf);
        }
    }
}

/// A reduction: its name, MPI's operation, and the same on two numbers.
type Op = (&'static str, SystemOperation, fn(i64, i64) -> i64);

/// Element `i` of rank `r`'s contribution to reduction `k`: up to 2^40 in magnitude, so that
/// sums over 8 ranks are exact in i64 and in f64.
fn value(t: &Test, k: u64, r: i32, i: usize) -> i64 {
    (mix64(msg_seed(t.seed, 80 + k, r, 0, i as u64)) % (1 << 41)) as i64 - (1 << 40)
}

fn reductions(t: &Test, c: &SimpleCommunicator, d: &mut Digest, what: &str) {
    let (me, size) = (c.rank(), c.size());
    for (k, n) in [1usize, 7, 1000, 5000].into_iter().enumerate() {
        let k = k as u64;
        let mine: Vec<i64> = (0..n).map(|i| value(t, k, me, i)).collect();
        let col = |i: usize| (0..size).map(move |r| value(t, k, r, i));
        let ops: [Op; 3] = [
            ("sum", SystemOperation::sum(), |a, b| a + b),
            ("max", SystemOperation::max(), |a, b| a.max(b)),
            ("min", SystemOperation::min(), |a, b| a.min(b)),
        ];
        for (name, op, f) in ops {
            let want: Vec<i64> = (0..n).map(|i| col(i).reduce(f).unwrap()).collect();
            for root in 0..size {
                t.phase(&format!("{what}: reduce ({name}) of {n} i64 at {root}"));
                t.waiting(&format!("reduce ({name}) at {root}"));
                if me == root {
                    let mut got = vec![0i64; n];
                    c.process_at_rank(root)
                        .reduce_into_root(&mine[..], &mut got[..], op);
                    t.check_slice(&format!("reduce ({name}) at {root}"), &want, &got);
                    d.add_words(root, -2, &got);
                } else {
                    c.process_at_rank(root).reduce_into(&mine[..], op);
                }
            }
            t.phase(&format!("{what}: allreduce ({name}) of {n} i64"));
            let mut got = vec![0i64; n];
            t.waiting(&format!("allreduce ({name})"));
            c.all_reduce_into(&mine[..], &mut got[..], op);
            t.check_slice(&format!("allreduce ({name})"), &want, &got);
            d.add_words(-1, -3, &got);
        }
        t.phase(&format!(
            "{what}: allreduce (bxor) of {n} u64, (sum) of {n} f64"
        ));
        let bits: Vec<u64> = mine.iter().map(|&v| mix64(v as u64)).collect();
        let mut got = vec![0u64; n];
        c.all_reduce_into(&bits[..], &mut got[..], SystemOperation::bitwise_xor());
        let want: Vec<u64> = (0..n)
            .map(|i| col(i).map(|v| mix64(v as u64)).fold(0, |a, b| a ^ b))
            .collect();
        t.check_slice("allreduce (bxor)", &want, &got);
        d.add_words(-1, -4, &got);
        let fl: Vec<f64> = mine.iter().map(|&v| v as f64).collect();
        let mut got = vec![0f64; n];
        c.all_reduce_into(&fl[..], &mut got[..], SystemOperation::sum());
        let want: Vec<f64> = (0..n).map(|i| col(i).sum::<i64>() as f64).collect();
        t.check_slice("allreduce (f64 sum)", &want, &got);
        d.add_words(-1, -5, &got.iter().map(|&x| x as i64).collect::<Vec<_>>());
    }
}

/// Block sizes of alltoallv round `round` from `src` to `dst`: a quarter empty, the rest up to
/// 3000 bytes.
fn block(t: &Test, round: u64, src: i32, dst: i32) -> usize {
    let r = mix64(msg_seed(t.seed, 90 + round, src, dst, 0));
    if r.is_multiple_of(4) {
        0
    } else {
        (r >> 8) as usize % 3001
    }
}

fn exchanges(t: &Test, c: &SimpleCommunicator, d: &mut Digest, what: &str) {
    let (me, size) = (c.rank(), c.size());
    let su = size as usize;
    t.phase(&format!("{what}: alltoall of 1000 bytes per pair"));
    let send: Vec<u8> = (0..size).flat_map(|p| t.msg(100, me, p, 0, 1000)).collect();
    let mut recv = filled(1000 * su, GUARD);
    t.waiting("alltoall");
    c.all_to_all_into(&send[..], &mut recv[..]);
    for p in 0..size {
        let b = &recv[1000 * p as usize..1000 * (p as usize + 1)];
        t.msg_check(b, 100, p, me, 0, "alltoall");
        d.add(p, -6, b);
    }
    for round in 0..3 {
        t.phase(&format!("{what}: alltoallv round {round}"));
        // Gaps of 5 elements before every block, on both sides: what MPI must not touch.
        let layout = |sizes: &[usize]| {
            let mut displs = Vec::with_capacity(su);
            let mut at = 0;
            for &n in sizes {
                at += 5;
                displs.push(at as Count);
                at += n;
            }
            (
                sizes.iter().map(|&n| n as Count).collect::<Vec<_>>(),
                displs,
                at + 5,
            )
        };
        let out_sizes: Vec<usize> = (0..size).map(|p| block(t, round, me, p)).collect();
        let in_sizes: Vec<usize> = (0..size).map(|p| block(t, round, p, me)).collect();
        let (sc, sd, slen) = layout(&out_sizes);
        let (rc, rd, rlen) = layout(&in_sizes);
        let mut sbuf = filled(slen, 0);
        for p in 0..su {
            let m = t.msg(110 + round, me, p as i32, round, out_sizes[p]);
            sbuf[sd[p] as usize..sd[p] as usize + out_sizes[p]].copy_from_slice(&m);
        }
        let mut rbuf = filled(rlen, GUARD);
        {
            let s = Partition::new(&sbuf[..], &sc[..], &sd[..]);
            let mut r = PartitionMut::new(&mut rbuf[..], &rc[..], &rd[..]);
            t.waiting(&format!("alltoallv round {round}"));
            c.all_to_all_varcount_into(&s, &mut r);
        }
        let mut pos = 0;
        for p in 0..su {
            let at = rd[p] as usize;
            t.check(rbuf[pos..at].iter().all(|&b| b == GUARD), || {
                format!("alltoallv: the gap before the block from {p} was written")
            });
            let b = &rbuf[at..at + in_sizes[p]];
            t.msg_check(b, 110 + round, p as i32, me, round, "alltoallv");
            d.add(p as i32, -7, b);
            pos = at + in_sizes[p];
        }
        t.check(rbuf[pos..].iter().all(|&b| b == GUARD), || {
            "alltoallv: the bytes after the last block were written".to_string()
        });
    }
    t.phase(&format!("{what}: allgather of 333 bytes"));
    let mine = t.msg(120, me, -1, 0, 333);
    let mut all = filled(333 * su, GUARD);
    t.waiting("allgather");
    c.all_gather_into(&mine[..], &mut all[..]);
    for p in 0..su {
        let b = &all[333 * p..333 * (p + 1)];
        t.msg_check(b, 120, p as i32, -1, 0, "allgather");
        d.add(p as i32, -8, b);
    }
    for root in 0..size {
        t.phase(&format!(
            "{what}: gather (varying counts) and scatter at {root}"
        ));
        let n_of = |p: i32| block(t, 7 + root as u64, p, root);
        let mine = t.msg(130, me, root, root as u64, n_of(me));
        let proot = c.process_at_rank(root);
        t.waiting(&format!("gatherv at {root}"));
        if me == root {
            let counts: Vec<Count> = (0..size).map(|p| n_of(p) as Count).collect();
            let displs: Vec<Count> = counts
                .iter()
                .scan(0, |a, &n| Some(std::mem::replace(a, *a + n)))
                .collect();
            let mut all = filled(counts.iter().sum::<Count>() as usize, GUARD);
            {
                let mut r = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                proot.gather_varcount_into_root(&mine[..], &mut r);
            }
            for p in 0..su {
                let b = &all[displs[p] as usize..(displs[p] + counts[p]) as usize];
                t.msg_check(b, 130, p as i32, root, root as u64, "gatherv");
                d.add(p as i32, -9, b);
            }
        } else {
            proot.gather_varcount_into(&mine[..]);
        }
        let mut got = filled(500, GUARD);
        t.waiting(&format!("scatter from {root}"));
        if me == root {
            let all: Vec<u8> = (0..size)
                .flat_map(|p| t.msg(140, root, p, 0, 500))
                .collect();
            proot.scatter_into_root(&all[..], &mut got[..]);
        } else {
            proot.scatter_into(&mut got[..]);
        }
        t.msg_check(&got, 140, root, me, 0, "scatter");
        d.add(root, -10, &got);
    }
}

fn all(t: &Test, c: &SimpleCommunicator, d: &mut Digest, what: &str) {
    barrier(t, c, what);
    bcast(t, c, d, what);
    reductions(t, c, d, what);
    exchanges(t, c, d, what);
}

fn main() {
    let t = Test::init("rust_coll");
    let mut d = Digest::default();
    all(&t, &t.world, &mut d, "world");
    // Halves with reversed ranks: collectives on a communicator whose ranks are not the world's.
    t.phase("split");
    let half = t.world.split_by_color_with_key(
        mpi::topology::Color::with_value(t.rank % 2),
        t.size - t.rank,
    );
    let half = half.unwrap_or_else(|| t.fail("split_by_color_with_key gave no communicator"));
    t.check_eq(
        "ranks in my half",
        (t.size + 1 - t.rank % 2) / 2,
        half.size(),
    );
    t.check_eq(
        "my rank in my half",
        (half.size() - 1) - t.rank / 2,
        half.rank(),
    );
    all(&t, &half, &mut d, "split half");
    // Freed before MPI_Finalize, which finish ends with.
    drop(half);
    t.finish(d);
}

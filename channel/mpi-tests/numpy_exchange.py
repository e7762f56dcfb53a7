"""NumPy arrays through mpi4py, every element checked: Send/Recv of buffers, Isend/Irecv
(Waitall, Waitany, Testall), Sendrecv, ANY_SOURCE/ANY_TAG receives with their Status checked
(source, tag, count; per-sender order), then Bcast, Reduce, Allreduce, Allgather, Alltoall,
Alltoallv (counts with zeros; the gaps between blocks stay untouched), Scatter and Gather, at
every root.

The conventions of check.h: MPI_TESTS_WATCHDOG (seconds, default 240), MPI_TESTS_SEED
(default 1), MPI_TESTS_VERBOSE=1; a failed check prints "[numpy_exchange rank R/N pid P] FAIL
line L: ..." and aborts the job with status 1; a hang prints a WATCHDOG line per rank and exits
86; rank 0 ends with "numpy_exchange: checksum ..." (what every rank received, the same over
every transport) and "numpy_exchange: OK".
Run: diwarp run -n 4 -- .venv/bin/python channel/mpi-tests/numpy_exchange.py
"""

import hashlib
import inspect
import os
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

NAME = "numpy_exchange"
SEED = int(os.environ.get("MPI_TESTS_SEED", "1"))
VERBOSE = os.environ.get("MPI_TESTS_VERBOSE") == "1"
WATCHDOG = int(os.environ.get("MPI_TESTS_WATCHDOG", "240"))

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
prefix = f"[{NAME} rank {rank}/{size} pid {os.getpid()}]"
state = {"phase": "MPI initialised", "waiting": ""}
t0 = time.monotonic()


def watchdog():
    time.sleep(WATCHDOG)
    sys.stderr.write(f"{prefix} WATCHDOG: still running after {WATCHDOG} s; phase: "
                     f"{state['phase']}; waiting for: {state['waiting'] or '(nothing recorded)'}\n")
    sys.stderr.flush()
    # The launcher kills every rank as soon as one exits: the others' lines must get out first.
    time.sleep(5)
    os._exit(86)


threading.Thread(target=watchdog, daemon=True).start()


def phase(what):
    state["phase"], state["waiting"] = what, ""
    if VERBOSE and rank == 0:
        sys.stderr.write(f"[{NAME} {time.monotonic() - t0:.2f}s] {what}\n")


def waiting(what):
    state["waiting"] = what


def fail(msg):
    # The line of the test that failed: the first frame outside these helpers.
    line = next((f.lineno for f in inspect.stack()[1:] if f.function not in HELPERS), 0)
    sys.stderr.write(f"{prefix} FAIL line {line}: {msg} [phase: {state['phase']}]\n")
    sys.stderr.flush()
    comm.Abort(1)


HELPERS = {"fail", "check", "check_array", "check_status"}


def check(cond, msg):
    if not cond:
        fail(msg)


def check_array(what, want, got):
    if want.shape != got.shape or want.dtype != got.dtype:
        fail(f"{what}: expected {want.dtype}{want.shape}, received {got.dtype}{got.shape}")
    bad = np.flatnonzero(want != got)
    if bad.size:
        i = bad[0]
        fail(f"{what}: {bad.size} of {want.size} elements differ; the first, element {i}: "
             f"expected {want.flat[i]!r}, received {got.flat[i]!r}")


def check_status(st, what, src, tag, count, dtype):
    got = st.Get_count(MPI.Datatype.fromcode(np.dtype(dtype).char))
    if (st.Get_source(), st.Get_tag(), got) != (src, tag, count):
        fail(f"{what}: expected source {src} tag {tag} {count} elements, received source "
             f"{st.Get_source()} tag {st.Get_tag()} {got} elements")


def data(salt, src, dst, seq, n, dtype):
    """The array naming one message: (seed, salt, src, dst, seq) seed its random elements."""
    rng = np.random.default_rng([SEED, salt, src + 1, dst + 1, seq])
    if np.dtype(dtype).kind == "f":
        return rng.integers(-(1 << 40), 1 << 40, n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def size_of(salt, src, dst, seq):
    """60 % up to 64 elements, some up to 4 Ki, a few up to 40 Ki (rendezvous sizes in bytes)."""
    r = np.random.default_rng([SEED, salt, src + 1, dst + 1, seq, 7]).integers(0, 1 << 30)
    return [r % 65, r % 4097, r % 40961][0 if r % 10 < 6 else 1 if r % 10 < 9 else 2]


# What this rank received: one hash per message, summed, so that the order in which wildcard
# receives matched them does not change it.
digest = {"sum": 0, "messages": 0, "elements": 0}


def got(src, tag, arr):
    h = hashlib.blake2b(np.ascontiguousarray(arr).tobytes(), digest_size=8,
                        key=f"{src}/{tag}/{arr.dtype.str}/{arr.size}".encode())
    digest["sum"] = (digest["sum"] + int.from_bytes(h.digest(), "little")) % (1 << 64)
    digest["messages"] += 1
    digest["elements"] += arr.size


DTYPES = [np.int32, np.float64, np.uint8, np.int64]


def point_to_point():
    peer = rank ^ 1
    if peer < size:
        for seq, n in enumerate([0, 1, 7, 1000, 4097, 70000, 300001]):
            dt = DTYPES[seq % len(DTYPES)]
            tag = 10 + seq
            phase(f"Send/Recv of {n} {np.dtype(dt).name} with {peer}")
            for turn in range(2):
                if (turn == 0) == (rank % 2 == 0):
                    waiting(f"Send to {peer}")
                    comm.Send(data(1, rank, peer, seq, n, dt), dest=peer, tag=tag)
                else:
                    buf = np.full(n + 3, 77, dtype=dt)
                    st = MPI.Status()
                    waiting(f"Recv from {peer}")
                    comm.Recv(buf, source=peer, tag=tag, status=st)
                    check_status(st, "Recv", peer, tag, n, dt)
                    check_array("Recv", data(1, peer, rank, seq, n, dt), buf[:n])
                    check_array("Recv: elements after the message", np.full(3, 77, dtype=dt), buf[n:])
                    got(peer, tag, buf[:n])
            phase(f"Sendrecv of {n} {np.dtype(dt).name} with {peer}")
            buf = np.empty(n, dtype=dt)
            st = MPI.Status()
            waiting(f"Sendrecv with {peer}")
            comm.Sendrecv(data(2, rank, peer, seq, n, dt), dest=peer, sendtag=tag + 100,
                          recvbuf=buf, source=peer, recvtag=tag + 100, status=st)
            check_status(st, "Sendrecv", peer, tag + 100, n, dt)
            check_array("Sendrecv", data(2, rank ^ 1, rank, seq, n, dt), buf)
            got(peer, tag + 100, buf)

    peers = [p for p in range(size) if p != rank]
    for rnd, how in enumerate(["Waitall", "Waitany", "Testall"]):
        phase(f"Isend/Irecv with every peer, completed by {how}")
        salt, tag = 20 + rnd, 30 + rnd
        sizes = {p: size_of(salt, p, rank, rnd) for p in peers}
        bufs = {p: np.full(sizes[p] + 2, -5, dtype=np.int64) for p in peers}
        reqs = [comm.Irecv(bufs[p], source=p, tag=tag) for p in peers]
        out = [data(salt, rank, p, rnd, size_of(salt, rank, p, rnd), np.int64) for p in peers]
        reqs += [comm.Isend(out[i], dest=p, tag=tag) for i, p in enumerate(peers)]
        sts = [MPI.Status() for _ in reqs]
        waiting(f"{how} of {len(reqs)} requests")
        if how == "Waitall":
            MPI.Request.Waitall(reqs, sts)
        elif how == "Waitany":
            for _ in reqs:
                st = MPI.Status()
                i = MPI.Request.Waitany(reqs, st)
                check(i != MPI.UNDEFINED, "Waitany: no active request left")
                sts[i] = st
        else:
            while not MPI.Request.Testall(reqs, sts):
                pass
        for i, p in enumerate(peers):
            n = sizes[p]
            check_status(sts[i], f"Irecv ({how})", p, tag, n, np.int64)
            check_array(f"Irecv ({how})", data(salt, p, rank, rnd, n, np.int64), bufs[p][:n])
            check_array(f"Irecv ({how}): after the message", np.full(2, -5, dtype=np.int64), bufs[p][n:])
            got(p, tag, bufs[p][:n])

    # Wildcards: every rank but the root sends k messages (tags 0, 1, 2 in turn), the root
    # takes them with ANY_SOURCE and ANY_TAG, each its sender's next one.
    k = 30
    for root in sorted({0, size - 1}):
        phase(f"ANY_SOURCE/ANY_TAG at root {root}")
        salt = 40 + root
        if rank != root:
            msgs = [data(salt, rank, root, s, size_of(salt, rank, root, s), np.float64) for s in range(k)]
            reqs = [comm.Isend(m, dest=root, tag=s % 3) for s, m in enumerate(msgs)]
            waiting("Waitall of the sends to the root")
            MPI.Request.Waitall(reqs)
        else:
            nxt = [0] * size
            buf = np.empty(40961, dtype=np.float64)
            for i in range((size - 1) * k):
                st = MPI.Status()
                waiting(f"Recv(ANY_SOURCE, ANY_TAG) {i}")
                comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
                src = st.Get_source()
                check(0 <= src < size and src != root, f"received from {src}")
                seq = nxt[src]
                check(seq < k, f"one message too many from {src}")
                n = size_of(salt, src, root, seq)
                check_status(st, "Recv(ANY_SOURCE, ANY_TAG)", src, seq % 3, n, np.float64)
                check_array("Recv(ANY_SOURCE, ANY_TAG)", data(salt, src, root, seq, n, np.float64), buf[:n])
                got(src, st.Get_tag(), buf[:n])
                nxt[src] += 1
        waiting("barrier after the wildcard receives")
        comm.Barrier()


def collectives():
    for root in range(size):
        for n, dt in [(0, np.int32), (5, np.float64), (33333, np.int64), (100000, np.uint8)]:
            phase(f"Bcast of {n} {np.dtype(dt).name} from {root}")
            buf = data(50, root, -1, n, n, dt) if rank == root else np.zeros(n, dtype=dt)
            waiting(f"Bcast from {root}")
            comm.Bcast(buf, root=root)
            check_array("Bcast", data(50, root, -1, n, n, dt), buf)
            got(root, -1, buf)
    for n in [1, 10, 5000]:
        mine = {dt: data(60, rank, -1, n, n, dt) for dt in (np.int64, np.float64)}
        every = {dt: np.array([data(60, r, -1, n, n, dt) for r in range(size)]) for dt in mine}
        for op, f in [(MPI.SUM, np.sum), (MPI.MAX, np.max), (MPI.MIN, np.min)]:
            for dt in mine:
                want = f(every[dt], axis=0).astype(dt)
                for root in range(size):
                    phase(f"Reduce ({op}) of {n} {np.dtype(dt).name} at {root}")
                    out = np.zeros(n, dtype=dt) if rank == root else None
                    waiting(f"Reduce at {root}")
                    comm.Reduce(mine[dt], out, op=op, root=root)
                    if rank == root:
                        check_array(f"Reduce at {root}", want, out)
                        got(root, -2, out)
                phase(f"Allreduce of {n} {np.dtype(dt).name}")
                out = np.zeros(n, dtype=dt)
                waiting("Allreduce")
                comm.Allreduce(mine[dt], out, op=op)
                check_array("Allreduce", want, out)
                got(-1, -3, out)
        phase(f"Allreduce in place of {n} int64")
        buf = mine[np.int64].copy()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        check_array("Allreduce in place", every[np.int64].sum(axis=0), buf)

    phase("Allgather")
    out = np.zeros((size, 257), dtype=np.int32)
    waiting("Allgather")
    comm.Allgather(data(70, rank, -1, 0, 257, np.int32), out)
    for p in range(size):
        check_array(f"Allgather: block of {p}", data(70, p, -1, 0, 257, np.int32), out[p])
        got(p, -4, out[p])

    phase("Alltoall")
    send = np.array([data(80, rank, p, 0, 100, np.float64) for p in range(size)])
    out = np.zeros_like(send)
    waiting("Alltoall")
    comm.Alltoall(send, out)
    for p in range(size):
        check_array(f"Alltoall: block from {p}", data(80, p, rank, 0, 100, np.float64), out[p])
        got(p, -5, out[p])

    for rnd in range(3):
        phase(f"Alltoallv round {rnd}")

        def count(src, dst):
            c = size_of(90 + rnd, src, dst, 0) % 2000
            return 0 if c % 4 == 0 else c

        def layout(counts):  # a gap of 3 elements before every block and after the last
            displs = [3 * (i + 1) + sum(counts[:i]) for i in range(len(counts))]
            return displs, sum(counts) + 3 * (len(counts) + 1)

        sc = [count(rank, p) for p in range(size)]
        rc = [count(p, rank) for p in range(size)]
        sd, slen = layout(sc)
        rd, rlen = layout(rc)
        send = np.zeros(slen, dtype=np.int32)
        for p in range(size):
            send[sd[p]:sd[p] + sc[p]] = data(100 + rnd, rank, p, rnd, sc[p], np.int32)
        out = np.full(rlen, -9, dtype=np.int32)
        waiting(f"Alltoallv round {rnd}")
        comm.Alltoallv([send, sc, sd, MPI.INT32_T], [out, rc, rd, MPI.INT32_T])
        mask = np.ones(rlen, dtype=bool)
        for p in range(size):
            block = out[rd[p]:rd[p] + rc[p]]
            check_array(f"Alltoallv: block from {p}", data(100 + rnd, p, rank, rnd, rc[p], np.int32), block)
            got(p, -6, block)
            mask[rd[p]:rd[p] + rc[p]] = False
        check((out[mask] == -9).all(), "Alltoallv: the gaps between blocks were written")

    for root in range(size):
        phase(f"Scatter and Gather at {root}")
        send = np.array([data(110, root, p, 0, 64, np.int64) for p in range(size)]) if rank == root else None
        out = np.zeros(64, dtype=np.int64)
        waiting(f"Scatter from {root}")
        comm.Scatter(send, out, root=root)
        check_array(f"Scatter from {root}", data(110, root, rank, 0, 64, np.int64), out)
        got(root, -7, out)
        every = np.zeros((size, 64), dtype=np.int64) if rank == root else None
        waiting(f"Gather at {root}")
        comm.Gather(out * 3 + rank, every, root=root)
        if rank == root:
            for p in range(size):
                check_array(f"Gather at {root}: block of {p}", data(110, root, p, 0, 64, np.int64) * 3 + p, every[p])
                got(p, -8, every[p])


def main():
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    point_to_point()
    collectives()
    phase("finish: gathering digests")
    waiting("gather of the digests at rank 0")
    every = comm.gather((digest["sum"], digest["messages"], digest["elements"]), root=0)
    if rank == 0:
        total = sum(e[0] for e in every) % (1 << 64)
        print(f"{NAME}: checksum {total:016x} over {sum(e[1] for e in every)} messages, "
              f"{sum(e[2] for e in every)} elements received ({size} ranks, seed {SEED})")
    waiting("final barrier")
    comm.Barrier()
    if rank == 0:
        print(f"{NAME}: OK ({time.monotonic() - t0:.2f} s)", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # an MPI error (ERRORS_RETURN) or a bug: the job must not hang
        import traceback
        sys.stderr.write(traceback.format_exc())
        fail(f"{type(e).__name__}: {e}")

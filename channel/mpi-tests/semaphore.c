/* Window atomics and point-to-point interleaved, with pauses that let connections go cold, so
 * that under churn (scripts/mpi-tests --mode churn) peers are promoted and demoted between
 * and during the operations. MPICH carries these atomics as active messages, so a message
 * lost or never completed across a change of path shows as a hang here (issue 43: mpi4py's
 * util.sync Semaphore hung under maximal churn).
 *   1. A semaphore on each rank's window in turn: acquire without blocking (MPI_Fetch_and_op
 *      -1 and MPI_Win_flush; on failure +1 back), hold it (a holders count, fetched and
 *      checked against the semaphore's value), release; the count ends where it began.
 *   2. A mutex by MPI_Compare_and_swap on each rank's window in turn, guarding a plain
 *      read-modify-write (MPI_Get, MPI_Put) of a counter: no update may be lost.
 *   3. MPI_Accumulate(MPI_SUM) and MPI_Fetch_and_op with flushes to every rank, checked.
 *   4. mpi4py's MCS queue lock (below), taken without blocking by all at once (exactly one
 *      wins) and blocking in a queue, guarding a read-modify-write of a count on rank 0.
 * Between operations every rank exchanges checked messages with a neighbour and sometimes
 * sleeps a few milliseconds.
 */
#include "check.h"

enum { ROUNDS = 60, SEM = 0, HOLD = 1, LOCK = 2, COUNT = 3, SUM = 4, CELLS = 5 };

static rng_t rng;
static uint64_t p2p_seq;
static uint8_t *sbuf, *rbuf;

/* Some pauses are longer than the churn settings' idle time: the peer's connection closes. */
static void pause_maybe(void) {
    uint64_t r = rng_below(&rng, 8);
    if (r < 3) usleep((useconds_t)(rng_below(&rng, 15000)));
}

/* A checked exchange with both neighbours at distance d (eager and rendezvous sizes). The
 * wait polls, flushing `w` (in a passive epoch) to myself between tests: Open MPI 4's osc
 * pt2pt serves the others' passive-target operations only inside one-sided calls, and they
 * may be waiting on this rank's window while it waits here (over its own transports too). */
static void exchange(int d, MPI_Win w) {
    static const size_t sizes[] = {0, 8, 100, 4000, 40000, 300000};
    int to = (t_rank + d) % t_size, from = (t_rank + t_size - d) % t_size, tag = (int)(p2p_seq % 7), done = 0;
    size_t n = sizes[p2p_seq % (sizeof sizes / sizeof sizes[0])];
    MPI_Request rq[2];
    MPI_Status st[2];
    msg_fill(sbuf, n, 50, t_rank, to, p2p_seq);
    MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, from, tag, MPI_COMM_WORLD, &rq[0]));
    MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD, &rq[1]));
    WAITING("exchange %llu: to %d, from %d (MPI_Testall, MPI_Win_flush to myself)",
            (unsigned long long)p2p_seq, to, from);
    for (;;) {
        MPI(MPI_Testall(2, rq, &done, st));
        if (done) break;
        MPI(MPI_Win_flush(t_rank, w));
    }
    CHECK_STATUS(st[0], "exchange", from, tag, n);
    msg_check(rbuf, n, 50, from, t_rank, p2p_seq, "exchange between the atomics");
    p2p_seq++;
}

static int64_t fop(MPI_Win w, int target, int cell, int64_t add) {
    int64_t old = 0;
    MPI(MPI_Fetch_and_op(&add, &old, MPI_INT64_T, target, cell, MPI_SUM, w));
    WAITING("MPI_Win_flush(%d) after MPI_Fetch_and_op on cell %d", target, cell);
    MPI(MPI_Win_flush(target, w));
    return old;
}

/* An MCS queue lock as mpi4py's util.sync.Mutex builds it (each operation in its own
 * MPI_Win_lock_all epoch; the tail on rank 0): a waiter spins on its own window (MPI_Win_sync,
 * MPI_Win_flush to itself for progress, short sleeps) until its predecessor's
 * MPI_Accumulate(REPLACE) hands it the lock. Only the target's progress completes what the
 * others wait for in MPI_Win_unlock_all. */
enum { M_LOCK = 0, M_NEXT = 1, M_TAIL = 2 };

static int spin_until(MPI_Win w, volatile int *mem, int idx, int sentinel, const char *what) {
    useconds_t delay = 1;
    MPI(MPI_Win_sync(w));
    while (mem[idx] == sentinel) {
        usleep(delay);
        delay = delay < 1000 ? delay * 2 : 1000;
        WAITING("spinning on my window's %s (MPI_Win_flush to myself)", what);
        MPI(MPI_Win_flush(t_rank, w));
        MPI(MPI_Win_sync(w));
    }
    return mem[idx];
}

/* Flushed: an MPI may hold an operation until its epoch's next synchronisation (Open MPI's
 * osc does), and the target spins on the value. */
static void put_int(MPI_Win w, int v, int target, int idx) {
    MPI(MPI_Accumulate(&v, 1, MPI_INT, target, idx, 1, MPI_INT, MPI_REPLACE, w));
    WAITING("MPI_Win_flush(%d) after writing cell %d there", target, idx);
    MPI(MPI_Win_flush(target, w));
}

static int mcs_acquire(MPI_Win w, volatile int *mem, int blocking) {
    int me = t_rank, null = MPI_PROC_NULL, prev = MPI_PROC_NULL, locked;
    WAITING("MPI_Win_lock_all to acquire the MCS lock");
    MPI(MPI_Win_lock_all(0, w));
    /* A store and MPI_Win_sync, not an MPI_Accumulate to myself (as mpi4py's does): nothing
     * orders that against my successor's, which may then be overwritten by it. */
    mem[M_NEXT] = MPI_PROC_NULL;
    MPI(MPI_Win_sync(w));
    if (blocking)
        MPI(MPI_Fetch_and_op(&me, &prev, MPI_INT, 0, M_TAIL, MPI_REPLACE, w));
    else
        MPI(MPI_Compare_and_swap(&me, &null, &prev, MPI_INT, 0, M_TAIL, w));
    WAITING("MPI_Win_flush(0) after swapping the MCS tail");
    MPI(MPI_Win_flush(0, w));
    locked = prev == MPI_PROC_NULL;
    if (blocking && !locked) {
        CHECK(prev >= 0 && prev < t_size && prev != t_rank, "MCS tail was %d", prev);
        put_int(w, me, prev, M_NEXT);
        locked = spin_until(w, mem, M_LOCK, 0, "lock flag (handed over by my predecessor)");
    }
    mem[M_LOCK] = locked;
    MPI(MPI_Win_sync(w));
    WAITING("MPI_Win_unlock_all after acquiring the MCS lock");
    MPI(MPI_Win_unlock_all(w));
    return locked;
}

static void mcs_release(MPI_Win w, volatile int *mem) {
    int me = t_rank, null = MPI_PROC_NULL, prev = MPI_PROC_NULL;
    WAITING("MPI_Win_lock_all to release the MCS lock");
    MPI(MPI_Win_lock_all(0, w));
    MPI(MPI_Compare_and_swap(&null, &me, &prev, MPI_INT, 0, M_TAIL, w));
    WAITING("MPI_Win_flush(0) after releasing the MCS tail");
    MPI(MPI_Win_flush(0, w));
    if (prev != me) {
        int next = spin_until(w, mem, M_NEXT, MPI_PROC_NULL, "successor");
        CHECK(next >= 0 && next < t_size && next != t_rank, "MCS successor is %d", next);
        put_int(w, 1, next, M_LOCK);
    }
    mem[M_LOCK] = 0;
    MPI(MPI_Win_sync(w));
    WAITING("MPI_Win_unlock_all after releasing the MCS lock");
    MPI(MPI_Win_unlock_all(w));
}

/* The guarded count lives on rank 0 of a second window: a lost handover or a lock held twice
 * shows as a wrong total. */
static void mcs_phase(void) {
    int *mem, nint = t_rank == 0 ? 3 : 2, i;
    int64_t *count, c = 0, total = 0;
    MPI_Win w, cw;
    MPI(MPI_Win_allocate((MPI_Aint)(nint * sizeof(int)), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w));
    MPI(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
    MPI(MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &count, &cw));
    MPI(MPI_Win_set_errhandler(cw, MPI_ERRORS_RETURN));
    MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, w));
    mem[M_LOCK] = 0;
    mem[M_NEXT] = MPI_PROC_NULL;
    if (t_rank == 0) mem[M_TAIL] = MPI_PROC_NULL;
    MPI(MPI_Win_unlock(t_rank, w));
    MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, cw));
    *count = 0;
    MPI(MPI_Win_unlock(t_rank, cw));
    WAITING("barrier after initialising the MCS lock");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < ROUNDS; i++) {
        int locked, blocking = i % 2, winners;
        PHASE("MCS lock round %d (%s)", i, blocking ? "blocking" : "non-blocking, then spinning");
        if (i >= ROUNDS / 2) pause_maybe();
        if (!blocking) {
            /* mpi4py's testAcquireNonblocking: all try at once, exactly one wins */
            WAITING("barrier before the non-blocking tries");
            MPI(MPI_Barrier(MPI_COMM_WORLD));
            locked = mcs_acquire(w, mem, 0);
            WAITING("barrier after the non-blocking tries");
            MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (locked) mcs_release(w, mem);
            WAITING("MPI_Allreduce of who won");
            MPI(MPI_Allreduce(&locked, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            CHECK_EQ("MCS lock: ranks that took it without blocking at once", 1, winners);
            while (!mcs_acquire(w, mem, 0)) {
            }
        } else {
            CHECK(mcs_acquire(w, mem, 1), "blocking MCS acquire returned without the lock");
        }
        MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, cw));
        MPI(MPI_Get(&c, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, cw));
        WAITING("MPI_Win_flush(0) of the guarded count");
        MPI(MPI_Win_flush(0, cw));
        c++;
        MPI(MPI_Put(&c, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, cw));
        WAITING("MPI_Win_unlock(0) of the guarded count");
        MPI(MPI_Win_unlock(0, cw));
        total++;
        mcs_release(w, mem);
        MPI(MPI_Win_lock_all(0, w));
        exchange(1 + (i + 1) % (t_size - 1 > 0 ? t_size - 1 : 1), w);
        MPI(MPI_Win_unlock_all(w));
    }
    WAITING("barrier after the MCS rounds");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, cw));
        CHECK_EQ("MCS-guarded count", (int64_t)t_size * ROUNDS, *count);
        MPI(MPI_Win_unlock(0, cw));
    }
    CHECK_EQ("MCS rounds of this rank", ROUNDS, total);
    MPI(MPI_Win_free(&cw));
    MPI(MPI_Win_free(&w));
}

int main(int argc, char **argv) {
    int64_t cells[CELLS];
    MPI_Win w;
    int root, i;
    t_init(&argc, &argv, "semaphore");
    rng = rng_new(0x5E4A + (uint64_t)t_rank);
    sbuf = xmalloc(300000);
    rbuf = xmalloc(300000);
    const int64_t value = t_size > 2 ? t_size / 2 : 1;
    cells[SEM] = value;
    cells[HOLD] = cells[LOCK] = cells[COUNT] = cells[SUM] = 0;
    MPI(MPI_Win_create(cells, sizeof cells, sizeof cells[0], MPI_INFO_NULL, MPI_COMM_WORLD, &w));
    MPI(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
    MPI(MPI_Win_lock_all(0, w));

    /* 1. the semaphore */
    int64_t acquired = 0;
    for (root = 0; root < t_size; root++) {
        for (i = 0; i < ROUNDS; i++) {
            PHASE("semaphore on rank %d, round %d", root, i);
            if (fop(w, root, SEM, -1) > 0) {
                int64_t holders = fop(w, root, HOLD, 1);
                CHECK(holders >= 0 && holders < value, "semaphore on rank %d: %lld holders before me, value %lld",
                      root, (long long)holders, (long long)value);
                acquired++;
                pause_maybe();
                holders = fop(w, root, HOLD, -1);
                CHECK(holders >= 1 && holders <= value, "semaphore on rank %d: %lld holders as I leave",
                      root, (long long)holders);
            }
            fop(w, root, SEM, 1);
            exchange(1 + i % (t_size - 1 > 0 ? t_size - 1 : 1), w);
            pause_maybe();
        }
    }
    CHECK(acquired > 0, "the semaphore was never acquired in %d tries", ROUNDS * t_size);

    /* 2. the mutex */
    int64_t mine = 0;
    for (root = 0; root < t_size; root++) {
        for (i = 0; i < ROUNDS / 2; i++) {
            int64_t me = t_rank + 1, zero = 0, old = -1, c = 0;
            long spins = 0;
            PHASE("mutex on rank %d, round %d", root, i);
            for (;;) {
                MPI(MPI_Compare_and_swap(&me, &zero, &old, MPI_INT64_T, root, LOCK, w));
                WAITING("MPI_Win_flush(%d) after MPI_Compare_and_swap, spin %ld", root, spins);
                MPI(MPI_Win_flush(root, w));
                if (old == 0) break;
                CHECK(old >= 1 && old <= t_size, "mutex on rank %d held by %lld", root, (long long)old);
                spins++;
                if (spins % 16 == 0) usleep(100);
            }
            MPI(MPI_Get(&c, 1, MPI_INT64_T, root, COUNT, 1, MPI_INT64_T, w));
            WAITING("MPI_Win_flush(%d) after MPI_Get of the count", root);
            MPI(MPI_Win_flush(root, w));
            c++;
            pause_maybe();
            MPI(MPI_Put(&c, 1, MPI_INT64_T, root, COUNT, 1, MPI_INT64_T, w));
            WAITING("MPI_Win_flush(%d) after MPI_Put of the count", root);
            MPI(MPI_Win_flush(root, w));
            MPI(MPI_Compare_and_swap(&zero, &me, &old, MPI_INT64_T, root, LOCK, w));
            WAITING("MPI_Win_flush(%d) after releasing the mutex", root);
            MPI(MPI_Win_flush(root, w));
            CHECK(old == me, "mutex on rank %d: held by %lld when I released it", root, (long long)old);
            mine++;
            exchange(1 + (i + root) % (t_size - 1 > 0 ? t_size - 1 : 1), w);
        }
    }

    /* 3. accumulates and fetches to every rank */
    for (i = 0; i < ROUNDS; i++) {
        int64_t add = (int64_t)(t_rank + 1) * (i + 1);
        PHASE("accumulate round %d", i);
        for (root = 0; root < t_size; root++) {
            int target = (t_rank + root + i) % t_size;
            MPI(MPI_Accumulate(&add, 1, MPI_INT64_T, target, SUM, 1, MPI_INT64_T, MPI_SUM, w));
            if (i % 3 == 0) {
                int64_t got = fop(w, target, SUM, 0);
                CHECK(got >= add, "accumulate on rank %d: fetched %lld after adding %lld", target,
                      (long long)got, (long long)add);
            }
        }
        WAITING("MPI_Win_flush_all after accumulate round %d", i);
        MPI(MPI_Win_flush_all(w));
        exchange(1 + i % (t_size - 1 > 0 ? t_size - 1 : 1), w);
        pause_maybe();
    }
    MPI(MPI_Win_unlock_all(w));

    PHASE("checking the windows");
    WAITING("barrier before the check");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, w)); /* makes the others' updates visible */
    CHECK_EQ("semaphore value at the end", value, cells[SEM]);
    CHECK_EQ("semaphore holders at the end", 0, cells[HOLD]);
    CHECK_EQ("mutex at the end", 0, cells[LOCK]);
    CHECK_EQ("mutex-guarded count", (int64_t)t_size * (ROUNDS / 2), cells[COUNT]);
    CHECK_EQ("accumulated sum", (int64_t)t_size * (t_size + 1) / 2 * ROUNDS * (ROUNDS + 1) / 2,
             cells[SUM]);
    MPI(MPI_Win_unlock(t_rank, w));
    CHECK_EQ("mutex rounds of this rank", (int64_t)t_size * (ROUNDS / 2), mine);
    MPI(MPI_Win_free(&w));

    /* 4. the MCS lock */
    mcs_phase();
    free(sbuf);
    free(rbuf);
    return t_finish();
}

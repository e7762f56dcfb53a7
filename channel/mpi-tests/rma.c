/* One-sided communication (MPI RMA), every byte checked, over each MPI's own path: MPICH's
 * active messages and FI_RMA, Open MPI 4's osc pt2pt (messages), Open MPI 5's osc rdma over
 * btl ofi (diwarp's FI_RMA and FI_ATOMIC; scripts/mpi-tests checks that they were used).
 *   1. Fence epochs: every rank puts a pattern into its right neighbour's window and gets one
 *      from its left neighbour's, sizes 1 B to 4 MiB (eager and rendezvous messages under the
 *      MPI's protocol).
 *   2. MPI_Accumulate (MPI_SUM, int64) from every rank into every rank's window.
 *   3. Passive target: every rank increments a counter on rank 0 with MPI_Fetch_and_op under
 *      MPI_Win_lock(SHARED), many times; the values fetched are distinct and the total is right.
 *      MPI_Compare_and_swap under an exclusive lock elects exactly one winner.
 *   4. Post/start/complete/wait between pairs, and MPI_Win_allocate with MPI_Win_lock_all,
 *      MPI_Rget and MPI_Win_flush.
 */
#include "check.h"

#define MAXB (4u << 20)

static MPI_Win win_of(void *base, size_t bytes, int disp) {
    MPI_Win w;
    MPI(MPI_Win_create(base, (MPI_Aint)bytes, disp, MPI_INFO_NULL, MPI_COMM_WORLD, &w));
    MPI(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
    return w;
}

static void fence(MPI_Win w, const char *what) {
    WAITING("MPI_Win_fence %s", what);
    MPI(MPI_Win_fence(0, w));
}

int main(int argc, char **argv) {
    MPI_Win w;
    int i, k;
    t_init(&argc, &argv, "rma");
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;

    /* 1. put and get in fence epochs */
    {
        /* the window: [put area: MAXB + 64 | get area: MAXB]; neighbours read the get area */
        const size_t putb = (size_t)MAXB + 64;
        uint8_t *win = xmalloc(putb + MAXB), *got = xmalloc(MAXB), *src = xmalloc(MAXB);
        size_t n;
        int round = 0;
        w = win_of(win, putb + MAXB, 1);
        for (n = 1; n <= MAXB; n = n < 64 ? n * 7 + 1 : n * 4, round++) {
            PHASE("fence epoch: put and get of %zu bytes", n);
            memset(win, 0xEE, n + 16);
            msg_fill(win + putb, n, 30, t_rank, -1, (uint64_t)round);
            msg_fill(src, n, 31, t_rank, right, (uint64_t)round);
            memset(got, 0xEE, n);
            fence(w, "opening the epoch");
            /* into the right neighbour's put area at offset 8 (unaligned on purpose) */
            MPI(MPI_Put(src, (int)n, MPI_BYTE, right, 8, (int)n, MPI_BYTE, w));
            MPI(MPI_Get(got, (int)n, MPI_BYTE, left, (MPI_Aint)putb, (int)n, MPI_BYTE, w));
            fence(w, "closing the epoch");
            msg_check(win + 8, n, 31, left, t_rank, (uint64_t)round, "MPI_Put from the left neighbour");
            for (k = 0; k < 8; k++) {
                CHECK(win[k] == 0xEE, "MPI_Put of %zu bytes at offset 8 wrote byte %d before it", n, k);
                CHECK(win[8 + n + (size_t)k] == 0xEE, "MPI_Put of %zu bytes wrote byte %zu past it", n,
                      8 + n + (size_t)k);
            }
            msg_check(got, n, 30, left, -1, (uint64_t)round, "MPI_Get from the left neighbour");
        }
        free(src);
        MPI(MPI_Win_free(&w));
        free(win);
        free(got);
    }

    /* 2. accumulate: every rank adds (src+1)*(i+1) to element i of every rank */
    {
        enum { N = 4096 };
        int64_t *acc = xmalloc(N * sizeof *acc), *add = xmalloc(N * sizeof *add);
        int t;
        for (i = 0; i < N; i++) acc[i] = i;
        w = win_of(acc, N * sizeof *acc, sizeof *acc);
        PHASE("MPI_Accumulate(MPI_SUM) from every rank to every rank");
        for (i = 0; i < N; i++) add[i] = (int64_t)(t_rank + 1) * (i + 1);
        fence(w, "before the accumulates");
        for (t = 0; t < t_size; t++) {
            int target = (t_rank + t) % t_size;
            MPI(MPI_Accumulate(add, N, MPI_INT64_T, target, 0, N, MPI_INT64_T, MPI_SUM, w));
        }
        fence(w, "after the accumulates");
        for (i = 0; i < N; i++) {
            int64_t want = i + (int64_t)t_size * (t_size + 1) / 2 * (i + 1);
            CHECK(acc[i] == want, "MPI_Accumulate: element %d is %lld, expected %lld", i,
                  (long long)acc[i], (long long)want);
        }
        MPI(MPI_Win_free(&w));
        free(acc);
        free(add);
    }

    /* 3. passive target: a shared counter and an election */
    {
        enum { INCS = 200 };
        int64_t cell[2] = {0, -1}; /* counter, winner */
        int64_t one = 1, old, *seen;
        int64_t me = t_rank, none = -1;
        w = win_of(cell, sizeof cell, sizeof cell[0]);
        seen = xmalloc(INCS * sizeof *seen);
        PHASE("MPI_Fetch_and_op on rank 0 under a shared lock, %d times", INCS);
        WAITING("barrier before the increments");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (i = 0; i < INCS; i++) {
            WAITING("MPI_Win_lock(SHARED, 0), increment %d", i);
            MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w));
            MPI(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, w));
            WAITING("MPI_Win_unlock(0), increment %d", i);
            MPI(MPI_Win_unlock(0, w));
            CHECK(old >= 0 && old < (int64_t)INCS * t_size,
                  "MPI_Fetch_and_op %d fetched %lld, outside 0..%d", i, (long long)old, INCS * t_size);
            CHECK(i == 0 || old > seen[i - 1], "MPI_Fetch_and_op %d fetched %lld after %lld", i,
                  (long long)old, (long long)seen[i - 1]);
            seen[i] = old;
        }
        PHASE("MPI_Compare_and_swap election on rank 0");
        WAITING("MPI_Win_lock(EXCLUSIVE, 0) for the election");
        MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w));
        MPI(MPI_Compare_and_swap(&me, &none, &old, MPI_INT64_T, 0, 1, w));
        WAITING("MPI_Win_unlock(0) after the election");
        MPI(MPI_Win_unlock(0, w));
        {
            /* every fetched counter value is distinct across ranks: gather them at rank 0 */
            int64_t *all = t_rank == 0 ? xmalloc((size_t)t_size * INCS * sizeof *all) : NULL;
            int64_t won = old == -1, winners = 0;
            WAITING("MPI_Gather of the fetched values");
            MPI(MPI_Gather(seen, INCS, MPI_INT64_T, all, INCS, MPI_INT64_T, 0, MPI_COMM_WORLD));
            WAITING("MPI_Reduce of the election results");
            MPI(MPI_Reduce(&won, &winners, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD));
            if (t_rank == 0) {
                /* a lock on its own window makes the others' updates visible to rank 0 */
                WAITING("MPI_Win_lock(EXCLUSIVE, 0) to read the counter");
                MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w));
                uint8_t *hit = calloc((size_t)t_size * INCS, 1);
                for (i = 0; i < t_size * INCS; i++) {
                    CHECK(!hit[all[i]], "MPI_Fetch_and_op: value %lld fetched twice (rank %d)",
                          (long long)all[i], i / INCS);
                    hit[all[i]] = 1;
                }
                CHECK(cell[0] == (int64_t)t_size * INCS, "counter is %lld after %d increments",
                      (long long)cell[0], t_size * INCS);
                CHECK(winners == 1, "MPI_Compare_and_swap: %lld ranks won the election", (long long)winners);
                CHECK(cell[1] >= 0 && cell[1] < t_size, "election winner is %lld", (long long)cell[1]);
                MPI(MPI_Win_unlock(0, w));
                free(hit);
                free(all);
            }
        }
        MPI(MPI_Win_free(&w));
        free(seen);
    }

    /* 4. PSCW between pairs, then MPI_Win_allocate with lock_all, Rget and flush */
    {
        int peer = t_rank ^ 1, active = peer < t_size;
        size_t n = 1u << 20;
        uint8_t *base;
        MPI_Group world, pair;
        MPI(MPI_Win_allocate((MPI_Aint)n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w));
        MPI(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
        memset(base, 0xEE, n);
        MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
        if (active) {
            uint8_t *src = xmalloc(n);
            MPI(MPI_Group_incl(world, 1, &peer, &pair));
            PHASE("post/start/complete/wait with rank %d, 1 MiB put", peer);
            msg_fill(src, n, 32, t_rank, peer, 0);
            MPI(MPI_Win_post(pair, 0, w));
            WAITING("MPI_Win_start towards %d", peer);
            MPI(MPI_Win_start(pair, 0, w));
            MPI(MPI_Put(src, (int)n, MPI_BYTE, peer, 0, (int)n, MPI_BYTE, w));
            WAITING("MPI_Win_complete towards %d", peer);
            MPI(MPI_Win_complete(w));
            WAITING("MPI_Win_wait for %d", peer);
            MPI(MPI_Win_wait(w));
            msg_check(base, n, 32, peer, t_rank, 0, "MPI_Put in a post/start epoch");
            MPI(MPI_Group_free(&pair));
            free(src);
        }
        MPI(MPI_Group_free(&world));
        WAITING("barrier before lock_all");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        PHASE("MPI_Win_lock_all: MPI_Rget from every rank, MPI_Put and MPI_Win_flush");
        msg_fill(base, 65536, 33, t_rank, -1, 1);
        WAITING("barrier after filling the window");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        {
            uint8_t *got = xmalloc((size_t)t_size * 65536);
            MPI_Request *rq = xmalloc((size_t)t_size * sizeof *rq);
            MPI(MPI_Win_lock_all(0, w));
            for (k = 0; k < t_size; k++)
                MPI(MPI_Rget(got + (size_t)k * 65536, 65536, MPI_BYTE, k, 0, 65536, MPI_BYTE, w, &rq[k]));
            WAITING("MPI_Waitall of %d MPI_Rget", t_size);
            MPI(MPI_Waitall(t_size, rq, MPI_STATUSES_IGNORE));
            for (k = 0; k < t_size; k++)
                msg_check(got + (size_t)k * 65536, 65536, 33, k, -1, 1, "MPI_Rget under lock_all");
            /* each rank writes its slice of rank 0's second half, then flushes */
            msg_fill(got, 4096, 34, t_rank, 0, 2);
            MPI(MPI_Put(got, 4096, MPI_BYTE, 0, (MPI_Aint)(65536 + 4096 * (size_t)t_rank), 4096,
                        MPI_BYTE, w));
            WAITING("MPI_Win_flush(0)");
            MPI(MPI_Win_flush(0, w));
            WAITING("MPI_Win_unlock_all");
            MPI(MPI_Win_unlock_all(w));
            free(got);
            free(rq);
        }
        WAITING("barrier after the flushed puts");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0) {
            MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w)); /* makes the puts visible locally */
            for (k = 0; k < t_size; k++)
                msg_check(base + 65536 + 4096 * (size_t)k, 4096, 34, k, 0, 2, "flushed MPI_Put");
            MPI(MPI_Win_unlock(0, w));
        }
        MPI(MPI_Win_free(&w));
    }
    return t_finish();
}

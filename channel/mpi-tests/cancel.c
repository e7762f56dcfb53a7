/* Cancelling posted receives. Ranks pair up (0-1, 2-3, ...); both play both sides.
 *   1. A receive nobody will match (specific source and tag, then ANY_SOURCE/ANY_TAG):
 *      MPI_Cancel, MPI_Wait, MPI_Test_cancelled must say cancelled.
 *   2. A cancelled receive does not swallow a later message: its buffer stays untouched and
 *      the message goes to the next receive.
 *   3. 64 receives posted, the odd ones cancelled; the peer then sends the even tags (they must
 *      complete into the right buffers) and afterwards the odd tags (received by new receives).
 *   4. Cancelling a receive that has already completed (seen with MPI_Request_get_status):
 *      MPI_Test_cancelled must say not cancelled, the data is intact.
 *   5. A race: the peer sends while the receive is being cancelled, 100 times, small and
 *      large. Either the cancel wins (then the message must still be receivable) or the
 *      receive does (then it holds the message); never both, never neither.
 */
#include "check.h"

#define POISON 0x5A

static void expect_cancelled(MPI_Request *rq, int want, const char *what) {
    MPI_Status st;
    int c = -1;
    MPI(MPI_Cancel(rq));
    WAIT(rq, &st, "MPI_Wait after MPI_Cancel (%s)", what);
    MPI(MPI_Test_cancelled(&st, &c));
    CHECK(c == want, "%s: MPI_Test_cancelled says %s, expected %s", what, c ? "cancelled" : "not cancelled",
          want ? "cancelled" : "not cancelled");
}

static void check_poison(const uint8_t *b, size_t n, const char *what) {
    size_t i;
    for (i = 0; i < n; i++)
        CHECK(b[i] == POISON, "%s: the cancelled receive's buffer was written at byte %zu (0x%02x)", what, i, b[i]);
}

int main(int argc, char **argv) {
    int i;
    MPI_Status st;
    MPI_Request rq;
    t_init(&argc, &argv, "cancel");
    int peer = t_rank ^ 1, active = peer < t_size, even = t_rank % 2 == 0;
    uint8_t *a = xmalloc(1u << 20), *b = xmalloc(1u << 20);

    /* 1 */
    PHASE("cancel unmatched receives");
    if (active) {
        MPI(MPI_Irecv(a, 100, MPI_BYTE, peer, 999, MPI_COMM_WORLD, &rq));
        expect_cancelled(&rq, 1, "receive from the peer, tag 999");
        MPI(MPI_Irecv(a, 100, MPI_BYTE, MPI_ANY_SOURCE, 998, MPI_COMM_WORLD, &rq));
        expect_cancelled(&rq, 1, "receive from ANY_SOURCE, tag 998");
    }
    WAITING("barrier after phase 1");
    MPI(MPI_Barrier(MPI_COMM_WORLD)); /* nothing is in flight: ANY_TAG is safe */
    if (active) {
        MPI(MPI_Irecv(a, 100, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq));
        expect_cancelled(&rq, 1, "receive from ANY_SOURCE, ANY_TAG");
    }
    WAITING("barrier after ANY_TAG cancel");
    MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 2 */
    for (i = 0; active && i < 2; i++) {
        size_t n = i == 0 ? 64 : 300000;
        PHASE("a cancelled receive does not take the next message (%zu bytes)", n);
        if (even) {
            memset(a, POISON, n);
            MPI(MPI_Irecv(a, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &rq));
            expect_cancelled(&rq, 1, "receive for tag 5 before the peer sends");
            WAITING("MPI_Send of ready to %d", peer);
            MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 6, MPI_COMM_WORLD));
            WAITING("MPI_Recv of tag 5 (%zu bytes) from %d after cancelling", n, peer);
            MPI(MPI_Recv(b, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, "message after a cancelled receive", peer, 5, n);
            msg_check(b, n, 30, peer, t_rank, (uint64_t)i, "message after a cancelled receive");
            check_poison(a, n, "message after a cancelled receive");
        } else {
            WAITING("MPI_Recv of ready from %d", peer);
            MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &st));
            msg_fill(b, n, 30, t_rank, peer, (uint64_t)i);
            WAITING("MPI_Send of tag 5 (%zu bytes) to %d", n, peer);
            MPI(MPI_Send(b, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD));
        }
    }

    /* 3 */
    PHASE("64 receives, odd ones cancelled");
    if (active) {
        enum { R = 64, SZ = 5000 };
        MPI_Request rqs[R];
        MPI_Status sts[R];
        uint8_t *bufs = xmalloc((size_t)R * SZ);
        int k;
        if (even) {
            memset(bufs, POISON, (size_t)R * SZ);
            for (k = 0; k < R; k++)
                MPI(MPI_Irecv(bufs + (size_t)k * SZ, SZ, MPI_BYTE, k % 3 ? peer : MPI_ANY_SOURCE, 100 + k,
                              MPI_COMM_WORLD, &rqs[k]));
            for (k = 1; k < R; k += 2) expect_cancelled(&rqs[k], 1, "odd receive of 64");
            WAITING("MPI_Send of ready to %d", peer);
            MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD));
            WAITING("MPI_Waitall of the 32 even receives");
            MPI(MPI_Waitall(R, rqs, sts));
            for (k = 0; k < R; k += 2) {
                char what[64];
                size_t n = (size_t)(k * 71 % SZ);
                snprintf(what, sizeof what, "even receive %d of 64", k);
                CHECK_STATUS(sts[k], what, peer, 100 + k, n);
                msg_check(bufs + (size_t)k * SZ, n, 31, peer, t_rank, (uint64_t)k, what);
            }
            for (k = 1; k < R; k += 2) check_poison(bufs + (size_t)k * SZ, SZ, "cancelled odd receive");
            for (k = 1; k < R; k += 2) {
                size_t n = (size_t)(k * 71 % SZ);
                WAITING("MPI_Recv of odd tag %d from %d", 100 + k, peer);
                MPI(MPI_Recv(bufs, SZ, MPI_BYTE, peer, 100 + k, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, "odd message after its receive was cancelled", peer, 100 + k, n);
                msg_check(bufs, n, 31, peer, t_rank, (uint64_t)k, "odd message after its receive was cancelled");
            }
        } else {
            WAITING("MPI_Recv of ready from %d", peer);
            MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &st));
            for (k = 0; k < 2 * R; k += 2) {
                int kk = k < R ? k : k - R + 1; /* evens first, then odds */
                size_t n = (size_t)(kk * 71 % SZ);
                msg_fill(bufs, n, 31, t_rank, peer, (uint64_t)kk);
                WAITING("MPI_Send of tag %d to %d", 100 + kk, peer);
                MPI(MPI_Send(bufs, (int)n, MPI_BYTE, peer, 100 + kk, MPI_COMM_WORLD));
            }
        }
        free(bufs);
    }

    /* 4 */
    PHASE("cancel a completed receive");
    if (active) {
        if (even) {
            int flag = 0;
            MPI(MPI_Irecv(a, 1000, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &rq));
            WAITING("MPI_Send of ready to %d", peer);
            MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 9, MPI_COMM_WORLD));
            WAITING("MPI_Request_get_status polling for the tag 8 message from %d", peer);
            while (!flag) MPI(MPI_Request_get_status(rq, &flag, &st));
            expect_cancelled(&rq, 0, "cancel of a completed receive");
            msg_check(a, 1000, 32, peer, t_rank, 0, "cancel of a completed receive");
        } else {
            WAITING("MPI_Recv of ready from %d", peer);
            MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 9, MPI_COMM_WORLD, &st));
            msg_fill(a, 1000, 32, t_rank, peer, 0);
            WAITING("MPI_Send of tag 8 to %d", peer);
            MPI(MPI_Send(a, 1000, MPI_BYTE, peer, 8, MPI_COMM_WORLD));
        }
    }

    /* 5 */
    {
        int cancelled = 0, received = 0;
        for (i = 0; active && i < 100; i++) {
            size_t n = i % 4 == 3 ? 200000 : (size_t)(i * 13);
            PHASE("cancel race %d (%zu bytes)", i, n);
            if (even) {
                int c = -1;
                MPI(MPI_Irecv(a, (int)n, MPI_BYTE, i % 2 ? peer : MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, &rq));
                WAITING("MPI_Send of go to %d (race %d)", peer, i);
                MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 11, MPI_COMM_WORLD));
                {   /* let the message arrive for a while, or not: progress without completing */
                    static const double delay_us[] = {0, 20, 200, 1000, 3000, 10000};
                    double t0 = MPI_Wtime(), d = delay_us[i % 6] * 1e-6;
                    int done = 0;
                    while (!done && MPI_Wtime() - t0 < d) MPI(MPI_Request_get_status(rq, &done, &st));
                }
                MPI(MPI_Cancel(&rq));
                WAIT(&rq, &st, "MPI_Wait after MPI_Cancel in race %d", i);
                MPI(MPI_Test_cancelled(&st, &c));
                if (c) {
                    cancelled++;
                    WAITING("MPI_Recv of the race %d message after the cancel won", i);
                    MPI(MPI_Recv(a, (int)n, MPI_BYTE, peer, 10, MPI_COMM_WORLD, &st));
                } else {
                    received++;
                }
                CHECK_STATUS(st, "cancel race message", peer, 10, n);
                msg_check(a, n, 33, peer, t_rank, (uint64_t)i, "cancel race message");
            } else {
                WAITING("MPI_Recv of go from %d (race %d)", peer, i);
                MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 11, MPI_COMM_WORLD, &st));
                msg_fill(a, n, 33, t_rank, peer, (uint64_t)i);
                WAITING("MPI_Send of the race %d message (%zu bytes) to %d", i, n, peer);
                MPI(MPI_Send(a, (int)n, MPI_BYTE, peer, 10, MPI_COMM_WORLD));
            }
        }
        if (t_rank == 0 && active)
            printf("cancel: race: cancel won %d times, the receive won %d times\n", cancelled, received);
    }
    WAITING("final barrier before the empty-queue check");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    {
        int flag = 1;
        MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "a message is left over (source %d, tag %d)", st.MPI_SOURCE, st.MPI_TAG);
    }
    free(a);
    free(b);
    return t_finish();
}

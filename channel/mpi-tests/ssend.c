/* Synchronous sends. Ranks pair up (0-1, 2-3, ...).
 *   1. MPI_Issend must not complete before the receiver has matched it: the sender polls
 *      MPI_Test for 100 ms while the receiver is kept away (it first waits for a "go" message
 *      that the sender sends only after polling); then the receive is posted and the Issend
 *      completes. Sizes 0 B to 1 MiB, both directions.
 *   2. MPI_Ssend ping-pong, 0 B to 4 MiB, every byte checked.
 *   3. MPI_Ssend into a receive posted earlier with MPI_ANY_SOURCE.
 *   4. Every rank MPI_Ssends to rank 0 at once, 50 rounds (one tag per round); rank 0 receives
 *      with MPI_ANY_SOURCE.
 */
#include "check.h"

static const size_t sizes[] = {0, 1, 100, 16384, 16385, 32768, 32769, 65536, 1u << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv) {
    size_t si;
    int role, i;
    MPI_Status st;
    t_init(&argc, &argv, "ssend");
    int peer = t_rank ^ 1, active = peer < t_size;
    uint8_t *sb = xmalloc(4u << 20), *rb = xmalloc(4u << 20);

    /* 1. Issend does not complete early */
    for (si = 0; active && si < NSIZES; si++) {
        for (role = 0; role < 2; role++) {
            size_t n = sizes[si];
            int sender = (role == 0) == (t_rank % 2 == 0);
            char what[96];
            snprintf(what, sizeof what, "MPI_Issend of %zu bytes", n);
            PHASE("Issend of %zu bytes, %s", n, sender ? "sending" : "receiving");
            if (sender) {
                MPI_Request rq;
                int flag = 0, polls = 0;
                double t0;
                msg_fill(sb, n, 20, t_rank, peer, si * 2 + (size_t)role);
                MPI(MPI_Issend(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq));
                t0 = MPI_Wtime();
                while (MPI_Wtime() - t0 < 0.1) {
                    MPI(MPI_Test(&rq, &flag, &st));
                    polls++;
                    CHECK(!flag, "%s to rank %d completed after %.1f ms (%d polls), before the receiver "
                          "posted its receive (it is waiting for our go message)",
                          what, peer, (MPI_Wtime() - t0) * 1e3, polls);
                    usleep(200);
                }
                WAITING("MPI_Send of the go message to %d", peer);
                MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD));
                WAIT(&rq, &st, "MPI_Wait of %s to %d", what, peer);
            } else {
                WAITING("MPI_Recv of the go message from %d", peer);
                MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &st));
                WAITING("MPI_Recv of the synchronous message (%zu bytes) from %d", n, peer);
                MPI(MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st));
                CHECK_STATUS(st, what, peer, 1, n);
                msg_check(rb, n, 20, peer, t_rank, si * 2 + (size_t)role, what);
            }
        }
    }

    /* 2. Ssend ping-pong */
    for (si = 0; active && si <= 12; si++) {
        size_t n = si == 0 ? 0 : (size_t)1 << (2 * (si - 1)); /* 0, 1, 4, ..., 4 MiB */
        int it, iters = n <= 65536 ? 10 : 2;
        for (it = 0; it < iters; it++) {
            int leg;
            PHASE("MPI_Ssend ping-pong of %zu bytes, iteration %d", n, it);
            for (leg = 0; leg < 2; leg++) {
                uint64_t seq = (uint64_t)si * 1000 + (uint64_t)it * 2 + (uint64_t)leg;
                if ((leg == 0) == (t_rank % 2 == 0)) {
                    msg_fill(sb, n, 21, t_rank, peer, seq);
                    WAITING("MPI_Ssend of %zu bytes to %d", n, peer);
                    MPI(MPI_Ssend(sb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
                } else {
                    char what[64];
                    snprintf(what, sizeof what, "MPI_Ssend ping-pong, %zu bytes", n);
                    WAITING("MPI_Recv of %zu bytes from %d", n, peer);
                    MPI(MPI_Recv(rb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &st));
                    CHECK_STATUS(st, what, peer, 3, n);
                    msg_check(rb, n, 21, peer, t_rank, seq, what);
                }
            }
        }
    }

    /* 3. into a posted ANY_SOURCE receive */
    PHASE("MPI_Ssend into a posted MPI_ANY_SOURCE receive");
    if (active) {
        MPI_Request rq;
        if (t_rank % 2 == 1) {
            MPI(MPI_Irecv(rb, 1000, MPI_BYTE, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &rq));
            WAITING("MPI_Send of ready message to %d", peer);
            MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 5, MPI_COMM_WORLD));
            WAIT(&rq, &st, "posted ANY_SOURCE receive for an Ssend from %d", peer);
            CHECK_STATUS(st, "Ssend into ANY_SOURCE", peer, 4, 777);
            msg_check(rb, 777, 22, peer, t_rank, 0, "Ssend into ANY_SOURCE");
        } else {
            WAITING("MPI_Recv of the ready message from %d", peer);
            MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &st));
            msg_fill(sb, 777, 22, t_rank, peer, 0);
            WAITING("MPI_Ssend to %d", peer);
            MPI(MPI_Ssend(sb, 777, MPI_BYTE, peer, 4, MPI_COMM_WORLD));
        }
    }

    /* 4. everyone Ssends to rank 0 */
    WAITING("barrier before the many-to-one Ssends");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < 50; i++) {
        size_t n = (size_t)(i * 37 % 3000);
        PHASE("many-to-one MPI_Ssend, round %d", i);
        if (t_rank == 0) {
            int *seen = calloc((size_t)t_size, sizeof *seen), k;
            for (k = 1; k < t_size; k++) {
                WAITING("MPI_Recv(ANY_SOURCE) of Ssend %d of %d, round %d", k, t_size - 1, i);
                MPI(MPI_Recv(rb, 4000, MPI_BYTE, MPI_ANY_SOURCE, 100 + i, MPI_COMM_WORLD, &st));
                CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < t_size && !seen[st.MPI_SOURCE],
                      "round %d: source %d is not a sender or sent twice", i, st.MPI_SOURCE);
                seen[st.MPI_SOURCE] = 1;
                CHECK_STATUS(st, "many-to-one Ssend", st.MPI_SOURCE, 100 + i, n);
                msg_check(rb, n, 23, st.MPI_SOURCE, 0, (uint64_t)i, "many-to-one Ssend");
            }
            free(seen);
        } else {
            msg_fill(sb, n, 23, t_rank, 0, (uint64_t)i);
            WAITING("MPI_Ssend to 0, round %d", i);
            MPI(MPI_Ssend(sb, (int)n, MPI_BYTE, 0, 100 + i, MPI_COMM_WORLD));
        }
    }
    free(sb);
    free(rb);
    return t_finish();
}

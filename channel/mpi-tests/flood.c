/* Many-to-one flood: every rank but 0 sends thousands of messages of mixed sizes (0 B to 1 MiB,
 * mostly small) to rank 0, keeping a window of up to 64 MPI_Isend in flight (every 7th message
 * a blocking MPI_Send), and rank 0 checks every one: count, source, tag and bytes, and that each
 * sender's messages come in the order they were sent.
 *   1. rank 0 takes them with MPI_Recv(ANY_SOURCE, ANY_TAG) as they come;
 *   2. rank 0 drains one sender at a time (highest rank first) with MPI_Recv(source, ANY_TAG)
 *      while the others' messages pile up unexpected (their large ones wait in rendezvous);
 *   3. rank 0 keeps 32 MPI_Irecv(ANY_SOURCE, ANY_TAG) posted and completes them with MPI_Waitsome.
 * Afterwards, nothing is left (MPI_Iprobe). Options: --count K per sender and phase (default
 * 5000 in phase 1, K/3 in phases 2 and 3).
 */
#include "check.h"

#define MAXMSG (1u << 20)
#define WINDOW 64

static size_t size_of(int src, uint64_t seq, int phase) {
    uint64_t h = msg_seed(900 + (uint64_t)phase, src, 0, seq), c = h % 1000, r = h >> 10;
    if (c < 700) return r % 65;
    if (c < 900) return 65 + r % 4032;
    if (c < 980) return 4097 + r % 61440;
    if (c < 997) return 65537 + r % (192u << 10);
    return (256u << 10) + r % (MAXMSG - (256u << 10) + 1);
}
static int tag_of(int src, uint64_t seq) { return (int)(msg_seed(901, src, 0, seq) % 32); }

static void sender(int K, int phase) {
    MPI_Request rq[WINDOW];
    uint8_t *buf[WINDOW];
    int s, slot, i;
    for (i = 0; i < WINDOW; i++) { rq[i] = MPI_REQUEST_NULL; buf[i] = NULL; }
    for (s = 0; s < K; s++) {
        size_t n = size_of(t_rank, (uint64_t)s, phase);
        int tag = tag_of(t_rank, (uint64_t)s);
        for (slot = 0; slot < WINDOW && rq[slot] != MPI_REQUEST_NULL; slot++) {}
        if (slot == WINDOW) {
            MPI_Status st;
            WAITING("MPI_Waitany for a free send slot, message %d of %d (phase %d)", s, K, phase);
            MPI(MPI_Waitany(WINDOW, rq, &slot, &st));
            CHECK(slot != MPI_UNDEFINED, "MPI_Waitany: no active send");
        }
        free(buf[slot]);
        buf[slot] = xmalloc(n);
        msg_fill(buf[slot], n, 60 + (uint64_t)phase, t_rank, 0, (uint64_t)s);
        if (s % 7 == 6) {
            WAITING("MPI_Send of message %d of %d (%zu bytes, phase %d) to 0", s, K, n, phase);
            MPI(MPI_Send(buf[slot], (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD));
            rq[slot] = MPI_REQUEST_NULL;
        } else {
            WAITING("MPI_Isend of message %d of %d (%zu bytes, phase %d) to 0", s, K, n, phase);
            MPI(MPI_Isend(buf[slot], (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &rq[slot]));
        }
    }
    WAITING("MPI_Waitall of the last sends (phase %d)", phase);
    MPI(MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE));
    for (i = 0; i < WINDOW; i++) free(buf[i]);
}

static void check_one(MPI_Status *st, const uint8_t *b, int *next, int K, int phase) {
    int src = st->MPI_SOURCE;
    char what[96];
    CHECK(src > 0 && src < t_size, "phase %d: MPI_SOURCE %d is not a sender", phase, src);
    CHECK(next[src] < K, "phase %d: message %d from rank %d, but it sends only %d", phase, next[src], src, K);
    uint64_t seq = (uint64_t)next[src]++;
    snprintf(what, sizeof what, "phase %d: next message from rank %d should be seq %llu", phase, src, (unsigned long long)seq);
    CHECK_STATUS(*st, what, src, tag_of(src, seq), size_of(src, seq, phase));
    msg_check(b, size_of(src, seq, phase), 60 + (uint64_t)phase, src, 0, seq, what);
}

static void receiver(int K, int phase) {
    int total = (t_size - 1) * K, i, src;
    int *next = calloc((size_t)t_size, sizeof *next);
    MPI_Status st;
    if (phase == 1) {
        uint8_t *b = xmalloc(MAXMSG);
        for (i = 0; i < total; i++) {
            WAITING("MPI_Recv(ANY_SOURCE, ANY_TAG), message %d of %d", i, total);
            MPI(MPI_Recv(b, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            check_one(&st, b, next, K, phase);
        }
        free(b);
    } else if (phase == 2) {
        uint8_t *b = xmalloc(MAXMSG);
        for (src = t_size - 1; src > 0; src--)
            for (i = 0; i < K; i++) {
                WAITING("MPI_Recv(%d, ANY_TAG), message %d of %d", src, i, K);
                MPI(MPI_Recv(b, MAXMSG, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                CHECK_EQ("MPI_Recv(src, ANY_TAG): MPI_SOURCE", src, st.MPI_SOURCE);
                check_one(&st, b, next, K, phase);
            }
        free(b);
    } else {
        enum { P = 32 };
        MPI_Request rq[P];
        MPI_Status sts[P], got[P];
        int idx[P], posted = 0, done = 0, outc, k;
        uint8_t *b = xmalloc((size_t)P * MAXMSG);
        /* ANY_SOURCE receives match in posting order, so the completed ones are checked in
         * posting order (order[slot] = when that slot's receive was posted) */
        long long order[P], next_check = 0, post_no = 0;
        int ready[P];
        for (k = 0; k < P; k++) { rq[k] = MPI_REQUEST_NULL; ready[k] = 0; }
        for (k = 0; k < P && posted < total; k++, posted++) {
            MPI(MPI_Irecv(b + (size_t)k * MAXMSG, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[k]));
            order[k] = post_no++;
        }
        while (done < total) {
            WAITING("MPI_Waitsome of %d posted ANY_SOURCE receives, %d of %d done", P, done, total);
            MPI(MPI_Waitsome(P, rq, &outc, idx, got));
            CHECK(outc != MPI_UNDEFINED && outc > 0, "MPI_Waitsome returned %d with %d messages missing", outc, total - done);
            for (k = 0; k < outc; k++) {
                ready[idx[k]] = 1;
                sts[idx[k]] = got[k];
            }
            /* check in posting order (matching order), repost */
            for (;;) {
                int s = -1;
                for (k = 0; k < P; k++) if (ready[k] && order[k] == next_check) s = k;
                if (s < 0) break;
                check_one(&sts[s], b + (size_t)s * MAXMSG, next, K, phase);
                ready[s] = 0;
                next_check++;
                done++;
                if (posted < total) {
                    MPI(MPI_Irecv(b + (size_t)s * MAXMSG, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[s]));
                    order[s] = post_no++;
                    posted++;
                }
            }
        }
        free(b);
    }
    for (src = 1; src < t_size; src++) CHECK_EQ("messages received from a sender", K, next[src]);
    free(next);
}

int main(int argc, char **argv) {
    int K = 5000, a, phase;
    long long msgs = 0;
    t_init(&argc, &argv, "flood");
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--count") && a + 1 < argc) K = atoi(argv[++a]);
        else FAIL("unknown argument %s", argv[a]);
    }
    for (phase = 1; phase <= 3; phase++) {
        int k = phase == 1 ? K : K / 3;
        PHASE("phase %d: %d messages from each of %d senders", phase, k, t_size - 1);
        if (t_rank == 0) receiver(k, phase);
        else sender(k, phase);
        msgs += (long long)k * (t_size - 1);
        WAITING("barrier after phase %d", phase);
        MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (t_rank == 0) {
        int flag = 1;
        MPI_Status st;
        MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "a message is left over after the flood (source %d, tag %d)", st.MPI_SOURCE, st.MPI_TAG);
        printf("flood: %lld messages from %d senders checked\n", msgs, t_size - 1);
    }
    return t_finish();
}

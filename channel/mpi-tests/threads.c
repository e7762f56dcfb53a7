/* MPI_THREAD_MULTIPLE: T threads per rank call MPI at the same time, as hybrid MPI+threads codes
 * do. Thread t of every rank owns tag t. In every round it posts receives from every other rank
 * and sends to every other rank (0 bytes to 512 KiB, so eager and rendezvous messages mix), then
 * waits with MPI_Waitall, MPI_Waitany or MPI_Test polling. Every message's source, tag, count
 * and bytes are checked. The tag alone keeps threads apart; within a thread, messages with the
 * same source and tag must arrive in send order (MPI's non-overtaking rule), which a sequence
 * number in each message's header checks.
 * One more thread per rank takes its messages with MPI_ANY_SOURCE (tag T), so wildcard matching
 * runs alongside the other threads' exact matching; its order is checked per source.
 * Options: --threads T (default 4), --rounds R (default 60).
 */
#include "check.h"

#include <pthread.h>

static int T = 4, R = 60;

static size_t size_of(int src, int dst, int tag, int round) {
    uint64_t h = msg_seed(900 + (uint64_t)tag, src, dst, (uint64_t)round), c = h % 100, r = h >> 8;
    if (c < 15) return 0;
    if (c < 60) return r % 512;
    if (c < 90) return 512 + r % 16000;
    return 16512 + r % ((512u << 10) - 16512 + 1);
}

/* The rank of this rank's p-th peer. */
static int peer_of(int p) { return p < t_rank ? p : p + 1; }

/* The sequence of a message (tag, round) in a sender's stream to one receiver. */
static uint64_t seq_of(int tag, int round) { return (uint64_t)tag << 32 | (uint64_t)round; }

struct worker {
    int tag;
    pthread_t th;
    long long msgs;
};

/* Exact sources: thread `tag` exchanges with every other rank, tag `tag` only. */
static void exchange(struct worker *w) {
    int np = t_size - 1, round, p;
    MPI_Request *rq = xmalloc(sizeof *rq * (size_t)(2 * np));
    MPI_Status *st = xmalloc(sizeof *st * (size_t)(2 * np));
    uint8_t **rb = xmalloc(sizeof *rb * (size_t)np), **sb = xmalloc(sizeof *sb * (size_t)np);
    for (round = 0; round < R; round++) {
        for (p = 0; p < np; p++) {
            int peer = peer_of(p);
            size_t rn = size_of(peer, t_rank, w->tag, round), sn = size_of(t_rank, peer, w->tag, round);
            rb[p] = xmalloc(rn + 64);
            memset(rb[p], 0xA5, rn + 64);
            sb[p] = xmalloc(sn);
            msg_fill(sb[p], sn, 5, t_rank, peer, seq_of(w->tag, round));
            MPI(MPI_Irecv(rb[p], (int)rn + 64, MPI_BYTE, peer, w->tag, MPI_COMM_WORLD, &rq[p]));
        }
        for (p = 0; p < np; p++) {
            int peer = peer_of(p);
            size_t sn = size_of(t_rank, peer, w->tag, round);
            MPI(MPI_Isend(sb[p], (int)sn, MPI_BYTE, peer, w->tag, MPI_COMM_WORLD, &rq[np + p]));
        }
        switch (round % 3) {
        case 0:
            WAITING("thread %d: MPI_Waitall, round %d", w->tag, round);
            MPI(MPI_Waitall(2 * np, rq, st));
            break;
        case 1: {
            int left = 2 * np, i;
            while (left > 0) {
                MPI_Status s;
                WAITING("thread %d: MPI_Waitany, round %d, %d left", w->tag, round, left);
                MPI(MPI_Waitany(2 * np, rq, &i, &s));
                CHECK(i != MPI_UNDEFINED, "thread %d: MPI_Waitany found no active request", w->tag);
                st[i] = s;
                left--;
            }
            break;
        }
        default: {
            int i, flag;
            for (i = 0; i < 2 * np; i++) {
                WAITING("thread %d: MPI_Test polling request %d, round %d", w->tag, i, round);
                do MPI(MPI_Test(&rq[i], &flag, &st[i]));
                while (!flag);
            }
        }
        }
        for (p = 0; p < np; p++) {
            int peer = peer_of(p);
            size_t rn = size_of(peer, t_rank, w->tag, round);
            char what[128];
            snprintf(what, sizeof what, "thread %d, round %d, from rank %d", w->tag, round, peer);
            CHECK_STATUS(st[p], what, peer, w->tag, rn);
            msg_check(rb[p], rn, 5, peer, t_rank, seq_of(w->tag, round), what);
            for (size_t k = rn; k < rn + 64; k++)
                CHECK(rb[p][k] == 0xA5, "%s: byte %zu past the message was written", what, k);
            free(rb[p]);
            free(sb[p]);
            w->msgs++;
        }
    }
    free(rq);
    free(st);
    free(rb);
    free(sb);
}

/* Wildcards: thread T receives everything tagged T with MPI_ANY_SOURCE while sending its own.
 * A fast sender's round r+1 message may be taken before a slow one's round r message, so the
 * sends are only waited for after the last receive: a rendezvous send completes once matched,
 * and waiting for it inside a round could wait on a receive that waits on us. */
static void wildcard(struct worker *w) {
    int np = t_size - 1, round, p, i;
    int *next = xmalloc(sizeof *next * (size_t)t_size);
    memset(next, 0, sizeof *next * (size_t)t_size);
    MPI_Request *sq = xmalloc(sizeof *sq * (size_t)np * (size_t)R);
    uint8_t **sb = xmalloc(sizeof *sb * (size_t)np * (size_t)R);
    size_t cap = (512u << 10) + 64;
    uint8_t *rb = xmalloc(cap);
    for (round = 0; round < R; round++) {
        for (p = 0; p < np; p++) {
            int peer = peer_of(p), k = round * np + p;
            size_t sn = size_of(t_rank, peer, w->tag, round);
            sb[k] = xmalloc(sn);
            msg_fill(sb[k], sn, 5, t_rank, peer, seq_of(w->tag, round));
            MPI(MPI_Isend(sb[k], (int)sn, MPI_BYTE, peer, w->tag, MPI_COMM_WORLD, &sq[k]));
        }
        for (i = 0; i < np; i++) {
            MPI_Status st;
            char what[128];
            memset(rb, 0xA5, cap);
            WAITING("thread %d (wildcard): MPI_Recv(ANY_SOURCE), round %d, %d of %d", w->tag, round, i, np);
            MPI(MPI_Recv(rb, (int)cap, MPI_BYTE, MPI_ANY_SOURCE, w->tag, MPI_COMM_WORLD, &st));
            int src = st.MPI_SOURCE;
            CHECK(src >= 0 && src < t_size && src != t_rank, "wildcard: MPI_SOURCE %d is not a sender", src);
            /* A sender's round r+1 message may overtake another sender's round r, never its own. */
            int r = next[src]++;
            CHECK(r < R, "wildcard: one message too many from rank %d", src);
            snprintf(what, sizeof what, "thread %d (wildcard): message %d from rank %d", w->tag, r, src);
            size_t n = size_of(src, t_rank, w->tag, r);
            CHECK_STATUS(st, what, src, w->tag, n);
            msg_check(rb, n, 5, src, t_rank, seq_of(w->tag, r), what);
            for (size_t k = n; k < n + 64; k++)
                CHECK(rb[k] == 0xA5, "%s: byte %zu past the message was written", what, k);
            w->msgs++;
        }
    }
    WAITING("thread %d (wildcard): its %d sends", w->tag, R * np);
    MPI(MPI_Waitall(R * np, sq, MPI_STATUSES_IGNORE));
    for (i = 0; i < R * np; i++) free(sb[i]);
    for (p = 0; p < t_size; p++)
        if (p != t_rank) CHECK_EQ("wildcard: messages taken from a rank", R, next[p]);
    free(next);
    free(sq);
    free(sb);
    free(rb);
}

static void *run(void *arg) {
    struct worker *w = arg;
    if (w->tag == T) wildcard(w);
    else exchange(w);
    t_wait_clear();
    return NULL;
}

int main(int argc, char **argv) {
    int a, t;
    t_init_thread(&argc, &argv, "threads", MPI_THREAD_MULTIPLE);
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc) T = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--rounds") && a + 1 < argc) R = atoi(argv[++a]);
        else FAIL("unknown argument %s", argv[a]);
    }
    CHECK(T >= 1 && R >= 1, "--threads and --rounds must be at least 1");
    struct worker *ws = xmalloc(sizeof *ws * ((size_t)T + 1));
    memset(ws, 0, sizeof *ws * ((size_t)T + 1));
    PHASE("%d threads exchanging, 1 taking ANY_SOURCE, %d rounds", T, R);
    for (t = 0; t <= T; t++) {
        ws[t].tag = t;
        CHECK(pthread_create(&ws[t].th, NULL, run, &ws[t]) == 0, "pthread_create failed");
    }
    long long msgs = 0;
    for (t = 0; t <= T; t++) {
        pthread_join(ws[t].th, NULL);
        msgs += ws[t].msgs;
    }
    CHECK_EQ("messages received by this rank", (long long)(T + 1) * R * (t_size - 1), msgs);
    free(ws);
    return t_finish();
}

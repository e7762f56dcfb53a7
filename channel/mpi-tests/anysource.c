/* MPI_ANY_SOURCE and MPI_ANY_TAG, with MPI's non-overtaking rule checked: two messages from the
 * same sender that both match a receive are matched in the order they were sent. Every other
 * rank sends K messages (sizes from 0 bytes to 1 MiB, mostly small, so a large rendezvous message
 * is often followed by small eager ones; tags 0, 1, 2) to a root, which checks for every message
 * that it is the next one that sender sent (source, tag, count and every byte):
 *   A. unexpected: the senders' messages are already there when the root calls
 *      MPI_Recv(ANY_SOURCE, ANY_TAG);
 *   B. posted: the root posts every MPI_Irecv(ANY_SOURCE, ANY_TAG) first; receives match in
 *      posting order, so per sender the sequence numbers must rise with the request index;
 *   C. MPI_Recv(ANY_SOURCE, tag) for tag 2, then 1, then 0: per (sender, tag) in send order;
 *   D. MPI_Recv(src, ANY_TAG), senders in descending order: per sender in send order.
 * Roots: rank 0, then the last rank. Options: --count K (default 500).
 */
#include "check.h"

#define MAXMSG (1u << 20)
#define MAXMSG_B (96u << 10)

static size_t size_of(int src, uint64_t seq, int phase) {
    uint64_t h = msg_seed(500 + (uint64_t)phase, src, 0, seq);
    uint64_t c = h % 100, r = h >> 8;
    size_t n;
    if (c < 60) n = r % 33;
    else if (c < 85) n = 33 + r % 2016;
    else if (c < 95) n = 2049 + r % 30720;
    else n = 65536 + r % (MAXMSG - 65536 + 1);
    if (phase == 'B' && n > MAXMSG_B) n = 65536 + r % (MAXMSG_B - 65536 + 1);
    return n;
}

static int tag_of(int src, uint64_t seq) { return (int)(msg_seed(600, src, 0, seq) % 3); }

/* Senders: K messages to root, nonblocking (blocking for phase B), then wait. */
static void send_all(int root, int K, int phase, int blocking) {
    MPI_Request *rq = xmalloc(sizeof *rq * (size_t)K);
    uint8_t **b = xmalloc(sizeof *b * (size_t)K);
    int s;
    for (s = 0; s < K; s++) {
        size_t n = size_of(t_rank, (uint64_t)s, phase);
        b[s] = xmalloc(n);
        msg_fill(b[s], n, (uint64_t)phase, t_rank, root, (uint64_t)s);
        if (blocking) {
            WAITING("MPI_Send %d of %d (%zu bytes, tag %d) to root %d", s, K, n, tag_of(t_rank, (uint64_t)s), root);
            MPI(MPI_Send(b[s], (int)n, MPI_BYTE, root, tag_of(t_rank, (uint64_t)s), MPI_COMM_WORLD));
            rq[s] = MPI_REQUEST_NULL;
        } else {
            WAITING("MPI_Isend %d of %d (%zu bytes) to root %d", s, K, n, root);
            MPI(MPI_Isend(b[s], (int)n, MPI_BYTE, root, tag_of(t_rank, (uint64_t)s), MPI_COMM_WORLD, &rq[s]));
        }
    }
    if (!blocking) {
        WAITING("barrier after posting %d sends to root %d", K, root);
        MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    WAITING("MPI_Waitall of %d sends to root %d", K, root);
    MPI(MPI_Waitall(K, rq, MPI_STATUSES_IGNORE));
    for (s = 0; s < K; s++) free(b[s]);
    free(b);
    free(rq);
}

/* Root: check one received message against the sender's next sequence number (next[src]),
 * or, with a fixed tag, the sender's next sequence number carrying that tag. */
static void check_one(MPI_Status *st, uint8_t *buf, int root, int K, int phase, int *next, int want_tag) {
    int src = st->MPI_SOURCE;
    char what[128];
    CHECK(src >= 0 && src < t_size && src != root, "phase %c: MPI_SOURCE %d is not a sender", phase, src);
    int seq = next[src];
    if (want_tag >= 0)
        while (seq < K && tag_of(src, (uint64_t)seq) != want_tag) seq++;
    CHECK(seq < K, "phase %c: one message too many from rank %d (tag %d)", phase, src, st->MPI_TAG);
    size_t n = size_of(src, (uint64_t)seq, phase);
    snprintf(what, sizeof what, "phase %c root %d: next message from rank %d should be seq %d", phase, root, src, seq);
    CHECK_STATUS(*st, what, src, tag_of(src, (uint64_t)seq), n);
    msg_check(buf, n, (uint64_t)phase, src, root, (uint64_t)seq, what);
    next[src] = seq + 1;
}

/* A phase ends for everyone before the next one's messages go out: otherwise a sender's next
 * phase messages could match the root's still pending ANY_SOURCE receives. */
static void end_phase(void) {
    WAITING("barrier at the end of the phase");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void run(int root, int K) {
    int senders = t_size - 1, total = senders * K, i, src;
    int *next = xmalloc(sizeof *next * (size_t)t_size);
    uint8_t *buf = xmalloc(MAXMSG + 64);
    MPI_Status st;

    /* A: unexpected, ANY_SOURCE + ANY_TAG */
    PHASE("A (unexpected, ANY_SOURCE/ANY_TAG), root %d", root);
    if (t_rank != root) {
        send_all(root, K, 'A', 0);
    } else {
        memset(next, 0, sizeof *next * (size_t)t_size);
        WAITING("barrier (senders post their sends)");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (i = 0; i < total; i++) {
            WAITING("MPI_Recv(ANY_SOURCE, ANY_TAG), message %d of %d", i, total);
            MPI(MPI_Recv(buf, MAXMSG + 64, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            check_one(&st, buf, root, K, 'A', next, -1);
        }
    }

    /* B: posted, ANY_SOURCE + ANY_TAG */
    end_phase();

    PHASE("B (posted, ANY_SOURCE/ANY_TAG), root %d", root);
    if (t_rank != root) {
        WAITING("barrier (root posts its receives)");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        send_all(root, K, 'B', 1);
    } else {
        MPI_Request *rq = xmalloc(sizeof *rq * (size_t)total);
        MPI_Status *sts = xmalloc(sizeof *sts * (size_t)total);
        uint8_t *big = xmalloc((size_t)total * (MAXMSG_B + 64));
        memset(next, 0, sizeof *next * (size_t)t_size);
        WAITING("posting %d MPI_Irecv(ANY_SOURCE, ANY_TAG)", total);
        for (i = 0; i < total; i++)
            MPI(MPI_Irecv(big + (size_t)i * (MAXMSG_B + 64), MAXMSG_B + 64, MPI_BYTE, MPI_ANY_SOURCE,
                          MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i]));
        WAITING("barrier (receives posted)");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        WAITING("MPI_Waitall of %d posted ANY_SOURCE receives", total);
        MPI(MPI_Waitall(total, rq, sts));
        for (i = 0; i < total; i++) check_one(&sts[i], big + (size_t)i * (MAXMSG_B + 64), root, K, 'B', next, -1);
        free(big); free(rq); free(sts);
    }

    /* C: ANY_SOURCE with a fixed tag: 2, 1, 0 */
    end_phase();

    PHASE("C (ANY_SOURCE, tags 2, 1, 0), root %d", root);
    if (t_rank != root) {
        send_all(root, K, 'C', 0);
    } else {
        int tag;
        WAITING("barrier (senders post their sends)");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (tag = 2; tag >= 0; tag--) {
            int count = 0, s;
            for (src = 0; src < t_size; src++)
                for (s = 0; src != root && s < K; s++) count += tag_of(src, (uint64_t)s) == tag;
            memset(next, 0, sizeof *next * (size_t)t_size);
            for (i = 0; i < count; i++) {
                WAITING("MPI_Recv(ANY_SOURCE, tag %d), message %d of %d", tag, i, count);
                MPI(MPI_Recv(buf, MAXMSG + 64, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
                check_one(&st, buf, root, K, 'C', next, tag);
            }
        }
    }

    /* D: fixed source, ANY_TAG, senders in descending order */
    end_phase();

    PHASE("D (source fixed, ANY_TAG), root %d", root);
    if (t_rank != root) {
        send_all(root, K, 'D', 0);
    } else {
        memset(next, 0, sizeof *next * (size_t)t_size);
        WAITING("barrier (senders post their sends)");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (src = t_size - 1; src >= 0; src--) {
            for (i = 0; src != root && i < K; i++) {
                WAITING("MPI_Recv(%d, ANY_TAG), message %d of %d", src, i, K);
                MPI(MPI_Recv(buf, MAXMSG + 64, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                check_one(&st, buf, root, K, 'D', next, -1);
            }
        }
    }

    end_phase();

    /* nothing left over */
    if (t_rank == root) {
        int flag = 1;
        MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "root %d: a message is left over after all phases (source %d tag %d)", root, st.MPI_SOURCE, st.MPI_TAG);
    }
    WAITING("barrier at the end of root %d", root);
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(next);
    free(buf);
}

int main(int argc, char **argv) {
    int K = 500, a;
    t_init(&argc, &argv, "anysource");
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--count") && a + 1 < argc) K = atoi(argv[++a]);
        else FAIL("unknown argument %s", argv[a]);
    }
    run(0, K);
    if (t_size > 2) run(t_size - 1, K);
    if (t_rank == 0)
        printf("anysource: %d messages per sender and phase, 4 phases, %d root(s)\n", K, t_size > 2 ? 2 : 1);
    return t_finish();
}

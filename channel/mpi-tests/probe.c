/* MPI_Probe, MPI_Iprobe, MPI_Mprobe/MPI_Mrecv and MPI_Improbe/MPI_Imrecv. Every rank sends M
 * messages (0 bytes to 512 KiB, random tags 0..9) to every other rank, then receives what it was
 * sent, taking each message with one of:
 *   0. MPI_Probe(ANY_SOURCE, ANY_TAG), a second MPI_Probe(source, tag) that must see the same
 *      message (a probe does not consume), a buffer of exactly MPI_Get_count bytes, MPI_Recv;
 *   1. MPI_Iprobe(ANY_SOURCE, ANY_TAG) polling, then MPI_Recv(source, tag);
 *   2. MPI_Mprobe(ANY_SOURCE, ANY_TAG), then MPI_Iprobe(source, ANY_TAG) must NOT see the
 *      matched message again (it may see the sender's next one), then MPI_Mrecv;
 *   3. MPI_Improbe(ANY_SOURCE, ANY_TAG) polling, then MPI_Imrecv + MPI_Wait;
 *   4. MPI_Probe(source, ANY_TAG) for a chosen source, then MPI_Recv(source, ANY_TAG).
 * All of them use ANY_TAG, so per sender the messages must come in send order; each one's
 * source, tag, count and bytes are checked. Also: MPI_Iprobe finds nothing before the sends and
 * after the last receive; MPI_Mprobe(MPI_PROC_NULL) gives MPI_MESSAGE_NO_PROC.
 * Options: --count M (default 300 per pair).
 */
#include "check.h"

static size_t size_of(int src, int dst, uint64_t seq) {
    uint64_t h = msg_seed(800, src, dst, seq), c = h % 100, r = h >> 8;
    if (c < 10) return 0;
    if (c < 60) return r % 256;
    if (c < 90) return 256 + r % 16128;
    return 16384 + r % (496u << 10);
}
static int tag_of(int src, int dst, uint64_t seq) { return (int)(msg_seed(801, src, dst, seq) % 10); }

static void check_msg(MPI_Status *st, void *buf, int *next, int M, const char *how) {
    int src = st->MPI_SOURCE;
    char what[128];
    CHECK(src >= 0 && src < t_size && src != t_rank, "%s: MPI_SOURCE %d is not a sender", how, src);
    CHECK(next[src] < M, "%s: one message too many from rank %d", how, src);
    uint64_t seq = (uint64_t)next[src]++;
    snprintf(what, sizeof what, "%s: next message from rank %d should be seq %llu", how, src, (unsigned long long)seq);
    CHECK_STATUS(*st, what, src, tag_of(src, t_rank, seq), size_of(src, t_rank, seq));
    msg_check(buf, size_of(src, t_rank, seq), 9, src, t_rank, seq, what);
}

static void assert_nothing_pending(const char *when) {
    int flag = 1;
    MPI_Status st;
    MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag, "MPI_Iprobe %s found a message (source %d, tag %d); expected none", when, st.MPI_SOURCE, st.MPI_TAG);
}

int main(int argc, char **argv) {
    int M = 300, a, p, i;
    t_init(&argc, &argv, "probe");
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--count") && a + 1 < argc) M = atoi(argv[++a]);
        else FAIL("unknown argument %s", argv[a]);
    }
    int total_in = (t_size - 1) * M, nsend = (t_size - 1) * M;
    int *next = calloc((size_t)t_size, sizeof *next);
    MPI_Request *rq = xmalloc(sizeof *rq * (size_t)nsend);
    uint8_t **sb = xmalloc(sizeof *sb * (size_t)nsend);
    MPI_Status st, st2;

    PHASE("MPI_PROC_NULL and an empty queue");
    {
        MPI_Message m = MPI_MESSAGE_NULL;
        MPI(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
        CHECK(m == MPI_MESSAGE_NO_PROC, "MPI_Mprobe(MPI_PROC_NULL) did not return MPI_MESSAGE_NO_PROC");
        CHECK_EQ("MPI_Mprobe(MPI_PROC_NULL) status source", MPI_PROC_NULL, st.MPI_SOURCE);
        MPI(MPI_Mrecv(NULL, 0, MPI_BYTE, &m, &st));
        CHECK_EQ("MPI_Mrecv(MPI_MESSAGE_NO_PROC) status source", MPI_PROC_NULL, st.MPI_SOURCE);
        assert_nothing_pending("before any send");
        WAITING("barrier before the sends");
        MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    PHASE("sending %d messages to each of %d peers", M, t_size - 1);
    for (p = 0, i = 0; p < t_size; p++) {
        int s;
        if (p == t_rank) continue;
        for (s = 0; s < M; s++, i++) {
            size_t n = size_of(t_rank, p, (uint64_t)s);
            sb[i] = xmalloc(n);
            msg_fill(sb[i], n, 9, t_rank, p, (uint64_t)s);
            WAITING("MPI_Isend %d of %d (%zu bytes) to %d", s, M, n, p);
            MPI(MPI_Isend(sb[i], (int)n, MPI_BYTE, p, tag_of(t_rank, p, (uint64_t)s), MPI_COMM_WORLD, &rq[i]));
        }
    }

    for (i = 0; i < total_in; i++) {
        int method = i % 5, count = -1, flag = 0;
        void *buf;
        PHASE("receive %d of %d by method %d", i, total_in, method);
        switch (method) {
        case 0:
            WAITING("MPI_Probe(ANY_SOURCE, ANY_TAG)");
            MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            WAITING("second MPI_Probe(%d, %d)", st.MPI_SOURCE, st.MPI_TAG);
            MPI(MPI_Probe(st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
            {
                int c2 = -1;
                MPI(MPI_Get_count(&st2, MPI_BYTE, &c2));
                CHECK(st2.MPI_SOURCE == st.MPI_SOURCE && st2.MPI_TAG == st.MPI_TAG && c2 == count,
                      "a second probe saw a different message: source %d tag %d %d bytes, then source %d tag %d %d bytes",
                      st.MPI_SOURCE, st.MPI_TAG, count, st2.MPI_SOURCE, st2.MPI_TAG, c2);
            }
            buf = xmalloc((size_t)count);
            WAITING("MPI_Recv(%d, %d) of the probed %d bytes", st.MPI_SOURCE, st.MPI_TAG, count);
            MPI(MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
            check_msg(&st2, buf, next, M, "MPI_Probe + MPI_Recv");
            free(buf);
            break;
        case 1:
            WAITING("MPI_Iprobe(ANY_SOURCE, ANY_TAG) polling");
            while (!flag) MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            buf = xmalloc((size_t)count);
            WAITING("MPI_Recv(%d, %d) of the probed %d bytes", st.MPI_SOURCE, st.MPI_TAG, count);
            MPI(MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
            check_msg(&st2, buf, next, M, "MPI_Iprobe + MPI_Recv");
            free(buf);
            break;
        case 2: {
            MPI_Message m;
            int src;
            WAITING("MPI_Mprobe(ANY_SOURCE, ANY_TAG)");
            MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st));
            MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            src = st.MPI_SOURCE;
            CHECK(src >= 0 && src < t_size && next[src] < M, "MPI_Mprobe: unexpected source %d", src);
            MPI(MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st2));
            if (flag) { /* must be the sender's next message, not the matched one */
                int c2 = -1;
                uint64_t nx = (uint64_t)next[src] + 1;
                MPI(MPI_Get_count(&st2, MPI_BYTE, &c2));
                CHECK(nx < (uint64_t)M && st2.MPI_TAG == tag_of(src, t_rank, nx) && c2 == (int)size_of(src, t_rank, nx),
                      "after MPI_Mprobe matched seq %d from %d, MPI_Iprobe(%d, ANY_TAG) saw tag %d %d bytes; "
                      "expected nothing or seq %llu (tag %d, %zu bytes)",
                      next[src], src, src, st2.MPI_TAG, c2, (unsigned long long)nx,
                      nx < (uint64_t)M ? tag_of(src, t_rank, nx) : -1, nx < (uint64_t)M ? size_of(src, t_rank, nx) : 0);
            }
            buf = xmalloc((size_t)count);
            WAITING("MPI_Mrecv of %d bytes from %d", count, src);
            MPI(MPI_Mrecv(buf, count, MPI_BYTE, &m, &st2));
            CHECK(m == MPI_MESSAGE_NULL, "MPI_Mrecv did not set the message handle to MPI_MESSAGE_NULL");
            check_msg(&st2, buf, next, M, "MPI_Mprobe + MPI_Mrecv");
            free(buf);
            break;
        }
        case 3: {
            MPI_Message m;
            MPI_Request r;
            WAITING("MPI_Improbe(ANY_SOURCE, ANY_TAG) polling");
            while (!flag) MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
            MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            buf = xmalloc((size_t)count + 16);
            MPI(MPI_Imrecv(buf, count + 16, MPI_BYTE, &m, &r));
            WAIT(&r, &st2, "MPI_Wait of MPI_Imrecv, %d bytes from %d", count, st.MPI_SOURCE);
            check_msg(&st2, buf, next, M, "MPI_Improbe + MPI_Imrecv");
            free(buf);
            break;
        }
        case 4: {
            int src = (t_rank + 1 + i / 5) % t_size, k;
            for (k = 0; k < t_size && (src == t_rank || next[src] >= M); k++) src = (src + 1) % t_size;
            CHECK(src != t_rank && next[src] < M, "no sender left but %d messages missing", total_in - i);
            WAITING("MPI_Probe(%d, ANY_TAG)", src);
            MPI(MPI_Probe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK_EQ("MPI_Probe(src, ANY_TAG) source", src, st.MPI_SOURCE);
            MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            buf = xmalloc((size_t)count);
            WAITING("MPI_Recv(%d, ANY_TAG) of the probed %d bytes", src, count);
            MPI(MPI_Recv(buf, count, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st2));
            CHECK_EQ("MPI_Recv after MPI_Probe: tag", st.MPI_TAG, st2.MPI_TAG);
            check_msg(&st2, buf, next, M, "MPI_Probe(src) + MPI_Recv(src, ANY_TAG)");
            free(buf);
            break;
        }
        }
    }
    PHASE("completing the sends");
    WAITING("MPI_Waitall of %d sends", nsend);
    MPI(MPI_Waitall(nsend, rq, MPI_STATUSES_IGNORE));
    for (i = 0; i < nsend; i++) free(sb[i]);
    WAITING("barrier after the last receive");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    assert_nothing_pending("after the last receive");
    if (t_rank == 0) printf("probe: %d messages per pair, 5 probe methods\n", M);
    free(next); free(rq); free(sb);
    return t_finish();
}

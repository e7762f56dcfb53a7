/* Ping-pong of every size from 0 bytes to 64 MiB: 0..3, then 2^k-1, 2^k, 2^k+1 for every k up to
 * the maximum. Ranks pair up (0-1, 2-3, ...), all pairs at once. Every byte is checked, and so
 * are source, tag and count; the bytes after the message in the receive buffer must be
 * untouched (no overrun), and half of the receives post a larger buffer than the message.
 *   1. blocking: MPI_Send / MPI_Recv, the even rank starts;
 *   2. exchange: both ranks send at once (MPI_Isend + MPI_Irecv, or MPI_Sendrecv), up to
 *      --exchange-max (default 16 MiB).
 * Options: --max BYTES (default 64 MiB; env PINGPONG_MAX), --exchange-max BYTES.
 */
#include "check.h"

#define POISON 0xA5
#define SLACK 100

static size_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

static int build_sizes(size_t max, size_t *out) {
    int n = 0;
    size_t k;
    for (k = 0; k <= 3 && k <= max; k++) out[n++] = k;
    for (k = 4; k <= max + 1 && k != 0; k <<= 1) {
        size_t c[3] = {k - 1, k, k + 1}, j;
        for (j = 0; j < 3; j++)
            if (c[j] <= max && c[j] > out[n - 1]) out[n++] = c[j];
    }
    return n;
}

static int iters_for(size_t n) { return n <= 65536 ? 3 : n <= (4u << 20) ? 2 : 1; }

static void check_tail(const uint8_t *buf, size_t n, const char *what) {
    size_t i;
    for (i = n; i < n + SLACK; i++)
        if (buf[i] != POISON)
            FAIL("%s: the receive wrote past the message's %zu bytes: byte %zu is 0x%02x, expected "
                 "poison 0x%02x",
                 what, n, i, buf[i], POISON);
}

int main(int argc, char **argv) {
    size_t max = 64u << 20, xmax = 16u << 20, sizes[256];
    int nsizes, i, it, a;
    uint8_t *sbuf, *rbuf;
    const char *env;
    t_init(&argc, &argv, "pingpong");
    if ((env = getenv("PINGPONG_MAX"))) max = parse_size(env);
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--max") && a + 1 < argc) max = parse_size(argv[++a]);
        else if (!strcmp(argv[a], "--exchange-max") && a + 1 < argc) xmax = parse_size(argv[++a]);
        else FAIL("unknown argument %s", argv[a]);
    }
    if (xmax > max) xmax = max;
    nsizes = build_sizes(max, sizes);
    int peer = t_rank ^ 1;
    int active = peer < t_size;
    sbuf = xmalloc(max + SLACK);
    rbuf = xmalloc(max + SLACK);

    /* 1. blocking ping-pong */
    for (i = 0; active && i < nsizes; i++) {
        size_t n = sizes[i];
        int posted = (int)(n + (i % 2 ? SLACK : 0));
        for (it = 0; it < iters_for(n); it++) {
            uint64_t seq = (uint64_t)i * 16 + (uint64_t)it;
            int leg;
            MPI_Status st;
            PHASE("blocking ping-pong %zu bytes with rank %d, iteration %d", n, peer, it);
            for (leg = 0; leg < 2; leg++) {
                int sender = (leg == 0) == (t_rank % 2 == 0);
                char what[96];
                snprintf(what, sizeof what, "blocking %zu bytes, iteration %d, leg %d", n, it, leg);
                if (sender) {
                    msg_fill(sbuf, n, 1, t_rank, peer, seq * 2 + (uint64_t)leg);
                    WAITING("MPI_Send of %zu bytes to %d tag %d", n, peer, i);
                    MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, peer, i, MPI_COMM_WORLD));
                } else {
                    memset(rbuf, POISON, n + SLACK);
                    WAITING("MPI_Recv of %zu bytes from %d tag %d", n, peer, i);
                    MPI(MPI_Recv(rbuf, posted, MPI_BYTE, peer, i, MPI_COMM_WORLD, &st));
                    CHECK_STATUS(st, what, peer, i, n);
                    msg_check(rbuf, n, 1, peer, t_rank, seq * 2 + (uint64_t)leg, what);
                    check_tail(rbuf, n, what);
                }
            }
        }
    }

    /* 2. both directions at once */
    for (i = 0; active && i < nsizes && sizes[i] <= xmax; i++) {
        size_t n = sizes[i];
        int posted = (int)(n + (i % 2 ? 0 : SLACK));
        for (it = 0; it < iters_for(n); it++) {
            uint64_t seq = (uint64_t)i * 16 + (uint64_t)it;
            MPI_Status st;
            char what[96];
            PHASE("exchange %zu bytes with rank %d, iteration %d", n, peer, it);
            snprintf(what, sizeof what, "exchange %zu bytes, iteration %d", n, it);
            msg_fill(sbuf, n, 2, t_rank, peer, seq);
            memset(rbuf, POISON, n + SLACK);
            if ((i + it) % 2 == 0) {
                MPI_Request rq[2];
                MPI_Status sts[2];
                MPI(MPI_Irecv(rbuf, posted, MPI_BYTE, peer, 1000 + i, MPI_COMM_WORLD, &rq[0]));
                MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, peer, 1000 + i, MPI_COMM_WORLD, &rq[1]));
                WAITING("MPI_Waitall of exchange (%zu bytes) with %d tag %d", n, peer, 1000 + i);
                MPI(MPI_Waitall(2, rq, sts));
                st = sts[0];
            } else {
                WAITING("MPI_Sendrecv of %zu bytes with %d tag %d", n, peer, 1000 + i);
                MPI(MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, peer, 1000 + i, rbuf, posted, MPI_BYTE,
                                 peer, 1000 + i, MPI_COMM_WORLD, &st));
            }
            CHECK_STATUS(st, what, peer, 1000 + i, n);
            msg_check(rbuf, n, 2, peer, t_rank, seq, what);
            check_tail(rbuf, n, what);
        }
    }
    free(sbuf);
    free(rbuf);
    if (t_rank == 0)
        printf("pingpong: %d sizes from 0 to %zu bytes (exchange up to %zu)\n", nsizes, max, xmax);
    return t_finish();
}

/* Collectives with every result checked, on MPI_COMM_WORLD, on a duplicate of it and on two
 * halves from MPI_Comm_split (ranks in reverse order, so local and world ranks differ):
 *   barrier (a late rank holds everybody back; 200 quick ones), bcast (every root, 0 B to 4 MiB),
 *   reduce and allreduce (every root; int64 sum/max/min/bxor and double sum, 1 to 256Ki
 *   elements, also MPI_IN_PLACE), alltoall (0 B to 64 KiB per pair), alltoallv (random counts
 *   with zeros and gaps between the blocks; the gaps must stay untouched), allgather, gather and
 *   scatter (every root), gatherv, scatterv and allgatherv with uneven counts.
 * Data moved by a collective carries the msg_fill pattern of (source, destination), so a block
 * in the wrong place or from the wrong rank is named in the failure.
 */
#include "check.h"

#define POISON 0x3C

static int *g_world; /* world rank of each rank of the communicator under test */
#define wrank(c, r) ((void)(c), g_world[(r)])

static void set_world_ranks(MPI_Comm c, int n) {
    MPI_Group g, w;
    int *r = xmalloc(sizeof(int) * (size_t)n), i;
    free(g_world);
    g_world = xmalloc(sizeof(int) * (size_t)n);
    for (i = 0; i < n; i++) r[i] = i;
    MPI(MPI_Comm_group(c, &g));
    MPI(MPI_Comm_group(MPI_COMM_WORLD, &w));
    MPI(MPI_Group_translate_ranks(g, n, r, w, g_world));
    MPI(MPI_Group_free(&g));
    MPI(MPI_Group_free(&w));
    free(r);
}

static int64_t val(int rank, int i, int op) { return (int64_t)t_mix64((uint64_t)rank * 1000003u + (uint64_t)i * 7 + (uint64_t)op) % 1000000 - 500000; }

static void test_barrier(MPI_Comm c, const char *cn, int me, int n) {
    int round, i;
    for (round = 0; round < 2 && n > 1; round++) {
        int late = round == 0 ? n - 1 : 0;
        double t0, dt;
        PHASE("%s: barrier with rank %d late by 300 ms", cn, late);
        WAITING("%s: barrier before the timed barrier", cn);
        MPI(MPI_Barrier(c));
        t0 = MPI_Wtime();
        if (me == late) usleep(300000);
        WAITING("%s: barrier with rank %d late", cn, late);
        MPI(MPI_Barrier(c));
        dt = MPI_Wtime() - t0;
        CHECK(me == late || dt > 0.15,
              "%s: MPI_Barrier returned after %.1f ms although rank %d entered it 300 ms late", cn, dt * 1e3, late);
    }
    PHASE("%s: 200 barriers", cn);
    WAITING("%s: one of 200 barriers", cn);
    for (i = 0; i < 200; i++) MPI(MPI_Barrier(c));
}

static void test_bcast(MPI_Comm c, const char *cn, int me, int n) {
    static const size_t sizes[] = {0, 1, 1000, 65537, (1u << 20) + 3, 4u << 20};
    uint8_t *b = xmalloc((4u << 20) + 16);
    int root;
    size_t k;
    for (root = 0; root < n; root++)
        for (k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t s = sizes[k];
            char what[96];
            if (s > 65537 && root > 1) continue; /* large sizes from two roots only */
            snprintf(what, sizeof what, "%s: bcast of %zu bytes from root %d", cn, s, root);
            PHASE("%s", what);
            if (me == root) msg_fill(b, s, 50, wrank(c, root), -1, k);
            else memset(b, POISON, s);
            WAITING("%s", what);
            MPI(MPI_Bcast(b, (int)s, MPI_BYTE, root, c));
            msg_check(b, s, 50, wrank(c, root), -1, k, what);
        }
    free(b);
}

static void test_reduce(MPI_Comm c, const char *cn, int me, int n, int all) {
    static const int counts[] = {1, 100, 65543, 262144};
    static const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR};
    static const char *opn[] = {"MPI_SUM", "MPI_MAX", "MPI_MIN", "MPI_BXOR"};
    int64_t *in = xmalloc(sizeof(int64_t) * 262144), *out = xmalloc(sizeof(int64_t) * 262144);
    double *din = xmalloc(sizeof(double) * 262144), *dout = xmalloc(sizeof(double) * 262144);
    int root, ci, oi, i, r;
    for (root = 0; root < (all ? 1 : n); root++)
        for (ci = 0; ci < 4; ci++) {
            int cnt = counts[ci];
            if (cnt > 100 && root > 1) continue;
            for (oi = 0; oi < 5; oi++) {
                char what[128];
                int inplace = (ci + oi) % 3 == 0;
                snprintf(what, sizeof what, "%s: %s of %d %s (%s)%s%s", cn, all ? "allreduce" : "reduce", cnt,
                         oi < 4 ? "int64" : "double", oi < 4 ? opn[oi] : "MPI_SUM", all ? "" : " to root ",
                         inplace ? ", MPI_IN_PLACE" : "");
                if (!all) snprintf(what + strlen(what), sizeof what - strlen(what), " root %d", root);
                PHASE("%s", what);
                for (i = 0; i < cnt; i++) {
                    in[i] = val(wrank(c, me), i, oi);
                    din[i] = (double)in[i];
                    out[i] = -1;
                    dout[i] = -1;
                }
                WAITING("%s", what);
                if (oi < 4) {
                    if (inplace && (all || me == root)) {
                        memcpy(out, in, sizeof(int64_t) * (size_t)cnt);
                        if (all) MPI(MPI_Allreduce(MPI_IN_PLACE, out, cnt, MPI_INT64_T, ops[oi], c));
                        else MPI(MPI_Reduce(MPI_IN_PLACE, out, cnt, MPI_INT64_T, ops[oi], root, c));
                    } else if (all) MPI(MPI_Allreduce(in, out, cnt, MPI_INT64_T, ops[oi], c));
                    else MPI(MPI_Reduce(in, out, cnt, MPI_INT64_T, ops[oi], root, c));
                } else {
                    if (inplace && (all || me == root)) {
                        memcpy(dout, din, sizeof(double) * (size_t)cnt);
                        if (all) MPI(MPI_Allreduce(MPI_IN_PLACE, dout, cnt, MPI_DOUBLE, MPI_SUM, c));
                        else MPI(MPI_Reduce(MPI_IN_PLACE, dout, cnt, MPI_DOUBLE, MPI_SUM, root, c));
                    } else if (all) MPI(MPI_Allreduce(din, dout, cnt, MPI_DOUBLE, MPI_SUM, c));
                    else MPI(MPI_Reduce(din, dout, cnt, MPI_DOUBLE, MPI_SUM, root, c));
                }
                if (!all && me != root) continue;
                for (i = 0; i < cnt; i++) {
                    int64_t e = val(wrank(c, 0), i, oi);
                    for (r = 1; r < n; r++) {
                        int64_t v = val(wrank(c, r), i, oi);
                        switch (oi) {
                        case 0: case 4: e += v; break;
                        case 1: e = v > e ? v : e; break;
                        case 2: e = v < e ? v : e; break;
                        case 3: e ^= v; break;
                        }
                    }
                    if (oi < 4 && out[i] != e)
                        FAIL("%s: element %d: expected %lld, received %lld", what, i, (long long)e, (long long)out[i]);
                    if (oi == 4 && dout[i] != (double)e)
                        FAIL("%s: element %d: expected %.1f, received %.1f", what, i, (double)e, dout[i]);
                }
            }
        }
    free(in); free(out); free(din); free(dout);
}

static void test_alltoall(MPI_Comm c, const char *cn, int me, int n) {
    static const size_t per[] = {0, 1, 1000, 65536};
    size_t k;
    int p;
    for (k = 0; k < sizeof per / sizeof *per; k++) {
        size_t s = per[k];
        uint8_t *sb = xmalloc(s * (size_t)n), *rb = xmalloc(s * (size_t)n);
        char what[96];
        snprintf(what, sizeof what, "%s: alltoall of %zu bytes per pair", cn, s);
        PHASE("%s", what);
        for (p = 0; p < n; p++) msg_fill(sb + s * (size_t)p, s, 51, wrank(c, me), wrank(c, p), k);
        memset(rb, POISON, s * (size_t)n);
        WAITING("%s", what);
        MPI(MPI_Alltoall(sb, (int)s, MPI_BYTE, rb, (int)s, MPI_BYTE, c));
        for (p = 0; p < n; p++) {
            char w2[128];
            snprintf(w2, sizeof w2, "%s, block from rank %d", what, p);
            msg_check(rb + s * (size_t)p, s, 51, wrank(c, p), wrank(c, me), k, w2);
        }
        free(sb);
        free(rb);
    }
}

static int a2av_count(int src, int dst, int round) {
    uint64_t h = msg_seed(52, src, dst, (uint64_t)round);
    return h % 5 == 0 ? 0 : (int)(h % (round == 0 ? 100 : 70000));
}

static void test_alltoallv(MPI_Comm c, const char *cn, int me, int n) {
    int round, p;
    for (round = 0; round < 3; round++) {
        int *sc = xmalloc(sizeof(int) * (size_t)n), *sd = xmalloc(sizeof(int) * (size_t)n);
        int *rc = xmalloc(sizeof(int) * (size_t)n), *rd = xmalloc(sizeof(int) * (size_t)n);
        size_t stot = 0, rtot = 0;
        char what[96];
        snprintf(what, sizeof what, "%s: alltoallv round %d", cn, round);
        PHASE("%s", what);
        for (p = 0; p < n; p++) { /* blocks in reverse order with 7-byte gaps */
            sc[p] = a2av_count(wrank(c, me), wrank(c, p), round);
            rc[p] = a2av_count(wrank(c, p), wrank(c, me), round);
        }
        for (p = n - 1; p >= 0; p--) {
            sd[p] = (int)stot;
            stot += (size_t)sc[p] + 7;
            rd[p] = (int)rtot;
            rtot += (size_t)rc[p] + 7;
        }
        uint8_t *sb = xmalloc(stot), *rb = xmalloc(rtot);
        for (p = 0; p < n; p++) msg_fill(sb + sd[p], (size_t)sc[p], 52, wrank(c, me), wrank(c, p), (uint64_t)round);
        memset(rb, POISON, rtot);
        WAITING("%s", what);
        MPI(MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, c));
        for (p = 0; p < n; p++) {
            char w2[128];
            int g;
            snprintf(w2, sizeof w2, "%s, %d bytes from rank %d", what, rc[p], p);
            msg_check(rb + rd[p], (size_t)rc[p], 52, wrank(c, p), wrank(c, me), (uint64_t)round, w2);
            for (g = 0; g < 7; g++)
                CHECK(rb[rd[p] + rc[p] + g] == POISON, "%s: the gap after the block from rank %d was written", what, p);
        }
        free(sc); free(sd); free(rc); free(rd); free(sb); free(rb);
    }
}

static void test_gathers(MPI_Comm c, const char *cn, int me, int n) {
    static const size_t per[] = {1, 1000, 100000};
    size_t k;
    int root, p;
    for (k = 0; k < sizeof per / sizeof *per; k++) {
        size_t s = per[k];
        uint8_t *one = xmalloc(s), *all = xmalloc(s * (size_t)n);
        char what[96];
        snprintf(what, sizeof what, "%s: allgather of %zu bytes", cn, s);
        PHASE("%s", what);
        msg_fill(one, s, 53, wrank(c, me), -1, k);
        memset(all, POISON, s * (size_t)n);
        WAITING("%s", what);
        MPI(MPI_Allgather(one, (int)s, MPI_BYTE, all, (int)s, MPI_BYTE, c));
        for (p = 0; p < n; p++) msg_check(all + s * (size_t)p, s, 53, wrank(c, p), -1, k, what);
        for (root = 0; root < n; root++) {
            snprintf(what, sizeof what, "%s: gather of %zu bytes to root %d", cn, s, root);
            PHASE("%s", what);
            msg_fill(one, s, 53, wrank(c, me), -1, k); /* the previous scatter overwrote it */
            memset(all, POISON, s * (size_t)n);
            WAITING("%s", what);
            MPI(MPI_Gather(one, (int)s, MPI_BYTE, all, (int)s, MPI_BYTE, root, c));
            for (p = 0; me == root && p < n; p++) msg_check(all + s * (size_t)p, s, 53, wrank(c, p), -1, k, what);
            snprintf(what, sizeof what, "%s: scatter of %zu bytes from root %d", cn, s, root);
            PHASE("%s", what);
            if (me == root)
                for (p = 0; p < n; p++) msg_fill(all + s * (size_t)p, s, 54, wrank(c, root), wrank(c, p), k);
            memset(one, POISON, s);
            WAITING("%s", what);
            MPI(MPI_Scatter(all, (int)s, MPI_BYTE, one, (int)s, MPI_BYTE, root, c));
            msg_check(one, s, 54, wrank(c, root), wrank(c, me), k, what);
        }
        free(one);
        free(all);
    }
    /* v variants: rank r contributes (r * 977 + 13) % 5000 bytes (world rank) */
    {
        int *cnt = xmalloc(sizeof(int) * (size_t)n), *dsp = xmalloc(sizeof(int) * (size_t)n), tot = 0;
        for (p = 0; p < n; p++) {
            cnt[p] = (wrank(c, p) * 977 + 13) % 5000;
            dsp[p] = tot;
            tot += cnt[p] + 3;
        }
        uint8_t *one = xmalloc((size_t)cnt[me]), *all = xmalloc((size_t)tot);
        char what[96];
        msg_fill(one, (size_t)cnt[me], 55, wrank(c, me), -1, 0);
        snprintf(what, sizeof what, "%s: allgatherv", cn);
        PHASE("%s", what);
        memset(all, POISON, (size_t)tot);
        WAITING("%s", what);
        MPI(MPI_Allgatherv(one, cnt[me], MPI_BYTE, all, cnt, dsp, MPI_BYTE, c));
        for (p = 0; p < n; p++) msg_check(all + dsp[p], (size_t)cnt[p], 55, wrank(c, p), -1, 0, what);
        for (root = 0; root < n; root++) {
            snprintf(what, sizeof what, "%s: gatherv to root %d", cn, root);
            PHASE("%s", what);
            memset(all, POISON, (size_t)tot);
            WAITING("%s", what);
            MPI(MPI_Gatherv(one, cnt[me], MPI_BYTE, all, cnt, dsp, MPI_BYTE, root, c));
            for (p = 0; me == root && p < n; p++) msg_check(all + dsp[p], (size_t)cnt[p], 55, wrank(c, p), -1, 0, what);
            snprintf(what, sizeof what, "%s: scatterv from root %d", cn, root);
            PHASE("%s", what);
            if (me == root)
                for (p = 0; p < n; p++) msg_fill(all + dsp[p], (size_t)cnt[p], 56, wrank(c, root), wrank(c, p), (uint64_t)root);
            uint8_t *mine = xmalloc((size_t)cnt[me] + 3);
            memset(mine, POISON, (size_t)cnt[me] + 3);
            WAITING("%s", what);
            MPI(MPI_Scatterv(all, cnt, dsp, MPI_BYTE, mine, cnt[me], MPI_BYTE, root, c));
            msg_check(mine, (size_t)cnt[me], 56, wrank(c, root), wrank(c, me), (uint64_t)root, what);
            CHECK(mine[cnt[me]] == POISON, "%s: scatterv wrote past the %d bytes", what, cnt[me]);
            free(mine);
        }
        free(one); free(all); free(cnt); free(dsp);
    }
}

static void run_all(MPI_Comm c, const char *cn) {
    int me, n;
    MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    MPI(MPI_Comm_rank(c, &me));
    MPI(MPI_Comm_size(c, &n));
    set_world_ranks(c, n);
    test_barrier(c, cn, me, n);
    test_bcast(c, cn, me, n);
    test_reduce(c, cn, me, n, 0);
    test_reduce(c, cn, me, n, 1);
    test_alltoall(c, cn, me, n);
    test_alltoallv(c, cn, me, n);
    test_gathers(c, cn, me, n);
}

int main(int argc, char **argv) {
    MPI_Comm dup, half;
    char name[64];
    t_init(&argc, &argv, "collectives");
    run_all(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    run_all(dup, "dup of MPI_COMM_WORLD");
    MPI(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_size - t_rank, &half));
    snprintf(name, sizeof name, "split half %d (reversed)", t_rank % 2);
    run_all(half, name);
    MPI(MPI_Comm_free(&dup));
    MPI(MPI_Comm_free(&half));
    if (t_rank == 0) printf("collectives: world, dup and split halves checked\n");
    return t_finish();
}

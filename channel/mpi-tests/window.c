/* Windows of MPI_Isend / MPI_Irecv: in every round each rank has W sends to and W receives from
 * every other rank in flight at once (both directions), of random sizes from 0 bytes to 2 MiB
 * (mostly small, some above any eager limit). Rounds vary:
 *   - tags: all the same (receives match in posting order: MPI's non-overtaking rule), all
 *     distinct with the receives posted in reverse order, or four tags interleaved;
 *   - order: receives posted before the sends, after them, or interleaved with them;
 *   - completion: MPI_Waitall, MPI_Waitany, MPI_Testsome, or MPI_Testall polling.
 * Every message's source, tag, count and bytes are checked.
 * Options: --rounds R (default 72: every combination twice; on more than 4 ranks 36, every
 * combination once, as each round's traffic grows with the peers), --window W (default 48).
 */
#include "check.h"

static size_t msg_size(int src, int dst, int round, int i) {
    uint64_t h = msg_seed(77, src, dst, (uint64_t)round << 20 | (uint64_t)i);
    uint64_t c = h % 100, r = h >> 8;
    if (c < 40) return r % 65;                       /* 0..64 */
    if (c < 70) return 65 + r % 4032;                /* ..4 KiB */
    if (c < 90) return 4097 + r % 61440;             /* ..64 KiB */
    if (c < 98) return 65537 + r % (448u << 10);     /* ..512 KiB */
    return (512u << 10) + r % (1536u << 10);         /* ..2 MiB */
}

static int tag_of(int mode, int i) { return mode == 0 ? 5 : mode == 1 ? 100 + i : i % 4; }

int main(int argc, char **argv) {
    int rounds = 0, W = 48, a, round;
    t_init(&argc, &argv, "window");
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--rounds") && a + 1 < argc) rounds = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--window") && a + 1 < argc) W = atoi(argv[++a]);
        else FAIL("unknown argument %s", argv[a]);
    }
    if (rounds <= 0) rounds = t_size > 4 ? 36 : 72;
    int npeers = t_size - 1, nreq = 2 * npeers * W;
    MPI_Request *rq = xmalloc(sizeof *rq * (size_t)nreq);
    MPI_Status *st = xmalloc(sizeof *st * (size_t)nreq);
    int *idx = xmalloc(sizeof *idx * (size_t)nreq);
    uint8_t **sb = xmalloc(sizeof *sb * (size_t)npeers * (size_t)W);
    uint8_t **rb = xmalloc(sizeof *rb * (size_t)npeers * (size_t)W);
    size_t *rposted = xmalloc(sizeof *rposted * (size_t)npeers * (size_t)W);
    long long total_msgs = 0, total_bytes = 0;

    for (round = 0; round < rounds; round++) {
        int tagmode = round % 3, order = (round / 3) % 3, completion = round % 4;
        rng_t rng = rng_new((uint64_t)t_rank << 32 | (uint64_t)round);
        int k, p, i, nr = 0;
        PHASE("round %d (tags %d, order %d, completion %d)", round, tagmode, order, completion);
        /* buffers: sends filled now, receives poisoned */
        for (p = 0; p < npeers; p++) {
            int peer = p < t_rank ? p : p + 1;
            for (i = 0; i < W; i++) {
                size_t sn = msg_size(t_rank, peer, round, i), rn = msg_size(peer, t_rank, round, i);
                rposted[p * W + i] = rn + rng_below(&rng, 3) * rng_below(&rng, 1000);
                sb[p * W + i] = xmalloc(sn);
                msg_fill(sb[p * W + i], sn, 3, t_rank, peer, (uint64_t)round << 20 | (uint64_t)i);
                rb[p * W + i] = xmalloc(rposted[p * W + i]);
                memset(rb[p * W + i], 0xA5, rposted[p * W + i]);
            }
        }
        /* post: request r < npeers*W are receives (p*W+i), the rest sends */
        WAITING("posting %d receives and %d sends (round %d)", npeers * W, npeers * W, round);
        for (k = 0; k < 2; k++) {
            int doing_recv = (order == 0) ? (k == 0) : (order == 1) ? (k == 1) : -1;
            for (p = 0; p < npeers; p++) {
                int peer = p < t_rank ? p : p + 1;
                for (i = 0; i < W; i++) {
                    int ri = tagmode == 1 ? W - 1 - i : i; /* mode 1: receives in reverse order */
                    int do_r = doing_recv == -1 ? (k == 0) : doing_recv;
                    int do_s = doing_recv == -1 ? (k == 0) : !doing_recv;
                    if (do_r) {
                        MPI(MPI_Irecv(rb[p * W + ri], (int)rposted[p * W + ri], MPI_BYTE, peer,
                                      tag_of(tagmode, ri), MPI_COMM_WORLD, &rq[p * W + ri]));
                        nr++;
                    }
                    if (do_s) {
                        MPI(MPI_Isend(sb[p * W + i], (int)msg_size(t_rank, peer, round, i), MPI_BYTE,
                                      peer, tag_of(tagmode, i), MPI_COMM_WORLD,
                                      &rq[npeers * W + p * W + i]));
                    }
                }
            }
            if (doing_recv == -1) break;
        }
        CHECK_EQ("receives posted", npeers * W, nr);
        /* complete */
        if (completion == 0) {
            WAITING("MPI_Waitall of %d requests (round %d)", nreq, round);
            MPI(MPI_Waitall(nreq, rq, st));
        } else if (completion == 1) {
            for (k = 0; k < nreq; k++) {
                int which;
                MPI_Status s1;
                WAITING("MPI_Waitany, %d of %d requests done (round %d)", k, nreq, round);
                MPI(MPI_Waitany(nreq, rq, &which, &s1));
                CHECK(which != MPI_UNDEFINED, "MPI_Waitany returned MPI_UNDEFINED with %d left", nreq - k);
                st[which] = s1;
            }
        } else {
            int done = 0;
            while (done < nreq) {
                int outc = 0, flag = 0;
                WAITING("%s polling, %d of %d requests done (round %d)",
                        completion == 2 ? "MPI_Testsome" : "MPI_Testall", done, nreq, round);
                if (completion == 2) {
                    MPI_Status *tmp = xmalloc(sizeof *tmp * (size_t)nreq);
                    MPI(MPI_Testsome(nreq, rq, &outc, idx, tmp));
                    CHECK(outc != MPI_UNDEFINED, "MPI_Testsome: MPI_UNDEFINED with %d left", nreq - done);
                    for (k = 0; k < outc; k++) st[idx[k]] = tmp[k];
                    free(tmp);
                    done += outc;
                } else {
                    MPI(MPI_Testall(nreq, rq, &flag, st));
                    if (flag) done = nreq;
                }
            }
        }
        /* check */
        for (p = 0; p < npeers; p++) {
            int peer = p < t_rank ? p : p + 1;
            for (i = 0; i < W; i++) {
                size_t rn = msg_size(peer, t_rank, round, i);
                char what[96];
                snprintf(what, sizeof what, "round %d, receive %d from rank %d", round, i, peer);
                CHECK_STATUS(st[p * W + i], what, peer, tag_of(tagmode, i), rn);
                msg_check(rb[p * W + i], rn, 3, peer, t_rank, (uint64_t)round << 20 | (uint64_t)i, what);
                total_msgs++;
                total_bytes += (long long)rn;
                free(rb[p * W + i]);
                free(sb[p * W + i]);
            }
        }
    }
    long long tm = 0, tb = 0;
    WAITING("MPI_Reduce of totals");
    MPI(MPI_Reduce(&total_msgs, &tm, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    MPI(MPI_Reduce(&total_bytes, &tb, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (t_rank == 0)
        printf("window: %d rounds, window %d per peer and direction: %lld messages, %.1f MiB checked\n",
               rounds, W, tm, (double)tb / 1048576.0);
    free(rq); free(st); free(idx); free(sb); free(rb); free(rposted);
    return t_finish();
}

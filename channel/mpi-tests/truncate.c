/* Truncation: a message longer than its receive buffer is an error of class MPI_ERR_TRUNCATE
 * (the tests run with MPI_ERRORS_RETURN), only the buffer's own bytes may be written, and the
 * connection keeps working: after every truncation the same sender's next message arrives
 * intact. Ranks pair up (0-1, 2-3, ...); both play both sides. Cases, each for message sizes
 * 1 B, 100 B, 20 KiB, 300 KiB and 4 MiB into buffers of 0, half and all-but-one bytes:
 *   MPI_Recv; MPI_Irecv + MPI_Wait; MPI_Waitall of a good and a truncated receive (must return
 *   MPI_ERR_IN_STATUS with MPI_ERR_TRUNCATE in the truncated one's status and MPI_SUCCESS in the
 *   other's); MPI_Mprobe + MPI_Mrecv; a receive posted before the message arrives.
 * Options (only for running the peer transports, whose defects this test exposes; see README):
 *   --skip zero-capacity     no receives into 0-byte buffers
 *   --skip large-truncation  no truncation of messages of 256 KiB and more
 *   --skip guard-large       no check that bytes past the buffer stay untouched for messages of
 *                            64 KiB and more
 *   --skip error-class       accept MPI_SUCCESS where MPI_ERR_TRUNCATE is due
 */
#include "check.h"

#define POISON 0xC3
#define GUARD 4096

static const size_t sizes[] = {1, 100, 20 << 10, 300 << 10, 4u << 20};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

static int skip_zero, skip_large, skip_guard_large, skip_error_class;

static int errclass(int rc) {
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

static void expect_truncate(int rc, const char *what) {
    char es[MPI_MAX_ERROR_STRING] = "";
    int el = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, es, &el);
    if (skip_error_class && rc == MPI_SUCCESS) return;
    CHECK(rc != MPI_SUCCESS && errclass(rc) == MPI_ERR_TRUNCATE,
          "%s: expected an error of class MPI_ERR_TRUNCATE (%d), got return code %d of class %d (%s)",
          what, MPI_ERR_TRUNCATE, rc, rc == MPI_SUCCESS ? MPI_SUCCESS : errclass(rc),
          rc == MPI_SUCCESS ? "success" : es);
}

static void check_guard(const uint8_t *b, size_t from, const char *what) {
    size_t i;
    for (i = from; i < from + GUARD; i++)
        CHECK(b[i] == POISON, "%s: a truncated receive of %zu bytes wrote byte %zu (0x%02x)", what, from, i, b[i]);
}

int main(int argc, char **argv) {
    int si, ci, kase;
    MPI_Status st;
    t_init(&argc, &argv, "truncate");
    for (si = 1; si < argc; si++) {
        const char *o = si + 1 < argc ? argv[si + 1] : "";
        if (strcmp(argv[si], "--skip")) FAIL("unknown argument %s", argv[si]);
        if (!strcmp(o, "zero-capacity")) skip_zero = 1;
        else if (!strcmp(o, "large-truncation")) skip_large = 1;
        else if (!strcmp(o, "guard-large")) skip_guard_large = 1;
        else if (!strcmp(o, "error-class")) skip_error_class = 1;
        else FAIL("unknown --skip %s", o);
        si++;
    }
    int peer = t_rank ^ 1, active = peer < t_size;
    uint8_t *sb = xmalloc((4u << 20) + GUARD), *rb = xmalloc((4u << 20) + GUARD), *gb = xmalloc(1000);
    uint64_t seq = 0;
    int ntrunc = 0;

    for (kase = 0; active && kase < 5; kase++)
        for (si = 0; si < NSIZES; si++)
            for (ci = 0; ci < 3; ci++) {
                size_t n = sizes[si];
                int cap = ci == 0 ? 0 : ci == 1 ? (int)(n / 2) : (int)(n - 1);
                int role;
                if ((skip_zero && cap == 0) || (skip_large && n >= (256u << 10))) continue;
                static const char *names[] = {"MPI_Recv", "MPI_Irecv + MPI_Wait", "MPI_Waitall",
                                              "MPI_Mprobe + MPI_Mrecv", "receive posted first"};
                for (role = 0; role < 2; role++, seq += 2) {
                    int receiver = (role == 0) == (t_rank % 2 == 0);
                    char what[128];
                    snprintf(what, sizeof what, "%s: %zu-byte message into a %d-byte buffer", names[kase], n, cap);
                    PHASE("%s (%s)", what, receiver ? "receiving" : "sending");
                    if (!receiver) {
                        if (kase == 4) {
                            WAITING("MPI_Recv of ready from %d", peer);
                            MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &st));
                        }
                        if (kase == 2) {
                            msg_fill(gb, 1000, 40, t_rank, peer, seq + 1);
                            WAITING("MPI_Send of the good message to %d", peer);
                            MPI(MPI_Send(gb, 1000, MPI_BYTE, peer, 2, MPI_COMM_WORLD));
                        }
                        msg_fill(sb, n, 40, t_rank, peer, seq);
                        WAITING("MPI_Send of %zu bytes (to be truncated) to %d", n, peer);
                        MPI(MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
                        msg_fill(sb, n, 41, t_rank, peer, seq);
                        WAITING("MPI_Send of the follow-up message (%zu bytes) to %d", n, peer);
                        MPI(MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
                        continue;
                    }
                    memset(rb, POISON, (size_t)cap + GUARD);
                    if (kase == 0) {
                        WAITING("MPI_Recv into %d bytes from %d", cap, peer);
                        expect_truncate(MPI_RC(MPI_Recv(rb, cap, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st)), what);
                    } else if (kase == 1) {
                        MPI_Request rq;
                        MPI(MPI_Irecv(rb, cap, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq));
                        WAITING("MPI_Wait of a %d-byte receive from %d", cap, peer);
                        expect_truncate(MPI_RC(MPI_Wait(&rq, &st)), what);
                    } else if (kase == 2) {
                        MPI_Request rq[2];
                        MPI_Status sts[2];
                        int rc;
                        MPI(MPI_Irecv(gb, 1000, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]));
                        MPI(MPI_Irecv(rb, cap, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]));
                        WAITING("MPI_Waitall of a good and a truncated receive from %d", peer);
                        rc = MPI_RC(MPI_Waitall(2, rq, sts));
                        if (!(skip_error_class && rc == MPI_SUCCESS)) {
                            CHECK(errclass(rc) == MPI_ERR_IN_STATUS,
                                  "%s: MPI_Waitall returned class %d, expected MPI_ERR_IN_STATUS (%d)",
                                  what, errclass(rc), MPI_ERR_IN_STATUS);
                            CHECK(sts[0].MPI_ERROR == MPI_SUCCESS,
                                  "%s: the good receive's status has MPI_ERROR %d (class %d), expected "
                                  "MPI_SUCCESS",
                                  what, sts[0].MPI_ERROR, errclass(sts[0].MPI_ERROR));
                            expect_truncate(sts[1].MPI_ERROR, what);
                        }
                        CHECK_STATUS(sts[0], "the good receive next to a truncated one", peer, 2, 1000);
                        msg_check(gb, 1000, 40, peer, t_rank, seq + 1, "the good receive next to a truncated one");
                    } else if (kase == 3) {
                        MPI_Message m;
                        int count = -1;
                        WAITING("MPI_Mprobe from %d", peer);
                        MPI(MPI_Mprobe(peer, 1, MPI_COMM_WORLD, &m, &st));
                        MPI(MPI_Get_count(&st, MPI_BYTE, &count));
                        CHECK_EQ("MPI_Mprobe count of the message to truncate", n, count);
                        WAITING("MPI_Mrecv into %d bytes", cap);
                        expect_truncate(MPI_RC(MPI_Mrecv(rb, cap, MPI_BYTE, &m, &st)), what);
                    } else {
                        MPI_Request rq;
                        MPI(MPI_Irecv(rb, cap, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq));
                        WAITING("MPI_Send of ready to %d", peer);
                        MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
                        WAITING("MPI_Wait of the posted %d-byte receive", cap);
                        expect_truncate(MPI_RC(MPI_Wait(&rq, &st)), what);
                    }
                    if (!(skip_guard_large && n >= 65536)) check_guard(rb, (size_t)cap, what);
                    ntrunc++;
                    /* the next message from the same sender is intact */
                    {
                        char w2[256];
                        snprintf(w2, sizeof w2, "the message after a truncation (%s)", what);
                        memset(rb, POISON, n + GUARD);
                        WAITING("MPI_Recv of the follow-up message (%zu bytes) from %d", n, peer);
                        MPI(MPI_Recv(rb, (int)n + GUARD, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st));
                        CHECK_STATUS(st, w2, peer, 1, n);
                        msg_check(rb, n, 41, peer, t_rank, seq, w2);
                    }
                }
            }
    if (t_rank == 0 && active) printf("truncate: %d truncations reported as MPI_ERR_TRUNCATE on rank 0\n", ntrunc);
    free(sb); free(rb); free(gb);
    return t_finish();
}

/* pt2pt: MPI point-to-point benchmark for diwarp, in the manner of the OSU micro-benchmarks
 * (written for this project; no OSU code). Exactly 2 ranks.
 *
 *   latency  ping-pong with blocking MPI_Send/MPI_Recv; prints one-way latency = round trip / 2 (us)
 *   bw       rank 0 posts a window of MPI_Isend, waits for all, then waits for a 4-byte ack from
 *            rank 1, which posted the matching MPI_Irecv, waited for all, and sent the ack (MB/s)
 *   bibw     both ranks post a window of MPI_Irecv and a window of MPI_Isend each round and wait
 *            for all of them (MB/s counts both directions)
 *
 * Output on stdout from rank 0: "# ..." comment lines and one "mode,size,value" line per size
 * (flushed at once, so a run that dies keeps the sizes already done). MB = 10^6 bytes, as OSU.
 *
 * Options:
 *   -m, --mode M[,M...]   latency, bw, bibw (default latency)
 *   -s, --sizes MIN:MAX   powers of two from MIN to MAX, K/M/G suffixes allowed (default 0:4M);
 *                         a MIN of 0 runs 0 B, then 1, 2, 4 ... (bw and bibw skip 0 B)
 *   -i, --iters N[:L]     timed iterations for sizes up to 8 KiB [and above 8 KiB]
 *                         (default latency 10000:1000, bw/bibw 100:20)
 *   -w, --warmup N[:L]    untimed iterations first, same split (default 1000:100, bw/bibw 10:2)
 *       --window N        messages in flight per round in bw and bibw (default 64)
 *       --verify          every received message is checked byte by byte against a pattern that
 *                         names its mode, size, iteration, slot and sender, and its status (source,
 *                         tag, count); bw/bibw then use one buffer per window slot. Timings include
 *                         the filling and checking and are not comparable with unverified runs.
 *       --watchdog S      a rank that makes no progress for S seconds (default 60; env
 *                         PT2PT_WATCHDOG) prints what it is waiting for and exits with status 86
 *
 * Exit status: 0 on success, 1 on a verify failure or MPI error (through MPI_Abort), 2 on a usage
 * error, 86 from the watchdog.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LARGE_SIZE 8192 /* sizes above this use the large iteration counts */
#define TAG_DATA 7
#define TAG_ACK 8
#define EXIT_WATCHDOG 86

enum mode { LATENCY, BW, BIBW };
static const char *const mode_names[] = {"latency", "bw", "bibw"};

static int rank = -1;
static char prefix[96] = "[pt2pt rank ? pid ?]";

/* ---- watchdog ----------------------------------------------------------------------------------
 * alarm(S) is armed once. When it fires and the progress counter moved since the last time, the
 * handler re-arms it and returns: the timed loops only store a counter, they never make a system
 * call for the watchdog. When nothing moved for a whole period, every rank still waiting prints
 * one line with what it waits for and exits. */

static unsigned wd_secs = 60;
static volatile unsigned long wd_progress, wd_seen;
static const char *volatile wd_what = "MPI_Init";  /* always a string literal */
static const char *volatile wd_mode = "-";
static volatile long wd_size = -1, wd_iter = -1, wd_iters = -1;

static char *wd_cat(char *p, char *end, const char *s) { /* async-signal-safe */
    while (*s && p < end) *p++ = *s++;
    return p;
}

static char *wd_num(char *p, char *end, long v) {
    char tmp[24];
    int n = 0;
    unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
    if (v < 0 && p < end) *p++ = '-';
    do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    while (n > 0 && p < end) *p++ = tmp[--n];
    return p;
}

static void wd_fire(int sig) {
    char line[512], *p = line, *end = line + sizeof line - 1;
    (void)sig;
    if (wd_progress != wd_seen) {
        wd_seen = wd_progress;
        alarm(wd_secs);
        return;
    }
    p = wd_cat(p, end, prefix);
    p = wd_cat(p, end, " WATCHDOG: no progress for at least ");
    p = wd_num(p, end, (long)wd_secs);
    p = wd_cat(p, end, " s; mode ");
    p = wd_cat(p, end, wd_mode);
    if (wd_size >= 0) {
        p = wd_cat(p, end, ", size ");
        p = wd_num(p, end, wd_size);
        p = wd_cat(p, end, " B");
    }
    if (wd_iter >= 0) {
        p = wd_cat(p, end, ", iteration ");
        p = wd_num(p, end, wd_iter + 1);
        p = wd_cat(p, end, " of ");
        p = wd_num(p, end, wd_iters);
        p = wd_cat(p, end, " (warmup included)");
    }
    p = wd_cat(p, end, "; waiting for: ");
    p = wd_cat(p, end, wd_what);
    *p++ = '\n';
    if (write(2, line, (size_t)(p - line)) < 0) { /* nothing more to do */ }
    /* The launcher kills every rank once one exits: let the other rank print its line first. */
    sleep(3);
    _exit(EXIT_WATCHDOG);
}

static void wd_arm(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wd_fire;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(wd_secs);
}

/* Before every blocking call: what it waits for (a literal), and a tick of progress. */
#define WAITING(what) (wd_what = (what), wd_progress++)

/* ---- errors ------------------------------------------------------------------------------------ */

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...) {
    char m[2048];
    int n = snprintf(m, sizeof m, "%s FAIL: ", prefix);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(m + n, sizeof m - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof m - 2) n = (int)sizeof m - 2;
    m[n++] = '\n';
    if (write(2, m, (size_t)n) < 0) { /* nothing more to do */ }
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

#define MPI(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            char es_[MPI_MAX_ERROR_STRING];                                                        \
            int el_ = 0, ec_ = 0;                                                                  \
            MPI_Error_string(rc_, es_, &el_);                                                      \
            MPI_Error_class(rc_, &ec_);                                                            \
            fail("%s at line %d returned %d (class %d): %s; mode %s, size %ld, iteration %ld",     \
                 #call, __LINE__, rc_, ec_, es_, wd_mode, wd_size, wd_iter + 1);                   \
        }                                                                                          \
    } while (0)

/* ---- payload pattern (--verify) ---------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* One seed per message: mode, size, iteration, window slot, sender. */
static uint64_t msg_seed(int mode, size_t size, long iter, long slot, int src) {
    return mix64(mix64(mix64(mix64((uint64_t)mode << 56 ^ size) ^ (uint64_t)iter) ^ (uint64_t)slot) ^
                 (uint64_t)src);
}

static uint64_t pattern_word(uint64_t seed, size_t w) { return mix64(seed ^ w * 0xD6E8FEB86659FD93ull); }

static void fill(void *buf, size_t n, uint64_t seed) {
    uint8_t *p = buf;
    size_t w, i;
    for (w = 0; w < n / 8; w++) {
        uint64_t v = pattern_word(seed, w);
        memcpy(p + 8 * w, &v, 8);
    }
    if (n % 8) {
        uint64_t v = pattern_word(seed, n / 8);
        for (i = n / 8 * 8; i < n; i++) p[i] = (uint8_t)(v >> (8 * (i % 8)));
    }
}

static void check(const void *buf, size_t n, uint64_t seed, const MPI_Status *st, int src, int tag,
                  const char *what, long iter, long slot) {
    const uint8_t *p = buf;
    size_t i, bad = 0, first = 0, last = 0;
    int count = -1;
    MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count != (int)n)
        fail("VERIFY: %s, size %zu, iteration %ld, slot %ld: expected source %d tag %d %zu bytes, "
             "got source %d tag %d %d bytes",
             what, n, iter + 1, slot, src, tag, n, st->MPI_SOURCE, st->MPI_TAG, count);
    for (i = 0; i < n; i += 8) {
        uint64_t v = pattern_word(seed, i / 8), g = 0;
        size_t k, m = n - i < 8 ? n - i : 8;
        memcpy(&g, p + i, m);
        if (m < 8) v &= (1ull << (8 * m)) - 1;
        if (g == v) continue;
        for (k = 0; k < m; k++) {
            if (p[i + k] != (uint8_t)(v >> (8 * k))) {
                if (!bad) first = i + k;
                last = i + k;
                bad++;
            }
        }
    }
    if (bad) {
        char exp[3 * 16 + 1] = "", got[3 * 16 + 1] = "";
        size_t k, m = n - first < 16 ? n - first : 16;
        for (k = 0; k < m; k++) {
            size_t o = first + k;
            snprintf(exp + 3 * k, 4, "%02x ", (uint8_t)(pattern_word(seed, o / 8) >> (8 * (o % 8))));
            snprintf(got + 3 * k, 4, "%02x ", p[o]);
        }
        fail("VERIFY: %s, size %zu, iteration %ld, slot %ld: %zu of %zu bytes differ, first at offset "
             "%zu, last at %zu\n    expected at %zu: %s\n    received at %zu: %s",
             what, n, iter + 1, slot, bad, n, first, last, first, exp, first, got);
    }
}

/* ---- options ----------------------------------------------------------------------------------- */

static const char usage_text[] =
    "usage: pt2pt [-m latency|bw|bibw[,...]] [-s MIN:MAX] [-i N[:L]] [-w N[:L]] [--window N]\n"
    "             [--verify] [--watchdog S]\n"
    "  -m, --mode     latency (one-way, us), bw, bibw (MB/s); comma-separated list allowed\n"
    "  -s, --sizes    powers of two from MIN to MAX bytes, K/M/G suffixes (default 0:4M)\n"
    "  -i, --iters    timed iterations up to 8 KiB [:above] (latency 10000:1000, bw 100:20)\n"
    "  -w, --warmup   untimed iterations up to 8 KiB [:above] (latency 1000:100, bw 10:2)\n"
    "      --window   messages in flight per bw/bibw round (default 64)\n"
    "      --verify   check every byte, source, tag and count of every received message\n"
    "      --watchdog seconds without progress before a rank reports and exits 86 (default 60)\n"
    "Output: \"mode,size,value\" lines on stdout, comments start with '#'. Exactly 2 ranks.\n";

static int parse_size(const char *s, size_t *out) {
    char *e;
    unsigned long long v = strtoull(s, &e, 10);
    if (e == s) return -1;
    switch (*e) {
    case 'k': case 'K': v <<= 10; e++; break;
    case 'm': case 'M': v <<= 20; e++; break;
    case 'g': case 'G': v <<= 30; e++; break;
    }
    if (*e == 'i' || *e == 'B') e++;  /* 4Mi, 4MB: same thing here */
    if (*e == 'B') e++;
    if (*e || v > (1ull << 30)) return -1;
    *out = (size_t)v;
    return 0;
}

/* "N" or "N:L" */
static int parse_pair(const char *s, long *small, long *large) {
    char *e;
    long a = strtol(s, &e, 10), b = a;
    if (e == s || a < 0) return -1;
    if (*e == ':') {
        const char *t = e + 1;
        b = strtol(t, &e, 10);
        if (e == t || b < 0) return -1;
    }
    if (*e) return -1;
    *small = a;
    *large = b;
    return 0;
}

struct opts {
    int modes[3], nmodes;
    size_t min, max;
    long iters[2], warmup[2]; /* [small, large]; -1 = the mode's default */
    long window;
    int verify;
};

/* Returns 0, or 2 after printing the reason (rank 0 only), or -1 for --help. */
static int parse_args(int argc, char **argv, struct opts *o) {
    static const struct option longs[] = {
        {"mode", required_argument, 0, 'm'},    {"sizes", required_argument, 0, 's'},
        {"iters", required_argument, 0, 'i'},   {"warmup", required_argument, 0, 'w'},
        {"window", required_argument, 0, 'W'},  {"verify", no_argument, 0, 'V'},
        {"watchdog", required_argument, 0, 'D'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    char *colon;
    o->modes[0] = LATENCY;
    o->nmodes = 1;
    o->min = 0;
    o->max = 4u << 20;
    o->iters[0] = o->iters[1] = o->warmup[0] = o->warmup[1] = -1;
    o->window = 64;
    o->verify = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:s:i:w:h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': {
            char *list = strdup(optarg), *tok, *save = NULL;
            o->nmodes = 0;
            for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int m;
                for (m = 0; m < 3 && strcmp(tok, mode_names[m]) != 0; m++) {}
                if (m == 3 || o->nmodes == 3) {
                    if (rank == 0) fprintf(stderr, "pt2pt: unknown or repeated mode '%s'\n", tok);
                    free(list);
                    return 2;
                }
                o->modes[o->nmodes++] = m;
            }
            free(list);
            if (o->nmodes == 0) goto bad;
            break;
        }
        case 's':
            colon = strchr(optarg, ':');
            if (!colon) goto bad;
            *colon = '\0';
            if (parse_size(optarg, &o->min) || parse_size(colon + 1, &o->max) || o->min > o->max) {
                *colon = ':';
                goto bad;
            }
            *colon = ':';
            break;
        case 'i':
            if (parse_pair(optarg, &o->iters[0], &o->iters[1]) || o->iters[0] < 1 || o->iters[1] < 1)
                goto bad;
            break;
        case 'w':
            if (parse_pair(optarg, &o->warmup[0], &o->warmup[1])) goto bad;
            break;
        case 'W':
            o->window = atol(optarg);
            if (o->window < 1 || o->window > 4096) goto bad;
            break;
        case 'V': o->verify = 1; break;
        case 'D':
            if (atoi(optarg) < 1) goto bad;
            wd_secs = (unsigned)atoi(optarg);
            break;
        case 'h': return -1;
        default: goto bad;
        }
    }
    if (optind < argc) goto bad;
    return 0;
bad:
    if (rank == 0)
        fprintf(stderr, "pt2pt: bad argument%s%s\n%s", optind > 1 ? " near " : "",
                optind > 1 ? argv[optind - 1] : "", usage_text);
    return 2;
}

/* ---- the three benchmarks ---------------------------------------------------------------------- */

static void *xalloc(size_t n, int byte) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, n ? n : 1)) fail("cannot allocate %zu bytes", n);
    memset(p, byte, n ? n : 1); /* touch every page before timing */
    return p;
}

/* Buffers of one size: nslots distinct buffers with --verify, else one shared by every slot (as
 * OSU does). */
struct bufs {
    char *s, *r;
    size_t stride; /* 0 when all slots share one buffer */
};

static double run_latency(const struct opts *o, size_t n, long warm, long iters, struct bufs *b) {
    const int peer = 1 - rank;
    double t0 = 0;
    long i;
    MPI_Status st;
    wd_iters = warm + iters;
    for (i = 0; i < warm + iters; i++) {
        wd_iter = i;
        if (i == warm) t0 = MPI_Wtime();
        if (rank == 0) {
            if (o->verify) fill(b->s, n, msg_seed(LATENCY, n, i, 0, 0));
            WAITING("MPI_Send of the ping to rank 1");
            MPI(MPI_Send(b->s, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD));
            WAITING("MPI_Recv of the pong from rank 1");
            MPI(MPI_Recv(b->r, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &st));
            if (o->verify) check(b->r, n, msg_seed(LATENCY, n, i, 0, 1), &st, 1, TAG_DATA, "pong", i, 0);
        } else {
            WAITING("MPI_Recv of the ping from rank 0");
            MPI(MPI_Recv(b->r, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &st));
            if (o->verify) {
                check(b->r, n, msg_seed(LATENCY, n, i, 0, 0), &st, 0, TAG_DATA, "ping", i, 0);
                fill(b->s, n, msg_seed(LATENCY, n, i, 0, 1));
            }
            WAITING("MPI_Send of the pong to rank 0");
            MPI(MPI_Send(b->s, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD));
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)iters);
}

static double run_bw(const struct opts *o, size_t n, long warm, long iters, struct bufs *b,
                     MPI_Request *req, MPI_Status *st) {
    const int peer = 1 - rank, w = (int)o->window;
    double t0 = 0;
    long i;
    int j;
    uint32_t ack = 0;
    MPI_Status ast;
    wd_iters = warm + iters;
    for (i = 0; i < warm + iters; i++) {
        wd_iter = i;
        if (i == warm) t0 = MPI_Wtime();
        if (rank == 0) {
            for (j = 0; j < w; j++) {
                char *p = b->s + b->stride * (size_t)j;
                if (o->verify) fill(p, n, msg_seed(BW, n, i, j, 0));
                MPI(MPI_Isend(p, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]));
            }
            WAITING("MPI_Waitall of the window's MPI_Isend to rank 1");
            MPI(MPI_Waitall(w, req, MPI_STATUSES_IGNORE));
            WAITING("MPI_Recv of the ack from rank 1");
            MPI(MPI_Recv(&ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, &ast));
            if (o->verify && ack != (uint32_t)i)
                fail("VERIFY: bw size %zu: ack of iteration %ld carries %u", n, i + 1, ack);
        } else {
            for (j = 0; j < w; j++)
                MPI(MPI_Irecv(b->r + b->stride * (size_t)j, (int)n, MPI_BYTE, peer, TAG_DATA,
                              MPI_COMM_WORLD, &req[j]));
            WAITING("MPI_Waitall of the window's MPI_Irecv from rank 0");
            MPI(MPI_Waitall(w, req, o->verify ? st : MPI_STATUSES_IGNORE));
            if (o->verify)
                for (j = 0; j < w; j++)
                    check(b->r + b->stride * (size_t)j, n, msg_seed(BW, n, i, j, 0), &st[j], 0, TAG_DATA,
                          "bw data", i, j);
            ack = (uint32_t)i;
            WAITING("MPI_Send of the ack to rank 0");
            MPI(MPI_Send(&ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD));
        }
    }
    return (double)n * (double)w * (double)iters / (MPI_Wtime() - t0) / 1e6;
}

static double run_bibw(const struct opts *o, size_t n, long warm, long iters, struct bufs *b,
                       MPI_Request *req, MPI_Status *st) {
    const int peer = 1 - rank, w = (int)o->window;
    double t0 = 0;
    long i;
    int j;
    wd_iters = warm + iters;
    for (i = 0; i < warm + iters; i++) {
        wd_iter = i;
        if (i == warm) t0 = MPI_Wtime();
        for (j = 0; j < w; j++)
            MPI(MPI_Irecv(b->r + b->stride * (size_t)j, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                          &req[j]));
        for (j = 0; j < w; j++) {
            char *p = b->s + b->stride * (size_t)j;
            if (o->verify) fill(p, n, msg_seed(BIBW, n, i, j, rank));
            MPI(MPI_Isend(p, (int)n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[w + j]));
        }
        WAITING(rank == 0 ? "MPI_Waitall of the window's MPI_Irecv from and MPI_Isend to rank 1"
                          : "MPI_Waitall of the window's MPI_Irecv from and MPI_Isend to rank 0");
        MPI(MPI_Waitall(2 * w, req, o->verify ? st : MPI_STATUSES_IGNORE));
        if (o->verify)
            for (j = 0; j < w; j++)
                check(b->r + b->stride * (size_t)j, n, msg_seed(BIBW, n, i, j, peer), &st[j], peer, TAG_DATA,
                      "bibw data", i, j);
    }
    return 2.0 * (double)n * (double)w * (double)iters / (MPI_Wtime() - t0) / 1e6;
}

/* ---- main -------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    struct opts o;
    int nranks, k, m, rc;
    const char *s = getenv("PT2PT_WATCHDOG");
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int liblen = 0;
    MPI_Request *req;
    MPI_Status *st;

    if (s && atoi(s) > 0) wd_secs = (unsigned)atoi(s);
    /* --watchdog must be known before MPI_Init is bounded by it */
    for (k = 1; k < argc; k++) {
        const char *v = strncmp(argv[k], "--watchdog=", 11) == 0 ? argv[k] + 11
                        : strcmp(argv[k], "--watchdog") == 0 && k + 1 < argc ? argv[k + 1] : NULL;
        if (v && atoi(v) > 0) wd_secs = (unsigned)atoi(v);
    }
    s = getenv("PMI_RANK");
    if (!s) s = getenv("OMPI_COMM_WORLD_RANK");
    snprintf(prefix, sizeof prefix, "[pt2pt rank %s pid %d]", s ? s : "?", (int)getpid());
    wd_arm();

    WAITING("MPI_Init");
    MPI(MPI_Init(&argc, &argv));
    MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    snprintf(prefix, sizeof prefix, "[pt2pt rank %d pid %d]", rank, (int)getpid());

    rc = parse_args(argc, argv, &o);
    if (rc == 0 && nranks != 2) {
        if (rank == 0) fprintf(stderr, "pt2pt: needs exactly 2 ranks, got %d\n", nranks);
        rc = 2;
    }
    if (rc != 0) {
        if (rc < 0 && rank == 0) fputs(usage_text, stdout);
        WAITING("MPI_Finalize");
        MPI_Finalize();
        return rc < 0 ? 0 : rc;
    }

    MPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, "\n")] = '\0';
    for (k = 0, m = 0; lib[k]; k++) { /* squeeze runs of blanks (MPICH pads its version line) */
        char c = lib[k] == '\t' ? ' ' : lib[k];
        if (c != ' ' || (m > 0 && lib[m - 1] != ' ')) lib[m++] = c;
    }
    lib[m] = '\0';
    req = malloc(sizeof *req * 2 * (size_t)o.window);
    st = malloc(sizeof *st * 2 * (size_t)o.window);
    if (!req || !st) fail("out of memory");

    for (k = 0; k < o.nmodes; k++) {
        const int mode = o.modes[k];
        const int is_lat = mode == LATENCY;
        const long def_it[2] = {is_lat ? 10000 : 100, is_lat ? 1000 : 20};
        const long def_wu[2] = {is_lat ? 1000 : 10, is_lat ? 100 : 2};
        long it[2], wu[2];
        size_t n;
        it[0] = o.iters[0] >= 0 ? o.iters[0] : def_it[0];
        it[1] = o.iters[1] >= 0 ? o.iters[1] : def_it[1];
        wu[0] = o.warmup[0] >= 0 ? o.warmup[0] : def_wu[0];
        wu[1] = o.warmup[1] >= 0 ? o.warmup[1] : def_wu[1];
        wd_mode = mode_names[mode];
        if (rank == 0) {
            printf("# pt2pt %s: sizes %zu..%zu B, iterations %ld (%ld above %d B), warmup %ld (%ld)",
                   mode_names[mode], o.min, o.max, it[0], it[1], LARGE_SIZE, wu[0], wu[1]);
            if (!is_lat) printf(", window %ld", o.window);
            printf(", verify %s; unit %s\n# MPI: %s\n", o.verify ? "on (timings include it)" : "off",
                   is_lat ? "us one-way" : "MB/s (10^6 B/s)", lib);
            fflush(stdout);
        }
        for (n = o.min;;) {
            const int large = n > LARGE_SIZE;
            const size_t slots = o.verify && !is_lat ? (size_t)o.window : 1;
            struct bufs b;
            double v;
            if (n == 0 && !is_lat) goto next; /* no bytes, no bandwidth */
            wd_size = (long)n;
            wd_iter = -1;
            b.stride = slots > 1 ? n : 0;
            b.s = xalloc(n * slots, 'a');
            b.r = xalloc(n * slots, 'b');
            WAITING("MPI_Barrier before the size");
            MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (mode == LATENCY) v = run_latency(&o, n, wu[large], it[large], &b);
            else if (mode == BW) v = run_bw(&o, n, wu[large], it[large], &b, req, st);
            else v = run_bibw(&o, n, wu[large], it[large], &b, req, st);
            wd_iter = -1;
            if (rank == 0) {
                printf("%s,%zu,%.2f\n", mode_names[mode], n, v);
                fflush(stdout);
            }
            free(b.s);
            free(b.r);
        next:
            if (n >= o.max) break;
            n = n == 0 ? 1 : 2 * n;
            if (n > o.max) break;
        }
    }
    wd_mode = "-";
    wd_size = -1;
    WAITING("the final MPI_Barrier");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    WAITING("MPI_Finalize");
    MPI(MPI_Finalize());
    alarm(0);
    if (rank == 0) {
        printf("# pt2pt: done\n");
        fflush(stdout);
    }
    free(req);
    free(st);
    return 0;
}

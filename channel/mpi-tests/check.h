/* Shared helpers of diwarp's MPI tests: checks that say which rank expected what and got what,
 * byte patterns that identify every message, and a watchdog that turns a hang into a report.
 *
 * Every program:
 *   int main(int argc, char **argv) {
 *       t_init(&argc, &argv, "name");      MPI_Init, MPI_ERRORS_RETURN, watchdog armed
 *       ... PHASE("..."); WAITING("MPI_Recv from %d", src); MPI(MPI_Recv(...)); CHECK(...) ...
 *       return t_finish();                 barrier, MPI_Finalize, "name: OK" from rank 0
 *   }
 *
 * Environment: MPI_TESTS_WATCHDOG (seconds, default 240), MPI_TESTS_SEED (default 1),
 * MPI_TESTS_VERBOSE=1 (rank 0 prints each phase).
 *
 * A failed check prints "[name rank R/N] FAIL file:line: ..." and calls MPI_Abort(..., 1).
 * The watchdog (alarm + SIGALRM) prints "[name rank R/N] WATCHDOG ... phase: ...; waiting for: ..."
 * on every rank still running, waits 5 s (so that every rank's line gets out before the launcher
 * kills the rest) and _exit(T_EXIT_WATCHDOG) without MPI. A program that passes exits 0.
 */
#ifndef DIWARP_MPI_TESTS_CHECK_H
#define DIWARP_MPI_TESTS_CHECK_H

#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define T_EXIT_WATCHDOG 86

static int t_rank = -1, t_size = -1;
static const char *t_name = "?";
static uint64_t t_seed = 1;
static int t_verbose;
static double t_t0;

/* ---- what this rank is doing: two double-buffered strings the signal handler can read ---- */

static char t_prefix[128];
static char t_phase_buf[2][256];
static volatile sig_atomic_t t_phase_cur;
/* "Waiting for" is kept per thread (a slot each, the main thread's first), so that a hang of
 * a program whose threads call MPI says what every thread waits for. */
#define T_WAIT_SLOTS 16
static char t_wait_bufs[T_WAIT_SLOTS][2][256];
static volatile sig_atomic_t t_wait_curs[T_WAIT_SLOTS];
static volatile int t_wait_slots_used;
static __thread int t_wait_slot = -1;

static int t_my_slot(void) {
    if (t_wait_slot < 0) {
        int s = __atomic_fetch_add(&t_wait_slots_used, 1, __ATOMIC_RELAXED);
        t_wait_slot = s < T_WAIT_SLOTS ? s : T_WAIT_SLOTS - 1;
    }
    return t_wait_slot;
}

/* This thread waits for nothing (a new phase, or it is done with MPI). */
static inline void t_wait_clear(void) { t_wait_bufs[t_my_slot()][t_wait_curs[t_my_slot()]][0] = '\0'; }

static void t_setbuf(char bufs[2][256], volatile sig_atomic_t *cur, const char *fmt, va_list ap) {
    int next = !*cur;
    vsnprintf(bufs[next], sizeof bufs[next], fmt, ap);
    *cur = next;
}

__attribute__((format(printf, 1, 2))) static void PHASE(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    t_setbuf(t_phase_buf, &t_phase_cur, fmt, ap);
    va_end(ap);
    t_wait_clear();
    if (t_verbose && t_rank == 0) {
        fprintf(stderr, "[%s %.2fs] %s\n", t_name, MPI_Wtime() - t_t0, t_phase_buf[t_phase_cur]);
    }
}


/* Call before every blocking MPI call: the watchdog prints the last one. */
__attribute__((format(printf, 1, 2))) static void WAITING(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int s = t_my_slot();
    t_setbuf(t_wait_bufs[s], &t_wait_curs[s], fmt, ap);
    va_end(ap);
}

static void t_write(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static unsigned t_watchdog_s = 240;

/* The last call made through MPI(...): its text, line, and whether it has returned. */
static const char *volatile t_call = "";
static volatile int t_call_line;
static volatile sig_atomic_t t_call_returned = 1;

static const char *t_utoa(unsigned v, char *buf, size_t len) { /* async-signal-safe */
    size_t i = len - 1;
    buf[i] = '\0';
    do { buf[--i] = (char)('0' + v % 10); v /= 10; } while (v && i > 0);
    return buf + i;
}

static char t_alarm_line[4096];
static size_t t_alarm_len;

static void t_cat(const char *s) { /* async-signal-safe append to t_alarm_line */
    while (*s && t_alarm_len < sizeof t_alarm_line - 2) t_alarm_line[t_alarm_len++] = *s++;
}

static void t_on_alarm(int sig) {
    char num[32];
    (void)sig;
    t_alarm_len = 0;
    t_cat(t_prefix);
    t_cat(" WATCHDOG: still running after ");
    t_cat(t_utoa(t_watchdog_s, num, sizeof num));
    t_cat(" s; phase: ");
    t_cat(t_phase_buf[t_phase_cur]);
    t_cat("; waiting for: ");
    {
        int s, n = t_wait_slots_used < T_WAIT_SLOTS ? t_wait_slots_used : T_WAIT_SLOTS, any = 0;
        for (s = 0; s < n; s++) {
            const char *w = t_wait_bufs[s][t_wait_curs[s]];
            if (!w[0]) continue;
            if (any++) t_cat(n > 1 ? " | " : "");
            if (n > 1) {
                t_cat("#");
                t_cat(t_utoa((unsigned)s, num, sizeof num));
                t_cat(": ");
            }
            t_cat(w);
        }
        if (!any) t_cat("(nothing recorded)");
    }
    if (t_call[0]) {
        t_cat(t_call_returned ? "; last MPI call (returned): " : "; inside MPI call: ");
        t_cat(t_call);
        t_cat(" at line ");
        t_cat(t_utoa((unsigned)t_call_line, num, sizeof num));
    }
    t_alarm_line[t_alarm_len++] = '\n';
    t_alarm_line[t_alarm_len] = '\0';
    t_write(t_alarm_line); /* one write, so that ranks' lines do not interleave */
    /* The launcher kills every rank as soon as one exits: give the others (whose alarms fire a
     * little later) time to print their own line first. */
    sleep(5);
    _exit(T_EXIT_WATCHDOG);
}

/* ---- failures ---- */

/* One write per report, so that lines of different ranks do not interleave. */
__attribute__((noreturn, format(printf, 4, 5))) static void t_fail(const char *cond, const char *file, int line,
                                                                   const char *fmt, ...) {
    char m[4096];
    size_t o = 0;
    int w;
    va_list ap;
#define T_ADV(w) (o += (w) < 0 ? 0 : (size_t)(w), o = o >= sizeof m ? sizeof m - 1 : o)
    if (cond) {
        w = snprintf(m + o, sizeof m - o, "%s check failed: %s\n", t_prefix, cond);
        T_ADV(w);
    }
    w = snprintf(m + o, sizeof m - o, "%s FAIL %s:%d: ", t_prefix, file, line);
    T_ADV(w);
    va_start(ap, fmt);
    w = vsnprintf(m + o, sizeof m - o, fmt, ap);
    va_end(ap);
    T_ADV(w);
    w = snprintf(m + o, sizeof m - o, " [phase: %s]\n", t_phase_buf[t_phase_cur]);
    T_ADV(w);
#undef T_ADV
    t_write(m);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

#define FAIL(...) t_fail(NULL, __FILE__, __LINE__, __VA_ARGS__)

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) t_fail(#cond, __FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)

/* Integer equality: prints both values. */
#define CHECK_EQ(what, expected, got)                                                          \
    do {                                                                                       \
        long long e_ = (long long)(expected), g_ = (long long)(got);                           \
        if (e_ != g_) FAIL("%s: expected %lld, received %lld", (what), e_, g_);                \
    } while (0)

/* Every MPI call goes through this: tests run with MPI_ERRORS_RETURN. */
#define MPI(call)                                                                              \
    do {                                                                                       \
        int rc_;                                                                               \
        t_call_returned = 0;                                                                   \
        t_call = #call;                                                                        \
        t_call_line = __LINE__;                                                                \
        rc_ = (call);                                                                          \
        t_call_returned = 1;                                                                   \
        if (rc_ != MPI_SUCCESS) {                                                              \
            char es_[MPI_MAX_ERROR_STRING];                                                    \
            int el_ = 0, ec_ = 0;                                                              \
            MPI_Error_string(rc_, es_, &el_);                                                  \
            MPI_Error_class(rc_, &ec_);                                                        \
            FAIL("%s returned %d (class %d): %s", #call, rc_, ec_, es_);                       \
        }                                                                                      \
    } while (0)

/* For calls whose error is the point (e.g. MPI_ERR_TRUNCATE): records the call like MPI(...)
 * for the watchdog, and yields its return code. */
static inline int t_rc(int rc) {
    t_call_returned = 1;
    return rc;
}
#define MPI_RC(call) (t_call_returned = 0, t_call = #call, t_call_line = __LINE__, t_rc(call))

/* ---- deterministic data ---- */

static inline uint64_t t_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A seed naming one message: test salt, source, destination, sequence number. */
static inline uint64_t msg_seed(uint64_t salt, int src, int dst, uint64_t seq) {
    return t_mix64(t_seed ^ t_mix64(salt ^ t_mix64(((uint64_t)(uint32_t)src << 32 | (uint32_t)dst) ^
                                                   t_mix64(seq))));
}

/* Small random numbers, reproducible per rank. */
typedef struct { uint64_t s; } rng_t;
static inline rng_t rng_new(uint64_t salt) { rng_t r = {t_mix64(t_seed ^ salt)}; return r; }
static inline uint64_t rng_next(rng_t *r) { r->s += 0x9E3779B97F4A7C15ull; return t_mix64(r->s); }
static inline uint64_t rng_below(rng_t *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

static inline uint8_t pattern_byte(uint64_t seed, size_t i) {
    return (uint8_t)(t_mix64(seed ^ (uint64_t)(i / 8) * 0xD6E8FEB86659FD93ull) >> (8 * (i % 8)));
}

static void fill_pattern(void *buf, size_t n, uint64_t seed) {
    uint8_t *p = buf;
    size_t words = n / 8, i;
    for (i = 0; i < words; i++) {
        uint64_t w = t_mix64(seed ^ (uint64_t)i * 0xD6E8FEB86659FD93ull);
        memcpy(p + 8 * i, &w, 8);
    }
    for (i = words * 8; i < n; i++) p[i] = pattern_byte(seed, i);
}

/* A message's bytes: the pattern of (salt, src, dst, seq), its first 16 bytes (if it has them)
 * replaced by a header naming it, so a misdelivered message says what it is. */
typedef struct {
    uint32_t magic, src, dst, seq;
} msg_hdr_t;
#define MSG_MAGIC 0xD1DA7E57u

static void msg_fill(void *buf, size_t n, uint64_t salt, int src, int dst, uint64_t seq) {
    fill_pattern(buf, n, msg_seed(salt, src, dst, seq));
    if (n >= sizeof(msg_hdr_t)) {
        msg_hdr_t h = {MSG_MAGIC, (uint32_t)src, (uint32_t)dst, (uint32_t)seq};
        memcpy(buf, &h, sizeof h);
    }
}

static void describe(const void *buf, size_t n, char *out, size_t outlen) {
    msg_hdr_t h;
    if (n >= sizeof h) {
        memcpy(&h, buf, sizeof h);
        if (h.magic == MSG_MAGIC) {
            snprintf(out, outlen, "its header names message seq %u from %u to %u", h.seq, h.src, h.dst);
            return;
        }
    }
    snprintf(out, outlen, "no message header in its first bytes");
}

/* Checks every byte; on a mismatch says where, what was expected and what arrived. */
static void msg_check_at(const void *buf, size_t n, uint64_t salt, int src, int dst, uint64_t seq,
                         const char *what, const char *file, int line) {
    const uint8_t *p = buf;
    uint64_t seed = msg_seed(salt, src, dst, seq);
    size_t words = n / 8, i, first = (size_t)-1, last = 0, bad = 0;
    size_t start = n >= sizeof(msg_hdr_t) ? sizeof(msg_hdr_t) / 8 : 0;
    if (n >= sizeof(msg_hdr_t)) {
        msg_hdr_t h = {MSG_MAGIC, (uint32_t)src, (uint32_t)dst, (uint32_t)seq}, g;
        memcpy(&g, p, sizeof g);
        size_t b;
        for (b = 0; b < sizeof h; b++) {
            if (((const uint8_t *)&h)[b] != ((const uint8_t *)&g)[b]) {
                if (first == (size_t)-1) first = b;
                last = b;
                bad++;
            }
        }
    }
    for (i = start; i < words; i++) {
        uint64_t w = t_mix64(seed ^ (uint64_t)i * 0xD6E8FEB86659FD93ull), g;
        memcpy(&g, p + 8 * i, 8);
        if (g != w) {
            size_t b;
            for (b = 0; b < 8; b++) {
                if (p[8 * i + b] != (uint8_t)(w >> (8 * b))) {
                    if (first == (size_t)-1) first = 8 * i + b;
                    last = 8 * i + b;
                    bad++;
                }
            }
        }
    }
    for (i = words * 8 > start * 8 ? words * 8 : start * 8; i < n; i++) {
        if (p[i] != pattern_byte(seed, i) && !(n >= sizeof(msg_hdr_t) && i < sizeof(msg_hdr_t))) {
            if (first == (size_t)-1) first = i;
            last = i;
            bad++;
        }
    }
    if (bad) {
        char d[160], exp[64] = "", got[64] = "";
        size_t k, m = n - first < 16 ? n - first : 16;
        uint8_t *e = malloc(n);
        msg_fill(e, n, salt, src, dst, seq);
        for (k = 0; k < m; k++) {
            snprintf(exp + 3 * k, 4, "%02x ", e[first + k]);
            snprintf(got + 3 * k, 4, "%02x ", p[first + k]);
        }
        free(e);
        describe(buf, n, d, sizeof d);
        t_fail(NULL, file, line,
               "%s: message seq %llu from %d to %d (%zu bytes): %zu bytes differ, first at offset %zu, "
               "last at %zu; %s\n    expected at %zu: %s\n    received at %zu: %s\n   ",
               what, (unsigned long long)seq, src, dst, n, bad, first, last, d, first, exp, first, got);
    }
}
#define msg_check(buf, n, salt, src, dst, seq, what)                                            \
    msg_check_at((buf), (n), (salt), (src), (dst), (seq), (what), __FILE__, __LINE__)

/* Status of a received message: source, tag and byte count. */
#define CHECK_STATUS(st, what, src, tag, bytes)                                                \
    do {                                                                                       \
        int c_ = -1;                                                                           \
        MPI(MPI_Get_count(&(st), MPI_BYTE, &c_));                                              \
        if ((st).MPI_SOURCE != (src) || (st).MPI_TAG != (tag) || c_ != (int)(bytes))            \
            FAIL("%s: expected source %d tag %d %d bytes, received source %d tag %d %d bytes",  \
                 (what), (int)(src), (int)(tag), (int)(bytes), (st).MPI_SOURCE, (st).MPI_TAG,  \
                 c_);                                                                          \
    } while (0)

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) FAIL("malloc(%zu) failed", n);
    return p;
}

/* ---- start and end ---- */

/* MPI_Init_thread asking for `required` (and failing unless it is provided); -1: MPI_Init. */
static void t_init_thread(int *argc, char ***argv, const char *name, int required) {
    const char *s;
    char host[64] = "";
    t_name = name;
    /* Arm the watchdog before MPI_Init: a hang there is reported too (rank from the launcher). */
    s = getenv("MPI_TESTS_WATCHDOG");
    if (s && atoi(s) > 0) t_watchdog_s = (unsigned)atoi(s);
    s = getenv("PMI_RANK");
    if (!s) s = getenv("OMPI_COMM_WORLD_RANK");
    snprintf(t_prefix, sizeof t_prefix, "[%s rank %s pid %d]", name, s ? s : "?", (int)getpid());
    snprintf(t_phase_buf[0], sizeof t_phase_buf[0], "MPI_Init");
    WAITING("MPI_Init");
    signal(SIGALRM, t_on_alarm);
    alarm(t_watchdog_s);

    if (required < 0) {
        MPI(MPI_Init(argc, argv));
    } else {
        int provided = -1;
        MPI(MPI_Init_thread(argc, argv, required, &provided));
        CHECK(provided >= required, "MPI_Init_thread: asked for thread level %d, provided %d", required, provided);
    }
    MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    gethostname(host, sizeof host - 1);
    snprintf(t_prefix, sizeof t_prefix, "[%s rank %d/%d pid %d]", name, t_rank, t_size, (int)getpid());
    s = getenv("MPI_TESTS_SEED");
    if (s) t_seed = strtoull(s, NULL, 0);
    t_verbose = getenv("MPI_TESTS_VERBOSE") && atoi(getenv("MPI_TESTS_VERBOSE"));
    t_t0 = MPI_Wtime();
    if (t_rank == 0 && t_verbose)
        fprintf(stderr, "[%s] %d ranks on %s, seed %llu, watchdog %u s\n", name, t_size, host,
                (unsigned long long)t_seed, t_watchdog_s);
    PHASE("start");
}

static inline void t_init(int *argc, char ***argv, const char *name) { t_init_thread(argc, argv, name, -1); }

static int t_finish(void) {
    double dt = MPI_Wtime() - t_t0;
    PHASE("finish");
    WAITING("final MPI_Barrier");
    MPI(MPI_Barrier(MPI_COMM_WORLD));
    WAITING("MPI_Finalize");
    MPI(MPI_Finalize());
    alarm(0);
    if (t_rank == 0) printf("%s: OK (%d ranks, %.2f s)\n", t_name, t_size, dt);
    return 0;
}

/* Waits for one request, recording what for. */
#define WAIT(req, st, ...)                                                                     \
    do {                                                                                       \
        WAITING(__VA_ARGS__);                                                                  \
        MPI(MPI_Wait((req), (st)));                                                            \
    } while (0)

#endif

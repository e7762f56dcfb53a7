/* footprint: what an MPI transport costs each rank in memory, read from /proc/self the way a
 * user reads it (written for this project). Any number of ranks.
 *
 * Every rank allocates and touches its own buffers first, then samples (after MPI_Init), then
 * exchanges with every peer, then samples again:
 *   - for each distance d = 1 .. n-1, MPI_Sendrecv to rank+d and from rank-d of 8 B, 4 KiB,
 *     64 KiB and 1 MiB (eager and rendezvous on every transport);
 *   - a window: 16 MPI_Irecv of 32 KiB from every peer and 16 MPI_Isend to every peer, the
 *     sends posted before a barrier releases the receives half the time, so that transports
 *     also hold unexpected messages;
 *   - MPI_Alltoall of 64 KiB per peer.
 * All of it --rounds times. Every byte received is checked against a pattern naming sender,
 * round, size and slot.
 *
 * Samples: VmRSS and VmHWM (/proc/self/status), Anonymous and Pss (/proc/self/smaps_rollup).
 * "Anonymous" is private heap and mappings, where a transport keeps its state; RSS also counts
 * the shared libraries each MPI and provider maps. Kernel socket buffers are in no RSS, so each
 * sample also sums the kernel's memory of the rank's own sockets (every fd of /proc/self/fd that
 * is a socket, the MPI's and launcher's included): SO_MEMINFO's rmem_alloc + max(wmem_alloc,
 * wmem_queued) + fwd_alloc + optmem, what the sockets hold at that moment (Linux 4.6+).
 *
 * Output on stdout from rank 0, one line per rank:
 *   mem,RANK,RSS0,RSS1,HWM,ANON0,ANON1,PSS1,SOCK1,KHELD0,KHELD1,APP
 * (KiB, except SOCK1 = number of sockets; 0 = after MPI_Init, 1 = after the traffic; KHELD =
 * kernel memory held by the sockets, rounded up to whole KiB; APP = this program's own buffers,
 * all touched, so in ANON0 and ANON1: 2 MiB + max(n-1, 1) x 1 MiB of window + n x 128 KiB of
 * alltoall), then "# footprint: done".
 * Exit status 0, 1 on a check failure (through MPI_Abort), 2 on usage.
 *
 * Options: --rounds N (default 5)
 */
#define _DEFAULT_SOURCE
#include <mpi.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

#define WINDOW 16
#define WIN_SIZE (32 * 1024)
#define A2A_SIZE (64 * 1024)
#define MAX_SIZE (1024 * 1024)
#define NFIELDS 10

static const int sizes[] = {8, 4096, 64 * 1024, MAX_SIZE};
static int rank, nranks;

static void fail(const char *what, int a, int b, int c) {
    fprintf(stderr, "footprint rank %d: FAIL: %s (%d, %d, %d)\n", rank, what, a, b, c);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The value in kB of the line "key: value kB" of a /proc file, or -1. */
static long proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* The kernel's memory held by every socket of this process, in bytes; their number in *count.
 * SO_MEMINFO's u32s: 0 rmem_alloc, 1 rcvbuf, 2 wmem_alloc, 3 sndbuf, 4 fwd_alloc, 5 wmem_queued,
 * 6 optmem, 7 backlog, 8 drops. An fd closed (or reused) by another thread meanwhile is skipped. */
/* Sockets are counted once each, however many descriptors the process holds for them (a
 * transport may keep a second descriptor of a socket to wait on). */
#define MAX_SOCKETS 4096

static long kernel_held(long *count) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    static char seen[MAX_SOCKETS][64];
    long held = 0;
    *count = 0;
    if (!d) {
        fail("cannot open /proc/self/fd", errno, 0, 0);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char link[64];
        uint32_t v[9];
        socklen_t len = sizeof v;
        ssize_t n;
        int fd, dup = 0;
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        fd = atoi(e->d_name);
        n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (n < 0) continue;
        link[n] = 0;
        if (strncmp(link, "socket:", 7) != 0) continue;
        for (long i = 0; i < *count && !dup; i++) dup = strncmp(seen[i], link, sizeof seen[i]) == 0;
        if (dup) continue;
        memset(v, 0, sizeof v);
        if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, v, &len) != 0) {
            if (errno == EBADF || errno == ENOTSOCK) continue;
            fail("getsockopt(SO_MEMINFO) failed (Linux 4.6+): errno, fd", errno, fd, 0);
        }
        held += (long)v[0] + (long)(v[2] > v[5] ? v[2] : v[5]) + (long)v[4] + (long)v[6];
        if (*count < MAX_SOCKETS) {
            snprintf(seen[*count], sizeof seen[*count], "%s", link);
            (*count)++;
        }
    }
    closedir(d);
    return held;
}

static uint8_t pattern(int from, int round, int size, int slot, size_t i) {
    return (uint8_t)(from * 131 + round * 31 + size * 7 + slot * 17 + i * 13 + (i >> 8));
}

static void fill(uint8_t *b, int from, int round, int size, int slot) {
    for (size_t i = 0; i < (size_t)size; i++) b[i] = pattern(from, round, size, slot, i);
}

static void check(const uint8_t *b, int from, int round, int size, int slot) {
    for (size_t i = 0; i < (size_t)size; i++)
        if (b[i] != pattern(from, round, size, slot, i)) fail("wrong byte from rank", from, size, (int)i);
}

int main(int argc, char **argv) {
    int rounds = 5;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            rounds = atoi(argv[++i]);
        } else {
            if (rank == 0) fprintf(stderr, "usage: footprint [--rounds N]\n");
            MPI_Finalize();
            return 2;
        }
    }
    int peers = nranks - 1;
    size_t win_bytes = (size_t)WINDOW * (peers > 0 ? peers : 1) * WIN_SIZE;
    uint8_t *sbuf = malloc(MAX_SIZE), *rbuf = malloc(MAX_SIZE);
    uint8_t *wsend = malloc(win_bytes), *wrecv = malloc(win_bytes);
    uint8_t *a2a_s = malloc((size_t)nranks * A2A_SIZE), *a2a_r = malloc((size_t)nranks * A2A_SIZE);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * WINDOW * (peers > 0 ? peers : 1));
    if (!sbuf || !rbuf || !wsend || !wrecv || !a2a_s || !a2a_r || !reqs) fail("out of memory", 0, 0, 0);
    /* Touched now, so the application's own buffers are in both samples. */
    memset(sbuf, 1, MAX_SIZE);
    memset(rbuf, 1, MAX_SIZE);
    memset(wsend, 1, win_bytes);
    memset(wrecv, 1, win_bytes);
    memset(a2a_s, 1, (size_t)nranks * A2A_SIZE);
    memset(a2a_r, 1, (size_t)nranks * A2A_SIZE);
    MPI_Barrier(MPI_COMM_WORLD);
    long s[NFIELDS];
    s[0] = proc_kb("/proc/self/status", "VmRSS");
    s[3] = proc_kb("/proc/self/smaps_rollup", "Anonymous");
    long sockets0;
    s[7] = (kernel_held(&sockets0) + 1023) / 1024;

    for (int r = 0; r < rounds; r++) {
        for (int d = 1; d < nranks; d++) {
            int to = (rank + d) % nranks, from = (rank - d + nranks) % nranks;
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                int n = sizes[k];
                MPI_Status st;
                int count;
                fill(sbuf, rank, r, n, d);
                MPI_Sendrecv(sbuf, n, MPI_BYTE, to, 100 + (int)k, rbuf, n, MPI_BYTE, from, 100 + (int)k,
                             MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                if (st.MPI_SOURCE != from || st.MPI_TAG != 100 + (int)k || count != n)
                    fail("wrong source, tag or count", st.MPI_SOURCE, st.MPI_TAG, count);
                check(rbuf, from, r, n, d);
            }
        }
        /* The window: on odd rounds every send is posted before any receive. */
        int nreq = 0;
        if (r % 2 == 0)
            for (int p = 0, i = 0; p < nranks; p++)
                if (p != rank)
                    for (int w = 0; w < WINDOW; w++, i++)
                        MPI_Irecv(wrecv + (size_t)i * WIN_SIZE, WIN_SIZE, MPI_BYTE, p, 200 + w, MPI_COMM_WORLD,
                                  &reqs[nreq++]);
        for (int p = 0, i = 0; p < nranks; p++)
            if (p != rank)
                for (int w = 0; w < WINDOW; w++, i++) {
                    fill(wsend + (size_t)i * WIN_SIZE, rank, r, WIN_SIZE, p * WINDOW + w);
                    MPI_Isend(wsend + (size_t)i * WIN_SIZE, WIN_SIZE, MPI_BYTE, p, 200 + w, MPI_COMM_WORLD,
                              &reqs[nreq++]);
                }
        if (r % 2 == 1) {
            MPI_Barrier(MPI_COMM_WORLD);
            for (int p = 0, i = 0; p < nranks; p++)
                if (p != rank)
                    for (int w = 0; w < WINDOW; w++, i++)
                        MPI_Irecv(wrecv + (size_t)i * WIN_SIZE, WIN_SIZE, MPI_BYTE, p, 200 + w, MPI_COMM_WORLD,
                                  &reqs[nreq++]);
        }
        MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
        for (int p = 0, i = 0; p < nranks; p++)
            if (p != rank)
                for (int w = 0; w < WINDOW; w++, i++)
                    check(wrecv + (size_t)i * WIN_SIZE, p, r, WIN_SIZE, rank * WINDOW + w);
        for (int p = 0; p < nranks; p++) fill(a2a_s + (size_t)p * A2A_SIZE, rank, r, A2A_SIZE, p);
        MPI_Alltoall(a2a_s, A2A_SIZE, MPI_BYTE, a2a_r, A2A_SIZE, MPI_BYTE, MPI_COMM_WORLD);
        for (int p = 0; p < nranks; p++) check(a2a_r + (size_t)p * A2A_SIZE, p, r, A2A_SIZE, rank);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    s[1] = proc_kb("/proc/self/status", "VmRSS");
    s[2] = proc_kb("/proc/self/status", "VmHWM");
    s[4] = proc_kb("/proc/self/smaps_rollup", "Anonymous");
    s[5] = proc_kb("/proc/self/smaps_rollup", "Pss");
    s[8] = (kernel_held(&s[6]) + 1023) / 1024;
    s[9] = (long)((2 * (size_t)MAX_SIZE + 2 * win_bytes + 2 * (size_t)nranks * A2A_SIZE) / 1024);
    for (int i = 0; i < NFIELDS; i++)
        if (s[i] < 0) fail("cannot read /proc/self/status or /proc/self/smaps_rollup (Linux 4.14+)", i, 0, 0);

    long *all = rank == 0 ? malloc(sizeof(long) * NFIELDS * nranks) : NULL;
    MPI_Gather(s, NFIELDS, MPI_LONG, all, NFIELDS, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int p = 0; p < nranks; p++) {
            long *v = all + (size_t)p * NFIELDS;
            printf("mem,%d,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld\n", p, v[0], v[1], v[2], v[3], v[4], v[5],
                   v[6], v[7], v[8], v[9]);
        }
        printf("# footprint: done (%d ranks, %d rounds)\n", nranks, rounds);
        fflush(stdout);
        free(all);
    }
    free(sbuf);
    free(rbuf);
    free(wsend);
    free(wrecv);
    free(a2a_s);
    free(a2a_r);
    free(reqs);
    MPI_Finalize();
    return 0;
}

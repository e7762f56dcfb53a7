/* sockbench: socket ping-pong and stream, plain or switched into iWARP mode
 * (libdiwarp-sockets.so's benchmark; scripts/sockets-bench runs it side by side).
 *
 *   sockbench server PORT tcp|udp plain|iwarp
 *   sockbench client PORT tcp|udp plain|iwarp pingpong SIZE,... ITERS
 *   sockbench client PORT tcp|udp plain|iwarp stream SIZE TOTAL_BYTES
 *
 * The server serves one client (every test it asks for, then an end). pingpong prints
 * "pingpong,SIZE,ONE_WAY_US" per size (ITERS round trips after ITERS/10 of warm-up); stream
 * prints "stream,SIZE,MB_PER_S": TOTAL_BYTES in SIZE-byte writes, timed until the server's
 * one-byte answer that it has them all. Every received message's first and last bytes are
 * checked. UDP: each write is one datagram, the client connects from PORT+1 (both ends are
 * connected sockets, as a switch needs). Exit status 0 OK, 1 error, 2 usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "diwarp_sockets.h"

enum { MAX = 1 << 20 };

static void die(const char *what) {
    fprintf(stderr, "sockbench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int udp;

static struct sockaddr_in at(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

static void put(int fd, const uint8_t *p, size_t n) {
    if (udp) {
        if (send(fd, p, n, 0) != (ssize_t)n)
            die("send");
        return;
    }
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die("write");
        p += k;
        n -= (size_t)k;
    }
}

/* One message of `n` bytes (a stream: `n` bytes). */
static void get(int fd, uint8_t *p, size_t n) {
    if (udp) {
        ssize_t k = recv(fd, p, MAX, 0);
        if (k != (ssize_t)n) {
            fprintf(stderr, "sockbench: datagram of %zd bytes, wanted %zu\n", k, n);
            exit(1);
        }
        return;
    }
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die(k == 0 ? "read: early end" : "read");
        p += k;
        n -= (size_t)k;
    }
}

static void check(const uint8_t *p, size_t n, uint8_t tag) {
    if (n > 0 && (p[0] != tag || p[n - 1] != tag)) {
        fprintf(stderr, "sockbench: message of %zu bytes changed\n", n);
        exit(1);
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void maybe_switch(int fd, const char *how) {
    int on = 1;
    if (strcmp(how, "iwarp") == 0 && setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) != 0)
        die("switch");
}

/* A test request: kind (0 end, 1 pingpong, 2 stream), size, count. */
struct req {
    uint32_t kind, size;
    uint64_t count;
};

static void serve(int fd) {
    uint8_t *buf = malloc(MAX);
    for (;;) {
        struct req r;
        get(fd, (uint8_t *)&r, sizeof r);
        if (r.kind == 0)
            return;
        if (r.size > MAX)
            exit(1);
        if (r.kind == 1) {
            for (uint64_t i = 0; i < r.count; i++) {
                get(fd, buf, r.size);
                check(buf, r.size, (uint8_t)i);
                put(fd, buf, r.size);
            }
        } else {
            for (uint64_t got = 0; got < r.count; got += r.size)
                get(fd, buf, r.size);
            check(buf, r.size, 0x5a);
            put(fd, (const uint8_t *)"k", 1);
        }
    }
}

static void ask(int fd, uint32_t kind, uint32_t size, uint64_t count) {
    struct req r = {kind, size, count};
    put(fd, (const uint8_t *)&r, sizeof r);
}

int main(int argc, char **argv) {
    if (argc < 5)
        return 2;
    int port = atoi(argv[2]);
    udp = strcmp(argv[3], "udp") == 0;
    int fd = socket(AF_INET, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    int one = 1, big = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (udp) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    }
    int server = strcmp(argv[1], "server") == 0;
    struct sockaddr_in s_addr = at(port), c_addr = at(port + 1);
    if (server) {
        if (bind(fd, (struct sockaddr *)&s_addr, sizeof s_addr) != 0)
            die("bind");
        if (udp) {
            if (connect(fd, (struct sockaddr *)&c_addr, sizeof c_addr) != 0)
                die("connect");
        } else {
            if (listen(fd, 1) != 0)
                die("listen");
        }
        printf("sockbench server: listening\n");
        fflush(stdout);
        if (!udp) {
            int c = accept(fd, NULL, NULL);
            if (c < 0)
                die("accept");
            close(fd);
            fd = c;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        maybe_switch(fd, argv[4]);
        serve(fd);
        close(fd);
        return 0;
    }
    if (argc != 8)
        return 2;
    if (udp && bind(fd, (struct sockaddr *)&c_addr, sizeof c_addr) != 0)
        die("bind");
    if (connect(fd, (struct sockaddr *)&s_addr, sizeof s_addr) != 0)
        die("connect");
    if (!udp)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    maybe_switch(fd, argv[4]);
    uint8_t *buf = malloc(MAX), *in = malloc(MAX);
    if (strcmp(argv[5], "pingpong") == 0) {
        uint64_t iters = strtoull(argv[7], NULL, 10);
        for (char *s = strtok(argv[6], ","); s; s = strtok(NULL, ",")) {
            size_t size = strtoul(s, NULL, 10);
            uint64_t warm = iters / 10 + 1;
            ask(fd, 1, (uint32_t)size, warm + iters);
            double t0 = 0;
            for (uint64_t i = 0; i < warm + iters; i++) {
                if (i == warm)
                    t0 = now();
                memset(buf, (uint8_t)i, size);
                put(fd, buf, size);
                get(fd, in, size);
                check(in, size, (uint8_t)i);
            }
            printf("pingpong,%zu,%.3f\n", size, (now() - t0) / (double)iters / 2 * 1e6);
        }
    } else if (strcmp(argv[5], "stream") == 0) {
        size_t size = strtoul(argv[6], NULL, 10);
        uint64_t total = strtoull(argv[7], NULL, 10) / size * size;
        memset(buf, 0x5a, size);
        ask(fd, 2, (uint32_t)size, total);
        double t0 = now();
        for (uint64_t sent = 0; sent < total; sent += size)
            put(fd, buf, size);
        get(fd, in, 1);
        printf("stream,%zu,%.1f\n", size, (double)total / (now() - t0) / 1e6);
    } else {
        return 2;
    }
    ask(fd, 0, 0, 0);
    close(fd);
    return 0;
}

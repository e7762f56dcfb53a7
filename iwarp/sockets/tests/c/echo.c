/* sockets-echo: a TCP echo pair for libdiwarp-sockets.so's tests.
 *
 *   sockets-echo server PORT MODE     accepts one connection on 127.0.0.1:PORT, echoes it
 *   sockets-echo client PORT MODE     sends 1 B .. 4 MiB, checks every byte echoed back
 *
 * MODE: plain (never switches), iwarp (switches; a failed switch is an error), try (switches;
 * EPROTONOSUPPORT, a peer that did not switch, goes on plain). Exit status: 0 OK, 1 a check
 * failed, 2 usage, 3 the switch failed (its errno is printed). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "diwarp_sockets.h"

static const char *role;

static void die(const char *what) {
    fprintf(stderr, "sockets-echo %s: %s: %s\n", role, what, strerror(errno));
    exit(1);
}

/* Switches `fd` as MODE says; returns whether it is switched. */
static int maybe_switch(int fd, const char *mode) {
    if (strcmp(mode, "plain") == 0)
        return 0;
    int on = 1;
    if (setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) != 0) {
        int e = errno;
        printf("sockets-echo %s: switch failed: %s\n", role, strerror(e));
        if (strcmp(mode, "try") == 0 && e == EPROTONOSUPPORT)
            return 0;
        exit(3);
    }
    int got = -1;
    socklen_t len = sizeof got;
    if (getsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &got, &len) != 0 || got != 1) {
        fprintf(stderr, "sockets-echo %s: getsockopt says %d after the switch\n", role, got);
        exit(1);
    }
    return 1;
}

static void write_all(int fd, const uint8_t *p, size_t n) {
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

static void read_all(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k == 0) {
            fprintf(stderr, "sockets-echo %s: early end of stream\n", role);
            exit(1);
        }
        if (k < 0)
            die("read");
        p += k;
        n -= (size_t)k;
    }
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    role = argv[1];
    const char *mode = argv[3];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    int sw;
    if (strcmp(role, "server") == 0) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0)
            die("listen");
        printf("sockets-echo server: listening\n");
        fflush(stdout);
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            die("accept");
        sw = maybe_switch(c, mode);
        static uint8_t buf[1 << 16];
        size_t total = 0;
        for (;;) {
            ssize_t k = read(c, buf, sizeof buf);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                die("read");
            if (k == 0)
                break;
            write_all(c, buf, (size_t)k);
            total += (size_t)k;
        }
        close(c);
        printf("sockets-echo server: OK switched=%d echoed=%zu\n", sw, total);
    } else if (strcmp(role, "client") == 0) {
        if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            die("connect");
        sw = maybe_switch(fd, mode);
        static const size_t sizes[] = {1, 100, 4096, 65536, 1 << 20};
        uint8_t *out = malloc(4 << 20), *in = malloc(4 << 20);
        size_t total = 0;
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            size_t n = sizes[s];
            for (size_t i = 0; i < n; i++)
                out[i] = (uint8_t)(i * 31 + s * 7 + (i >> 9));
            memset(in, 0, n);
            if (s % 2 == 1 && n >= 3) {
                /* Gathered and scattered: three pieces out, two in, as far as each call goes. */
                struct iovec o[3] = {{out, n / 3}, {out + n / 3, n / 3}, {out + 2 * (n / 3), n - 2 * (n / 3)}};
                ssize_t k = writev(fd, o, 3);
                if (k <= 0)
                    die("writev");
                write_all(fd, out + k, n - (size_t)k);
                struct iovec i2[2] = {{in, n / 2}, {in + n / 2, n - n / 2}};
                k = readv(fd, i2, 2);
                if (k <= 0)
                    die("readv");
                read_all(fd, in + k, n - (size_t)k);
            } else {
                write_all(fd, out, n);
                read_all(fd, in, n);
            }
            if (memcmp(in, out, n) != 0) {
                fprintf(stderr, "sockets-echo client: %zu bytes came back changed\n", n);
                return 1;
            }
            total += n;
        }
        if (shutdown(fd, SHUT_WR) != 0 && errno != ENOTCONN)
            die("shutdown");
        uint8_t rest;
        if (read(fd, &rest, 1) != 0) {
            fprintf(stderr, "sockets-echo client: no end of stream after the echo\n");
            return 1;
        }
        printf("sockets-echo client: OK switched=%d checked=%zu\n", sw, total);
    } else {
        return 2;
    }
    close(fd);
    return 0;
}

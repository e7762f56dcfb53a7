/* sockets-dgram: a pair of connected UDP sockets for libdiwarp-sockets.so's tests.
 *
 *   sockets-dgram a PORT_A PORT_B MODE     binds 127.0.0.1:PORT_A, connects to PORT_B, sends
 *   sockets-dgram b PORT_B PORT_A MODE     binds PORT_B, connects to PORT_A, echoes
 *
 * MODE: plain (never switches), iwarp (switches: `a` asks before connect, `b` after; a
 * failed switch is an error), try (switches after connect;
 * EPROTONOSUPPORT, a peer that did not switch, goes on plain: then only a short plain
 * exchange runs). Switched, `a` sends 1 B .. 1 MiB messages and a burst of 2000 numbered
 * ones, `b` echoes each, and `a` checks every byte, every boundary and the order; then a cut
 * read (MSG_TRUNC), poll and epoll on a message the library holds. Exit status: 0 OK, 1 a
 * check failed, 2 usage, 3 the switch failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "diwarp_sockets.h"

static const char *role;
#define PROGRAM "sockets-dgram"
#include "check.h"


static const size_t sizes[] = {1, 100, 1472, 9000, 65507, 200000, 1 << 20};
enum { NSIZES = sizeof sizes / sizeof *sizes, BURST = 2000, MAX = 1 << 20 };

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 29 + seed * 13 + (i >> 8));
}

static struct sockaddr_in at(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

/* Sends one message; a blocking send of a switched socket queues it whole. */
static void send_msg(int fd, const void *p, size_t n) {
    ssize_t k = send(fd, p, n, 0);
    CHECK(k == (ssize_t)n);
}

int main(int argc, char **argv) {
    if (argc != 5)
        return 2;
    role = argv[1];
    int is_a = strcmp(role, "a") == 0;
    const char *mode = argv[4];
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(fd >= 0);
    int big = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    struct sockaddr_in me = at(atoi(argv[2])), peer = at(atoi(argv[3]));
    CHECK(bind(fd, (struct sockaddr *)&me, sizeof me) == 0);
    int on = 1, got = -1;
    socklen_t glen = sizeof got;
    int sw = 0;
    if (is_a && strcmp(mode, "iwarp") == 0) {
        /* Asked before connect: the socket switches as it connects. */
        CHECK(setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) == 0);
        CHECK(getsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &got, &glen) == 0 && got == 0);
        CHECK(connect(fd, (struct sockaddr *)&peer, sizeof peer) == 0);
        CHECK(getsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &got, &glen) == 0 && got == 1);
        sw = 1;
    } else {
        CHECK(connect(fd, (struct sockaddr *)&peer, sizeof peer) == 0);
    }
    if (!sw && strcmp(mode, "plain") != 0) {
        if (setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) != 0) {
            int e = errno;
            printf("sockets-dgram %s: switch failed: %s\n", role, strerror(e));
            if (strcmp(mode, "try") != 0 || e != EPROTONOSUPPORT)
                return 3;
        } else {
            sw = 1;
        }
    }
    uint8_t *out = malloc(MAX), *in = malloc(MAX + 1);
    if (!sw) {
        /* Plain: a greets until b answers (b may not be bound yet: plain UDP loses that
         * datagram, and the refusal comes back as ECONNREFUSED); the peer's hellos are
         * skipped. */
        if (is_a) {
            int answered = 0;
            for (int i = 0; i < 100 && !answered; i++) {
                send(fd, "plain-hi", 8, 0);
                struct pollfd p = {.fd = fd, .events = POLLIN};
                while (!answered && poll(&p, 1, 100) == 1) {
                    ssize_t k = recv(fd, in, MAX, 0);
                    if (k < 0 && errno != ECONNREFUSED)
                        CHECK(k >= 0);
                    answered = k == 8 && memcmp(in, "plain-ok", 8) == 0;
                }
            }
            CHECK(answered);
        } else {
            ssize_t k;
            do {
                k = recv(fd, in, MAX, 0);
                CHECK(k >= 0 || errno == ECONNREFUSED);
            } while (!(k == 8 && memcmp(in, "plain-hi", 8) == 0));
            send_msg(fd, "plain-ok", 8);
        }
        printf("sockets-dgram %s: OK switched=0\n", role);
        return 0;
    }
    if (is_a) {
        for (size_t s = 0; s < NSIZES; s++) {
            fill(out, sizes[s], (unsigned)s);
            send_msg(fd, out, sizes[s]);
            ssize_t k = recv(fd, in, MAX + 1, 0);
            CHECK(k == (ssize_t)sizes[s]);
            CHECK(memcmp(in, out, sizes[s]) == 0);
        }
        /* A burst: every message whole, in order. */
        for (uint32_t i = 0; i < BURST; i++) {
            uint32_t m[8] = {i, i ^ 0xabcdef, i * 7};
            send_msg(fd, m, sizeof m - (i % 3) * 4);
        }
        for (uint32_t i = 0; i < BURST; i++) {
            uint32_t m[8] = {0};
            ssize_t k = recv(fd, m, sizeof m, 0);
            CHECK(k == (ssize_t)(sizeof m - (i % 3) * 4));
            CHECK(m[0] == i && m[1] == (i ^ 0xabcdef) && m[2] == i * 7);
        }
        /* A cut read: the rest of the message is dropped, MSG_TRUNC says how long it was. */
        fill(out, 100, 99);
        send_msg(fd, out, 100);
        send_msg(fd, "next", 4);
        /* b sends "held" after the two; wait for it with poll, then epoll, unread. */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        CHECK(poll(&p, 1, 5000) == 1 && p.revents == POLLIN);
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7}, got;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
        CHECK(epoll_wait(ep, &got, 1, 5000) == 1 && got.data.u64 == 7 && got.events == EPOLLIN);
        CHECK(recv(fd, in, 16, 0) == 4 && memcmp(in, "held", 4) == 0);
        CHECK(epoll_wait(ep, &got, 1, 0) == 0);
        close(ep);
        send_msg(fd, "bye", 3);
    } else {
        for (size_t s = 0; s < NSIZES + BURST; s++) {
            ssize_t k = recv(fd, in, MAX + 1, 0);
            CHECK(k > 0);
            send_msg(fd, in, (size_t)k);
        }
        uint8_t small[10];
        struct iovec iv = {small, sizeof small};
        struct msghdr m = {.msg_iov = &iv, .msg_iovlen = 1};
        CHECK(recvmsg(fd, &m, 0) == 10 && (m.msg_flags & MSG_TRUNC));
        fill(out, 100, 99);
        CHECK(memcmp(small, out, 10) == 0);
        CHECK(recv(fd, in, 2, MSG_TRUNC) == 4 && memcmp(in, "ne", 2) == 0);
        send_msg(fd, "held", 4);
        CHECK(recv(fd, in, 16, 0) == 3 && memcmp(in, "bye", 3) == 0);
    }
    CHECK(close(fd) == 0);
    printf("sockets-dgram %s: OK switched=1\n", role);
    return 0;
}

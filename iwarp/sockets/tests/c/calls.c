/* sockets-calls: every socket call a program makes, on a connection switched into iWARP mode on
 * both ends (libdiwarp-sockets.so's tests).
 *
 *   sockets-calls server PORT PHASE     accepts one connection on 127.0.0.1:PORT
 *   sockets-calls client PORT PHASE
 *
 * Both ends ask for iWARP mode before the connection exists: the server on its listener (the
 * accepted socket switches in accept4), the client before connect.
 *
 * PHASE:
 *   blocking   recv with MSG_PEEK, FIONREAD, poll and select on bytes the library holds, readv,
 *              MSG_DONTWAIT/O_NONBLOCK/FIONBIO and EAGAIN, sendmsg/recvmsg with MSG_WAITALL,
 *              dup/dup2/F_DUPFD, sendto/recvfrom, SO_ERROR, fork (the child is refused, the
 *              parent goes on), shutdown(SHUT_WR) with the other direction still open, and a
 *              write after the peer closed (EPIPE).
 *   epoll-lt   a non-blocking echo of 1 B .. 1 MiB messages driven by level-triggered epoll on
 *   epoll-et   both ends (edge-triggered: every event read and written until EAGAIN).
 *   flood      (client) writes until the connection fails; the test kills the server.
 * Every byte is checked. Exit status: 0 OK, 1 a check failed, 2 usage. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "diwarp_sockets.h"

static const char *role;
#define PROGRAM "sockets-calls"
#include "check.h"


static uint8_t pattern(size_t i, unsigned seed) { return (uint8_t)(i * 131 + seed * 17 + (i >> 11)); }

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

static void expect(const uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, seed)) {
            fprintf(stderr, "sockets-calls %s: byte %zu of %zu (seed %u) is %u\n", role, i, n, seed, p[i]);
            exit(1);
        }
}

static void write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k > 0);
        p += k;
        n -= (size_t)k;
    }
}

static void read_all(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k > 0);
        p += k;
        n -= (size_t)k;
    }
}

static void expect_text(int fd, const char *text) {
    char buf[64] = {0};
    size_t n = strlen(text);
    read_all(fd, buf, n);
    if (memcmp(buf, text, n) != 0) {
        fprintf(stderr, "sockets-calls %s: read \"%.*s\", wanted \"%s\"\n", role, (int)n, buf, text);
        exit(1);
    }
}

static void set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0);
    CHECK(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0);
    CHECK(((fcntl(fd, F_GETFL) & O_NONBLOCK) != 0) == (on != 0));
}

static int so_error(int fd) {
    int e = -1;
    socklen_t len = sizeof e;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0);
    return e;
}

/* ---- blocking ----------------------------------------------------------------------------- */

enum { BIG = 71003 };

static void blocking_server(int c) {
    char buf[8] = {0};
    /* Peeked bytes stay; the library holds them, so poll and select must say so although
     * the kernel's socket is empty. */
    CHECK(recv(c, buf, 5, MSG_PEEK | MSG_WAITALL) == 5 && memcmp(buf, "hello", 5) == 0);
    int avail = 0;
    CHECK(ioctl(c, FIONREAD, &avail) == 0 && avail == 5);
    CHECK(read(c, buf, 2) == 2 && memcmp(buf, "he", 2) == 0);
    struct pollfd p = {.fd = c, .events = POLLIN};
    CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLIN);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(c, &rs);
    struct timeval tv = {0, 0};
    CHECK(select(c + 1, &rs, NULL, NULL, &tv) == 1 && FD_ISSET(c, &rs));
    char a[1], b[2];
    struct iovec iv[2] = {{a, 1}, {b, 2}};
    CHECK(readv(c, iv, 2) == 3 && a[0] == 'l' && memcmp(b, "lo", 2) == 0);
    /* Nothing left: every non-blocking way says EAGAIN, poll says nothing. */
    CHECK(poll(&p, 1, 0) == 0);
    CHECK(recv(c, buf, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    set_nonblock(c, 1);
    CHECK(read(c, buf, 1) == -1 && errno == EAGAIN);
    set_nonblock(c, 0);
    int on = 1, off = 0;
    CHECK(ioctl(c, FIONBIO, &on) == 0);
    CHECK(recv(c, buf, 1, 0) == -1 && errno == EAGAIN);
    CHECK(ioctl(c, FIONBIO, &off) == 0);
    write_all(c, "ready", 5);

    /* Gathered by the client, read whole with MSG_WAITALL into two pieces. */
    uint8_t *big = malloc(BIG);
    struct iovec two[2] = {{big, 50000}, {big + 50000, BIG - 50000}};
    struct msghdr m = {.msg_iov = two, .msg_iovlen = 2};
    CHECK(recvmsg(c, &m, MSG_WAITALL) == BIG && m.msg_flags == 0);
    expect(big, BIG, 1);
    free(big);

    /* Duplicates are the same stream. */
    int d = dup(c), d2 = dup2(c, 100), d3 = fcntl(c, F_DUPFD_CLOEXEC, 200);
    CHECK(d >= 0 && d2 == 100 && d3 >= 200);
    write_all(d, "one", 3);
    write_all(d2, "two", 3);
    write_all(d3, "six", 3);
    CHECK(close(d) == 0 && close(d2) == 0 && close(d3) == 0);
    write_all(c, "!", 1);

    socklen_t alen = 99;
    struct sockaddr_in from;
    CHECK(recvfrom(c, buf, 6, MSG_WAITALL, (struct sockaddr *)&from, &alen) == 6 &&
          memcmp(buf, "sendto", 6) == 0 && alen == 0);
    CHECK(so_error(c) == 0);

    /* The client forked; its parent goes on. */
    expect_text(c, "after-fork");

    /* The client ended its direction: a read says so, the other direction still works. */
    CHECK(read(c, buf, 1) == 0);
    p.events = POLLIN | POLLRDHUP;
    CHECK(poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLRDHUP)) == (POLLIN | POLLRDHUP));
    write_all(c, "reply-after-eof", 15);
}

static volatile sig_atomic_t sigpipes;

static void count_sigpipe(int sig) {
    (void)sig;
    sigpipes++;
}

static void blocking_client(int fd) {
    write_all(fd, "hello", 5);
    expect_text(fd, "ready");

    uint8_t *big = malloc(BIG);
    fill(big, BIG, 1);
    struct iovec three[3] = {{big, 1000}, {big + 1000, 70000}, {big + 71000, 3}};
    struct msghdr m = {.msg_iov = three, .msg_iovlen = 3};
    CHECK(sendmsg(fd, &m, 0) == BIG);
    free(big);

    expect_text(fd, "onetwosix!");
    struct sockaddr_in nowhere = {.sin_family = AF_INET};
    CHECK(sendto(fd, "sendto", 6, 0, (struct sockaddr *)&nowhere, sizeof nowhere) == 6);
    CHECK(so_error(fd) == 0);

    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        char x;
        /* The parent's queue pair is not the child's to move: refused, clearly. */
        int ok = read(fd, &x, 1) == -1 && errno == EOPNOTSUPP;
        ok = ok && write(fd, "x", 1) == -1 && errno == EOPNOTSUPP;
        ok = ok && close(fd) == 0;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    write_all(fd, "after-fork", 10);

    CHECK(shutdown(fd, SHUT_WR) == 0);
    /* A write after the end, as on a kernel socket: EPIPE and SIGPIPE. */
    CHECK(signal(SIGPIPE, count_sigpipe) != SIG_ERR);
    CHECK(write(fd, "x", 1) == -1 && errno == EPIPE && sigpipes == 1);
    expect_text(fd, "reply-after-eof");
    char x;
    CHECK(read(fd, &x, 1) == 0); /* the server closed */
    CHECK(send(fd, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE && sigpipes == 1);
}

/* ---- epoll -------------------------------------------------------------------------------- */

enum { ECHO_BUF = 4 << 20 };

/* Runs one end of the echo: the server sends back what it reads until the client's end of
 * stream; the client sends `total` bytes of the pattern and checks them coming back. */
static void epoll_echo(int fd, int edge, int client) {
    static const size_t sizes[] = {1, 7, 100, 1500, 4096, 65536, 200000, 1 << 20};
    enum { NSIZES = sizeof sizes / sizeof *sizes };
    size_t total = 0;
    for (size_t s = 0; s < NSIZES; s++)
        total += sizes[s];
    uint8_t *out = malloc(ECHO_BUF), *in = malloc(ECHO_BUF);
    if (client)
        fill(out, total, 9);
    size_t queued = client ? total : 0, sent = 0, got = 0, writes = 0;
    int ended = 0, shut = 0;
    set_nonblock(fd, 1);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | (edge ? EPOLLET : 0), .data.u64 = 42};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    int rounds = 0;
    for (;;) {
        struct epoll_event got_ev[4];
        int n = epoll_wait(ep, got_ev, 4, 5000);
        CHECK(n >= 0);
        if (n == 0) {
            fprintf(stderr, "sockets-calls %s: no event in 5 s (sent %zu got %zu)\n", role, sent, got);
            exit(1);
        }
        rounds++;
        CHECK(n == 1 && got_ev[0].data.u64 == 42);
        uint32_t e = got_ev[0].events;
        if (e & EPOLLIN) {
            for (;;) { /* edge-triggered: until EAGAIN; level: once is enough, but the same */
                size_t room = ECHO_BUF - got;
                CHECK(room > 0);
                ssize_t k = read(fd, in + got, room > 300000 ? 300000 : room);
                if (k < 0) {
                    CHECK(errno == EAGAIN);
                    break;
                }
                if (k == 0) {
                    ended = 1;
                    break;
                }
                got += (size_t)k;
                if (!client)
                    queued = got; /* the server echoes what it has */
                if (!edge)
                    break;
            }
        }
        /* Writes go as far as the socket takes them, the client's in messages of every size. */
        uint8_t *src = client ? out : in;
        while (sent < queued) {
            size_t want = queued - sent;
            if (client && want > sizes[writes % NSIZES])
                want = sizes[writes % NSIZES];
            ssize_t k = write(fd, src + sent, want);
            if (k < 0) {
                CHECK(errno == EAGAIN);
                break;
            }
            sent += (size_t)k;
            writes++;
        }
        if (client && sent == total && !shut) {
            CHECK(shutdown(fd, SHUT_WR) == 0);
            shut = 1;
        }
        if (!client && ended && sent == queued && !shut) {
            CHECK(shutdown(fd, SHUT_WR) == 0);
            shut = 1;
        }
        if (ended && (client ? got == total : shut))
            break;
    }
    if (client) {
        CHECK(got == total);
        expect(in, total, 9);
        printf("sockets-calls client: echoed=%zu rounds=%d\n", total, rounds);
    } else {
        printf("sockets-calls server: echoed=%zu rounds=%d\n", sent, rounds);
    }
    close(ep);
    free(out);
    free(in);
}

/* ---- flood -------------------------------------------------------------------------------- */

/* Writes until the connection fails (the test kills the server): the error must be a clear
 * one and come within seconds, not a hang. */
static void flood(int fd) {
    static uint8_t buf[1 << 16];
    for (;;) {
        ssize_t k = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
        if (k < 0) {
            CHECK(errno == EPIPE || errno == ECONNRESET);
            printf("sockets-calls client: write failed: %s\n", strerror(errno));
            return;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    role = argv[1];
    const char *phase = argv[3];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    int server = strcmp(role, "server") == 0;
    if (server) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
        /* Asked on the listener: every connection it accepts switches as it is accepted. */
        int on = 1;
        CHECK(setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) == 0);
        printf("sockets-calls server: listening\n");
        fflush(stdout);
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        CHECK(c >= 0);
        close(fd);
        fd = c;
    } else {
        /* Asked before connect: the socket switches as it connects. */
        int on = 1;
        CHECK(setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) == 0);
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    }
    int got = 0;
    socklen_t glen = sizeof got;
    CHECK(getsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &got, &glen) == 0 && got == 1);
    if (strcmp(phase, "blocking") == 0)
        server ? blocking_server(fd) : blocking_client(fd);
    else if (strcmp(phase, "epoll-lt") == 0 || strcmp(phase, "epoll-et") == 0)
        epoll_echo(fd, strcmp(phase, "epoll-et") == 0, !server);
    else if (strcmp(phase, "flood") == 0)
        server ? (void)pause() : flood(fd);
    else
        return 2;
    CHECK(close(fd) == 0);
    printf("sockets-calls %s: OK %s\n", role, phase);
    return 0;
}

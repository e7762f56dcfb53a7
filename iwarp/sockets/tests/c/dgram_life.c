/* sockets-dgram-life: a switched pair of connected UDP sockets between the program's calls.
 *
 *   sockets-dgram-life a PORT_A PORT_B PHASE    binds 127.0.0.1:PORT_A, connects to PORT_B
 *   sockets-dgram-life b PORT_B PORT_A PHASE
 *
 * Both switch after connect. PHASE:
 *   sleep    a checks that no thread but its own runs before the switch and one (the
 *            library's ticker) after, sends COUNT messages and computes for 3 s without a
 *            call; b must have them all within 1.5 s of a's first send (the monotonic clock
 *            is the host's; run a under DIWARP_FAULTS drops: the lost ones must be resent
 *            while a computes).
 *   restart  b blocks in recv while a SIGALRM handler with SA_RESTART fires every 50 ms: the
 *            recv goes on and returns a's message; then with a handler without SA_RESTART
 *            the blocked recv fails with EINTR. Calls that succeed leave errno as it was.
 * Exit status: 0 OK, 1 a check failed, 2 usage, 3 the switch failed. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "diwarp_sockets.h"

static const char *role;
#define PROGRAM "sockets-dgram-life"
#include "check.h"

enum { COUNT = 40 };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int threads(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static volatile sig_atomic_t hits;
static void on_alarm(int s) {
    (void)s;
    hits++;
}

static void alarm_handler(int flags) {
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
}

static void timer(int first_ms, int every_ms) {
    struct itimerval it = {{every_ms / 1000, (every_ms % 1000) * 1000},
                           {first_ms / 1000, (first_ms % 1000) * 1000}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
}

static struct sockaddr_in at(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

int main(int argc, char **argv) {
    if (argc != 5)
        return 2;
    role = argv[1];
    int is_a = strcmp(role, "a") == 0;
    const char *phase = argv[4];
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in me = at(atoi(argv[2])), peer = at(atoi(argv[3]));
    CHECK(bind(fd, (struct sockaddr *)&me, sizeof me) == 0);
    CHECK(connect(fd, (struct sockaddr *)&peer, sizeof peer) == 0);
    int sleep_phase = strcmp(phase, "sleep") == 0;
    if (sleep_phase && is_a)
        CHECK(threads() == 1);
    int on = 1;
    if (setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on) != 0) {
        printf(PROGRAM " %s: switch failed: %s\n", role, strerror(errno));
        return 3;
    }
    char buf[256];
    if (sleep_phase) {
        if (is_a) {
            CHECK(threads() == 2);
            double sent = now_ms();
            for (uint32_t i = 0; i < COUNT; i++) {
                uint32_t m[16] = {i, i * 77};
                memcpy(&m[2], &sent, sizeof sent);
                CHECK(send(fd, m, sizeof m, 0) == (ssize_t)sizeof m);
            }
            /* Computes, in no call of the library's. */
            volatile uint64_t x = 0;
            for (double t0 = now_ms(); now_ms() - t0 < 3000;)
                x += 1;
            CHECK(recv(fd, buf, sizeof buf, 0) == 4 && memcmp(buf, "done", 4) == 0);
        } else {
            double first = 0;
            for (uint32_t i = 0; i < COUNT; i++) {
                uint32_t m[16];
                CHECK(recv(fd, m, sizeof m, 0) == (ssize_t)sizeof m);
                CHECK(m[0] == i && m[1] == i * 77);
                if (i == 0)
                    memcpy(&first, &m[2], sizeof first);
            }
            double took = now_ms() - first;
            printf(PROGRAM " b: %d messages in %.0f ms from a's first send\n", COUNT, took);
            CHECK(took < 1500);
            CHECK(send(fd, "done", 4, 0) == 4);
        }
    } else if (strcmp(phase, "restart") == 0) {
        if (is_a) {
            usleep(400 * 1000);
            errno = EDOM;
            CHECK(send(fd, "one", 3, 0) == 3 && errno == EDOM);
            CHECK(recv(fd, buf, sizeof buf, 0) == 4 && memcmp(buf, "ack1", 4) == 0);
            CHECK(errno == EDOM);
            usleep(800 * 1000);
            CHECK(send(fd, "two", 3, 0) == 3);
            CHECK(recv(fd, buf, sizeof buf, 0) == 3 && memcmp(buf, "bye", 3) == 0);
        } else {
            alarm_handler(SA_RESTART);
            timer(50, 50);
            errno = EDOM;
            ssize_t k = recv(fd, buf, sizeof buf, 0);
            int e = errno;
            timer(0, 0);
            printf(PROGRAM " b: recv with SA_RESTART returned %zd after %d signals\n", k,
                   (int)hits);
            CHECK(k == 3 && memcmp(buf, "one", 3) == 0);
            CHECK(e == EDOM);
            CHECK(hits >= 3);
            CHECK(send(fd, "ack1", 4, 0) == 4 && errno == EDOM);
            alarm_handler(0);
            hits = 0;
            timer(200, 0);
            k = recv(fd, buf, sizeof buf, 0);
            e = errno;
            printf(PROGRAM " b: recv without SA_RESTART returned %zd (%s)\n", k, strerror(e));
            CHECK(k == -1 && e == EINTR && hits == 1);
            CHECK(recv(fd, buf, sizeof buf, 0) == 3 && memcmp(buf, "two", 3) == 0);
            CHECK(send(fd, "bye", 3, 0) == 3);
        }
    } else {
        return 2;
    }
    CHECK(close(fd) == 0);
    printf(PROGRAM " %s: OK switched=1\n", role);
    return 0;
}

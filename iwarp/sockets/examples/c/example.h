/* What the extension examples share: a connected TCP socket on 127.0.0.1:PORT, switched into
 * iWARP mode, and a check that ends the program with the line that failed. */
#ifndef DIWARP_SOCKETS_EXAMPLE_H
#define DIWARP_SOCKETS_EXAMPLE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "diwarp_sockets.h"

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s: line %d: %s failed (errno %d: %s)\n", __FILE__, __LINE__,     \
                    #cond, errno, strerror(errno));                                            \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* argv: server|client PORT. Returns the switched socket; *server says which end this is. */
static int example_connect(int argc, char **argv, int *server) {
    CHECK(argc == 3);
    *server = strcmp(argv[1], "server") == 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    CHECK(fd >= 0);
    if (*server) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
        printf("listening\n");
        fflush(stdout);
        int c = accept(fd, NULL, NULL);
        CHECK(c >= 0);
        close(fd);
        fd = c;
    } else {
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    }
    CHECK(setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &one, sizeof one) == 0);
    return fd;
}

/* Waits for one completion and checks it is `opcode` of `wr_id`, without error. */
static struct diwarp_wc example_complete(int fd, uint32_t opcode, uint64_t wr_id) {
    struct diwarp_wc wc;
    CHECK(diwarp_wait(fd, &wc, 1, 10000) == 1);
    CHECK(wc.opcode == opcode && wc.wr_id == wr_id && wc.status == 0);
    return wc;
}

#endif

/* RDMA Read: the server fills a buffer, registers it for the peer to read and sends its STag;
 * the client registers a buffer of its own for the Read Responses to land in, reads the
 * server's buffer in two pieces (second half first), checks every byte, and tells the server
 * it is done. The server's program never sends the data itself.
 *   Usage: rdma_read server|client PORT */
#include "example.h"

enum { LEN = 3 << 20 };

int main(int argc, char **argv) {
    int server;
    int fd = example_connect(argc, argv, &server);
    uint8_t *buf = malloc(LEN);
    CHECK(buf);
    if (server) {
        for (size_t k = 0; k < LEN; k++)
            buf[k] = (uint8_t)(k ^ (k >> 9));
        uint32_t stag;
        CHECK(diwarp_reg_mr(fd, buf, LEN, DIWARP_ACCESS_REMOTE_READ, &stag) == 0);
        CHECK(write(fd, &stag, sizeof stag) == sizeof stag);
        char done;
        CHECK(read(fd, &done, 1) == 1 && done == 'R');
    } else {
        uint32_t remote, local;
        CHECK(read(fd, &remote, sizeof remote) == sizeof remote);
        memset(buf, 0, LEN);
        CHECK(diwarp_reg_mr(fd, buf, LEN, DIWARP_ACCESS_LOCAL_WRITE, &local) == 0);
        CHECK(diwarp_rdma_read(fd, local, LEN / 2, LEN - LEN / 2, remote, LEN / 2, 2) == 0);
        CHECK(diwarp_rdma_read(fd, local, 0, LEN / 2, remote, 0, 1) == 0);
        CHECK(example_complete(fd, DIWARP_WC_RDMA_READ, 2).byte_len == LEN - LEN / 2);
        CHECK(example_complete(fd, DIWARP_WC_RDMA_READ, 1).byte_len == LEN / 2);
        for (size_t k = 0; k < LEN; k++)
            if (buf[k] != (uint8_t)(k ^ (k >> 9))) {
                fprintf(stderr, "rdma_read client: byte %zu is %u\n", k, buf[k]);
                return 1;
            }
        CHECK(write(fd, "R", 1) == 1);
        CHECK(diwarp_dereg_mr(fd, local) == 0);
    }
    close(fd);
    printf("rdma_read %s: OK\n", server ? "server" : "client");
    return 0;
}

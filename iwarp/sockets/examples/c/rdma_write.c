/* RDMA Write: the server registers a buffer the peer may write and sends its STag over the
 * socket; the client writes a pattern at two offsets straight into it, then sends one byte
 * (which arrives after the written data: RDMAP keeps the order); the server checks every byte
 * of the buffer without ever calling read for the data.  Usage: rdma_write server|client PORT */
#include "example.h"

enum { LEN = 1 << 20, OFF = 4096 };

int main(int argc, char **argv) {
    int server;
    int fd = example_connect(argc, argv, &server);
    uint8_t *buf = malloc(LEN);
    CHECK(buf);
    if (server) {
        memset(buf, 0xee, LEN);
        uint32_t stag;
        CHECK(diwarp_reg_mr(fd, buf, LEN, DIWARP_ACCESS_REMOTE_WRITE, &stag) == 0);
        CHECK(write(fd, &stag, sizeof stag) == sizeof stag);
        char done;
        CHECK(read(fd, &done, 1) == 1 && done == 'W');
        for (size_t k = 0; k < LEN; k++) {
            uint8_t want = k < OFF ? (uint8_t)(k * 3) : k < 2 * OFF ? 0xee : (uint8_t)(k * 7);
            if (buf[k] != want) {
                fprintf(stderr, "rdma_write server: byte %zu is %u, wanted %u\n", k, buf[k], want);
                return 1;
            }
        }
        CHECK(diwarp_dereg_mr(fd, stag) == 0);
    } else {
        uint32_t stag;
        CHECK(read(fd, &stag, sizeof stag) == sizeof stag);
        for (size_t k = 0; k < LEN; k++)
            buf[k] = (uint8_t)(k * (k < OFF ? 3 : 7));
        CHECK(diwarp_rdma_write(fd, buf, OFF, stag, 0, 1) == 0);
        CHECK(diwarp_rdma_write(fd, buf + 2 * OFF, LEN - 2 * OFF, stag, 2 * OFF, 2) == 0);
        CHECK(example_complete(fd, DIWARP_WC_RDMA_WRITE, 1).byte_len == OFF);
        CHECK(example_complete(fd, DIWARP_WC_RDMA_WRITE, 2).byte_len == LEN - 2 * OFF);
        CHECK(write(fd, "W", 1) == 1);
        char end;
        CHECK(read(fd, &end, 1) == 0);
    }
    close(fd);
    printf("rdma_write %s: OK\n", server ? "server" : "client");
    return 0;
}

/* Posted receives and sends that complete later: the server posts 8 receives ahead, the
 * client posts 8 sends of different sizes at once; both poll for the completions. Every
 * byte, length and id is checked.  Usage: async server|client PORT */
#include "example.h"

enum { N = 8, MAX = 1 << 16 };

static size_t size_of(int i) { return (size_t)1 << (2 * i); } /* 1 B .. 16 KiB */

int main(int argc, char **argv) {
    int server;
    int fd = example_connect(argc, argv, &server);
    static uint8_t bufs[N][MAX];
    if (server) {
        for (int i = 0; i < N; i++)
            CHECK(diwarp_post_recv(fd, bufs[i], MAX, 100 + i) == 0);
        for (int i = 0; i < N; i++) {
            struct diwarp_wc wc = example_complete(fd, DIWARP_WC_RECV, 100 + i);
            CHECK(wc.byte_len == size_of(i));
            for (size_t k = 0; k < size_of(i); k++)
                CHECK(bufs[i][k] == (uint8_t)(k + i));
        }
        /* The answer also comes as a message the client posted a receive for. */
        CHECK(diwarp_post_send(fd, "all 8", 5, 1) == 0);
        example_complete(fd, DIWARP_WC_SEND, 1);
    } else {
        char answer[16] = {0};
        CHECK(diwarp_post_recv(fd, answer, sizeof answer, 7) == 0);
        for (int i = 0; i < N; i++) {
            for (size_t k = 0; k < size_of(i); k++)
                bufs[i][k] = (uint8_t)(k + i);
            CHECK(diwarp_post_send(fd, bufs[i], size_of(i), 200 + i) == 0);
        }
        /* Sends complete in order among themselves; the answer's receive may be reported
         * before the last of them, as both can come out of the same look at the socket. */
        int sends = 0, got_answer = 0;
        while (sends < N || !got_answer) {
            struct diwarp_wc wc;
            CHECK(diwarp_wait(fd, &wc, 1, 10000) == 1 && wc.status == 0);
            if (wc.opcode == DIWARP_WC_SEND) {
                CHECK(wc.wr_id == (uint64_t)(200 + sends) && wc.byte_len == size_of(sends));
                sends++;
            } else {
                CHECK(wc.opcode == DIWARP_WC_RECV && wc.wr_id == 7 && !got_answer);
                CHECK(wc.byte_len == 5 && memcmp(answer, "all 8", 5) == 0);
                got_answer = 1;
            }
        }
    }
    close(fd);
    printf("async %s: OK\n", server ? "server" : "client");
    return 0;
}

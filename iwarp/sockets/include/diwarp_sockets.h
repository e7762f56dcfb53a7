/* libdiwarp-sockets.so (LD_PRELOAD): socket calls over diwarp's iWARP queue pairs.
 *
 * A connected socket switched on both ends with
 *     int on = 1;
 *     setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on);
 * carries its data over a queue pair: a stream socket over an RC queue pair (MPA start-up on
 * that connection, then FPDUs), a datagram socket over an RD queue pair (reliable, ordered
 * messages). Set before the connection exists, the option marks the socket instead: it
 * switches as connect succeeds (a failed switch fails connect; the socket stays connected,
 * plain), and a marked listener's accepted sockets switch in accept/accept4.
 * Both ends must switch within DIWARP_SWITCH_TIMEOUT_MS (default 2000) of each other and
 * before either sends data; if the peer does not, the call fails with EPROTONOSUPPORT and
 * the socket stays a plain socket, its stream untouched. Without the library loaded the
 * kernel refuses the level with ENOPROTOOPT. getsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE)
 * reads 1 on a switched socket. */
#ifndef DIWARP_SOCKETS_H
#define DIWARP_SOCKETS_H

#include <stddef.h>
#include <stdint.h>

#define SOL_DIWARP 0x6477
#define DIWARP_IWARP_MODE 1

/* Extensions, on a switched stream socket (an RC queue pair; a datagram socket gives
 * EOPNOTSUPP, one never switched EBADF). Each call posts and returns 0, or -1 with errno;
 * what it started completes later, in diwarp_poll or diwarp_wait. Link with
 * -ldiwarp_sockets (the same library LD_PRELOAD loads).
 *
 * Registered memory: the peer may RDMA Read (DIWARP_ACCESS_REMOTE_READ) or Write
 * (DIWARP_ACCESS_REMOTE_WRITE) it, this end's RDMA Reads may land in it
 * (DIWARP_ACCESS_LOCAL_WRITE), at zero-based offsets under its STag, until deregistered.
 * An access outside what was granted breaks the connection on both ends.
 *
 * Posted receives: from the first diwarp_post_recv on, every message the peer sends (its
 * diwarp_post_send, or its write) fills the oldest posted receive, cut to its length
 * (status EMSGSIZE, byte_len the message's), instead of joining the byte stream. */
#define DIWARP_ACCESS_LOCAL_WRITE 1
#define DIWARP_ACCESS_REMOTE_READ 2
#define DIWARP_ACCESS_REMOTE_WRITE 4

enum diwarp_wc_opcode {
    DIWARP_WC_SEND = 0,
    DIWARP_WC_RECV = 1,
    DIWARP_WC_RDMA_WRITE = 2,
    DIWARP_WC_RDMA_READ = 3,
};

struct diwarp_wc {
    uint64_t wr_id;    /* the request's own */
    uint32_t opcode;   /* enum diwarp_wc_opcode */
    int32_t status;    /* 0, or the errno of why it failed */
    uint64_t byte_len; /* bytes sent, received (a message's whole length), written or read */
};

/* `addr` must stay valid until diwarp_dereg_mr. */
int diwarp_reg_mr(int fd, void *addr, size_t len, int access, uint32_t *stag);
int diwarp_dereg_mr(int fd, uint32_t stag);
/* A Send of `len` bytes (copied before it returns); completes once in the kernel. */
int diwarp_post_send(int fd, const void *buf, size_t len, uint64_t wr_id);
/* `buf` must stay valid until the receive completes. */
int diwarp_post_recv(int fd, void *buf, size_t len, uint64_t wr_id);
/* RDMA Write of `len` bytes (copied before it returns) into the peer's region. */
int diwarp_rdma_write(int fd, const void *buf, size_t len, uint32_t remote_stag,
                      uint64_t remote_offset, uint64_t wr_id);
/* RDMA Read of `len` bytes of the peer's region into this end's region `local_stag`. */
int diwarp_rdma_read(int fd, uint32_t local_stag, uint64_t local_offset, size_t len,
                     uint32_t remote_stag, uint64_t remote_offset, uint64_t wr_id);
/* Up to `max` completions, oldest first: how many (0: none yet). */
int diwarp_poll(int fd, struct diwarp_wc *wc, int max);
/* As diwarp_poll, waiting up to `timeout_ms` (-1: for ever) for at least one. */
int diwarp_wait(int fd, struct diwarp_wc *wc, int max, int timeout_ms);

#endif

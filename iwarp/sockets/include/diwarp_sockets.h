/* libdiwarp-sockets.so (LD_PRELOAD): socket calls over diwarp's iWARP queue pairs.
 *
 * A connected socket switched on both ends with
 *     int on = 1;
 *     setsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE, &on, sizeof on);
 * carries its data over a queue pair: a stream socket over an RC queue pair (MPA start-up on
 * that connection, then FPDUs), a datagram socket over an RD queue pair (reliable, ordered
 * messages). An unconnected socket cannot switch (ENOTCONN).
 * Both ends must switch within DIWARP_SWITCH_TIMEOUT_MS (default 2000) of each other and
 * before either sends data; if the peer does not, the call fails with EPROTONOSUPPORT and
 * the socket stays a plain socket, its stream untouched. Without the library loaded the
 * kernel refuses the level with ENOPROTOOPT. getsockopt(fd, SOL_DIWARP, DIWARP_IWARP_MODE)
 * reads 1 on a switched socket. */
#ifndef DIWARP_SOCKETS_H
#define DIWARP_SOCKETS_H

#define SOL_DIWARP 0x6477
#define DIWARP_IWARP_MODE 1

#endif

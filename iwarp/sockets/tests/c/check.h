/* The sockets tests' check: on failure, the line, the condition and errno, then exit 1.
 * A program defines `role` (which end it is) before including this. */
#ifndef DIWARP_SOCKETS_TEST_CHECK_H
#define DIWARP_SOCKETS_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s %s: line %d: %s failed (errno %d: %s)\n", PROGRAM, role,       \
                    __LINE__, #cond, errno, strerror(errno));                                  \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif

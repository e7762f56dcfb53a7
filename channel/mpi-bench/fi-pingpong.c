/* Provider-level ping-pong: the libfabric calls MPI makes for a blocking send and receive
 * (fi_trecv, then fi_tinject up to the provider's inject size or fi_tsend above it, then
 * fi_cq_read until done), without MPI. Two processes (fork) on cores 0 and 1 exchange their
 * endpoint names through pipes. It splits MPI's latency into the provider's share and MPI's.
 *
 *   gcc -O2 -o fi-pingpong channel/mpi-bench/fi-pingpong.c -lfabric
 *   FI_PROVIDER_PATH=$(scripts/build-provider) FI_PROVIDER=diwarp FI_DIWARP_IFACE=127.0.0.1 \
 *     ./fi-pingpong [iterations [size [verify]]]
 *
 * Prints "fi <provider> <size> B: <t> us one-way" (round trip / 2, after 1000 warm-up
 * iterations). With verify set, every received byte is checked; a mismatch exits 1. */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                    \
  do {                                                                           \
    int r_ = (x);                                                                \
    if (r_ < 0) {                                                                \
      fprintf(stderr, "fi-pingpong: %s: %d %s\n", #x, r_, fi_strerror(-r_));     \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

/* Receive and send completions read so far and not yet waited for. */
static int recvs_done, sends_done;

/* Reads at most one completion (this is also what drives the provider's progress). */
static void poll_once(struct fid_cq *cq) {
  struct fi_cq_tagged_entry e;
  ssize_t n = fi_cq_read(cq, &e, 1);
  if (n == 1) {
    if (e.flags & FI_RECV)
      recvs_done++;
    else
      sends_done++;
  } else if (n == -FI_EAVAIL) {
    struct fi_cq_err_entry err = {0};
    fi_cq_readerr(cq, &err, 0);
    fprintf(stderr, "fi-pingpong: completion error %s\n", fi_strerror(err.err));
    exit(1);
  } else if (n != -FI_EAGAIN) {
    CK((int)n);
  }
}

/* Polls until a receive (if `want_recv`) and a send (if `want_send`) completed. */
static void wait_done(struct fid_cq *cq, int want_recv, int want_send, double deadline) {
  while ((want_recv && !recvs_done) || (want_send && !sends_done)) {
    poll_once(cq);
    if (now() > deadline) {
      fprintf(stderr, "fi-pingpong: no completion within 30 s\n");
      exit(1);
    }
  }
  recvs_done -= want_recv;
  sends_done -= want_send;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 1;
  int verify = argc > 3 && atoi(argv[3]);
  int up[2], down[2];
  if (iters <= 0 || pipe(up) || pipe(down)) {
    fprintf(stderr, "usage: fi-pingpong [iterations [size [verify]]]\n");
    return 2;
  }
  pid_t child = fork();
  int rank = child == 0;
  pin(rank);

  struct fi_info *hints = fi_allocinfo(), *info;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = 0; /* no FI_CONTEXT: operations pass no context of their own */
  CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
  struct fid_fabric *fab;
  struct fid_domain *dom;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  CK(fi_fabric(info->fabric_attr, &fab, NULL));
  CK(fi_domain(fab, info, &dom, NULL));
  struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 128};
  CK(fi_cq_open(dom, &ca, &cq, NULL));
  struct fi_av_attr aa = {.type = FI_AV_TABLE};
  CK(fi_av_open(dom, &aa, &av, NULL));
  CK(fi_endpoint(dom, info, &ep, NULL));
  CK(fi_ep_bind(ep, &av->fid, 0));
  CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  CK(fi_enable(ep));

  char name[256], peer[256];
  size_t len = sizeof name;
  CK(fi_getname(&ep->fid, name, &len));
  int out = rank ? up[1] : down[1], in = rank ? down[0] : up[0];
  if (write(out, name, len) != (ssize_t)len || read(in, peer, len) != (ssize_t)len) {
    fprintf(stderr, "fi-pingpong: name exchange failed\n");
    return 1;
  }
  fi_addr_t pa;
  if (fi_av_insert(av, peer, 1, &pa, 0, NULL) != 1) {
    fprintf(stderr, "fi-pingpong: fi_av_insert failed\n");
    return 1;
  }

  size_t inject = info->tx_attr->inject_size;
  char *sb = malloc(size + 1), *rb = malloc(size + 1);
  double t0 = now();
  for (int i = 0; i < iters + 1000; i++) {
    if (i == 1000) t0 = now();
    double deadline = now() + 30;
    unsigned char seed = (unsigned char)(i * 2 + rank);
    if (verify)
      for (size_t k = 0; k < size; k++) sb[k] = (char)(k * 31 + seed);
    int r;
    while ((r = fi_trecv(ep, rb, size, NULL, pa, 7, 0, NULL)) == -FI_EAGAIN) poll_once(cq);
    CK(r);
    if (rank == 1) wait_done(cq, 1, 0, deadline);
    do {
      r = size <= inject ? fi_tinject(ep, sb, size, pa, 7) : fi_tsend(ep, sb, size, NULL, pa, 7, sb);
      if (r == -FI_EAGAIN) poll_once(cq);
    } while (r == -FI_EAGAIN);
    CK(r);
    /* Rank 0 waits for the answer, rank 1 only for its own send; an inject is done at once. */
    wait_done(cq, rank == 0, size > inject, deadline);
    if (verify) {
      unsigned char peer_seed = (unsigned char)(i * 2 + !rank);
      for (size_t k = 0; k < size; k++)
        if (rb[k] != (char)(k * 31 + peer_seed)) {
          fprintf(stderr, "fi-pingpong: byte %zu of iteration %d wrong\n", k, i);
          exit(1);
        }
    }
  }
  double dt = now() - t0;
  fi_close(&ep->fid);
  if (rank == 1) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  printf("fi %s %zu B: %.2f us one-way\n", info->fabric_attr->prov_name, size,
         dt / iters / 2 * 1e6);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// A C model of one rank's step of the `ddp` workload (issue 17), to tell what the exchange's way
// of waiting costs apart from loom: 1 or 2 processes, each step a compute loop (PASSES passes
// over a 600 KiB float array, about 6 us each on this machine) and, with 2, the messages loom's
// direct all-reduce sent on its synchronous Gloo pairs until branch h/ddp-s28
// (runtime/distributed/gloo.cpp, mesh_exchange; now one message per peer: Note [One message per
// peer]): a header and the first 128 KiB chunk, then each peer's chunk k read before chunk k + 1
// is written, on blocking loopback sockets, then the reduction. MODE is how a read
// waits: "block" (a blocking recv, Gloo's synchronous mode), "poll<us>" (poll FIONREAD for the
// whole message up to <us>, then the blocking recv: Note [Spinning before a blocking read]), or
// "busy" (recv with MSG_DONTWAIT until data comes: Gloo's busyPoll). Prints each process's
// median step, CPU time per step (all of it, and the compute loop's), voluntary and involuntary
// context switches per step, and the wall time of each phase of the exchange.
//
//   cc -O2 -march=native -o /tmp/exchange_step_model perf/tools/exchange_step_model.c
//   /tmp/exchange_step_model 1 170496 35 2000 block     # 1 rank: mlp's bucket, a ~200 us step
//   /tmp/exchange_step_model 2 170496 35 2000 block
//   /tmp/exchange_step_model 2 170496 35 2000 poll100
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int busy = 0;
static double poll_us = 0;
static long polled = 0, blocked = 0;

static void read_all(int fd, char* p, size_t n) {
  if (poll_us > 0) {
    double start = seconds(CLOCK_MONOTONIC);
    int ready = 0;
    while (ioctl(fd, FIONREAD, &ready) == 0 && (size_t)ready < n && (seconds(CLOCK_MONOTONIC) - start) * 1e6 < poll_us) {
    }
    if ((size_t)ready >= n) polled++;
    else blocked++;
  }
  while (n) {
    ssize_t r = recv(fd, p, n, busy ? MSG_DONTWAIT : 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) exit(1);
    p += r, n -= (size_t)r;
  }
}

static void write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t r = send(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) exit(1);
    p += r, n -= (size_t)r;
  }
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s RANKS(1|2) BYTES PASSES STEPS block|poll<us>|busy\n", argv[0]);
    return 2;
  }
  int ranks = atoi(argv[1]), passes = atoi(argv[3]), steps = atoi(argv[4]), warmup = 20;
  size_t n = (size_t)atol(argv[2]), chunk = (size_t)128 << 10, header = 48 + 64;  // Gloo's preamble + loom's header
  const char* mode = argv[5];
  busy = strcmp(mode, "busy") == 0;
  if (strncmp(mode, "poll", 4) == 0) poll_us = atof(mode + 4);
  int fds[2] = {-1, -1}, one = 1;
  if (ranks == 2) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, (struct sockaddr*)&addr, sizeof addr) || listen(listener, 1) ||
        getsockname(listener, (struct sockaddr*)&addr, &len))
      return 1;
    fds[1] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fds[1], (struct sockaddr*)&addr, sizeof addr)) return 1;
    fds[0] = accept(listener, NULL, NULL);
    close(listener);
    for (int i = 0; i < 2; i++) setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int rank = ranks == 2 && fork() == 0 ? 1 : 0, fd = fds[rank];
  size_t work_n = 150 * 1024;
  float* work = malloc(work_n * sizeof(float));
  for (size_t i = 0; i < work_n; i++) work[i] = 1.0f;
  char *mine = malloc(n), *theirs = malloc(n), head[112] = {0}, head_in[112];
  memset(mine, 1, n);
  double *step = malloc(sizeof(double) * (size_t)steps), phase[6] = {0}, compute = 0, cpu0 = 0, sink = 0;
  struct rusage r0, r1;
  for (int s = -warmup; s < steps; s++) {
    if (s == 0) {
      getrusage(RUSAGE_THREAD, &r0);
      cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
      polled = blocked = 0;
    }
    double t = seconds(CLOCK_MONOTONIC), c = seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int p = 0; p < passes; p++) {
      for (size_t i = 0; i < work_n; i++) work[i] = work[i] * 0.999f + 1e-3f;
      sink += work[p];
    }
    if (s >= 0) compute += seconds(CLOCK_THREAD_CPUTIME_ID) - c;
    double q = seconds(CLOCK_MONOTONIC), q2;
#define PHASE(k) (q2 = seconds(CLOCK_MONOTONIC), phase[k] += s >= 0 ? q2 - q : 0, q = q2)
    if (ranks == 2) {
      write_all(fd, head, header);
      write_all(fd, mine, n < chunk ? n : chunk);
      PHASE(0);
      read_all(fd, head_in, header);
      PHASE(1);
      for (size_t at = 0; at < n; at += chunk) {
        read_all(fd, theirs + at, n - at < chunk ? n - at : chunk);
        PHASE(at == 0 ? 2 : 4);
        if (at + chunk < n) write_all(fd, mine + at + chunk, n - at - chunk < chunk ? n - at - chunk : chunk);
        PHASE(3);
      }
      float *a = (float*)mine, *b = (float*)theirs;
      for (size_t i = 0; i < n / sizeof(float); i++) a[i] = a[i] * 0.5f + b[i] * 0.5f;
      PHASE(5);
    } else {
      memcpy(theirs, mine, n);  // what a 1-rank all-gather copies
    }
    if (s >= 0) step[s] = seconds(CLOCK_MONOTONIC) - t;
  }
  double cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  getrusage(RUSAGE_THREAD, &r1);
  qsort(step, (size_t)steps, sizeof(double), by_value);
  double us = 1e6 / steps;
  printf("ranks %d, rank %d, %s: step median %.1f us; CPU %.1f us/step (compute %.1f); switches %.2f voluntary, "
         "%.2f involuntary /step; reads polled %ld, blocked %ld [%g]\n",
         ranks, rank, mode, step[steps / 2] * 1e6, cpu * us, compute * us, (double)(r1.ru_nvcsw - r0.ru_nvcsw) / steps,
         (double)(r1.ru_nivcsw - r0.ru_nivcsw) / steps, polled, blocked, sink);
  if (ranks == 2)
    printf("  rank %d, wall us/step: write header+chunk 0 %.1f, read header %.1f, read chunk 0 %.1f, write chunk 1 %.1f, "
           "read chunk 1 %.1f, reduce %.1f\n",
           rank, phase[0] * us, phase[1] * us, phase[2] * us, phase[3] * us, phase[4] * us, phase[5] * us);
  fflush(stdout);
  if (ranks == 2 && rank == 0) wait(NULL);
  return 0;
}

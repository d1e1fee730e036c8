// What one step of a two-rank all-gather costs the transport alone on this machine: two
// processes exchange N bytes each way over loopback TCP, the bytes Gloo's pairs move for loom's
// direct all-reduce. Each side is one thread on a non-blocking socket, sending what the socket
// takes and receiving what has arrived in turn (poll between), so no thread start, hand-off or
// sleeping read is counted: the floor under the `ddp` workload's scaling (perf/RESULTS.md, issue
// 17). Prints each side's wall and CPU time per exchange.
//
//   cc -O2 -o /tmp/loopback_exchange perf/tools/loopback_exchange.c
//   /tmp/loopback_exchange 170496 3000     # BENCH mlp's gradients: 166.5 KiB
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s BYTES ROUNDS\n", argv[0]);
    return 2;
  }
  size_t n_bytes = (size_t)atol(argv[1]);
  int rounds = atoi(argv[2]), warmup = 50, one = 1;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, (struct sockaddr*)&addr, sizeof addr) || listen(listener, 1) ||
      getsockname(listener, (struct sockaddr*)&addr, &len)) {
    perror("listen");
    return 1;
  }
  pid_t child = fork();
  int peer;
  if (child == 0) {
    peer = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(peer, (struct sockaddr*)&addr, sizeof addr)) return 1;
  } else {
    peer = accept(listener, NULL, NULL);
  }
  setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK);
  char* out = calloc(n_bytes, 1);
  char* in = calloc(n_bytes, 1);
  double cpu0 = 0, wall0 = 0;
  for (int i = 0; i < warmup + rounds; ++i) {
    if (i == warmup) {
      cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
      wall0 = seconds(CLOCK_MONOTONIC);
    }
    size_t sent = 0, got = 0;
    while (sent < n_bytes || got < n_bytes) {
      struct pollfd p = {.fd = peer, .events = (short)((sent < n_bytes ? POLLOUT : 0) | (got < n_bytes ? POLLIN : 0))};
      if (poll(&p, 1, -1) < 0) return 1;
      if (p.revents & POLLOUT) {
        ssize_t k = send(peer, out + sent, n_bytes - sent, 0);
        if (k > 0) sent += (size_t)k;
      }
      if (p.revents & POLLIN) {
        ssize_t k = recv(peer, in + got, n_bytes - got, 0);
        if (k == 0) return 1;
        if (k > 0) got += (size_t)k;
      }
    }
  }
  printf("%s: %zu bytes each way: wall %.1f us, CPU %.1f us per exchange\n",
         child ? "parent" : "child", n_bytes, (seconds(CLOCK_MONOTONIC) - wall0) / rounds * 1e6,
         (seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / rounds * 1e6);
  if (child) wait(NULL);
  return 0;
}

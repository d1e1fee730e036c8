// The rendezvous store: a small key-value table every process of a job can reach, through which
// the processes of a group find each other before any transport exists (Gloo's addresses,
// NCCL's unique id). PyTorch calls it the Store (TCPStore, FileStore); loom's has only what its
// rendezvous needs.
//
//   TcpStore   init_method "tcp://host:port" or "env://" (MASTER_ADDR, MASTER_PORT): rank 0
//              serves the table on a thread; every rank, rank 0 too, is a client.
//   FileStore  init_method "file:///path": an append-only file of records on a shared
//              filesystem, locked with flock. As in PyTorch, the file must not hold an earlier
//              job's records; the last process to leave removes it.
//
// get() waits for a key that is not set yet, at most `timeout`, then raises a Distributed error
// naming the key: a rank that never joins fails the others cleanly instead of hanging them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace loom::distributed {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting until some process sets it (at most `timeout`).
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds `delta` to the integer under `key` (0 when unset) and returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

// Rank 0 (`serve`) listens on `port` of `host` first; every process then connects, retrying
// until `timeout`. Port 0 with `serve` picks a free port (port() says which).
std::shared_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout);
int tcp_store_port(const Store& store);
// `world_size` processes share the file at `path`; the last to destroy its store removes it.
std::shared_ptr<Store> make_file_store(const std::string& path, int world_size);

}  // namespace loom::distributed

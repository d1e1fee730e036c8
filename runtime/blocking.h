// Long work inside an embedding: releasing its lock, and stopping when the user asks.
//
// loom runs inside a program that may serialize its threads with a lock of its own: the Python
// interpreter's GIL. Work that takes long or waits (executing a trace, compiling its kernels,
// waiting for a sync another thread runs) is done inside a BlockingRegion, which releases that
// lock so the program's other threads run meanwhile. Inside a region, code touches nothing the
// embedding's lock protects: no Python object, and none of the lazy layer's bookkeeping that the
// lock serializes (lazy/sync.h says which). Regions nest: only the outermost releases the lock.
//
// The embedding may also be asked to stop (Ctrl-C: SIGINT). Long work calls check_interrupt()
// between its steps, at points where stopping leaves everything as it was (lazy/sync.h: a sync
// stopped this way changes no tensor); it throws Error(Interrupted) when the embedding says the
// thread's work must stop. Only work inside a region of the thread the embedding delivers
// interrupts to (Python: the main thread) is ever stopped.
//
// Without an installed embedding (C++ programs, the C++ tests) a region does nothing and
// check_interrupt() never throws.
#pragma once

namespace loom {

struct EmbeddingHooks {
  // Releases the embedding's lock if this thread holds it; returns what reacquire() needs (null:
  // nothing was released).
  void* (*release)() = nullptr;
  void (*reacquire)(void* state) = nullptr;
  // Called by check_interrupt() inside a region (with the lock released): whether this thread's
  // work must stop. May take the embedding's lock for a moment to ask it (Python runs its signal
  // handlers then). Must be cheap when nothing happened.
  bool (*interrupt_requested)() = nullptr;
  // Whether this thread holds the embedding's lock now (runtime/environment.h reads the live
  // environment only then).
  bool (*holds_lock)() = nullptr;
};

// The embedding installs its hooks once, before any work (pyext/module.cpp).
void install_embedding_hooks(EmbeddingHooks hooks);

class BlockingRegion {
 public:
  BlockingRegion();
  ~BlockingRegion();
  BlockingRegion(const BlockingRegion&) = delete;
  BlockingRegion& operator=(const BlockingRegion&) = delete;

 private:
  void* state_ = nullptr;
  bool outermost_ = false;
};

// Whether this thread is inside a BlockingRegion.
bool in_blocking_region() noexcept;

// Whether an embedding is installed and this thread holds its lock.
bool holds_embedding_lock() noexcept;

// Throws Error(Interrupted) if this thread's work must stop (see above).
void check_interrupt();

}  // namespace loom

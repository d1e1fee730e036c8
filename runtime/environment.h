// The process environment as loom's own threads read it: a snapshot, never `environ` itself.
//
// Generated kernels are compiled off the thread that owns the program's state: on the thread
// pool (a module's units in parallel), on the background thread (-O3 recompiles), and by a sync
// that has released the GIL (runtime/blocking.h). Reading the live environment there, by getenv
// or by handing `environ` to a child process, races with the program's own setenv (Python's
// `os.environ[...] = ...`, pytest's monkeypatch): glibc may grow the array into new memory and
// free the old one meanwhile. It happened: a compiler was spawned with a torn environment and
// failed with "Bad address".
//
// So loom reads environment() instead, an immutable copy, and children get its envp(). The copy
// is renewed where the live environment cannot be changing: Python changes it only while holding
// the GIL, so environment() called on a thread that holds the GIL renews it first, and a sync
// renews it before it releases the GIL to run its trace (lazy/sync.cpp; also a compiled step's
// replay). A compile inside a sync therefore sees the environment as it was when the sync
// started; a background job, as of the latest renewal.
//
// A C++ program (no embedding) gets renewals only at syncs: one that calls setenv and then reads
// loom's knobs before its next sync calls refresh_environment() itself (tests/cpp do).
//
// Invariants: a snapshot never changes once made; environment() never returns null (the first
// call copies the environment of that moment); a renewal costs a comparison of the environ
// pointers when nothing changed (glibc's setenv makes a new string for a new value and never
// frees one, so an unchanged pointer is an unchanged entry).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

class Environment {
 public:
  // A copy of the process environment now: call only where nothing can change it meanwhile.
  static std::shared_ptr<const Environment> copy_of_process();

  // NAME's value; "" when it is unset (loom's knobs treat empty as unset).
  std::string get(std::string_view name) const;
  // "NAME=VALUE" strings ending with a null pointer, as posix_spawn takes them.
  char* const* envp() const { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

// The latest snapshot, renewed first when this thread holds the embedding's lock (see above).
std::shared_ptr<const Environment> environment();

// environment()->get(name).
std::string environment_value(std::string_view name);

// Makes a new snapshot if the process environment changed since the last one. Call only where
// nothing changes the environment meanwhile: the thread holding the embedding's lock, or in a C++
// program, a thread that no other calls setenv beside.
void refresh_environment();

}  // namespace loom

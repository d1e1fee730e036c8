// Where in the user's Python program something happened: the file, line and function of the
// innermost frame outside loom's own package (pyext/profiler_bindings.cpp installs the hook that
// reads it). The lazy layer asks for it when it records a node while sources are captured
// (lazy/provenance.h) and at every sync; profiles and loom.explain_syncs() show it.
//
// Locations are interned: an id (int32) stands for one (file, line, function) for the life of
// the process, so events and per-node tables hold four bytes. -1 means unknown (no Python on the
// stack, no hook installed: C++ tests).
#pragma once

#include <cstdint>
#include <string>

namespace loom {

struct SourceLocation {
  std::string file;
  int line = 0;
  std::string function;
};

// The id of a location (the same id for the same location every time).
int32_t intern_source(const std::string& file, int line, const std::string& function);
// The location of an id from intern_source; an empty location for -1 or an unknown id.
SourceLocation source_location(int32_t id);

// The hook that reads the calling thread's current Python location, or -1 (it must not throw;
// it is called with the embedding's lock held, or returns -1 when it is not).
using SourceHook = int32_t (*)();
void install_source_hook(SourceHook hook);
// The current location, through the hook (-1 without one).
int32_t current_source();

}  // namespace loom

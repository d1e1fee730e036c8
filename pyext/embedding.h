// loom's long work inside Python (runtime/blocking.h's hooks): the GIL is released while loom
// runs or waits, and Ctrl-C stops the main thread's work (pyext/embedding.cpp says how).
#pragma once

#include "pyext/common.h"

namespace loom::py {

// Installs the hooks (loom._C's import).
void install_embedding();

// Sets the Python exception for an Error(Interrupted): the exception the signal handler raised
// when loom's work stopped for it, or a KeyboardInterrupt with `message` (a tensor whose
// computation was interrupted, read later).
void raise_interrupt(const char* message);

}  // namespace loom::py

// LOOM_DUMP_DIR: each newly lowered trace's IR (.ir), kernel groups (.groups) and generated
// sources (.cpp for the CPU, .cu for CUDA) written to a directory, named by the plan's key.
#pragma once

#include <cstdint>
#include <string>

#include "fusion/program.h"

namespace loom::graph {

// Writes the files of one trace; a source that is empty is not written.
void dump(const std::string& dir, uint64_t key, const Trace& trace, const fusion::Program& program,
          const std::string& cpu_source, const std::string& cuda_source);

}  // namespace loom::graph

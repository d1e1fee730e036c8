#include "graph/dump.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace loom::graph {

void dump(const std::string& dir, uint64_t key, const Trace& t, const fusion::Program& p, const std::string& cpu,
          const std::string& cuda) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(key));
  std::string base = dir + "/trace_" + name;
  {
    std::ofstream ir(base + ".ir");
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      const Node* n = t.nodes[i];
      ir << "%" << i << " = " << op_name(n->op()) << " " << dtype_name(n->dtype()) << format_dims(n->shape());
      for (int32_t in : t.inputs[i]) ir << " %" << in;
      ir << "\n";
    }
  }
  std::ofstream(base + ".groups") << fusion::describe(p, t);
  if (!cpu.empty()) std::ofstream(base + ".cpp") << cpu;
  if (!cuda.empty()) std::ofstream(base + ".cu") << cuda;
}

}  // namespace loom::graph

#include "runtime/source_location.h"

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace loom {
namespace {

struct Table {
  std::mutex mu;
  std::map<std::tuple<std::string, int, std::string>, int32_t> ids;
  std::vector<SourceLocation> locations;
};

Table& table() {
  static Table* t = new Table();  // process lifetime: events may be read at exit
  return *t;
}

std::atomic<SourceHook> hook{nullptr};

}  // namespace

int32_t intern_source(const std::string& file, int line, const std::string& function) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto [it, fresh] = t.ids.try_emplace({file, line, function}, static_cast<int32_t>(t.locations.size()));
  if (fresh) t.locations.push_back({file, line, function});
  return it->second;
}

SourceLocation source_location(int32_t id) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  if (id < 0 || static_cast<size_t>(id) >= t.locations.size()) return {};
  return t.locations[static_cast<size_t>(id)];
}

void install_source_hook(SourceHook h) { hook.store(h, std::memory_order_release); }

int32_t current_source() {
  SourceHook h = hook.load(std::memory_order_acquire);
  return h ? h() : -1;
}

}  // namespace loom

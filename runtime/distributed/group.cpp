#include "runtime/distributed/group.h"

#include <map>
#include <mutex>

#include "runtime/distributed/work.h"
#include "runtime/error.h"

namespace loom::distributed {
namespace {

std::mutex& broken_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

struct Registry {
  std::mutex mutex;
  std::map<int64_t, std::shared_ptr<Group>> groups;
  int64_t next = 1;
};

// Never destroyed: groups may own threads (a store's server) that must not be joined while
// statics are torn down at exit.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

}  // namespace

const char* reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Max: return "MAX";
  }
  return "?";
}

void Group::reduce_scatter(Span, Span, ReduceOp) {
  LOOM_FAIL(Runtime, "internal: the ", backend(), " transport has no reduce_scatter (collective.h composes it)");
}

std::vector<std::string> Group::gather_parts(const std::string*, Span, std::vector<const char*>&, const char*) {
  LOOM_FAIL(Runtime, "internal: the ", backend(), " transport has no gather_parts (collective.h gathers otherwise)");
}

void Group::check_usable() const {
  std::lock_guard lock(broken_mutex());
  LOOM_CHECK(broken_by_.empty(), Distributed, "the process group (", backend(), ", rank ", rank_, " of ", size_,
             ") cannot be used after an earlier failure: ", broken_by_);
}

void Group::broken(const std::string& error) {
  {
    std::lock_guard lock(broken_mutex());
    if (broken_by_.empty()) broken_by_ = error;
  }
  LOOM_FAIL(Distributed, error);
}

int add_group(std::shared_ptr<Group> group) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  int64_t id = r.next++;
  r.groups.emplace(id, std::move(group));
  return static_cast<int>(id);
}

std::shared_ptr<Group> group(int64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.groups.find(id);
  LOOM_CHECK(it != r.groups.end(), Runtime, "the process group used here was destroyed "
             "(destroy_process_group): collectives recorded on it cannot run");
  return it->second;
}

void remove_group(int64_t id) {
  std::shared_ptr<Group> g;  // destroyed outside the lock (it may join threads)
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    auto it = r.groups.find(id);
    if (it == r.groups.end()) return;
    g = std::move(it->second);
    r.groups.erase(it);
  }
  stop_queue(*g);  // its asynchronous calls finish first
}

}  // namespace loom::distributed

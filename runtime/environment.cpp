#include "runtime/environment.h"

#include <mutex>

#include "runtime/blocking.h"

extern char** environ;

namespace loom {

namespace {

struct Snapshot {
  std::mutex mu;
  std::shared_ptr<const Environment> current;
  // What `environ` held when `current` was made: the array and its entries' addresses.
  char** array = nullptr;
  std::vector<const char*> entries;

  bool unchanged_locked() const {
    if (environ != array) return false;
    size_t n = 0;
    for (char** e = environ; e && *e; ++e, ++n)
      if (n >= entries.size() || entries[n] != *e) return false;
    return n == entries.size();
  }
  void copy_locked() {
    current = Environment::copy_of_process();
    array = environ;
    entries.clear();
    for (char** e = environ; e && *e; ++e) entries.push_back(*e);
  }
};

Snapshot& snapshot() {
  static auto* s = new Snapshot();  // never destroyed: background threads may read it at exit
  return *s;
}

}  // namespace

std::shared_ptr<const Environment> Environment::copy_of_process() {
  auto env = std::make_shared<Environment>();
  for (char** e = environ; e && *e; ++e) env->entries_.emplace_back(*e);
  for (std::string& s : env->entries_) env->pointers_.push_back(s.data());
  env->pointers_.push_back(nullptr);
  return env;
}

std::string Environment::get(std::string_view name) const {
  for (const std::string& e : entries_)
    if (e.size() > name.size() && e[name.size()] == '=' && std::string_view(e).substr(0, name.size()) == name)
      return e.substr(name.size() + 1);
  return "";
}

std::shared_ptr<const Environment> environment() {
  Snapshot& s = snapshot();
  bool safe_to_read = holds_embedding_lock();
  std::lock_guard lock(s.mu);
  if (!s.current || (safe_to_read && !s.unchanged_locked())) s.copy_locked();
  return s.current;
}

std::string environment_value(std::string_view name) { return environment()->get(name); }

void refresh_environment() {
  Snapshot& s = snapshot();
  std::lock_guard lock(s.mu);
  if (!s.current || !s.unchanged_locked()) s.copy_locked();
}

}  // namespace loom

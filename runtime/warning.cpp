#include "runtime/warning.h"

#include <cstdio>
#include <mutex>
#include <unordered_set>

namespace loom {
namespace {

void to_stderr(const std::string& message) { std::fprintf(stderr, "loom: warning: %s\n", message.c_str()); }

struct Warnings {
  std::mutex mu;
  std::unordered_set<std::string> reported;
  WarningSink sink = to_stderr;
};

Warnings& warnings() {
  static auto* w = new Warnings();  // never destroyed: warnings may come from late destructors
  return *w;
}

}  // namespace

void warn_once(const std::string& topic, const std::string& message) {
  Warnings& w = warnings();
  WarningSink sink;
  {
    std::lock_guard lock(w.mu);
    if (!w.reported.insert(topic).second) return;
    sink = w.sink;
  }
  sink(message);
}

WarningSink set_warning_sink(WarningSink sink) {
  Warnings& w = warnings();
  std::lock_guard lock(w.mu);
  WarningSink previous = w.sink;
  w.sink = sink ? sink : to_stderr;
  return previous;
}

void forget_reported_warnings() {
  Warnings& w = warnings();
  std::lock_guard lock(w.mu);
  w.reported.clear();
}

}  // namespace loom

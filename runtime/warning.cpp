#include "runtime/warning.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <unordered_set>

namespace loom {
namespace {

void to_stderr(const std::string& message) { std::fprintf(stderr, "loom: warning: %s\n", message.c_str()); }

std::atomic<WarningHandler> handler{&to_stderr};

struct Reported {
  std::mutex mu;
  std::unordered_set<std::string> topics;
};

Reported& reported() {
  static auto* r = new Reported();  // never destroyed: warnings may come from late destructors
  return *r;
}

}  // namespace

WarningHandler set_warning_handler(WarningHandler h) noexcept { return handler.exchange(h ? h : &to_stderr); }

void warn(const std::string& message) noexcept {
  try {
    handler.load()(message);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: warning: %s (and reporting it failed: %s)\n", message.c_str(), e.what());
  } catch (...) {
    to_stderr(message);
  }
}

void warn_once(const std::string& topic, const std::string& message) noexcept {
  try {
    Reported& r = reported();
    std::lock_guard lock(r.mu);
    if (!r.topics.insert(topic).second) return;
  } catch (...) {  // no memory to remember the topic: warn anyway
  }
  warn(message);
}

void forget_reported_warnings() {
  Reported& r = reported();
  std::lock_guard lock(r.mu);
  r.topics.clear();
}

}  // namespace loom

#include "lazy/provenance.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/source_location.h"

namespace loom {

namespace detail {
std::atomic<bool> recording_hooked{false};
}

namespace {

bool debug_source_from_environment() {
  const char* v = std::getenv("LOOM_DEBUG_SOURCE");
  return v && *v && std::string(v) != "0";
}

struct Sources {
  std::mutex mu;
  int holders = 0;
  bool profiling = false;
  std::unordered_map<const Node*, int32_t> of_node;
};

std::atomic<int64_t> record_every{1};
std::atomic<bool> capture_on{false};  // mirrors holders > 0, read without the lock

// Per thread: when the last op was recorded or the last sync ended (the start of the next record
// span), the ops recorded since the last sync, and the sampling counter.
thread_local int64_t last_mark = 0;
thread_local int64_t ops_since_sync = 0;
thread_local int64_t sample_count = 0;

void update_hook(const Sources& s) {
  capture_on.store(s.holders > 0, std::memory_order_relaxed);
  detail::recording_hooked.store(s.holders > 0 || s.profiling, std::memory_order_relaxed);
}

Sources& sources() {
  static Sources* s = [] {
    auto* fresh = new Sources();  // process lifetime: nodes die at exit
    if (debug_source_from_environment()) {
      fresh->holders = 1;
      update_hook(*fresh);
    }
    return fresh;
  }();
  return *s;
}

// Touch the table at load time, so LOOM_DEBUG_SOURCE=1 captures from the first node.
const bool environment_read = (sources(), true);

// The start of a record span on this thread: the last mark, unless it is older than the profile.
int64_t mark_or_profile_start() { return std::max(last_mark, profiler::started_ns()); }

struct SiteLog {
  std::mutex mu;
  std::vector<SyncSite> sites;
  std::map<std::pair<SyncCause, int32_t>, size_t> index;
};

SiteLog& site_log() {
  static SiteLog* log = new SiteLog();
  return *log;
}

}  // namespace

void detail::note_recorded_slow(const Node& node) {
  int32_t source = -1;
  if (capture_on.load(std::memory_order_relaxed)) {
    source = current_source();
    Sources& s = sources();
    std::lock_guard lock(s.mu);
    s.of_node[&node] = source;
  }
  if (!profiler::active()) return;
  int64_t now = profiler::now_ns();
  ++ops_since_sync;
  int64_t every = record_every.load(std::memory_order_relaxed);
  if (every > 0 && ++sample_count >= every) {
    sample_count = 0;
    profiler::Event e;
    e.category = "record";
    e.name = std::string("record ") + op_name(node.op());
    e.start_ns = mark_or_profile_start();
    e.duration_ns = now - e.start_ns;
    e.thread = profiler::record_lane(profiler::thread_id());
    e.source = source;
    profiler::emit(std::move(e));
  }
  last_mark = now;
}

void hold_source_capture() {
  Sources& s = sources();
  std::lock_guard lock(s.mu);
  if (s.holders++ == 0) s.of_node.clear();
  update_hook(s);
}

void release_source_capture() {
  Sources& s = sources();
  std::lock_guard lock(s.mu);
  if (s.holders > 0 && --s.holders == 0) s.of_node.clear();
  update_hook(s);
}

bool capturing_sources() noexcept { return capture_on.load(std::memory_order_relaxed); }

void set_record_sample(int64_t every) { record_every.store(std::max<int64_t>(every, 0), std::memory_order_relaxed); }

void set_profiling_records(bool on) {
  Sources& s = sources();
  std::lock_guard lock(s.mu);
  s.profiling = on;
  update_hook(s);
}

int32_t node_source(const Node* node) {
  if (!capture_on.load(std::memory_order_relaxed)) return -1;
  Sources& s = sources();
  std::lock_guard lock(s.mu);
  auto it = s.of_node.find(node);
  return it == s.of_node.end() ? -1 : it->second;
}

const char* sync_cause_name(SyncCause cause) noexcept {
  switch (cause) {
#define LOOM_SYNC_CAUSE_NAME(id, name) \
  case SyncCause::id: return #name;
    LOOM_FOR_EACH_SYNC_CAUSE(LOOM_SYNC_CAUSE_NAME)
#undef LOOM_SYNC_CAUSE_NAME
  }
  return "other";
}

SyncScope::SyncScope(SyncCause cause, bool runs) : span_("sync", sync_cause_name(cause)) {
  if (!runs) {
    span_.cancel();
    return;
  }
  int32_t source = current_source();
  {
    SiteLog& log = site_log();
    std::lock_guard lock(log.mu);
    auto [it, fresh] = log.index.try_emplace({cause, source}, log.sites.size());
    if (fresh) log.sites.push_back({cause, source, 0});
    ++log.sites[it->second].count;
  }
  profiler::Event* e = span_.event();
  if (!e) return;
  e->name = std::string("sync (") + sync_cause_name(cause) + ")";
  e->source = source;
  e->args.emplace_back("cause", sync_cause_name(cause));
  profiler::Event record;
  record.category = "record";
  record.name = "record";
  record.start_ns = mark_or_profile_start();
  record.duration_ns = e->start_ns - record.start_ns;
  record.thread = profiler::record_lane(e->thread);
  record.args.emplace_back("ops", std::to_string(ops_since_sync));
  profiler::emit(std::move(record));
}

SyncScope::~SyncScope() {
  ops_since_sync = 0;
  if (span_.event()) last_mark = profiler::now_ns();
}

std::vector<SyncSite> sync_sites(bool reset) {
  SiteLog& log = site_log();
  std::lock_guard lock(log.mu);
  std::vector<SyncSite> sites = log.sites;
  if (reset) {
    log.sites.clear();
    log.index.clear();
  }
  return sites;
}

}  // namespace loom

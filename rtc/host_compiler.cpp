#include "rtc/host_compiler.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "rtc/disk_cache.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom::rtc {
namespace {

// -O3 for vectorization (with -fopenmp-simd for the reductions the renderer marks); no
// -ffast-math: results must not depend on the compiler's reassociation elsewhere.
constexpr const char* kBaseFlags =
    "-O3 -fPIC -shared -march=native -std=c++17 -fno-math-errno -ffp-contract=off -fopenmp-simd -w";

std::string compiler() {
  const char* cxx = std::getenv("LOOM_CXX");
  return cxx && *cxx ? cxx : "c++";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a command, returning its exit status and combined output.
std::pair<int, std::string> run(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  LOOM_CHECK(pipe, Runtime, "cannot run: ", command);
  std::string output;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  int status = ::pclose(pipe);
  return {status, output};
}

// glibc's vector math library (x86-64, glibc 2.35 or later for tanhf and erff): with it,
// generated loops call vector variants of exp, log, tanh, ... (fusion/targets.cpp).
bool have_libmvec() {
  static const bool found = [] {
    void* h = ::dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
    bool ok = h && ::dlsym(h, "_ZGVdN8v_tanhf") && ::dlsym(h, "_ZGVdN8v_erff");
    return ok;
  }();
  return found;
}

const std::string& flags() {
  static const std::string f = std::string(kBaseFlags) + (have_libmvec() ? " -DLOOM_LIBMVEC" : "");
  return f;
}

const char* libraries() { return have_libmvec() ? " -lmvec" : ""; }

// What the binary depends on besides the source: the CPU (for -march=native), the compiler and
// the flags.
uint64_t environment_hash() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, cpu;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0 || line.rfind("model name", 0) == 0) {
      cpu += line;
      if (line.rfind("flags", 0) == 0) break;
    }
  return hash_combine(hash_combine(hash_text(host_compiler_identity()), hash_text(flags())), hash_text(cpu));
}

struct Caches {
  std::mutex mu;
  // Loaded modules by key, held weakly (host_compiler.h); entries of unloaded modules are swept
  // when the map has doubled since the last sweep.
  std::unordered_map<uint64_t, std::weak_ptr<HostModule>> memory;
  size_t swept_size = 0;

  void remember(uint64_t key, const std::shared_ptr<HostModule>& m) {
    memory[key] = m;
    if (memory.size() < 2 * swept_size + 16) return;
    std::erase_if(memory, [](const auto& entry) { return entry.second.expired(); });
    swept_size = memory.size();
  }
};

Caches& caches() {
  static auto* c = new Caches();
  return *c;
}

std::shared_ptr<HostModule> load(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return nullptr;
  return std::make_shared<HostModule>(handle);
}

}  // namespace

HostModule::~HostModule() {
  if (handle_) ::dlclose(handle_);
}

void* HostModule::symbol(const std::string& name) const {
  void* p = ::dlsym(handle_, name.c_str());
  LOOM_CHECK(p, Runtime, "compiled module has no symbol ", name);
  return p;
}

const std::string& host_compiler_identity() {
  static const std::string identity = [] {
    std::string cxx = compiler();
    auto [status, out] = run(shell_quote(cxx) + " --version");
    LOOM_CHECK(status == 0, Runtime, "loom needs a C++ compiler to generate CPU kernels, but '", cxx,
               "' does not run (", out.substr(0, out.find('\n')),
               "). Install g++ or point LOOM_CXX at a compiler.");
    return cxx + ": " + out.substr(0, out.find('\n'));
  }();
  return identity;
}

std::shared_ptr<HostModule> compile_host(const std::string& source, int kernels) {
  uint64_t key = hash_combine(hash_text(source), environment_hash());
  Caches& c = caches();
  std::lock_guard lock(c.mu);
  if (auto it = c.memory.find(key); it != c.memory.end())
    if (std::shared_ptr<HostModule> m = it->second.lock()) return m;

  DiskCache disk("cpu", ".so");
  if (auto path = disk.find(key)) {
    if (auto m = load(*path)) {
      count(metrics().modules_loaded_from_disk);
      c.remember(key, m);
      return m;
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::string src = disk.temporary_path(key) + ".cpp";
  {
    std::ofstream out(src);
    out << source;
    LOOM_CHECK(out.good(), Runtime, "cannot write generated source to ", src);
  }
  std::string tmp = disk.temporary_path(key);
  auto [status, output] =
      run(shell_quote(compiler()) + " " + flags() + " " + shell_quote(src) + " -o " + shell_quote(tmp) + libraries());
  std::remove(src.c_str());
  if (status != 0) {
    std::remove(tmp.c_str());
    std::string kept = disk.source_path(key) + ".failed";
    std::ofstream(kept) << source;
    LOOM_FAIL(Runtime, "generated kernel module failed to compile (", compiler(), "); source saved to ", kept,
              ":\n", output.substr(0, 4000));
  }
  std::string path = disk.commit(key, tmp, source);
  auto m = load(path);
  LOOM_CHECK(m, Runtime, "cannot load compiled module ", path, ": ", ::dlerror());
  count(metrics().kernels_compiled, kernels);
  count(metrics().compile_nanoseconds,
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  c.remember(key, m);
  return m;
}

}  // namespace loom::rtc

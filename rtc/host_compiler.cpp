#include "rtc/host_compiler.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "rtc/disk_cache.h"
#include "rtc/process.h"
#include "runtime/blocking.h"
#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/metrics.h"
#include "runtime/warning.h"

namespace loom::rtc {
namespace {

// The optimisation level, then the rest: -O3 for vectorization (with -fopenmp-simd for the
// loops the renderer marks, which GCC vectorizes at -O1 too); no -ffast-math: results must not
// depend on the compiler's reassociation elsewhere.
constexpr const char* kBaseFlags =
    "-fPIC -shared -march=native -std=c++17 -fno-math-errno -ffp-contract=off -fopenmp-simd -w";

const char* level_flag(OptLevel level) { return level == OptLevel::Quick ? "-O1" : "-O3"; }

// The exported string every host module carries: its full key (rtc/disk_cache.h).
constexpr const char* kKeySymbol = "loom_module_key";

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

std::string flags(OptLevel level) {
  static const std::string f = std::string(kBaseFlags) + (have_libmvec() ? " -DLOOM_LIBMVEC" : "");
  return std::string(level_flag(level)) + " " + f;
}

const char* libraries() { return have_libmvec() ? "-lmvec" : ""; }  // after the source, as ld needs

// Where `program` runs from: the real path of the file it names (rtc/process.h).
std::string resolved_path(const std::string& program) {
  std::string file = find_program(program);
  char buf[PATH_MAX];
  return !file.empty() && ::realpath(file.c_str(), buf) ? std::string(buf) : std::string();
}

// The compiler: LOOM_CXX split into words (a wrapper and its arguments: "ccache g++"), and what
// identifies it in a key: the command, the real path of the program it runs and the full output
// of --version.
struct Compiler {
  std::vector<std::string> argv;
  std::string identity;
};

const Compiler& compiler() {
  static const Compiler c = [] {
    std::string cxx = environment_value("LOOM_CXX");
    Compiler out;
    out.argv = split_command(cxx.empty() ? "c++" : cxx, "LOOM_CXX");
    LOOM_CHECK(!out.argv.empty(), Value, "LOOM_CXX is blank: name a C++ compiler (LOOM_CXX=g++, LOOM_CXX='ccache g++')");
    std::vector<std::string> version = out.argv;
    version.push_back("--version");
    double limit = compile_timeout_seconds();
    ProcessResult r = run_process(version, limit);
    std::string first_line = r.output.substr(0, r.output.find('\n'));
    if (r.timed_out) first_line = "it did not answer --version within " + std::to_string(limit) + " s";
    LOOM_CHECK(r.started && !r.timed_out && r.exit_code == 0, Runtime,
               "loom needs a C++ compiler to generate CPU kernels, but '", quote_command(out.argv),
               "' does not run (", first_line, "). Install g++ or point LOOM_CXX at a compiler.");
    out.identity = "compiler: " + quote_command(out.argv) + "\nresolved: " + resolved_path(out.argv[0]) +
                   "\nversion: " + r.output;
    return out;
  }();
  return c;
}

// The CPU -march=native compiles for.
const std::string& cpu_identity() {
  static const std::string cpu = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, model, flag_line;
    while (std::getline(cpuinfo, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (line.rfind("flags", 0) == 0) {
        flag_line = line;
        break;
      }
    }
    return model + "; flags fnv1a64 " + hex64(hash_text(flag_line));
  }();
  return cpu;
}

// Everything the module built from `source` depends on (rtc/disk_cache.h).
std::string module_key(const std::string& source, OptLevel level) {
  return "loom host module\nsource: fnv1a64 " + hex64(hash_text(source)) + ", " + std::to_string(source.size()) +
         " bytes\n" + compiler().identity + "\nflags: " + flags(level) + " " + libraries() +
         "\ncpu: " + cpu_identity() + "\n";
}

// `text` as a C string literal.
std::string c_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f && c != '?') {  // '?' would start a trigraph in old modes
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\%03o", c);
      out += esc;
    }
  }
  return out + "\"";
}

// The source compiled: the kernels, then the key the binary must carry.
std::string with_key(const std::string& source, const std::string& key) {
  return source + "\n// The key of this module, checked by loom after loading it (rtc/disk_cache.h).\nextern \"C\" " +
         "__attribute__((visibility(\"default\"), used)) const char " + kKeySymbol + "[] =\n    " + c_literal(key) +
         ";\n";
}

// Loads a module and checks that it is the module of `key`; nullptr, with `why`, if it is not.
std::shared_ptr<HostModule> load_checked(const std::string& path, const std::string& key, const std::string& source,
                                         OptLevel level, int kernels, std::string& why) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    why = ::dlerror();
    return nullptr;
  }
  const auto* embedded = static_cast<const char*>(::dlsym(handle, kKeySymbol));
  if (!embedded || key != embedded) {
    why = embedded ? "it carries the key of another module" : "it carries no key";
    ::dlclose(handle);
    return nullptr;
  }
  return std::make_shared<HostModule>(handle, source, level, kernels);
}

struct Caches {
  std::mutex mu;
  // Loaded modules by key, held weakly (host_compiler.h); entries of unloaded modules are swept
  // when the map has doubled since the last sweep.
  std::unordered_map<std::string, std::weak_ptr<HostModule>> memory;
  size_t swept_size = 0;

  void remember(const std::string& key, const std::shared_ptr<HostModule>& m) {
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

// Runs the compiler on `text` in the process's private folder and returns the binary.
std::string compile(const std::string& text, const std::string& key, OptLevel level, const DiskCache& disk,
                    const std::function<void()>& while_waiting) {
  static std::atomic<uint64_t> counter{0};
  const TrustedDir& work = private_work_dir();
  // Unique across the processes a fork() may share the folder with.
  std::string name = DiskCache::name_of(key) + "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  work.write(name + ".cpp", text);
  std::vector<std::string> argv = compiler().argv;
  std::istringstream flag_words(flags(level));
  for (std::string w; flag_words >> w;) argv.push_back(w);
  for (std::string w : {work.path_of(name + ".cpp"), std::string("-o"), work.path_of(name + ".so")}) argv.push_back(w);
  if (*libraries()) argv.push_back(libraries());
  double limit = compile_timeout_seconds();
  ProcessResult r;
  try {
    // Ctrl-C stops a compile too (runtime/blocking.h): the compiler's group is killed and nothing
    // of it stays.
    r = run_process(argv, limit, while_waiting);
  } catch (...) {
    work.remove(name + ".cpp");
    work.remove(name + ".so");
    throw;
  }
  work.remove(name + ".cpp");
  std::string binary, why;
  TrustedDir::Read out = r.started && !r.timed_out && r.exit_code == 0 ? work.read_output(name + ".so", binary, why)
                                                                        : TrustedDir::Read::Missing;
  work.remove(name + ".so");  // never a partial output left behind, whatever happened
  std::string command = quote_command(compiler().argv);
  LOOM_CHECK(!r.timed_out, Runtime, "the C++ compiler '", command, "' did not finish compiling a generated kernel ",
             "module within ", limit, " s (LOOM_COMPILE_TIMEOUT), so loom stopped it and every process it started; ",
             "nothing was cached. Raise LOOM_COMPILE_TIMEOUT (seconds, 0 for no limit) if it is only slow.");
  if (!r.started || r.exit_code != 0) {
    std::string kept = disk.save_failed_source(key, text);
    LOOM_FAIL(Runtime, "generated kernel module failed to compile ('", command, "', exit status ", r.exit_code,
              "); source saved to ", kept, ":\n", r.output.substr(0, 4000));
  }
  LOOM_CHECK(out == TrustedDir::Read::Ok, Runtime, "the C++ compiler '", command, "' reported success but its ",
             "output cannot be used: ", why.empty() ? "it wrote no " + work.path_of(name + ".so") : why);
  return binary;
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

const std::string& host_compiler_identity() { return compiler().identity; }

namespace {

// The module of `key` if it is loaded, or in the disk cache (then loaded); else nullptr.
// `lock` holds the caches' mutex.
std::shared_ptr<HostModule> find_locked(const std::string& key, const std::string& source, OptLevel level,
                                        int kernels, Caches& c, const DiskCache& disk) {
  if (auto it = c.memory.find(key); it != c.memory.end())
    if (std::shared_ptr<HostModule> m = it->second.lock()) return m;
  std::string why;
  if (disk.find(key)) {
    if (auto m = load_checked(disk.load_path(key), key, source, level, kernels, why)) {
      count(metrics().modules_loaded_from_disk);
      c.remember(key, m);
      return m;
    }
    warn_once("kernel cache module", "the cached kernel module " + disk.dir().path_of(DiskCache::name_of(key) + ".so") +
                                         " is not the module it is filed as (" + why + "); rebuilding it");
    disk.remove(key);
  }
  return nullptr;
}

// Finds or compiles the module of `source` at `level`; `optimizing`: a background recompile
// (optimize_host), counted apart.
std::shared_ptr<HostModule> build(const std::string& source, int kernels, OptLevel level, bool optimizing,
                                  const std::function<void()>& while_waiting) {
  std::string key = module_key(source, level);
  Caches& c = caches();
  const DiskCache& disk = DiskCache::of("cpu", ".so", ".cpp");
  std::unique_lock lock(c.mu);
  if (std::shared_ptr<HostModule> m = find_locked(key, source, level, kernels, c, disk)) return m;
  // The compile runs unlocked, so other threads compile other modules meanwhile
  // (rtc/kernel_units.h compiles a module's units in parallel).
  lock.unlock();
  auto start = std::chrono::steady_clock::now();
  std::string text = with_key(source, key);
  disk.store(key, compile(text, key, level, disk, while_waiting), text);
  std::string why;
  auto m = load_checked(disk.load_path(key), key, source, level, kernels, why);
  LOOM_CHECK(m, Runtime, "cannot load the compiled module ", disk.dir().path_of(DiskCache::name_of(key) + ".so"), ": ",
             why);
  if (optimizing) {
    count(metrics().kernels_optimized, kernels);
  } else {
    count(metrics().kernels_compiled, kernels);
    count(metrics().compile_nanoseconds,
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  lock.lock();
  if (auto it = c.memory.find(key); it != c.memory.end())
    if (std::shared_ptr<HostModule> other = it->second.lock()) return other;  // another thread's, first
  c.remember(key, m);
  return m;
}

}  // namespace

std::shared_ptr<HostModule> compile_host(const std::string& source, int kernels, OptLevel level) {
  return build(source, kernels, level, false, [] { check_interrupt(); });
}

std::shared_ptr<HostModule> find_host(const std::string& source, OptLevel level, int kernels) {
  Caches& c = caches();
  std::lock_guard lock(c.mu);
  return find_locked(module_key(source, level), source, level, kernels, c, DiskCache::of("cpu", ".so", ".cpp"));
}

std::shared_ptr<HostModule> optimize_host(const std::string& source, int kernels, const std::function<bool()>& stop) {
  return build(source, kernels, OptLevel::Full, true, [&stop] {
    LOOM_CHECK(!stop(), Interrupted, "a background compile was stopped");
  });
}

}  // namespace loom::rtc

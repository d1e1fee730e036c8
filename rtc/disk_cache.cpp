#include "rtc/disk_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/warning.h"

namespace loom::rtc {
namespace {

constexpr const char* kKeyHeader = "loom kernel cache entry 1\n";

// The effective user's home from the password database (HOME unset: a service, sudo -i, cron).
std::string home_of_user() {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw, *found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0 || !found || !found->pw_dir) return "";
  return found->pw_dir;
}

std::string key_file(const std::string& key, uint64_t sum) {
  return std::string(kKeyHeader) + "checksum " + hex64(sum) + "\n" + key;
}

}  // namespace

uint64_t hash_text(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t checksum(const std::string& bytes) { return hash_text(bytes) ^ bytes.size(); }

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string cache_root() {
  std::shared_ptr<const Environment> env = environment();
  if (std::string dir = env->get("LOOM_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env->get("XDG_CACHE_HOME"); xdg[0] == '/') return xdg + "/loom";
  std::string home = env->get("HOME");
  std::string h = home[0] == '/' ? home : home_of_user();
  return h.empty() ? "" : h + "/.cache/loom";
}

const TrustedDir& private_work_dir() {
  // One per process: a fork()ed child makes its own (its parent removes its folder at exit).
  static std::mutex mu;
  static TrustedDir* dir = nullptr;
  static pid_t owner = 0;
  std::lock_guard lock(mu);
  if (!dir || owner != ::getpid()) {
    owner = ::getpid();
    dir = new TrustedDir(TrustedDir::make_private("loom-" + std::to_string(owner) + "-"));
  }
  return *dir;
}

const DiskCache& DiskCache::of(const std::string& kind, const std::string& extension,
                               const std::string& source_extension) {
  static std::mutex mu;
  static auto* caches = new std::map<std::string, DiskCache*>();  // never destroyed: loaded modules use them
  std::string root = cache_root();
  std::lock_guard lock(mu);
  DiskCache*& cache = (*caches)[root + '\0' + kind + '\0' + extension];
  if (cache) return *cache;
  std::string why;
  std::optional<TrustedDir> dir;
  if (root.empty()) {
    why = "no cache folder is known (HOME and XDG_CACHE_HOME are unset and this user has no home directory)";
  } else if (std::optional<TrustedDir> r = TrustedDir::open(root, why)) {
    dir = r->sub(kind, why);
  }
  if (!dir) {
    warn_once("kernel cache folder " + root,
              "not using the kernel cache folder: " + why +
                  ". Compiled kernels go to a private temporary folder for this process instead; make the folder "
                  "yours with mode 0700, or point LOOM_CACHE_DIR at one.");
    dir = private_work_dir().sub(kind, why);
    LOOM_CHECK(dir, Runtime, "cannot make a private kernel cache folder: ", why);
  }
  cache = new DiskCache(std::move(*dir), extension, source_extension);
  return *cache;
}

std::string DiskCache::name_of(const std::string& key) { return hex64(hash_text(key)); }

std::optional<std::string> DiskCache::find(const std::string& key) const {
  std::string name = name_of(key), meta, binary, why;
  auto refuse = [&] {
    warn_once("kernel cache file", "not using a kernel cache file: " + why + "; rebuilding it (later such files are " +
                                       "rebuilt without a warning)");
    remove(key);
    return std::nullopt;
  };
  switch (dir_.read(name + ".key", meta, why)) {
    case TrustedDir::Read::Missing: return std::nullopt;
    case TrustedDir::Read::Refused: return refuse();
    case TrustedDir::Read::Ok: break;
  }
  std::string expected_start = std::string(kKeyHeader) + "checksum ";
  size_t key_at = expected_start.size() + 17;
  if (meta.size() < key_at || meta.compare(0, expected_start.size(), expected_start) != 0 ||
      meta.compare(key_at, std::string::npos, key) != 0) {
    why = dir_.path_of(name + ".key") + " was written for another module (a swapped, foreign or older entry)";
    return refuse();
  }
  switch (dir_.read(name + extension_, binary, why)) {
    case TrustedDir::Read::Missing: return std::nullopt;  // its writer is still at work, or died
    case TrustedDir::Read::Refused: return refuse();
    case TrustedDir::Read::Ok: break;
  }
  if (meta != key_file(key, checksum(binary))) {  // truncated, corrupted or swapped
    remove(key);
    return std::nullopt;
  }
  return binary;
}

std::string DiskCache::load_path(const std::string& key) const { return dir_.held_path_of(name_of(key) + extension_); }

void DiskCache::store(const std::string& key, const std::string& binary, const std::string& source) const {
  std::string name = name_of(key);
  dir_.write(name + source_extension_, source);
  // The key file before the binary: a reader that finds the binary finds its key.
  dir_.write(name + ".key", key_file(key, checksum(binary)));
  dir_.write(name + extension_, binary);
}

void DiskCache::remove(const std::string& key) const noexcept {
  std::string name = name_of(key);
  dir_.remove(name + extension_);
  dir_.remove(name + ".key");
}

std::string DiskCache::save_failed_source(const std::string& key, const std::string& source) const {
  std::string name = name_of(key) + source_extension_ + ".failed";
  dir_.write(name, source);
  return dir_.path_of(name);
}

}  // namespace loom::rtc

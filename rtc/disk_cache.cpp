#include "rtc/disk_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace loom::rtc {

namespace fs = std::filesystem;

std::string cache_root() {
  if (const char* dir = std::getenv("LOOM_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/loom";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/loom";
}

uint64_t hash_text(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::optional<uint64_t> file_checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return hash_text(bytes.str()) ^ bytes.str().size();
}

DiskCache::DiskCache(std::string kind, std::string extension)
    : dir_(cache_root() + "/" + kind), extension_(std::move(extension)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  LOOM_CHECK(!ec, Runtime, "cannot create the kernel cache directory ", dir_, ": ", ec.message(),
             " (set LOOM_CACHE_DIR to a writable directory)");
}

std::string DiskCache::path(uint64_t key, const std::string& ext) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(key));
  return dir_ + "/" + name + ext;
}

std::string DiskCache::source_path(uint64_t key) const { return path(key, extension_ == ".so" ? ".cpp" : ".cu"); }

std::optional<std::string> DiskCache::find(uint64_t key) const {
  std::string binary = path(key, extension_), sum = path(key, ".sum");
  std::error_code ec;
  if (!fs::exists(binary, ec)) return std::nullopt;
  std::ifstream in(sum);
  unsigned long long expected = 0;
  std::optional<uint64_t> actual = file_checksum(binary);
  if (in >> expected && actual && *actual == expected) return binary;
  // A truncated or corrupted entry (or one whose writer died before the checksum): rebuild it.
  fs::remove(binary, ec);
  fs::remove(sum, ec);
  return std::nullopt;
}

std::string DiskCache::temporary_path(uint64_t key) const {
  static std::atomic<uint64_t> counter{0};
  return path(key, "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".tmp" + extension_);
}

std::string DiskCache::commit(uint64_t key, const std::string& temporary, const std::string& source) const {
  std::string binary = path(key, extension_);
  std::optional<uint64_t> sum = file_checksum(temporary);
  LOOM_CHECK(sum, Runtime, "compiled module ", temporary, " cannot be read back");
  auto write_atomically = [&](const std::string& target, const std::string& text) {
    std::string tmp = temporary + ".part";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
      LOOM_CHECK(out.good(), Runtime, "cannot write ", tmp);
    }
    fs::rename(tmp, target);
  };
  write_atomically(source_path(key), source);
  // The checksum goes in first: a reader that finds the binary also finds its checksum.
  write_atomically(path(key, ".sum"), std::to_string(static_cast<unsigned long long>(*sum)));
  fs::rename(temporary, binary);
  return binary;
}

}  // namespace loom::rtc

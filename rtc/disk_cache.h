// The on-disk cache of compiled modules (DESIGN decision 7).
//
// Entries are keyed by a hash of everything that determines the binary: the source, the compiler
// and its version, the target and the flags. Each entry is a binary, its source (kept beside it
// for debugging) and a checksum; all are written to temporary names and renamed into place, so a
// crash never leaves a partial entry, and an entry whose checksum does not match (truncated,
// corrupted) is discarded and rebuilt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loom::rtc {

// The cache root: $LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else ~/.cache/loom.
std::string cache_root();

class DiskCache {
 public:
  // `kind` names a subdirectory ("cpu", "cuda") and the binary's file extension.
  DiskCache(std::string kind, std::string extension);

  // The path of a valid binary for key, or nullopt (a bad entry is deleted).
  std::optional<std::string> find(uint64_t key) const;
  // The path the compiler should write a new binary to (unique per process and call).
  std::string temporary_path(uint64_t key) const;
  // Moves a finished binary into place, with its source and checksum. Returns its final path.
  std::string commit(uint64_t key, const std::string& temporary, const std::string& source) const;
  std::string source_path(uint64_t key) const;

 private:
  std::string path(uint64_t key, const std::string& ext) const;
  std::string dir_;
  std::string extension_;
};

// FNV-1a over a file's bytes; nullopt if it cannot be read.
std::optional<uint64_t> file_checksum(const std::string& path);
uint64_t hash_text(const std::string& text);

}  // namespace loom::rtc

// The on-disk cache of compiled modules (DESIGN decisions 7 and 15).
//
// Where: $LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else <home>/.cache/loom, <home> being $HOME
// or, when HOME is unset, the effective user's home from the password database; one subfolder
// per kind ("cpu", "cuda"). Never a folder shared with other users: a cache folder (or kind
// subfolder) that is not trusted (rtc/trusted_dir.h: another user's, or writable by group or
// others) is refused with a warning, once, and the process caches in a private temporary folder
// instead, as it does when no home is known.
//
// What an entry is: `<name><ext>` (the binary), `<name>.key` (the entry's full key and the
// binary's checksum) and `<name><source ext>` (the source, for debugging), where <name> is a
// hash of the key. The key spells out everything the binary was built from (a hash of the
// source, the compiler's resolved path and full version, the flags, the target): find() returns
// a binary only if its .key file holds exactly the key asked for and its bytes match the
// checksum, so a truncated, corrupted, swapped or foreign entry is removed and rebuilt, never
// used. Host modules also carry the key inside the binary, checked after loading and before any
// kernel runs (rtc/host_compiler.cpp). Every file is written under a temporary name (0600) and
// renamed into place, binary last, so a crash never leaves an entry that find() would return.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rtc/trusted_dir.h"

namespace loom::rtc {

// The cache root the environment names (see above); empty when no home is known.
std::string cache_root();

class DiskCache {
 public:
  // The cache of `kind` (binaries ending in `extension`, sources in `source_extension`) under
  // the current cache root: one per root and kind, kept for the life of the process (a loaded
  // module's path goes through the folder it holds).
  static const DiskCache& of(const std::string& kind, const std::string& extension,
                             const std::string& source_extension);

  // The name of the entry of `key`: a hash of it.
  static std::string name_of(const std::string& key);

  // The binary stored for exactly `key`, or nullopt (a bad entry is removed).
  std::optional<std::string> find(const std::string& key) const;
  // The path through which the binary of `key`, found by find(), may be loaded (dlopen).
  std::string load_path(const std::string& key) const;
  // Stores a binary built from `key`, with its source.
  void store(const std::string& key, const std::string& binary, const std::string& source) const;
  // Removes the entry of `key` (its binary was found to be something else once loaded).
  void remove(const std::string& key) const noexcept;
  // Saves the source of a failed compile beside the entries; returns where.
  std::string save_failed_source(const std::string& key, const std::string& source) const;

  const TrustedDir& dir() const noexcept { return dir_; }

 private:
  DiskCache(TrustedDir dir, std::string extension, std::string source_extension)
      : dir_(std::move(dir)), extension_(std::move(extension)), source_extension_(std::move(source_extension)) {}
  TrustedDir dir_;
  std::string extension_, source_extension_;
};

// FNV-1a over a text's bytes.
uint64_t hash_text(const std::string& text);
// The checksum stored in an entry's .key file.
uint64_t checksum(const std::string& bytes);
// "0123456789abcdef": a hash as 16 hex digits.
std::string hex64(uint64_t value);

// A private folder of this process for compiler inputs and outputs (rtc/trusted_dir.h).
const TrustedDir& private_work_dir();

}  // namespace loom::rtc

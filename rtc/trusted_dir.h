// A folder only this user can change, and the files loom keeps in it (DESIGN decision 15).
//
// Compiled modules are loaded into the process and run, so whoever can write them runs code as
// the user of loom (root, perhaps). A folder is trusted when it is owned by the effective user
// and neither group nor others may write it; a file in it when it is a regular file with the
// same two properties. Folders loom creates are 0700, files 0600.
//
// No check is separated from its use by a path lookup someone could redirect: the folder is
// opened once and held as a file descriptor; files are opened relative to it with O_NOFOLLOW
// and checked with fstat on the descriptor that is then read; writes go to a fresh temporary
// name (O_EXCL) and are renamed into place, so a reader never sees a partial file; and a
// module is loaded through the held descriptor (/proc/self/fd/N/name), never through the
// folder's path.
#pragma once

#include <optional>
#include <string>

namespace loom::rtc {

class TrustedDir {
 public:
  // Opens the folder at `path` (relative: from the working directory), creating it and missing
  // parents with mode 0700. nullopt, with `why` saying what is wrong, when it cannot be made or
  // is not trusted.
  static std::optional<TrustedDir> open(const std::string& path, std::string& why);
  // A subfolder, made 0700 if missing, held the same way.
  std::optional<TrustedDir> sub(const std::string& name, std::string& why) const;
  // A new folder of this process alone (mkdtemp in $TMPDIR or /tmp, 0700), removed with what it
  // holds when the process exits. Throws if none can be made.
  static TrustedDir make_private(const std::string& prefix);

  TrustedDir(TrustedDir&& o) noexcept;
  TrustedDir& operator=(TrustedDir&& o) noexcept;
  TrustedDir(const TrustedDir&) = delete;
  ~TrustedDir();

  const std::string& path() const noexcept { return path_; }
  // The path of `name` inside this folder, for messages and for other processes (a compiler).
  std::string path_of(const std::string& name) const { return path_ + "/" + name; }
  // A path that reaches `name` through the held descriptor: what dlopen is given.
  std::string held_path_of(const std::string& name) const;

  enum class Read { Ok, Missing, Refused };
  // The bytes of `name`: Missing if there is none, Refused (with `why`) if it is a symlink, not a
  // regular file, or a file of another user or one group or others may write.
  Read read(const std::string& name, std::string& bytes, std::string& why) const;
  // The bytes of `name` that another program (a compiler) wrote here: a regular file of this
  // user, whatever mode the program's umask gave it (it is made 0600 first; this folder is 0700,
  // so nobody else could have reached it).
  Read read_output(const std::string& name, std::string& bytes, std::string& why) const;
  // Writes `bytes` to `name` (mode 0600), atomically: a temporary name, then a rename.
  void write(const std::string& name, const std::string& bytes) const;
  void remove(const std::string& name) const noexcept;

 private:
  TrustedDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Read read_file(const std::string& name, std::string& bytes, std::string& why, bool make_private) const;
  int fd_;
  std::string path_;
};

}  // namespace loom::rtc

// The kernel cache trusts nothing it finds on disk (DESIGN decision 15, issue 12 item 5): an
// entry is returned only for exactly its key with its checksum, folders and files are private,
// a folder of another user or one others may write is refused (with one warning) for a private
// temporary folder; and the compiler runner (rtc/process.h): argv without a shell, time limits
// that kill the whole process group.
#include <boost/test/unit_test.hpp>

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "rtc/disk_cache.h"
#include "rtc/process.h"
#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/warning.h"

using namespace loom;
using namespace loom::rtc;
namespace fs = std::filesystem;

namespace {

// A C++ program renews loom's copy of the environment itself (runtime/environment.h).
void set_env(const char* name, const char* value, int overwrite) {
  ::setenv(name, value, overwrite);
  refresh_environment();
}
void unset_env(const char* name) {
  ::unsetenv(name);
  refresh_environment();
}

std::vector<std::string> warned;
void record_warning(const std::string& message) { warned.push_back(message); }

// A fresh folder for one test, and LOOM_CACHE_DIR pointing below it; restores both after.
struct Scratch {
  fs::path root;
  WarningHandler previous;
  explicit Scratch(const char* cache_sub = "cache") {
    char pattern[] = "/tmp/loom-test-cache-XXXXXX";
    root = ::mkdtemp(pattern);
    set_env("LOOM_CACHE_DIR", (root / cache_sub).c_str(), 1);
    previous = set_warning_handler(record_warning);
    forget_reported_warnings();
    warned.clear();
  }
  ~Scratch() {
    set_warning_handler(previous);
    unset_env("LOOM_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  fs::path cache() const { return root / "cache"; }
};

unsigned mode_of(const fs::path& p) {
  struct stat st;
  BOOST_REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool mentions(const std::string& needle) {
  for (const std::string& w : warned)
    if (w.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(disk_cache)

BOOST_AUTO_TEST_CASE(entries_round_trip_in_private_folders_and_files) {
  Scratch s;
  mode_t old_umask = ::umask(0);  // what loom creates must be private whatever the umask
  const DiskCache& c = DiskCache::of("k1", ".bin", ".src");
  c.store("key one", "binary one", "source one");
  ::umask(old_umask);
  BOOST_TEST(c.find("key one").value_or("") == "binary one");
  BOOST_TEST(!c.find("key two"));
  BOOST_TEST(c.dir().path() == (s.cache() / "k1").string());
  BOOST_TEST(mode_of(s.cache()) == 0700u);
  BOOST_TEST(mode_of(s.cache() / "k1") == 0700u);
  std::string name = DiskCache::name_of("key one");
  for (const char* ext : {".bin", ".key", ".src"}) BOOST_TEST(mode_of(s.cache() / "k1" / (name + ext)) == 0600u, ext);
  BOOST_TEST(warned.empty());
}

BOOST_AUTO_TEST_CASE(swapped_and_corrupted_entries_are_not_used) {
  Scratch s;
  const DiskCache& c = DiskCache::of("k2", ".bin", ".src");
  fs::path dir = s.cache() / "k2";
  std::string a = DiskCache::name_of("key a"), b = DiskCache::name_of("key b");
  auto swap_files = [&](const std::string& ext) {
    fs::rename(dir / (a + ext), dir / "tmp");
    fs::rename(dir / (b + ext), dir / (a + ext));
    fs::rename(dir / "tmp", dir / (b + ext));
  };
  // Whole entries swapped (binary and key file): each names the other's key.
  c.store("key a", "module a", "");
  c.store("key b", "module b", "");
  swap_files(".bin");
  swap_files(".key");
  BOOST_TEST(!c.find("key a"));
  BOOST_TEST(!c.find("key b"));
  BOOST_TEST(!fs::exists(dir / (a + ".bin")));  // removed, to be rebuilt
  BOOST_TEST(mentions("written for another module"));
  // Only the binaries swapped (same length): the checksum disagrees.
  c.store("key a", "module a", "");
  c.store("key b", "module b", "");
  swap_files(".bin");
  BOOST_TEST(!c.find("key a"));
  BOOST_TEST(!c.find("key b"));
  // A key file whose checksum was recomputed for a foreign binary still names the wrong key.
  c.store("key a", "module a", "");
  std::string forged = "loom kernel cache entry 1\nchecksum " + hex64(checksum("evil")) + "\nkey b";
  std::ofstream(dir / (a + ".key"), std::ios::trunc) << forged;
  std::ofstream(dir / (a + ".bin"), std::ios::trunc) << "evil";
  BOOST_TEST(!c.find("key a"));
  // Truncated.
  c.store("key a", "module a", "");
  fs::resize_file(dir / (a + ".bin"), 3);
  BOOST_TEST(!c.find("key a"));
  c.store("key a", "module a", "");
  BOOST_TEST(c.find("key a").value_or("") == "module a");
}

BOOST_AUTO_TEST_CASE(files_others_could_have_written_are_refused) {
  Scratch s;
  const DiskCache& c = DiskCache::of("k3", ".bin", ".src");
  fs::path dir = s.cache() / "k3";
  std::string name = DiskCache::name_of("key");
  c.store("key", "module", "");
  fs::permissions(dir / (name + ".bin"), fs::perms::group_write, fs::perm_options::add);
  BOOST_TEST(!c.find("key"));
  BOOST_TEST(mentions("writable by its group"));
  c.store("key", "module", "");
  fs::remove(dir / (name + ".bin"));
  std::ofstream(s.root / "elsewhere") << "module";
  fs::create_symlink(s.root / "elsewhere", dir / (name + ".bin"));
  BOOST_TEST(!c.find("key"));  // a symlink is not followed
  if (::geteuid() == 0) {
    c.store("key", "module", "");
    BOOST_REQUIRE(::chown((dir / (name + ".key")).c_str(), 65534, 65534) == 0);
    forget_reported_warnings();
    BOOST_TEST(!c.find("key"));
    BOOST_TEST(mentions("owned by user 65534"));
  }
}

BOOST_AUTO_TEST_CASE(a_folder_others_may_write_is_refused_for_a_private_one) {
  Scratch s("shared");
  fs::create_directories(s.root / "shared");
  fs::permissions(s.root / "shared", fs::perms::owner_all | fs::perms::group_all);  // 0770
  const DiskCache& c = DiskCache::of("k4", ".bin", ".src");
  BOOST_TEST(c.dir().path().find((s.root / "shared").string()) == std::string::npos, c.dir().path());
  BOOST_TEST(mode_of(c.dir().path()) == 0700u);
  BOOST_TEST(mentions("writable by its group (mode 0770)"), (warned.empty() ? "" : warned[0]));
  c.store("key", "module", "");
  BOOST_TEST(c.find("key").value_or("") == "module");
  BOOST_TEST(fs::is_empty(s.root / "shared"));  // nothing written into the refused folder
}

BOOST_AUTO_TEST_CASE(a_folder_of_another_user_is_refused) {
  if (::geteuid() != 0) return;  // only root can hand a folder to another user
  Scratch s("theirs");
  fs::create_directories(s.root / "theirs");
  BOOST_REQUIRE(::chown((s.root / "theirs").c_str(), 65534, 65534) == 0);
  const DiskCache& c = DiskCache::of("k5", ".bin", ".src");
  BOOST_TEST(c.dir().path().find((s.root / "theirs").string()) == std::string::npos);
  BOOST_TEST(mentions("owned by user 65534"));
}

BOOST_AUTO_TEST_CASE(a_relative_cache_folder_is_from_the_working_directory) {
  Scratch s;
  fs::path cwd = fs::current_path();
  fs::current_path(s.root);
  set_env("LOOM_CACHE_DIR", "relative/cache", 1);
  const DiskCache& c = DiskCache::of("k6", ".bin", ".src");
  fs::current_path(cwd);
  BOOST_TEST(c.dir().path() == (s.root / "relative" / "cache" / "k6").string());
  BOOST_TEST(warned.empty());
  c.store("key", "module", "");  // through the held folder, whatever the working directory is now
  BOOST_TEST(c.find("key").value_or("") == "module");
}

BOOST_AUTO_TEST_CASE(without_home_the_cache_is_the_users_own_never_tmp) {
  std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  unset_env("HOME");
  unset_env("XDG_CACHE_HOME");
  unset_env("LOOM_CACHE_DIR");
  std::string root = cache_root();
  if (!saved_home.empty()) set_env("HOME", saved_home.c_str(), 1);
  struct passwd* pw = ::getpwuid(::geteuid());
  BOOST_REQUIRE(pw);
  BOOST_TEST(root == std::string(pw->pw_dir) + "/.cache/loom");
  BOOST_TEST(root.rfind("/tmp", 0) != 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(process)

BOOST_AUTO_TEST_CASE(command_lines_split_into_words_without_a_shell) {
  using V = std::vector<std::string>;
  BOOST_TEST((split_command("g++", "X") == V{"g++"}));
  BOOST_TEST((split_command("  ccache   g++ -O1 ", "X") == V{"ccache", "g++", "-O1"}));
  BOOST_TEST((split_command("'/opt/my gcc/g++' -DX=\"a b\" c\\ d", "X") == V{"/opt/my gcc/g++", "-DX=a b", "c d"}));
  BOOST_TEST((split_command("\"a\\\"b\" '$HOME' `x` *", "X") == V{"a\"b", "$HOME", "`x`", "*"}));
  BOOST_TEST((split_command("''", "X") == V{""}));
  BOOST_TEST(split_command("   ", "X").empty());
  for (const char* bad : {"'open", "\"open", "trailing\\"}) BOOST_CHECK_THROW(split_command(bad, "LOOM_CXX"), Error);
}

BOOST_AUTO_TEST_CASE(a_process_gets_its_arguments_and_output) {
  ProcessResult r = run_process({"sh", "-c", "echo \"[$1] [$2]\"; echo err >&2; exit 3", "sh", "a b", "$HOME"}, 60);
  BOOST_TEST(r.started);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.exit_code == 3);
  BOOST_TEST(r.output == "[a b] [$HOME]\nerr\n");
  ProcessResult missing = run_process({"/nonexistent/compiler"}, 60);
  BOOST_TEST(!missing.started);
  BOOST_TEST(missing.output.find("No such file") != std::string::npos, missing.output);
}

BOOST_AUTO_TEST_CASE(a_time_limit_kills_the_whole_process_group) {
  char pattern[] = "/tmp/loom-test-process-XXXXXX";
  fs::path dir = ::mkdtemp(pattern);
  // The child starts a grandchild that would outlive it, then hangs.
  std::string script = "sleep 1000 & echo $! > " + (dir / "pid").string() + "; sleep 1000";
  auto start = std::chrono::steady_clock::now();
  ProcessResult r = run_process({"sh", "-c", script}, 1.0);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(r.timed_out);
  BOOST_TEST(took < 60.0);
  pid_t grandchild = 0;
  std::ifstream(dir / "pid") >> grandchild;
  BOOST_REQUIRE(grandchild > 0);
  // Gone, or a zombie waiting for init to reap it: not running either way.
  bool running = true;
  for (int i = 0; i < 100 && running; ++i) {
    std::ifstream status("/proc/" + std::to_string(grandchild) + "/status");
    std::string line, state;
    while (std::getline(status, line))
      if (line.rfind("State:", 0) == 0) state = line;
    running = !state.empty() && state.find("Z") == std::string::npos && state.find("X") == std::string::npos;
    if (running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_TEST(!running);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(an_interrupt_while_waiting_stops_the_process) {
  auto start = std::chrono::steady_clock::now();
  auto interrupt = [&] {
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300)) throw Error(ErrorKind::Runtime, "stop");
  };
  BOOST_CHECK_THROW(run_process({"sleep", "1000"}, 0, interrupt), Error);  // no time limit: only the interrupt
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(took < 60.0);
}

BOOST_AUTO_TEST_CASE(compile_timeout_knob_is_checked) {
  set_env("LOOM_COMPILE_TIMEOUT", "2.5", 1);
  BOOST_TEST(compile_timeout_seconds() == 2.5);
  set_env("LOOM_COMPILE_TIMEOUT", "0", 1);
  BOOST_TEST(compile_timeout_seconds() == 0.0);
  for (const char* bad : {"abc", "-1", "5s", "nan", "inf"}) {
    set_env("LOOM_COMPILE_TIMEOUT", bad, 1);
    BOOST_CHECK_THROW(compile_timeout_seconds(), Error);
  }
  unset_env("LOOM_COMPILE_TIMEOUT");
  BOOST_TEST(compile_timeout_seconds() == 300.0);
}

BOOST_AUTO_TEST_SUITE_END()

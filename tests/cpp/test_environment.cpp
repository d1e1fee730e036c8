// runtime/environment.h: what loom's threads read of the environment, and what a compiler
// process is started with.
#include <boost/test/unit_test.hpp>

#include <stdlib.h>

#include <atomic>
#include <string>
#include <thread>

#include "rtc/process.h"
#include "runtime/environment.h"

using namespace loom;
using namespace loom::rtc;

BOOST_AUTO_TEST_SUITE(environment_snapshot)

BOOST_AUTO_TEST_CASE(a_snapshot_changes_only_when_renewed) {
  ::setenv("LOOM_TEST_ENV", "one", 1);
  refresh_environment();
  std::shared_ptr<const Environment> first = environment();
  BOOST_TEST(first->get("LOOM_TEST_ENV") == "one");
  BOOST_TEST(first->get("LOOM_TEST_EN") == "");  // a prefix of a name is not the name
  BOOST_TEST(first->get("LOOM_TEST_ENV_NOT_SET") == "");
  ::setenv("LOOM_TEST_ENV", "two", 1);
  // No embedding here: a C++ program renews the copy itself; what was handed out never changes.
  BOOST_TEST(environment_value("LOOM_TEST_ENV") == "one");
  refresh_environment();
  BOOST_TEST(environment_value("LOOM_TEST_ENV") == "two");
  BOOST_TEST(first->get("LOOM_TEST_ENV") == "one");
  ::unsetenv("LOOM_TEST_ENV");
  refresh_environment();
  BOOST_TEST(environment_value("LOOM_TEST_ENV") == "");
  BOOST_TEST(environment() == environment());  // unchanged: the same snapshot, not a new copy
}

BOOST_AUTO_TEST_CASE(a_child_gets_the_snapshot_and_its_path) {
  ::setenv("LOOM_TEST_CHILD", "seen", 1);
  refresh_environment();
  ::setenv("LOOM_TEST_CHILD", "not yet", 1);  // after the snapshot: the child must not see it
  ProcessResult r = run_process({"sh", "-c", "echo \"$LOOM_TEST_CHILD\""}, 60);
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output == "seen\n");
  // The program is looked up in the snapshot's PATH too.
  std::string path = environment_value("PATH");
  ::setenv("PATH", "/nonexistent", 1);
  refresh_environment();
  ProcessResult missing = run_process({"sh", "-c", "exit 0"}, 60);
  BOOST_TEST(!missing.started);
  BOOST_TEST(missing.output.find("not found in PATH") != std::string::npos, missing.output);
  ::setenv("PATH", path.c_str(), 1);
  ::unsetenv("LOOM_TEST_CHILD");
  refresh_environment();
  BOOST_TEST(find_program("sh") != "");
  BOOST_TEST(find_program("/bin/sh") == "/bin/sh");
}

// The failure this design removes: a compiler spawned on one thread while another grows the
// environment (glibc moves the array and frees the old one). Spawning reads only the snapshot, so
// every child starts and sees a whole environment.
BOOST_AUTO_TEST_CASE(spawning_while_another_thread_changes_the_environment) {
  std::atomic<bool> done{false};
  std::thread changer([&] {
    for (int i = 0; !done.load(); ++i) {
      std::string name = "LOOM_TEST_GROW_" + std::to_string(i % 400);
      ::setenv(name.c_str(), std::string(static_cast<size_t>(i % 64), 'x').c_str(), 1);
      if (i % 400 == 399)
        for (int j = 0; j < 400; ++j) ::unsetenv(("LOOM_TEST_GROW_" + std::to_string(j)).c_str());
    }
  });
  int failed = 0;
  std::string why;
  for (int k = 0; k < 100; ++k) {
    ProcessResult r = run_process({"sh", "-c", "test -n \"$PATH\""}, 60);
    if (!r.started || r.exit_code != 0) {
      ++failed;
      why = r.output;
    }
  }
  done = true;
  changer.join();
  for (int j = 0; j < 400; ++j) ::unsetenv(("LOOM_TEST_GROW_" + std::to_string(j)).c_str());
  refresh_environment();
  BOOST_TEST(failed == 0, why);
}

BOOST_AUTO_TEST_SUITE_END()

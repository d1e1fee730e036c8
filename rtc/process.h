// Running a compiler: a command line split into argv, run without a shell, under a time limit.
//
// The compiler may be a wrapper with arguments (LOOM_CXX="ccache g++", "'/opt/my gcc/bin/g++' -B
// /x"): the command is split into words as a POSIX shell would split it, honouring single
// quotes, double quotes and backslashes, but nothing is expanded ($VAR, `...`, globs) and no
// shell ever runs. The child runs in a process group of its own, with stdin from /dev/null and
// stdout and stderr captured together; when it outlives its time limit the whole group (the
// compiler driver, cc1plus, as, ld, a ccache wrapper) is killed, so nothing it started keeps
// running or writing.
//
// Compiles run off the program's main thread, so everything here reads the environment from
// loom's snapshot (runtime/environment.h), never the live one: the child gets the snapshot's
// variables and the program is looked up in the snapshot's PATH.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace loom::rtc {

// The words of a command line (empty for an empty or blank line). Throws loom::Error (Value)
// naming `what` for an unterminated quote or a trailing backslash.
std::vector<std::string> split_command(const std::string& line, const char* what);

struct ProcessResult {
  bool started = false;    // false: the program could not be run (output says why)
  bool timed_out = false;  // killed (with its process group) after the time limit
  int exit_code = -1;      // its exit status, or 128 + the signal that ended it
  std::string output;      // stdout and stderr, interleaved (the first 1 MiB)
};

// The file a command's first word runs: the word itself when it has a slash, else the first
// executable regular file of that name in PATH (/usr/bin:/bin when PATH is unset, as execvp);
// "" when there is none.
std::string find_program(const std::string& program);

// Runs argv[0] (looked up in PATH when it has no slash) with `argv`, waiting at most
// `timeout_seconds` (0: no limit). `while_waiting`, if given, is called about every 100 ms; if
// it throws (an interrupt: Ctrl-C), the process group is killed and the exception passes on.
// (The child is in a group of its own, so the terminal's Ctrl-C does not reach it directly.)
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::function<void()>& while_waiting = {});

// LOOM_COMPILE_TIMEOUT: seconds a compile of generated code may take (default 300, 0 for no
// limit); anything else that is not a non-negative number is an error (loom::Error, Value).
double compile_timeout_seconds();

// argv as one line, each word quoted where a shell would need it (for messages).
std::string quote_command(const std::vector<std::string>& argv);

}  // namespace loom::rtc

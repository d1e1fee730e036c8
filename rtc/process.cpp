#include "rtc/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "runtime/environment.h"
#include "runtime/error.h"

namespace loom::rtc {

std::vector<std::string> split_command(const std::string& line, const char* what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {  // everything up to the next ' is literal
      size_t end = line.find('\'', i + 1);
      LOOM_CHECK(end != std::string::npos, Value, what, "=", line, ": unterminated single quote");
      word.append(line, i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {  // a backslash escapes only " \ $ ` inside double quotes
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() && std::strchr("\"\\$`", line[j + 1])) ++j;
        word += line[j];
      }
      LOOM_CHECK(j < line.size(), Value, what, "=", line, ": unterminated double quote");
      i = j;
      in_word = true;
    } else if (c == '\\') {
      LOOM_CHECK(i + 1 < line.size(), Value, what, "=", line, ": a backslash ends the line");
      word += line[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string quote_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& w : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "+-_./=:,@%") == std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  std::string path = environment_value("PATH");
  std::istringstream dirs(path.empty() ? "/usr/bin:/bin" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

double compile_timeout_seconds() {
  std::string text = environment_value("LOOM_COMPILE_TIMEOUT");
  if (text.empty()) return 300;
  const char* v = text.c_str();
  char* end = nullptr;
  errno = 0;
  double s = std::strtod(v, &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  LOOM_CHECK(errno == 0 && end != v && *end == '\0' && std::isfinite(s) && s >= 0, Value, "LOOM_COMPILE_TIMEOUT='", v,
             "' is not a time limit: expected seconds (a number >= 0; 0 means no limit)");
  return s;
}

namespace {

constexpr size_t kMaxOutput = 1 << 20;

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Spawns argv (argv[0] found at `program`) in a new process group with stdout and stderr on
// `out`, with the environment's snapshot; returns its pid or -errno.
pid_t spawn(const std::string& program, const std::vector<std::string>& argv, int out) {
  std::shared_ptr<const Environment> env = environment();  // held until the child has its copy
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  // A group of its own (so a timeout kills everything it started), the default handlers and
  // no blocked signals (Python ignores SIGPIPE, and the child would inherit that).
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGXFSZ}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), env->envp());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -rc;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::function<void()>& while_waiting) {
  ProcessResult result;
  if (argv.empty()) {
    result.output = "empty command";
    return result;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = std::string("cannot make a pipe: ") + std::strerror(errno);
    return result;
  }
  Fd read_end{pipe_fds[0]};
  std::string program = find_program(argv[0]);
  if (program.empty()) {
    result.output = "cannot run " + argv[0] + ": " + std::strerror(ENOENT) + " (not found in PATH)";
    return result;
  }
  pid_t pid;
  {
    Fd write_end{pipe_fds[1]};  // the child's copy is all that stays open
    pid = spawn(program, argv, write_end.fd);
  }
  if (pid < 0) {
    result.output = std::string("cannot run ") + argv[0] + ": " + std::strerror(-pid);
    return result;
  }
  result.started = true;

  using Clock = std::chrono::steady_clock;
  bool limited = timeout_seconds > 0;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(limited ? timeout_seconds : 0));
  auto ms_left = [&]() -> int {
    if (!limited) return 100;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 100));
  };
  // Read until the output closes, then wait for the exit: both against the deadline (a child
  // may close its output and still run).
  bool open = true;
  int status = 0;
  auto next_check = Clock::now();
  for (;;) {
    if (open) {
      pollfd p{read_end.fd, POLLIN, 0};
      int ready = ::poll(&p, 1, ms_left());
      if (ready > 0) {
        char buf[65536];
        ssize_t n = ::read(read_end.fd, buf, sizeof buf);
        if (n > 0) {
          if (result.output.size() < kMaxOutput)
            result.output.append(buf, std::min(static_cast<size_t>(n), kMaxOutput - result.output.size()));
        } else if (n == 0 || errno != EINTR) {
          open = false;
        }
      }
    } else {
      pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (done < 0 && errno != EINTR) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms_left(), 5)));
    }
    auto kill_group = [&] {
      ::kill(-pid, SIGKILL);  // the group: the driver and whatever it started
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    };
    if (limited && Clock::now() >= deadline) {
      kill_group();
      result.timed_out = true;
      result.exit_code = exit_code_of(status);
      return result;
    }
    if (while_waiting && Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::milliseconds(100);
      try {
        while_waiting();
      } catch (...) {
        kill_group();
        throw;
      }
    }
  }
  result.exit_code = exit_code_of(status);
  return result;
}

}  // namespace loom::rtc

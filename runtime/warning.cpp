#include "runtime/warning.h"

#include <atomic>
#include <cstdio>

namespace loom {
namespace {

void to_stderr(const std::string& message) { std::fprintf(stderr, "loom warning: %s\n", message.c_str()); }

std::atomic<WarningHandler> handler{&to_stderr};

}  // namespace

void set_warning_handler(WarningHandler h) noexcept { handler.store(h ? h : &to_stderr); }

void warn(const std::string& message) { handler.load()(message); }

}  // namespace loom

// Warnings from the engine: things loom worked around but the user should know (a thread pool
// smaller than asked, a kernel cache it would not trust).
//
// They go to stderr as one line, "loom: warning: <message>", and each distinct `topic` is
// reported once per process, so a condition met on every op is not a flood. The layers below
// pyext know nothing of Python (and a Python warning would need the GIL, which a compile or a
// kernel may run without), so this is the one place they are written; tests may redirect them.
#pragma once

#include <string>

namespace loom {

// Reports `message` unless a warning of `topic` was reported before in this process.
void warn_once(const std::string& topic, const std::string& message);

// For tests: where warnings go (default: stderr; returns the previous sink), and forgetting
// which topics were reported.
using WarningSink = void (*)(const std::string& message);
WarningSink set_warning_sink(WarningSink sink);
void forget_reported_warnings();

}  // namespace loom

// Warnings from the engine: a degraded path it took (slower, same results) or a condition it
// worked around (a thread pool smaller than asked, a kernel cache it would not trust), which the
// user should hear about but which is not an error.
//
// The layers below pyext know nothing of Python, so this is the one place they report to. The
// handler decides where a warning goes: by default stderr, one line "loom: warning: <message>";
// the extension installs one that makes it a Python RuntimeWarning (where warning filters apply).
// Warnings can come from any thread, with or without the GIL, from inside a compile or a sync:
// so `warn` never throws (a handler's failure is reported to stderr and dropped), and the
// engine warns once per cause (`warn_once`), never on a hot path.
#pragma once

#include <string>

namespace loom {

using WarningHandler = void (*)(const std::string& message);

// Where warnings go; nullptr restores stderr. Returns the previous handler.
WarningHandler set_warning_handler(WarningHandler handler) noexcept;

// Gives `message` to the handler.
void warn(const std::string& message) noexcept;

// Gives `message` to the handler unless a warning of `topic` was given before in this process.
void warn_once(const std::string& topic, const std::string& message) noexcept;

// For tests: forgets which topics were reported.
void forget_reported_warnings();

}  // namespace loom

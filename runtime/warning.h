// Warnings: a degraded path the engine took (slower, same results) that users should hear about,
// not an error. The Python extension sends them to Python's warnings module as RuntimeWarning,
// where filters apply as usual (one filtered as "error" raises at the call that warned); without
// the extension (C++ tests, tools) they go to stderr. Callers decide how often to warn: the
// engine warns once per cause, never on a hot path.
#pragma once

#include <string>

namespace loom {

using WarningHandler = void (*)(const std::string& message);

// nullptr restores the default (stderr).
void set_warning_handler(WarningHandler handler) noexcept;

// Gives the warning to the handler, which may throw (a warning filtered as an error).
void warn(const std::string& message);

}  // namespace loom

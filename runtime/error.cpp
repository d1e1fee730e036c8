#include "runtime/error.h"

namespace loom::detail {

// Out of line so that the throw and the string building stay off the callers' hot paths.
void throw_error(ErrorKind kind, std::string message) { throw Error(kind, std::move(message)); }

}  // namespace loom::detail

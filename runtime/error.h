// Errors raised by the engine.
//
// Every layer throws loom::Error. Its kind says which Python exception it becomes at the
// extension boundary (set_python_error in pyext/common.cpp), so a shape mismatch surfaces as
// RuntimeError, an out-of-range index as IndexError, and so on, with the message written where
// the fault was detected. Messages follow PyTorch's wording where PyTorch has one, so users
// recognise them.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace loom {

enum class ErrorKind : uint8_t {
  Runtime,         // RuntimeError: shapes, layouts, devices, failed compiles
  Value,           // ValueError: a well-typed argument with a bad value
  Type,            // TypeError: an argument of the wrong kind
  Index,           // IndexError: indices and dims out of range
  NotImplemented,  // NotImplementedError
  OutOfMemory,     // MemoryError, with the allocator's statistics in the message
  Distributed,     // loom.distributed.DistBackendError (a RuntimeError): a collective's transport
                   // failed (a peer died, a timeout) or the ranks disagree
  Interrupted,     // KeyboardInterrupt: the user stopped long work (runtime/blocking.h)
  LinAlg,          // loom.linalg.LinAlgError (a RuntimeError, as torch.linalg.LinAlgError): a matrix
                   // LAPACK found singular or not positive-definite (lazy/ops_lapack.cpp)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {

template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

[[noreturn]] void throw_error(ErrorKind kind, std::string message);

}  // namespace detail
}  // namespace loom

// LOOM_CHECK(cond, Kind, message parts...): throws loom::Error of that kind when cond is false.
// The message is only built on failure, so checks on hot paths cost one branch.
#define LOOM_CHECK(cond, kind, ...)                                                         \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::loom::detail::throw_error(::loom::ErrorKind::kind, ::loom::detail::concat(__VA_ARGS__)); \
  } while (0)

#define LOOM_FAIL(kind, ...) \
  ::loom::detail::throw_error(::loom::ErrorKind::kind, ::loom::detail::concat(__VA_ARGS__))

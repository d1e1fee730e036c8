// Where loom's GPU work runs, and how its failures are reported.
//
// One stream per device: every copy, fill, kernel, cuBLAS call and graph launch of loom goes to
// it, in program order. That single order is what makes the caching allocator safe without
// events (a block freed by the host is next used by work queued after everything that used it)
// and what lets a plan rewrite its argument table before each replay. The stream is created
// non-blocking, so work other libraries put on the legacy default stream never serializes with
// loom's, and it is a legal stream for graph capture (the default stream is not).
//
// Errors. Every runtime call is checked; a failure raises RuntimeError naming the call and what
// it was doing (the kernel, the op). A kernel fault surfaces at the next call that waits for the
// device; the message then names the last kernel launched, and LOOM_LAUNCH_BLOCKING=1 waits after
// every launch so that it names the faulting one. Data errors that only kernels can see (an
// index out of range, an integer division by zero) are written by the kernel into the device's
// error word; synchronize() and every copy to the host read it and raise the registered error.
//
// Only files compiled with the CUDA toolkit include this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "runtime/error.h"

namespace loom::cuda {

// Throws RuntimeError "CUDA error in <what> (<context>): <name>: <description>" unless ok.
void check(cudaError_t err, const char* what, const std::string& context = {});

// Makes `device` current on this thread, its primary context included (cheap when it already is).
void set_device(int device);

// The device's stream (created on first use; lives for the process).
cudaStream_t stream(int device);

// Waits for the device's stream, then raises any asynchronous fault or data error.
void synchronize(int device);

// LOOM_LAUNCH_BLOCKING=1: wait after every launch.
bool launch_blocking() noexcept;

// Bookkeeping after a kernel (or cuBLAS call) was queued: counts it, remembers its name for
// later fault messages, and under LOOM_LAUNCH_BLOCKING waits and raises naming it.
void after_launch(int device, const std::string& what);

// The device-visible address of the device's error word (mapped host memory, so that reading it
// costs the host nothing; device memory where the driver refuses to map). A kernel that finds a
// data error stores its code there if the word is 0.
int32_t* error_word(int device);
// A code for a data error kernels may report: `kind` and `message` are what raising it throws.
// Codes are positive and stable for the process; registering the same message twice returns
// the same code.
int32_t register_data_error(ErrorKind kind, const std::string& message);
// Raises the error a kernel reported since the last check, clearing the word. Only meaningful
// after the stream was synchronized.
void raise_data_errors(int device);

// Set while this thread captures a graph on a device's stream: the staging ring and every
// synchronous path refuse to run then, as they would break the capture.
bool capturing() noexcept;
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

// Device attributes, read once per device.
int multiprocessor_count(int device);
// 10 * major + minor, e.g. 90 for Hopper.
int compute_capability(int device);

}  // namespace loom::cuda

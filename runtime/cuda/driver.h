// The CUDA driver API functions loom calls, reached through the runtime's entry-point query
// instead of linking libcuda (DESIGN decision 12): the same build loads where there is no driver.
//
// Which API for what. The runtime API (libcudart, linked) owns the device's primary context and
// serves memory, streams, events, copies and CUDA Graphs: its stream and graph handles are the
// driver's own objects (cudaStream_t is CUstream), cuBLAS runs on them, and stream capture
// records launches made through either API. The driver is needed only for what the runtime
// cannot do with NVRTC's output: load (and unload) a cubin or PTX image as a module, look up its kernels,
// launch them, and ask the occupancy calculator about them. That is this table, and nothing
// else in loom calls the driver.
//
// Only files compiled with the CUDA toolkit include this header.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace loom::cuda {

struct DriverApi {
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuModuleLoadDataEx_v2010 cuModuleLoadDataEx = nullptr;
  PFN_cuModuleGetFunction_v2000 cuModuleGetFunction = nullptr;
  PFN_cuModuleUnload_v2000 cuModuleUnload = nullptr;
  PFN_cuLaunchKernel_v4000 cuLaunchKernel = nullptr;
  PFN_cuFuncGetAttribute_v2020 cuFuncGetAttribute = nullptr;
  PFN_cuOccupancyMaxPotentialBlockSize_v6050 cuOccupancyMaxPotentialBlockSize = nullptr;
  PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050 cuOccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
};

// The table, looked up once. Throws RuntimeError ("CUDA is not available (...)" without a GPU,
// or naming the first function the driver does not provide).
const DriverApi& driver();

// Throws RuntimeError "CUDA driver error in <what>: <name>: <description>" unless r is CUDA_SUCCESS.
void check(CUresult r, const char* what, const std::string& context = {});

}  // namespace loom::cuda

// Shared by the bench/cuda benchmarks: status checks that exit, CUDA-event timing, and the
// `bench:` line of bench/machine_limits.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace shardwise::cuda::bench {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "bench: %s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Mean seconds per call of `body` over `iters` calls after `warmup` calls, by CUDA events on the
// default stream (every call here is queued on it).
inline double time_gpu(int iters, const std::function<void()>& body, int warmup = 2) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < warmup; ++i) body();
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) body();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) * 1e-3 / iters;
}

inline void print_figure(const std::string& name, double ours, double limit, const char* unit) {
  std::printf("bench: %s ours=%.2f limit=%.2f unit=%s ratio=%.3f\n", name.c_str(), ours, limit,
              unit, ours / limit);
}

// The device's name, printed before the figures (they only mean something next to it).
inline void print_device() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s (%d SMs, %.0f GiB)\n", prop.name, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1u << 30));
}

}  // namespace shardwise::cuda::bench

// Grad norm, zero count and clipping over device spans. The fp64 sum of squares is
// reduction_kernels' two-pass sum (deterministic); the zero count adds per-block counts with an
// integer atomic, exact in any order.
#include <cmath>

#include "cuda_status.hpp"
#include "reduction_kernels.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/grad_stats_cuda.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::cuda {
namespace {

using detail::as_stream;
using detail::check_cuda;

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 4096;

int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

__global__ void count_zeros_kernel(const float* x, std::int64_t n, unsigned long long* count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    mine += x[i] == 0.0f ? 1ull : 0ull;  // +0 and -0, as optim::count_zeros
  }
  // Warp sums first: one atomic per warp instead of one per thread.
  for (int offset = 16; offset > 0; offset /= 2)
    mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if ((threadIdx.x & 31u) == 0 && mine != 0) atomicAdd(count, mine);
}

__global__ void scale_kernel(float* x, std::int64_t n, float coeff) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    x[i] = __fmul_rn(x[i], coeff);
  }
}

void check_spans(std::span<const DeviceSpan> spans, const char* what) {
  for (const DeviceSpan& s : spans) {
    SW_REQUIRE(s.size >= 0 && (s.size == 0 || s.data != nullptr), InvalidArgument, what,
               ": a span of ", s.size, " elements at ", static_cast<const void*>(s.data));
  }
}

}  // namespace

double GradStatsCuda::sum_of_squares(std::span<const DeviceSpan> spans) {
  check_spans(spans, "GradStatsCuda::sum_of_squares");
  std::int64_t partials = 0;
  for (const DeviceSpan& s : spans)
    partials += s.size > 0 ? detail::sum_of_squares_partials(s.size) : 0;
  partials_.reserve(static_cast<std::size_t>(partials > 0 ? partials : 1) * sizeof(double));
  result_.reserve(sizeof(double));
  const cudaStream_t stream = as_stream(stream_);
  std::int64_t offset = 0;
  for (const DeviceSpan& s : spans) {
    if (s.size == 0) continue;
    detail::launch_sum_of_squares_partials(s.data, s.size, partials_.as<double>() + offset, stream);
    offset += detail::sum_of_squares_partials(s.size);
  }
  detail::launch_sum_partials(partials_.as<double>(), offset, result_.as<double>(), stream);
  double total = 0.0;
  check_cuda(
      cudaMemcpyAsync(&total, result_.data(), sizeof(double), cudaMemcpyDeviceToHost, stream),
      "cudaMemcpyAsync of the sum of squares");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after the sum of squares");
  return total;
}

std::int64_t GradStatsCuda::count_zeros(std::span<const DeviceSpan> spans) {
  check_spans(spans, "GradStatsCuda::count_zeros");
  result_.reserve(sizeof(unsigned long long));
  const cudaStream_t stream = as_stream(stream_);
  auto* count = result_.as<unsigned long long>();
  check_cuda(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream),
             "cudaMemsetAsync of the zero count");
  for (const DeviceSpan& s : spans) {
    if (s.size == 0) continue;
    count_zeros_kernel<<<blocks_for(s.size), kThreads, 0, stream>>>(s.data, s.size, count);
    detail::check_launch("count_zeros_kernel launch");
  }
  unsigned long long total = 0;
  check_cuda(cudaMemcpyAsync(&total, count, sizeof(total), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync of the zero count");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after the zero count");
  return static_cast<std::int64_t>(total);
}

void GradStatsCuda::scale(std::span<const DeviceSpan> spans, float coeff) {
  check_spans(spans, "GradStatsCuda::scale");
  for (const DeviceSpan& s : spans) {
    if (s.size == 0) continue;
    scale_kernel<<<blocks_for(s.size), kThreads, 0, as_stream(stream_)>>>(s.data, s.size, coeff);
    detail::check_launch("scale_kernel launch");
  }
}

ClipResult GradStatsCuda::clip(std::span<const DeviceSpan> spans, double max_norm) {
  ClipResult result;
  result.grad_norm = std::sqrt(sum_of_squares(spans));
  // Optimizer::step skips the step on a non-finite norm and clips only for max_norm > 0.
  if (!std::isfinite(result.grad_norm) || max_norm <= 0.0) return result;
  result.clip_coeff = optim::clip_coefficient(result.grad_norm, max_norm);
  if (result.clip_coeff < 1.0) scale(spans, static_cast<float>(result.clip_coeff));
  return result;
}

}  // namespace shardwise::cuda

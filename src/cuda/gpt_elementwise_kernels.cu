// Element-wise pieces of the device GPT (bias rows, residual sums, GELU) and the column sums of
// bias gradients.
#include "cuda_status.hpp"
#include "gpt_kernel_support.cuh"
#include "gpt_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

using gpt::blocks_for;
using gpt::first_index;
using gpt::grid_stride;
using gpt::kThreads;

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi), as core/gelu.hpp
constexpr float kGeluC = 0.044715f;
// Rows each block of a column sum's first pass adds up: enough blocks to fill the GPU, few
// enough partials for the second pass.
constexpr std::int64_t kRowsPerChunk = 64;

__global__ void broadcast_rows_kernel(const float* bias, std::int64_t n, std::int64_t cols,
                                      float* y) {
  for (std::int64_t e = first_index(); e < n * cols; e += grid_stride()) y[e] = bias[e % cols];
}

__global__ void add_kernel(const float* a, const float* b, std::int64_t count, float* out) {
  for (std::int64_t e = first_index(); e < count; e += grid_stride()) out[e] = a[e] + b[e];
}

// core/gelu.cpp's form: s = 0.5 (1 + tanh(u)) = 1 / (1 + e), e = exp(-2u) with -2u clamped to
// [-87, 87]; gelu = x s, gelu' = s + 2 x s (e s) u'.
struct GeluParts {
  float s, e;
};
__device__ __forceinline__ GeluParts gelu_parts(float v) {
  const float u = kGeluK * (v + kGeluC * v * v * v);
  const float m = fminf(fmaxf(-2.0f * u, -87.0f), 87.0f);
  const float e = expf(m);
  return {1.0f / (1.0f + e), e};
}

__global__ void gelu_forward_kernel(const float* x, float* y, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const float v = x[i];
    y[i] = v * gelu_parts(v).s;
  }
}

__global__ void gelu_backward_kernel(const float* x, float* d, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const float v = x[i];
    const GeluParts g = gelu_parts(v);
    const float du = kGeluK * (1.0f + 3.0f * kGeluC * v * v);
    d[i] *= g.s + 2.0f * v * g.s * (g.e * g.s) * du;
  }
}

// Pass 1: partials[chunk, c] = sum of m[r, c] over the chunk's rows, in row order.
__global__ void column_chunk_sums_kernel(const float* m, std::int64_t rows, std::int64_t cols,
                                         float* partials) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  if (c >= cols) return;
  const std::int64_t r0 = chunk * kRowsPerChunk;
  const std::int64_t r1 = r0 + kRowsPerChunk < rows ? r0 + kRowsPerChunk : rows;
  float s = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) s += m[r * cols + c];
  partials[chunk * cols + c] = s;
}

// Pass 2: sums[c] += the chunks' partials, in chunk order.
__global__ void add_chunk_partials_kernel(const float* partials, std::int64_t chunks,
                                          std::int64_t cols, float* sums) {
  for (std::int64_t c = first_index(); c < cols; c += grid_stride()) {
    float s = 0.0f;
    for (std::int64_t k = 0; k < chunks; ++k) s += partials[k * cols + c];
    sums[c] += s;
  }
}

}  // namespace

void launch_broadcast_rows(const float* bias, std::int64_t n, std::int64_t cols, float* y,
                           cudaStream_t stream) {
  broadcast_rows_kernel<<<blocks_for(n * cols), kThreads, 0, stream>>>(bias, n, cols, y);
  check_launch("broadcast_rows_kernel");
}

void launch_add(const float* a, const float* b, std::int64_t count, float* out,
                cudaStream_t stream) {
  add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(a, b, count, out);
  check_launch("add_kernel");
}

void launch_gelu_forward(const float* x, float* y, std::int64_t count, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, y, count);
  check_launch("gelu_forward_kernel");
}

void launch_gelu_backward(const float* x, float* d, std::int64_t count, cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, d, count);
  check_launch("gelu_backward_kernel");
}

std::int64_t column_sum_partials(std::int64_t rows, std::int64_t cols) {
  return (rows + kRowsPerChunk - 1) / kRowsPerChunk * cols;
}

void launch_add_column_sums(const float* m, std::int64_t rows, std::int64_t cols, float* sums,
                            float* partials, cudaStream_t stream) {
  const std::int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>(chunks));
  column_chunk_sums_kernel<<<grid, kThreads, 0, stream>>>(m, rows, cols, partials);
  check_launch("column_chunk_sums_kernel");
  add_chunk_partials_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(partials, chunks, cols,
                                                                       sums);
  check_launch("add_chunk_partials_kernel");
}

}  // namespace shardwise::cuda::detail

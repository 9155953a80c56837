// Layer norm of the device GPT: one warp per row for the row statistics and the input gradient;
// the weight and bias gradients are column sums over rows, taken in two passes (chunks of rows,
// then the chunks in order) so every column has enough threads behind it.
#include "cuda_status.hpp"
#include "gpt_kernel_support.cuh"
#include "gpt_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

using gpt::blocks_for;
using gpt::first_index;
using gpt::grid_stride;
using gpt::kThreads;
using gpt::warp_sum;

constexpr int kWarpsPerBlock = 4;
constexpr std::int64_t kRowsPerChunk = 64;

__device__ __forceinline__ std::int64_t warp_row() {
  return static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
}

__global__ void layer_norm_forward_kernel(const float* x, const float* w, const float* b,
                                          std::int64_t n, int h, float eps, float* y, float* mean,
                                          float* rstd) {
  const std::int64_t row = warp_row();
  if (row >= n) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float* xr = x + row * h;
  float s = 0.0f;
  for (int c = lane; c < h; c += 32) s += xr[c];
  const float m = warp_sum(s) / static_cast<float>(h);
  float v = 0.0f;
  for (int c = lane; c < h; c += 32) v += (xr[c] - m) * (xr[c] - m);
  const float r = 1.0f / sqrtf(warp_sum(v) / static_cast<float>(h) + eps);
  float* yr = y + row * h;
  for (int c = lane; c < h; c += 32) yr[c] = (xr[c] - m) * r * w[c] + b[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dx (=, +=) rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w.
__global__ void layer_norm_dx_kernel(const float* dy, const float* x, const float* mean,
                                     const float* rstd, const float* w, std::int64_t n, int h,
                                     float* dx, bool add) {
  const std::int64_t row = warp_row();
  if (row >= n) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float m = mean[row], r = rstd[row];
  const float* xr = x + row * h;
  const float* dyr = dy + row * h;
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = lane; c < h; c += 32) {
    const float dxhat = dyr[c] * w[c];
    s1 += dxhat;
    s2 += dxhat * (xr[c] - m) * r;
  }
  const float inv_h = 1.0f / static_cast<float>(h);
  const float mean_dxhat = warp_sum(s1) * inv_h, mean_dxhat_xhat = warp_sum(s2) * inv_h;
  float* dxr = dx + row * h;
  for (int c = lane; c < h; c += 32) {
    const float xhat = (xr[c] - m) * r;
    const float v = r * (dyr[c] * w[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    dxr[c] = add ? dxr[c] + v : v;
  }
}

// Pass 1: per chunk of rows and column, the sums of dy * xhat and of dy.
__global__ void layer_norm_param_partials_kernel(const float* dy, const float* x, const float* mean,
                                                 const float* rstd, std::int64_t n, int h,
                                                 float* partials_w, float* partials_b) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  if (c >= h) return;
  const std::int64_t r0 = chunk * kRowsPerChunk;
  const std::int64_t r1 = r0 + kRowsPerChunk < n ? r0 + kRowsPerChunk : n;
  float sw = 0.0f, sb = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) {
    const float d = dy[r * h + c];
    sw += d * ((x[r * h + c] - mean[r]) * rstd[r]);
    sb += d;
  }
  partials_w[chunk * h + c] = sw;
  partials_b[chunk * h + c] = sb;
}

// Pass 2: dw += the chunks' partials in order, db likewise.
__global__ void layer_norm_param_sums_kernel(const float* partials_w, const float* partials_b,
                                             std::int64_t chunks, int h, float* dw, float* db) {
  for (std::int64_t c = first_index(); c < h; c += grid_stride()) {
    float sw = 0.0f, sb = 0.0f;
    for (std::int64_t k = 0; k < chunks; ++k) {
      sw += partials_w[k * h + c];
      sb += partials_b[k * h + c];
    }
    dw[c] += sw;
    db[c] += sb;
  }
}

std::int64_t chunks_for(std::int64_t n) { return (n + kRowsPerChunk - 1) / kRowsPerChunk; }

int row_blocks(std::int64_t n) {
  return static_cast<int>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

std::int64_t layer_norm_partials(std::int64_t n, std::int64_t h) { return 2 * chunks_for(n) * h; }

void launch_layer_norm_forward(const float* x, const float* w, const float* b, std::int64_t n,
                               int h, float eps, float* y, float* mean, float* rstd,
                               cudaStream_t stream) {
  layer_norm_forward_kernel<<<row_blocks(n), kWarpsPerBlock * 32, 0, stream>>>(x, w, b, n, h, eps,
                                                                               y, mean, rstd);
  check_launch("layer_norm_forward_kernel");
}

void launch_layer_norm_backward(const float* dy, const float* x, const float* mean,
                                const float* rstd, const float* w, std::int64_t n, int h, float* dx,
                                bool add, float* dw, float* db, float* partials,
                                cudaStream_t stream) {
  const std::int64_t chunks = chunks_for(n);
  float* partials_w = partials;
  float* partials_b = partials + chunks * h;
  const dim3 grid(static_cast<unsigned>((h + kThreads - 1) / kThreads),
                  static_cast<unsigned>(chunks));
  layer_norm_param_partials_kernel<<<grid, kThreads, 0, stream>>>(dy, x, mean, rstd, n, h,
                                                                  partials_w, partials_b);
  check_launch("layer_norm_param_partials_kernel");
  layer_norm_param_sums_kernel<<<blocks_for(h), kThreads, 0, stream>>>(partials_w, partials_b,
                                                                       chunks, h, dw, db);
  check_launch("layer_norm_param_sums_kernel");
  layer_norm_dx_kernel<<<row_blocks(n), kWarpsPerBlock * 32, 0, stream>>>(dy, x, mean, rstd, w, n,
                                                                          h, dx, add);
  check_launch("layer_norm_dx_kernel");
}

}  // namespace shardwise::cuda::detail

// Attention pieces of the device GPT around its cuBLAS products: moving q, k, v between the fused
// rows [q | k | v] and a per-(sequence, head) layout [batch, heads, seq, head_dim] (so each
// product is one strided-batched GEMM), rotary positions applied on the way, and the causal
// softmax forward and backward, one warp per score row.
#include "cuda_status.hpp"
#include "gpt_kernel_support.cuh"
#include "gpt_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

using gpt::blocks_for;
using gpt::first_index;
using gpt::grid_stride;
using gpt::kThreads;
using gpt::warp_max;
using gpt::warp_sum;

constexpr int kWarpsPerBlock = 4;

// Where element e of the head layout sits: sequence b, head, position s, dimension d.
struct HeadIndex {
  std::int64_t b, head, s, d;
};
__device__ __forceinline__ HeadIndex head_index(std::int64_t e, int seq, int heads, int head_dim) {
  HeadIndex i;
  i.d = e % head_dim;
  std::int64_t rest = e / head_dim;
  i.s = rest % seq;
  rest /= seq;
  i.head = rest % heads;
  i.b = rest / heads;
  return i;
}

// Element d of the rotated pair (v0, v1) at position s: the CPU's v0 cs - v1 sn / v0 sn + v1 cs.
__device__ __forceinline__ float rotate(float v0, float v1, const HeadIndex& i, int head_dim,
                                        const RopeTables& rope) {
  const std::int64_t t = i.s * (head_dim / 2) + i.d / 2;
  const float cs = rope.cos[t], sn = rope.sign * rope.sin[t];
  return (i.d & 1) == 0 ? v0 * cs - v1 * sn : v0 * sn + v1 * cs;
}

__global__ void rows_to_heads_kernel(const float* rows, std::int64_t row_stride, std::int64_t col0,
                                     int batch, int seq, int heads, int head_dim, RopeTables rope,
                                     float* out) {
  const std::int64_t count = static_cast<std::int64_t>(batch) * seq * heads * head_dim;
  for (std::int64_t e = first_index(); e < count; e += grid_stride()) {
    const HeadIndex i = head_index(e, seq, heads, head_dim);
    const float* src = rows + (i.b * seq + i.s) * row_stride + col0 + i.head * head_dim;
    if (rope.cos == nullptr) {
      out[e] = src[i.d];
    } else {
      const std::int64_t pair = i.d & ~std::int64_t{1};
      out[e] = rotate(src[pair], src[pair + 1], i, head_dim, rope);
    }
  }
}

__global__ void heads_to_rows_kernel(const float* in, int batch, int seq, int heads, int head_dim,
                                     RopeTables rope, float* rows, std::int64_t row_stride,
                                     std::int64_t col0) {
  const std::int64_t count = static_cast<std::int64_t>(batch) * seq * heads * head_dim;
  for (std::int64_t e = first_index(); e < count; e += grid_stride()) {
    const HeadIndex i = head_index(e, seq, heads, head_dim);
    float* dst = rows + (i.b * seq + i.s) * row_stride + col0 + i.head * head_dim;
    if (rope.cos == nullptr) {
      dst[i.d] = in[e];
    } else {
      const std::int64_t pair = e - (i.d & 1);
      dst[i.d] = rotate(in[pair], in[pair + 1], i, head_dim, rope);
    }
  }
}

__global__ void causal_softmax_kernel(float* scores, std::int64_t rows, int seq) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int i = static_cast<int>(row % seq);
  float* p = scores + row * seq;
  float mx = -INFINITY;
  for (int j = lane; j <= i; j += 32) mx = fmaxf(mx, p[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j <= i; j += 32) sum += expf(p[j] - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < seq; j += 32) p[j] = j <= i ? expf(p[j] - mx) * inv : 0.0f;
}

__global__ void causal_softmax_backward_kernel(const float* probs, float* ds, std::int64_t rows,
                                               int seq, float scale) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int i = static_cast<int>(row % seq);
  const float* p = probs + row * seq;
  float* d = ds + row * seq;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += 32) dot += d[j] * p[j];
  dot = warp_sum(dot);
  for (int j = lane; j < seq; j += 32) d[j] = j <= i ? p[j] * (d[j] - dot) * scale : 0.0f;
}

int row_blocks(std::int64_t rows) {
  return static_cast<int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void launch_rows_to_heads(const float* rows, std::int64_t row_stride, std::int64_t col0, int batch,
                          int seq, int heads, int head_dim, RopeTables rope, float* out,
                          cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(batch) * seq * heads * head_dim;
  rows_to_heads_kernel<<<blocks_for(count), kThreads, 0, stream>>>(rows, row_stride, col0, batch,
                                                                   seq, heads, head_dim, rope, out);
  check_launch("rows_to_heads_kernel");
}

void launch_heads_to_rows(const float* heads_in, int batch, int seq, int heads, int head_dim,
                          RopeTables rope, float* rows, std::int64_t row_stride, std::int64_t col0,
                          cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(batch) * seq * heads * head_dim;
  heads_to_rows_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      heads_in, batch, seq, heads, head_dim, rope, rows, row_stride, col0);
  check_launch("heads_to_rows_kernel");
}

void launch_causal_softmax(float* scores, std::int64_t count, int seq, cudaStream_t stream) {
  const std::int64_t rows = count * seq;
  causal_softmax_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, stream>>>(scores, rows, seq);
  check_launch("causal_softmax_kernel");
}

void launch_causal_softmax_backward(const float* probs, float* ds, std::int64_t count, int seq,
                                    float scale, cudaStream_t stream) {
  const std::int64_t rows = count * seq;
  causal_softmax_backward_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, stream>>>(
      probs, ds, rows, seq, scale);
  check_launch("causal_softmax_backward_kernel");
}

}  // namespace shardwise::cuda::detail

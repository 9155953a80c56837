#include "cuda_status.hpp"
#include "float_bits.cuh"
#include "newton_schulz_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest

int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

__device__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__global__ void normalise_kernel(const double* sum_of_squares, float eps, const float* g, float* x,
                                 std::int64_t n) {
  const double norm = sqrt(*sum_of_squares);  // IEEE sqrt, as std::sqrt
  const float inv = static_cast<float>(1.0 / (norm + static_cast<double>(eps)));
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) x[i] = __fmul_rn(g[i], inv);
}

__global__ void mirror_upper_kernel(float* a, std::int64_t m) {
  for (std::int64_t idx = first_index(); idx < m * m; idx += grid_stride()) {
    const std::int64_t i = idx % m, j = idx / m;  // element (i, j) sits at i + j * m
    if (i > j) a[idx] = a[j + i * m];             // reads the upper triangle only
  }
}

__global__ void add_diagonal_kernel(float* a, std::int64_t m, float value) {
  for (std::int64_t i = first_index(); i < m; i += grid_stride()) {
    a[i * m + i] = __fadd_rn(a[i * m + i], value);
  }
}

__global__ void round_to_bf16_kernel(const float* src, std::uint16_t* bf16, float* rounded,
                                     std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::uint16_t h = float_to_bf16_bits(src[i]);
    bf16[i] = h;
    if (rounded != nullptr) rounded[i] = bf16_bits_to_float(h);
  }
}

}  // namespace

void launch_normalise(const double* sum_of_squares, float eps, const float* g, float* x,
                      std::int64_t n, cudaStream_t stream) {
  normalise_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sum_of_squares, eps, g, x, n);
  check_launch("normalise_kernel launch");
}

void launch_mirror_upper(float* a, std::int64_t m, cudaStream_t stream) {
  mirror_upper_kernel<<<blocks_for(m * m), kThreads, 0, stream>>>(a, m);
  check_launch("mirror_upper_kernel launch");
}

void launch_add_diagonal(float* a, std::int64_t m, float value, cudaStream_t stream) {
  add_diagonal_kernel<<<blocks_for(m), kThreads, 0, stream>>>(a, m, value);
  check_launch("add_diagonal_kernel launch");
}

void launch_round_to_bf16(const float* src, std::uint16_t* bf16, float* rounded, std::int64_t n,
                          cudaStream_t stream) {
  round_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, bf16, rounded, n);
  check_launch("round_to_bf16_kernel launch");
}

}  // namespace shardwise::cuda::detail

#include "cuda_status.hpp"
#include "float_bits.cuh"
#include "newton_schulz_kernels.hpp"
#include "shardwise/core/error.hpp"

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

__device__ float inverse_norm(const double* sum_of_squares, float eps) {
  const double norm = sqrt(*sum_of_squares);  // IEEE sqrt, as std::sqrt
  return static_cast<float>(1.0 / (norm + static_cast<double>(eps)));
}

__global__ void normalise_kernel(const double* sum_of_squares, float eps, const float* g, float* x,
                                 std::int64_t n) {
  const float inv = inverse_norm(sum_of_squares, eps);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) x[i] = __fmul_rn(g[i], inv);
}

__global__ void normalise_to_bf16_kernel(const double* sum_of_squares, float eps, const float* g,
                                         std::uint16_t* x, std::int64_t n) {
  const float inv = inverse_norm(sum_of_squares, eps);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    x[i] = float_to_bf16_bits(__fmul_rn(g[i], inv));
  }
}

// Tiles of 32 x 32 through shared memory, so both the read of the upper triangle and the write of
// the lower one are coalesced (a column-major transpose read one element per thread would stride
// by m). Block (I, J) writes the lower part of tile (I, J) from tile (J, I); tiles above the
// diagonal have nothing to do. A diagonal tile reads all of itself before writing its lower half.
constexpr int kTile = 32;
constexpr int kTileRows = 8;  // threads per block: kTile x kTileRows

template <typename T>
__global__ void mirror_upper_kernel(T* a, std::int64_t m) {
  __shared__ T tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const std::int64_t ti = blockIdx.x, tj = blockIdx.y;
  if (ti < tj) return;
  const int x = static_cast<int>(threadIdx.x);
  for (int k = static_cast<int>(threadIdx.y); k < kTile; k += kTileRows) {
    const std::int64_t row = tj * kTile + x, col = ti * kTile + k;
    if (row < m && col < m) tile[k][x] = a[row + col * m];  // tile[k][x] = a(tj*32+x, ti*32+k)
  }
  __syncthreads();
  for (int k = static_cast<int>(threadIdx.y); k < kTile; k += kTileRows) {
    const std::int64_t row = ti * kTile + x, col = tj * kTile + k;
    if (row < m && col < m && row > col) a[row + col * m] = tile[x][k];  // a(col, row)
  }
}

__global__ void add_diagonal_kernel(float* a, std::int64_t m, float value) {
  for (std::int64_t i = first_index(); i < m; i += grid_stride()) {
    a[i * m + i] = __fadd_rn(a[i * m + i], value);
  }
}

__global__ void widen_bf16_kernel(const std::uint16_t* bf16, float* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = bf16_bits_to_float(bf16[i]);
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

__device__ float load(const float* p, std::int64_t i) { return p[i]; }
__device__ float load(const std::uint16_t* p, std::int64_t i) { return bf16_bits_to_float(p[i]); }
__device__ void store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ void store(std::uint16_t* p, std::int64_t i, float v) { p[i] = float_to_bf16_bits(v); }

template <typename T>
__global__ void gram_polynomial_kernel(const float* r2, const T* r, T* p, std::int64_t m, float a,
                                       float b, float c) {
  const std::int64_t count = m * m;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    float v = __fadd_rn(__fmul_rn(c, r2[i]), __fmul_rn(b, load(r, i)));
    if (i % (m + 1) == 0) v = __fadd_rn(v, a);
    store(p, i, v);
  }
}

template <typename T>
void mirror_upper(T* a, std::int64_t m, cudaStream_t stream) {
  const std::int64_t tiles = (m + kTile - 1) / kTile;
  if (tiles > 65535) {  // gridDim.y's limit; an m x m matrix that size needs > 8 TB anyway
    throw CudaError(str_cat("mirror_upper_kernel: a ", m, " x ", m, " matrix is too large"));
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(tiles));
  mirror_upper_kernel<T><<<grid, dim3(kTile, kTileRows), 0, stream>>>(a, m);
  check_launch("mirror_upper_kernel launch");
}

}  // namespace

void launch_normalise(const double* sum_of_squares, float eps, const float* g, float* x,
                      std::int64_t n, cudaStream_t stream) {
  normalise_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sum_of_squares, eps, g, x, n);
  check_launch("normalise_kernel launch");
}

void launch_normalise_to_bf16(const double* sum_of_squares, float eps, const float* g,
                              std::uint16_t* x, std::int64_t n, cudaStream_t stream) {
  normalise_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sum_of_squares, eps, g, x, n);
  check_launch("normalise_to_bf16_kernel launch");
}

void launch_mirror_upper(float* a, std::int64_t m, cudaStream_t stream) {
  mirror_upper(a, m, stream);
}
void launch_mirror_upper(std::uint16_t* a, std::int64_t m, cudaStream_t stream) {
  mirror_upper(a, m, stream);
}

void launch_add_diagonal(float* a, std::int64_t m, float value, cudaStream_t stream) {
  add_diagonal_kernel<<<blocks_for(m), kThreads, 0, stream>>>(a, m, value);
  check_launch("add_diagonal_kernel launch");
}

void launch_widen_bf16(const std::uint16_t* bf16, float* out, std::int64_t n, cudaStream_t stream) {
  widen_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(bf16, out, n);
  check_launch("widen_bf16_kernel launch");
}

void launch_round_to_bf16(const float* src, std::uint16_t* bf16, float* rounded, std::int64_t n,
                          cudaStream_t stream) {
  round_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, bf16, rounded, n);
  check_launch("round_to_bf16_kernel launch");
}

void launch_gram_polynomial(const float* r2, const float* r, float* p, std::int64_t m, float a,
                            float b, float c, cudaStream_t stream) {
  gram_polynomial_kernel<<<blocks_for(m * m), kThreads, 0, stream>>>(r2, r, p, m, a, b, c);
  check_launch("gram_polynomial_kernel launch");
}

void launch_gram_polynomial(const float* r2, const std::uint16_t* r, std::uint16_t* p,
                            std::int64_t m, float a, float b, float c, cudaStream_t stream) {
  gram_polynomial_kernel<<<blocks_for(m * m), kThreads, 0, stream>>>(r2, r, p, m, a, b, c);
  check_launch("gram_polynomial_kernel launch");
}

}  // namespace shardwise::cuda::detail

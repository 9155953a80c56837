// Muon's Newton–Schulz orthogonalization on an NVIDIA GPU with cuBLAS: the iteration of
// optim::NewtonSchulz (same options, every coefficient set of optim::ns_coefficients, the same
// normalisation X = G / (||G||_F + eps) with the norm's square summed in fp64, the same short-side
// view so a tall matrix is never transposed in memory, the same bf16 rounding points).
//
// GEMM precision:
//   kFp32, allow_tf32 = false  fp32 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32)
//   kFp32, allow_tf32 = true   inputs rounded to TF32 by the tensor cores, fp32 accumulation
//                              (CUBLAS_COMPUTE_32F_FAST_TF32; SYRK under
//                              CUBLAS_TF32_TENSOR_OP_MATH)
//   kBf16                      bf16 inputs, fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F),
//                              rounded where optim::NewtonSchulz rounds: X, A = X X^T, and the
//                              polynomial B before B X; a X stays an fp32 term
// Symmetric products (X X^T, A A): with options.use_syrk, cublasSsyrk for fp32/TF32 (half the
// flops; the other triangle is mirrored by a kernel). cuBLAS has no real bf16 SYRK, so bf16
// always forms them as GEMMs writing both triangles.
//
// No CUDA headers: pointers are device memory, the stream an opaque cudaStream_t.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "shardwise/optim/newton_schulz.hpp"

namespace shardwise::cuda {

namespace detail {
struct NewtonSchulzWorkspace;  // cuBLAS handle and device buffers (newton_schulz_cuda.cpp)
}

class NewtonSchulzCuda {
 public:
  // Creates the cuBLAS handle bound to `stream`; throws CudaError when that fails (e.g. no GPU).
  explicit NewtonSchulzCuda(optim::NewtonSchulzOptions options = {}, bool allow_tf32 = false,
                            void* stream = nullptr);
  ~NewtonSchulzCuda();
  NewtonSchulzCuda(const NewtonSchulzCuda&) = delete;
  NewtonSchulzCuda& operator=(const NewtonSchulzCuda&) = delete;

  // out = NS(g) for the rows x cols row-major fp32 matrix g (device memory; out may alias g).
  // Asynchronous on the stream; the workspace grows to the largest matrix seen and is kept.
  // Throws ShapeError for a matrix cuBLAS's 32-bit sizes cannot hold, CudaError naming the
  // failing CUDA or cuBLAS call.
  void orthogonalize(const float* g, std::int64_t rows, std::int64_t cols, float* out);

  // Row blocks orthogonalized independently (a fused QKV weight), as optim::NewtonSchulz.
  void orthogonalize_row_blocks(const float* g, std::int64_t rows, std::int64_t cols,
                                std::span<const std::int64_t> row_split, float* out);

  const optim::NewtonSchulzOptions& options() const { return options_; }
  bool allow_tf32() const { return allow_tf32_; }

 private:
  optim::NewtonSchulzOptions options_;
  bool allow_tf32_;
  void* stream_;
  std::unique_ptr<detail::NewtonSchulzWorkspace> workspace_;
};

}  // namespace shardwise::cuda

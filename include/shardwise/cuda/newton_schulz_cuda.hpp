// Muon's Newton–Schulz orthogonalization on an NVIDIA GPU with cuBLAS: the iteration of
// optim::NewtonSchulz (same options, every coefficient set of optim::ns_coefficients, the standard
// and the Gram algorithm with the CPU's restart schedule (TF32 restarts by bf16's limit), the same
// normalisation X = G / (||G||_F + eps) with the norm's square summed in fp64, the same short-side
// view so a tall matrix is never transposed in memory, the same bf16 rounding points).
//
// GEMM precision:
//   kFp32, allow_tf32 = false  fp32 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32)
//   kFp32, allow_tf32 = true   inputs rounded to TF32 by the tensor cores, fp32 accumulation
//                              (CUBLAS_COMPUTE_32F_FAST_TF32; cublasSsyrk has no tensor
//                              cores, so TF32 never takes the SYRK route)
//   kBf16                      bf16 inputs and outputs, fp32 accumulation (CUBLAS_COMPUTE_32F):
//                              X, A = X X^T and the polynomial B are kept in bf16, each rounded
//                              once by cuBLAS from its fp32 accumulation, which is where
//                              optim::NewtonSchulz rounds them; a X is added exactly (as the
//                              GEMM's C) before the next X is rounded; the result is fp32
// Symmetric products (X X^T, A A): with options.use_syrk, half the flops through one of two
// routes (NewtonSchulzCudaTuning): cublasSsyrk on fp32 CUDA cores, GEMMs on the upper triangle's
// blocks on the tensor cores (TF32, bf16), where cuBLAS's SYRK has none; either way a kernel
// mirrors the other triangle. Without use_syrk, one GEMM writes both triangles.
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

// When the symmetric products take which route (use_syrk only). The defaults were the faster on
// an H200 for Llama-sized matrices; tests lower them to reach every route with small matrices.
struct NewtonSchulzCudaTuning {
  // fp32 without TF32: cublasSsyrk from this short side up; below it a plain GEMM was faster.
  int syrk_min_side = 2048;
  // Otherwise: the diagonal halved while blocks keep at least min_block rows, at most max_levels
  // times (a plain GEMM when not even once).
  int min_block = 1024;
  int max_levels = 3;
};

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
  void set_tuning(NewtonSchulzCudaTuning tuning) { tuning_ = tuning; }
  const NewtonSchulzCudaTuning& tuning() const { return tuning_; }

 private:
  optim::NewtonSchulzOptions options_;
  bool allow_tf32_;
  NewtonSchulzCudaTuning tuning_;
  void* stream_;
  std::unique_ptr<detail::NewtonSchulzWorkspace> workspace_;
};

}  // namespace shardwise::cuda

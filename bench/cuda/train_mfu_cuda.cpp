// Training-step throughput of the device GPT (GptModelCuda) on a GPT-2-small-sized model: 12
// layers, hidden 768, 12 heads, ffn 3072, sequence 1024, vocabulary 50304, learned positions,
// tied embeddings, bf16 GEMM inputs with fp32 accumulation. One step is forward + backward of one
// micro-batch (no optimizer). Model FLOPs are counted as bench/train_throughput.cpp counts them
// (gpt_model_flops_per_token). The limit is cuBLAS's bf16 GEMM rate (bf16 inputs, fp32 output
// and accumulation, as the model's products) on an 8192 x 8192 x 8192 product measured in the
// same run. Prints
//   bench: train_mfu_cuda ours=<model TFLOP/s> limit=<cuBLAS bf16 TFLOP/s> unit=TF/s ratio=<r>
// and the tokens per second. Usage: bench_train_mfu_cuda [micro_batch=8] [steps=5] [precision];
// exits 0 without a GPU (prints why).
#include <cublas_v2.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cuda_bench_support.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/gpt_model_cuda.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace {

using shardwise::cuda::DeviceBuffer;
using shardwise::cuda::bench::check;

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench: %s failed: %s\n", what, cublasGetStatusString(status));
    std::exit(1);
  }
}

// TFLOP/s of cuBLAS on an m x m x m product with bf16 inputs and fp32 output.
double bf16_gemm_tflops(int m, int iters) {
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  const auto mm = static_cast<std::size_t>(m) * m;
  std::vector<std::uint16_t> halves(mm);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  // Random bf16 values (2^-7 <= |v| < 2^-6): tensor cores run faster on zeros than on real data.
  for (std::uint16_t& v : halves) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<std::uint16_t>(0x3c00u | ((state >> 40) & 0x807fu));
  }
  DeviceBuffer a(mm * 2), b(mm * 2), c(mm * 4);
  shardwise::cuda::copy_to_device(a.data(), halves.data(), mm * 2);
  shardwise::cuda::copy_to_device(b.data(), halves.data(), mm * 2);
  const float one = 1.0f, zero = 0.0f;
  const double seconds = shardwise::cuda::bench::time_gpu(iters, [&] {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.data(),
                              CUDA_R_16BF, m, b.data(), CUDA_R_16BF, m, &zero, c.data(), CUDA_R_32F,
                              m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  cublasDestroy(handle);
  return 2.0 * m * static_cast<double>(m) * m / seconds * 1e-12;
}

shardwise::GptConfig gpt2_small() {
  shardwise::GptConfig c;
  c.vocab_size = 50304;
  c.seq_len = 1024;
  c.num_layers = 12;
  c.hidden = 768;
  c.num_heads = 12;
  c.ffn_hidden = 3072;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int micro_batch = argc > 1 ? std::atoi(argv[1]) : 8;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string precision = argc > 3 ? argv[3] : "bf16";
  if (!shardwise::cuda::gpu_available()) {
    std::printf("bench_train_mfu_cuda: no CUDA device, nothing measured\n");
    return 0;
  }
  try {
    shardwise::cuda::bench::print_device();
    const shardwise::GptConfig config = gpt2_small();
    shardwise::cuda::GptCudaOptions options;
    options.precision = shardwise::cuda::parse_gemm_precision(precision);
    shardwise::cuda::GptModelCuda model(config, options);
    std::int64_t total = 0;
    std::vector<std::int64_t> offsets;
    for (const shardwise::ParamInfo& p : model.params()) {
      offsets.push_back(total);
      total += (p.numel() + 63) / 64 * 64;
    }
    DeviceBuffer values(static_cast<std::size_t>(total) * 4),
        grads(static_cast<std::size_t>(total) * 4);
    check(cudaMemset(grads.data(), 0, static_cast<std::size_t>(total) * 4), "cudaMemset");
    std::vector<float*> value_views, grad_views;
    for (std::int64_t o : offsets) {
      value_views.push_back(values.as<float>() + o);
      grad_views.push_back(grads.as<float>() + o);
    }
    model.bind(value_views, grad_views);
    model.init_parameters(1234);
    const int seq = config.seq_len;
    const auto n = static_cast<std::size_t>(micro_batch) * seq;
    std::vector<std::int32_t> tokens(n), targets(n);
    std::uint64_t state = 42;
    for (std::size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      tokens[i] =
          static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(config.vocab_size));
    }
    for (std::size_t i = 0; i < n; ++i) targets[i] = (i + 1) % seq == 0 ? -1 : tokens[i + 1];
    double loss = 0, forward_seconds = 0;
    auto step = [&] {
      // The forward share is timed from an idle device: without this sync it would include the
      // tail of the previous backward, which forward's final sync waits for.
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const auto t0 = std::chrono::steady_clock::now();
      loss = model.forward(tokens.data(), targets.data(), micro_batch, seq);  // ends in a sync
      forward_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      model.backward(1.0, nullptr);
    };
    step();  // warm-up: allocations, cuBLAS heuristics
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    forward_seconds = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) step();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
    const double tokens_per_s = static_cast<double>(n) / seconds;
    const double ours =
        shardwise::cuda::gpt_model_flops_per_token(config, seq) * tokens_per_s * 1e-12;
    const double limit = bf16_gemm_tflops(8192, 10);
    std::printf(
        "train_mfu_cuda: %s, micro-batch %d x %d, %.1f ms/step (forward %.1f ms), %.0f tokens/s, "
        "loss %.4f\n",
        precision.c_str(), micro_batch, seq, seconds * 1e3, forward_seconds / steps * 1e3,
        tokens_per_s, loss);
    shardwise::cuda::bench::print_figure("train_mfu_cuda", ours, limit, "TF/s");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_mfu_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}

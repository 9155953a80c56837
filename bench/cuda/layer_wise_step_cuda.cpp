// The whole optimizer step of one Llama-3-8B layer's params (hidden 4096, FFN 14336, 32 heads /
// 8 KV heads: fused QKV 6144x4096 split Q/K/V, proj 4096x4096, fc1 28672x4096 (gate + up),
// fc2 4096x14336, two RMSNorm weights) on the device at dp = 1: device DDP buffers, the
// layer-wise chain (Muon with fp32 Newton–Schulz, TF32 off; AdamW for the norms), grad norm and
// clipping, and the param all-gather, as cuda::make_device_layer_wise builds them. Against the sum
// of its lower bounds measured in the same run: cuBLAS running Newton–Schulz's GEMMs
// (5 quintic steps of X Xᵀ, A A, P X per matrix or QKV part, fp32) and AdamW's bytes (28 per
// element) at the device-to-device copy bandwidth. Prints
//   bench: layer_wise_step_cuda ours=<steps/s> limit=<steps/s> unit=step/s ratio=<ours/limit>
// Usage: bench_layer_wise_step_cuda [iters=5]; exits 0 without a GPU (prints why).
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <vector>

#include "cuda_bench_support.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/device_data_parallel.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace {

using namespace shardwise;
using cuda::DeviceBuffer;
using cuda::bench::check;
using cuda::bench::time_gpu;

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench: %s failed: status %d\n", what, static_cast<int>(status));
    std::exit(1);
  }
}

// Layer 0 of a Llama-3-8B-shaped model (the embedding and output layer left out).
ParamList llama3_8b_layer() {
  TransformerConfig c;
  c.name = "llama3-8b-layer";
  c.num_layers = 1;
  c.hidden_size = 4096;
  c.ffn_hidden_size = 14336;
  c.num_attention_heads = 32;
  c.num_query_groups = 8;
  c.vocab_size = 128;
  c.dtype = DType::kFloat32;
  ParamList layer;
  for (const ParamInfo& p : generate_transformer_params(c)) {
    if (p.name.rfind("layers.0.", 0) == 0) layer.push_back(p);
  }
  return layer;
}

// Seconds for 5 quintic steps of cuBLAS GEMMs on an m x n matrix (m <= n), fp32, TF32 off.
double newton_schulz_gemm_seconds(cublasHandle_t handle, std::int64_t m64, std::int64_t n64,
                                  int iters) {
  const int m = static_cast<int>(m64), n = static_cast<int>(n64);
  DeviceBuffer x(static_cast<std::size_t>(m64 * n64) * 4),
      a(static_cast<std::size_t>(m64 * m64) * 4);
  DeviceBuffer gram(a.bytes()), poly(a.bytes()), y(x.bytes());
  check(cudaMemset(x.data(), 0x3c, x.bytes()), "cudaMemset");
  check(cudaMemset(a.data(), 0x3c, a.bytes()), "cudaMemset");
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int rows, int cols, int depth,
                  const void* pa, int lda, const void* pb, int ldb, void* pc, int ldc) {
    check_cublas(
        cublasGemmEx(handle, ta, tb, rows, cols, depth, &one, pa, CUDA_R_32F, lda, pb, CUDA_R_32F,
                     ldb, &zero, pc, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  };
  return time_gpu(
      iters,
      [&] {
        for (int s = 0; s < 5; ++s) {
          gemm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, x.data(), n, x.data(), n, gram.data(), m);
          gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, a.data(), m, a.data(), m, poly.data(), m);
          gemm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, x.data(), n, a.data(), m, y.data(), n);
        }
      },
      1);
}

double copy_bytes_per_second(int iters) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceBuffer from(bytes), to(bytes);
  check(cudaMemset(from.data(), 1, bytes), "cudaMemset");
  const double s = time_gpu(iters, [&] {
    check(cudaMemcpyAsync(to.data(), from.data(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
  });
  return 2.0 * static_cast<double>(bytes) / s;  // read + write
}

// The lower bound of one step: NS GEMMs of every Muon matrix (per QKV part) + AdamW's bytes.
double lower_bound_seconds(const ParamList& params, const optim::MuonOptions& muon, int iters) {
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  double ns = 0.0;
  std::int64_t adamw_elements = 0;
  for (const ParamInfo& p : params) {
    if (!is_managed_by_layer_wise_optimizer(p)) {
      adamw_elements += p.numel();
      continue;
    }
    std::vector<std::int64_t> parts = {p.shape[0]};
    if (muon.split_qkv && !p.qkv_split.empty()) parts = p.qkv_split;
    for (std::int64_t rows : parts) {
      ns += newton_schulz_gemm_seconds(handle, std::min(rows, p.shape[1]),
                                       std::max(rows, p.shape[1]), iters);
    }
  }
  cublasDestroy(handle);
  const double adamw = 28.0 * static_cast<double>(adamw_elements) / copy_bytes_per_second(iters);
  std::printf("lower bounds: Newton-Schulz GEMMs %.2f ms, AdamW bytes %.4f ms\n", ns * 1e3,
              adamw * 1e3);
  return ns + adamw;
}

void fill(const TensorView& v, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> host(static_cast<std::size_t>(v.numel));
  for (float& x : host) x = normal(rng);
  cuda::copy_to_device(v.data, host.data(), v.nbytes());
}

void run(int iters) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParamList params = llama3_8b_layer();
  std::int64_t total = 0;
  for (const ParamInfo& p : params) total += p.numel();
  DistributedDataParallelConfig config;
  config.use_distributed_optimizer = true;
  const LayoutOptions options = config.layout_options(LayoutAlgorithm::kLayerWise, 1, 1);
  FullParamLayout layout = compute_full_param_layout(params, options);
  validate_full_layout(params, layout, options);
  optim::MuonOptions muon;
  cuda::DeviceDataParallel dp = cuda::make_device_layer_wise(
      params, std::move(layout), config, DataParallelGroups{world, nullptr}, world, 0, muon, {});
  dp.optimizer->set_step_options({1.0, false});
  for (ParamId id = 0; id < params.size(); ++id) {
    fill(dp.ddp->param(id), static_cast<std::uint32_t>(id));
    fill(dp.ddp->main_grad(id), static_cast<std::uint32_t>(1000 + id));
  }
  for (ParamId id = params.size(); id-- > 0;) dp.ddp->register_grad_ready(id);
  dp.ddp->finish_grad_sync();

  const auto step = [&] {
    dp.optimizer->step();
    cuda::synchronize();
  };
  step();  // warm-up: workspaces, cuBLAS
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) step();
  const double ours =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  const double bound = lower_bound_seconds(params, muon, iters);
  std::printf("one layer, %lld params: step %.2f ms, lower bound %.2f ms\n",
              static_cast<long long>(total), ours * 1e3, bound * 1e3);
  cuda::bench::print_figure("layer_wise_step_cuda", 1.0 / ours, 1.0 / bound, "step/s");
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 5;
  if (!shardwise::cuda::gpu_available()) {
    std::printf("bench_layer_wise_step_cuda: no CUDA device, nothing measured\n");
    return 0;
  }
  try {
    shardwise::cuda::bench::print_device();
    run(iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_layer_wise_step_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}

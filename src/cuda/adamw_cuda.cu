// The fused AdamW kernel. Each thread updates 4 consecutive elements with 16-byte loads and
// stores of the fp32 arrays (8-byte ones for 16-bit grads / model params) when every pointer is
// aligned for it; otherwise, and for the last numel % 4 elements, one element per thread. The
// kernel is bound by memory traffic (24 bytes of fp32 state read and written per element plus the
// grad and the model copy), so wide accesses are what matters.
//
// Bits: the arithmetic is adamw_update's scalar loop (src/optim/adamw_kernels.cpp) written with
// explicit round-to-nearest intrinsics (__fmul_rn, __fadd_rn, __fsqrt_rn, __fdiv_rn), which nvcc
// never contracts into FMAs, in the same order. IEEE-754 fixes the result of each of them, so
// the GPU's bits equal the CPU's (denormals are kept: this file is not built with fast math).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda_status.hpp"
#include "float_bits.cuh"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/adamw_cuda.hpp"

namespace shardwise::cuda {
namespace {

using optim::AdamWStepScalars;

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
constexpr int kVector = 4;

// Element types: fp32, bf16 or fp16 storage, or no model copy at all.
struct F32 {
  using Storage = float;
  using Vec4 = float4;
  __device__ static float widen(float x) { return x; }
  __device__ static float narrow(float x) { return x; }
};
struct BF16 {
  using Storage = std::uint16_t;
  using Vec4 = ushort4;
  __device__ static float widen(std::uint16_t x) { return detail::bf16_bits_to_float(x); }
  __device__ static std::uint16_t narrow(float x) { return detail::float_to_bf16_bits(x); }
};
struct F16 {
  using Storage = std::uint16_t;
  using Vec4 = ushort4;
  __device__ static float widen(std::uint16_t x) { return detail::fp16_bits_to_float(x); }
  __device__ static std::uint16_t narrow(float x) { return detail::float_to_fp16_bits(x); }
};
struct NoCopy {
  using Storage = void;
};

// adamw_update's scalar loop for one element: returns the new param, updates m and v.
__device__ __forceinline__ float adamw_element(const AdamWStepScalars& s, float p, float g,
                                               float& m, float& v) {
  const float mi = __fadd_rn(__fmul_rn(s.beta1, m), __fmul_rn(s.one_minus_beta1, g));
  const float vi = __fadd_rn(__fmul_rn(s.beta2, v), __fmul_rn(s.one_minus_beta2, __fmul_rn(g, g)));
  m = mi;
  v = vi;
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), s.inv_sqrt_bias2), s.eps);
  return __fsub_rn(__fmul_rn(p, s.decay), __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
}

template <typename Grad, typename Model>
struct Operands {
  float* p;
  const typename Grad::Storage* g;
  float* m;
  float* v;
  typename Model::Storage* out;
};

// Elements [begin, end), one per thread.
template <typename Grad, typename Model>
__global__ void adamw_scalar_kernel(AdamWStepScalars s, Operands<Grad, Model> x, std::int64_t begin,
                                    std::int64_t end) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = begin + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < end; i += stride) {
    float m = x.m[i], v = x.v[i];
    const float p = adamw_element(s, x.p[i], Grad::widen(x.g[i]), m, v);
    x.p[i] = p;
    x.m[i] = m;
    x.v[i] = v;
    if constexpr (!std::is_void_v<typename Model::Storage>) x.out[i] = Model::narrow(p);
  }
}

template <typename T>
__device__ __forceinline__ void unpack(const T& q, float (&f)[4]) {
  f[0] = q.x, f[1] = q.y, f[2] = q.z, f[3] = q.w;
}

// Groups [0, groups) of 4 elements, one group per thread; every pointer is aligned for it.
template <typename Grad, typename Model>
__global__ void adamw_vector_kernel(AdamWStepScalars s, Operands<Grad, Model> x,
                                    std::int64_t groups) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       q < groups; q += stride) {
    float p[4], m[4], v[4], g[4];
    unpack(reinterpret_cast<const float4*>(x.p)[q], p);
    unpack(reinterpret_cast<const float4*>(x.m)[q], m);
    unpack(reinterpret_cast<const float4*>(x.v)[q], v);
    const auto gq = reinterpret_cast<const typename Grad::Vec4*>(x.g)[q];
    g[0] = Grad::widen(gq.x), g[1] = Grad::widen(gq.y), g[2] = Grad::widen(gq.z),
    g[3] = Grad::widen(gq.w);
    for (int k = 0; k < kVector; ++k) p[k] = adamw_element(s, p[k], g[k], m[k], v[k]);
    reinterpret_cast<float4*>(x.p)[q] = make_float4(p[0], p[1], p[2], p[3]);
    reinterpret_cast<float4*>(x.m)[q] = make_float4(m[0], m[1], m[2], m[3]);
    reinterpret_cast<float4*>(x.v)[q] = make_float4(v[0], v[1], v[2], v[3]);
    if constexpr (!std::is_void_v<typename Model::Storage>) {
      typename Model::Vec4 out;
      out.x = Model::narrow(p[0]), out.y = Model::narrow(p[1]), out.z = Model::narrow(p[2]),
      out.w = Model::narrow(p[3]);
      reinterpret_cast<typename Model::Vec4*>(x.out)[q] = out;
    }
  }
}

bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

int blocks_for(std::int64_t items) {
  const std::int64_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <typename Grad, typename Model>
void launch(const AdamWStepScalars& s, const AdamWDeviceTensors& t, cudaStream_t stream) {
  using GradStorage = typename Grad::Storage;
  using ModelStorage = typename Model::Storage;
  const Operands<Grad, Model> x{t.param, static_cast<const GradStorage*>(t.grad), t.exp_avg,
                                t.exp_avg_sq, static_cast<ModelStorage*>(t.model_param)};
  bool vector = aligned(t.param, 16) && aligned(t.exp_avg, 16) && aligned(t.exp_avg_sq, 16) &&
                aligned(t.grad, kVector * sizeof(GradStorage));
  if constexpr (!std::is_void_v<ModelStorage>) {
    vector = vector && aligned(t.model_param, kVector * sizeof(ModelStorage));
  }
  const std::int64_t groups = vector ? t.numel / kVector : 0;
  if (groups > 0) {
    adamw_vector_kernel<Grad, Model><<<blocks_for(groups), kThreads, 0, stream>>>(s, x, groups);
    detail::check_launch("adamw_vector_kernel launch");
  }
  const std::int64_t first = groups * kVector;
  if (first < t.numel) {
    adamw_scalar_kernel<Grad, Model>
        <<<blocks_for(t.numel - first), kThreads, 0, stream>>>(s, x, first, t.numel);
    detail::check_launch("adamw_scalar_kernel launch");
  }
}

template <typename Grad>
void launch_for_model(const AdamWStepScalars& s, const AdamWDeviceTensors& t, cudaStream_t stream) {
  if (t.model_param == nullptr) return launch<Grad, NoCopy>(s, t, stream);
  switch (t.model_dtype) {
    case DType::kFloat32:
      return launch<Grad, F32>(s, t, stream);
    case DType::kBFloat16:
      return launch<Grad, BF16>(s, t, stream);
    case DType::kFloat16:
      return launch<Grad, F16>(s, t, stream);
    default:
      throw InvalidArgument(str_cat("adamw_update_device: model param dtype ",
                                    dtype_name(t.model_dtype), " (expected fp32, bf16 or fp16)"));
  }
}

}  // namespace

void adamw_update_device(const AdamWStepScalars& scalars, const AdamWDeviceTensors& t,
                         void* stream) {
  SW_REQUIRE(t.numel >= 0, InvalidArgument, "adamw_update_device: numel ", t.numel);
  if (t.numel == 0) return;
  SW_REQUIRE(
      t.param != nullptr && t.grad != nullptr && t.exp_avg != nullptr && t.exp_avg_sq != nullptr,
      InvalidArgument, "adamw_update_device: param, grad, exp_avg and exp_avg_sq are needed");
  const cudaStream_t s = detail::as_stream(stream);
  switch (t.grad_dtype) {
    case DType::kFloat32:
      return launch_for_model<F32>(scalars, t, s);
    case DType::kBFloat16:
      return launch_for_model<BF16>(scalars, t, s);
    case DType::kFloat16:
      return launch_for_model<F16>(scalars, t, s);
    default:
      throw InvalidArgument(str_cat("adamw_update_device: grad dtype ", dtype_name(t.grad_dtype),
                                    " (expected fp32, bf16 or fp16)"));
  }
}

}  // namespace shardwise::cuda

// MXFP8 kernels for NVIDIA GPUs. Two shapes of each kernel:
//  - vectorised (cols % 32 == 0 and 16-byte aligned pointers, the common case): a thread owns 8
//    consecutive elements (one or two 16-byte loads, one 8-byte store of E4M3 codes), 4 threads
//    own a block of 32 and combine their amax with two shuffles;
//  - general (partial last blocks, odd alignment): quantize runs one warp per block of 32 (lane i
//    holds element i; the amax is one warp max-reduction), dequantize one thread per element.
// A thread that loads 2 bytes and stores 1 leaves most of HBM's bandwidth unused, hence the first.
//
// The kernels are bound by instructions, not bytes, once the loads are wide, so the narrowing
// conversions use the hardware (two elements per cvt: fp32 -> E4M3 with round-to-nearest-even and
// saturation at 448, fp32 -> bf16 / fp16 round-to-nearest-even). They agree with the CPU
// codec (core/fp8.hpp, src/core/mxfp8_kernels.cpp) bit for bit on every number; NaN and Inf,
// where the hardware spells results its own way, are patched to the CPU's bits; the vectorised
// kernels skip that patching for groups that hold no NaN or Inf (nearly all of them). Products
// are __fmul_rn (no flush-to-zero, no contraction). README "MXFP8 on the GPU" has the H200 figures.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_status.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace shardwise::cuda {
namespace {

using detail::check_cuda;

// The format's constants come from the CPU codec's headers (core/fp8.hpp, core/mxfp8.hpp).
constexpr int kBlock = static_cast<int>(kMxfp8BlockSize);
constexpr int kWarpsPerCta = 8;
constexpr int kThreadsPerCta = kBlock * kWarpsPerCta;
constexpr std::int64_t kMaxCtas = 1 << 16;  // grid-stride loops cover the rest

constexpr std::uint32_t kAbsMask = fp8_detail::kF32AbsMask;
constexpr std::uint32_t kInfBits = fp8_detail::kF32Inf;
constexpr std::uint32_t kRebias = fp8_detail::kExponentRebias;  // E4M3 bias 7 -> fp32's 127
constexpr std::uint32_t kQuietNaN = 0x7fc00000u;
constexpr std::uint32_t kE4M3NaNCode = kE4M3NaN;  // magnitude 0x7F; the sign bit is separate
constexpr std::uint32_t kE8M0NaNCode = kE8M0NaN;

// --- element conversions ------------------------------------------------------------------------

// Eight 16-bit values in one 16-byte vector, element 2k in the low half of word k.
__device__ __forceinline__ void load_halves8(const std::uint16_t* p, std::uint32_t (&half)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
  for (int k = 0; k < 4; ++k) {
    half[2 * k] = words[k] & 0xffffu;
    half[2 * k + 1] = words[k] >> 16;
  }
}

// Each input reads one element as fp32 (general kernel) or the fp32 bits of 8 consecutive
// elements from a 16-byte aligned address (vectorised kernel).
struct Bf16Input {
  const std::uint16_t* p;
  __device__ float operator()(std::int64_t i) const {
    return __uint_as_float(static_cast<std::uint32_t>(p[i]) << 16);
  }
  __device__ void load8(std::int64_t i, std::uint32_t (&bits)[8]) const {
    load_halves8(p + i, bits);
    for (auto& b : bits) b <<= 16;
  }
};

struct F16Input {
  const std::uint16_t* p;
  __device__ float operator()(std::int64_t i) const { return __half2float(__ushort_as_half(p[i])); }
  __device__ void load8(std::int64_t i, std::uint32_t (&bits)[8]) const {
    load_halves8(p + i, bits);
    for (auto& b : bits) {
      b = __float_as_uint(__half2float(__ushort_as_half(static_cast<unsigned short>(b))));
    }
  }
};

struct F32Input {
  const float* p;
  __device__ float operator()(std::int64_t i) const { return p[i]; }
  __device__ void load8(std::int64_t i, std::uint32_t (&bits)[8]) const {
    const uint4 lo = *reinterpret_cast<const uint4*>(p + i);
    const uint4 hi = *reinterpret_cast<const uint4*>(p + i + 4);
    const std::uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    for (int k = 0; k < 8; ++k) bits[k] = words[k];
  }
};

// The block scale as a biased E8M0 exponent for a finite amax (fp32 bits), as
// scale_biased_exponent in mxfp8_kernels.cpp: ceil rule, the smallest 2^e with
// amax <= 448 * 2^e; floor rule (OCP), e = floor(log2(amax)) - 8.
template <bool kFloor>
__device__ __forceinline__ std::uint32_t scale_biased_exponent(std::uint32_t amax) {
  int biased = static_cast<int>(amax >> 23) - 8;
  if (!kFloor) biased += (amax & 0x7fffffu) > 0x600000u ? 1 : 0;
  biased = biased < 0 ? 0 : (biased > 254 ? 254 : biased);
  return static_cast<std::uint32_t>(biased);
}

// Floor rule: a block holding NaN or Inf gets the NaN scale and every element the E4M3 NaN.
__device__ __forceinline__ std::uint32_t nan_code(std::uint32_t u) {
  return ((u >> 24) & 0x80u) | kE4M3NaNCode;
}

__device__ __forceinline__ float inverse_of_scale(std::uint32_t biased) {
  return __uint_as_float((254u - biased) << 23);
}

// Two elements (fp32 bits) -> two E4M3 codes, element 0 in the low byte, signs kept. NaN and Inf
// elements become the E4M3 NaN (0x7F with the sign); the hardware would saturate Inf to 448.
__device__ __forceinline__ std::uint32_t encode_e4m3_pair(std::uint32_t u0, std::uint32_t u1,
                                                          float inverse_scale) {
  const std::uint32_t abs0 = u0 & kAbsMask, abs1 = u1 & kAbsMask;
  const float2 scaled = make_float2(__fmul_rn(__uint_as_float(abs0), inverse_scale),
                                    __fmul_rn(__uint_as_float(abs1), inverse_scale));
  std::uint32_t codes = __nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, __NV_E4M3);
  codes |= (abs0 >= kInfBits ? kE4M3NaNCode : 0u) | (abs1 >= kInfBits ? kE4M3NaNCode << 8 : 0u);
  return codes | ((u0 >> 24) & 0x80u) | ((u1 >> 16) & 0x8000u);
}

// The same for two finite elements: the hardware conversion keeps the sign (-0 becomes 0x80).
__device__ __forceinline__ std::uint32_t encode_finite_e4m3_pair(std::uint32_t u0, std::uint32_t u1,
                                                                 float inverse_scale) {
  const float2 scaled = make_float2(__fmul_rn(__uint_as_float(u0), inverse_scale),
                                    __fmul_rn(__uint_as_float(u1), inverse_scale));
  return __nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float e8m0_to_float(std::uint32_t e) {
  std::uint32_t bits = e << 23;
  bits = e == 0 ? 0x00400000u : bits;
  bits = e == kE8M0NaNCode ? kQuietNaN : bits;
  return __uint_as_float(bits);
}

// A NaN result as the CPU codec makes it: the quiet NaN with the E4M3 code's sign.
__device__ __forceinline__ float scaled_or_nan(float product, std::uint32_t code, std::uint32_t e) {
  const bool nan = e == kE8M0NaNCode || (code & 0x7fu) == kE4M3NaNCode;
  return nan ? __uint_as_float(kQuietNaN | ((code & 0x80u) << 24)) : product;
}

// E4M3 code -> fp32 by integer arithmetic. NaN codes are patched by scaled_or_nan.
__device__ __forceinline__ float e4m3_to_float(std::uint32_t code) {
  const std::uint32_t abs = code & 0x7fu;
  const std::uint32_t normal = (abs << 20) + kRebias;
  const float subnormal = __fmul_rn(static_cast<float>(abs & 7u), 0.001953125f);  // m * 2^-9
  const std::uint32_t bits = abs < 8u ? __float_as_uint(subnormal) : normal;
  return __uint_as_float(((code & 0x80u) << 24) | bits);
}

// Two E4M3 codes (element 0 in the low byte) times 2^(e - 127), in fp32. The codes are decoded
// by the hardware (E4M3 -> fp16 -> fp32, both exact) or by integer arithmetic: on an H200 the
// first is faster when the results are narrowed to 16 bits again (0.73 vs 0.56 of a copy for
// bf16) and the second when they are stored as fp32 (0.94 vs 0.82), so each output picks one.
template <bool kHardwareDecode, bool kMayBeNaN = true>
__device__ __forceinline__ float2 dequantize_pair(std::uint32_t codes, std::uint32_t e) {
  const float scale = e8m0_to_float(e);
  const std::uint32_t c0 = codes & 0xffu, c1 = (codes >> 8) & 0xffu;
  float2 values;
  if constexpr (kHardwareDecode) {
    values = __half22float2(
        __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3)));
  } else {
    values = make_float2(e4m3_to_float(c0), e4m3_to_float(c1));
  }
  if constexpr (!kMayBeNaN) {
    return make_float2(__fmul_rn(values.x, scale), __fmul_rn(values.y, scale));
  }
  return make_float2(scaled_or_nan(__fmul_rn(values.x, scale), c0, e),
                     scaled_or_nan(__fmul_rn(values.y, scale), c1, e));
}

// Whether any of the four E4M3 codes in `word` is a NaN (magnitude 0x7F): adding 1 to each
// magnitude carries into bit 7 of that byte only for 0x7F.
__device__ __forceinline__ bool has_nan_code(std::uint32_t word) {
  return (((word & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u) != 0;
}

// fp32 pairs -> bf16 / fp16 pairs (element 0 in the low half), round to nearest even; NaN keeps
// its sign and top payload bits as the CPU's float_to_bf16 / float_to_fp16 do.
template <bool kMayBeNaN = true>
__device__ __forceinline__ std::uint32_t bf16_pair(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  std::uint32_t lo = __bfloat16_as_ushort(h.x), hi = __bfloat16_as_ushort(h.y);
  if (!kMayBeNaN) return lo | (hi << 16);
  if (isnan(a)) lo = (__float_as_uint(a) >> 16) | 0x40u;
  if (isnan(b)) hi = (__float_as_uint(b) >> 16) | 0x40u;
  return lo | (hi << 16);
}

template <bool kMayBeNaN = true>
__device__ __forceinline__ std::uint32_t fp16_pair(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  std::uint32_t lo = __half_as_ushort(h.x), hi = __half_as_ushort(h.y);
  if (!kMayBeNaN) return lo | (hi << 16);
  if (isnan(a)) lo = ((__float_as_uint(a) >> 16) & 0x8000u) | 0x7e00u;
  if (isnan(b)) hi = ((__float_as_uint(b) >> 16) & 0x8000u) | 0x7e00u;
  return lo | (hi << 16);
}

// Where the scale of block b (row-major numbering: b = row * blocks_per_row + block column)
// lives: at b in the row-major layout; in the swizzled 128x4 layout in 512-byte tiles of 128 rows
// x 4 block columns, rows r and r + 32k of a tile interleaved (mxfp8_scale_offset on the CPU).
struct ScaleIndex {
  bool swizzled;
  std::int64_t blocks_per_row;
  std::int64_t tiles_per_row;
  __device__ std::int64_t operator()(std::int64_t block) const {
    if (!swizzled) return block;
    const std::int64_t row = block / blocks_per_row, column = block % blocks_per_row;
    const std::int64_t tile = (row / 128) * tiles_per_row + column / 4;
    return tile * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + column % 4;
  }
};

// --- kernels ------------------------------------------------------------------------------------

template <bool kFloor, typename Input>
__global__ void quantize_kernel(Input input, std::int64_t rows, std::int64_t cols,
                                std::int64_t blocks_per_row, std::uint8_t* __restrict__ data,
                                std::uint8_t* __restrict__ scale, ScaleIndex scale_index) {
  const int lane = static_cast<int>(threadIdx.x) % kBlock;
  const std::int64_t warp =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kBlock;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kBlock;
  const std::int64_t total = rows * blocks_per_row;
  // Every lane of a warp walks the same blocks, so the full-mask reduction below is uniform.
  for (std::int64_t block = warp; block < total; block += warps) {
    const std::int64_t row = block / blocks_per_row;
    const std::int64_t col = (block % blocks_per_row) * kBlock + lane;
    const bool valid = col < cols;
    const std::int64_t index = row * cols + col;
    const std::uint32_t u = valid ? __float_as_uint(input(index)) : 0u;
    const std::uint32_t abs = u & kAbsMask;
    // Ceil rule: NaN/Inf are left out of amax; missing lanes of a partial block count as 0.
    const std::uint32_t amax = __reduce_max_sync(0xffffffffu, kFloor || abs < kInfBits ? abs : 0u);
    const bool nan_block = kFloor && amax >= kInfBits;
    const std::uint32_t biased = nan_block ? kE8M0NaNCode : scale_biased_exponent<kFloor>(amax);
    const std::uint32_t code =
        nan_block ? nan_code(u) : encode_e4m3_pair(u, 0u, inverse_of_scale(biased)) & 0xffu;
    if (valid) data[index] = static_cast<std::uint8_t>(code);
    if (lane == 0) scale[scale_index(block)] = static_cast<std::uint8_t>(biased);
  }
}

// Vectorised quantize: thread g owns elements [8g, 8g + 8), which lie in block g / 4 because
// cols % 32 == 0. Lanes walk the groups a warp at a time so the quad shuffles see every lane.
template <bool kFloor, typename Input>
__global__ void quantize_x8_kernel(Input input, std::int64_t groups,
                                   std::uint8_t* __restrict__ data,
                                   std::uint8_t* __restrict__ scale, ScaleIndex scale_index) {
  const int lane = static_cast<int>(threadIdx.x) % kBlock;
  const std::int64_t warp =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kBlock;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kBlock;
  for (std::int64_t base = warp * kBlock; base < groups; base += warps * kBlock) {
    const std::int64_t g = base + lane;
    const bool valid = g < groups;  // groups % 4 == 0: a quad is all valid or all not
    std::uint32_t bits[8] = {};
    if (valid) input.load8(g * 8, bits);
    std::uint32_t amax = 0;
    for (std::uint32_t b : bits) amax = max(amax, b & kAbsMask);
    // NaN or Inf among this thread's elements (amax compares above every finite value): the ceil
    // rule leaves them out of the amax and stores them as the E4M3 NaN. Rare, so that work is
    // done only by warps that have one (the shuffles below need the whole warp).
    const bool special = amax >= kInfBits;
    if (!kFloor && __any_sync(0xffffffffu, special)) {
      amax = 0;
      for (std::uint32_t b : bits) {
        const std::uint32_t abs = b & kAbsMask;
        amax = max(amax, abs < kInfBits ? abs : 0u);
      }
    }
    amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    // Floor rule: NaN/Inf anywhere in the block (same for the whole quad) makes it all NaN.
    const bool nan_block = kFloor && amax >= kInfBits;
    const std::uint32_t biased = nan_block ? kE8M0NaNCode : scale_biased_exponent<kFloor>(amax);
    const float inverse_scale = inverse_of_scale(biased);
    std::uint32_t packed[2] = {0u, 0u};
    for (int k = 0; k < 8; k += 2) {
      std::uint32_t codes;
      if (nan_block) {
        codes = nan_code(bits[k]) | (nan_code(bits[k + 1]) << 8);
      } else if (special) {  // ceil rule only: a floor-rule block with one is a NaN block
        codes = encode_e4m3_pair(bits[k], bits[k + 1], inverse_scale);
      } else {
        codes = encode_finite_e4m3_pair(bits[k], bits[k + 1], inverse_scale);
      }
      packed[k / 4] |= codes << (8 * (k % 4));
    }
    if (valid) {
      *reinterpret_cast<uint2*>(data + g * 8) = make_uint2(packed[0], packed[1]);
      if ((lane & 3) == 0) scale[scale_index(g / 4)] = static_cast<std::uint8_t>(biased);
    }
  }
}

// Each output writes one element (general kernel) or 8 consecutive elements to a 16-byte
// aligned address (vectorised kernel).
struct F32Output {
  static constexpr bool kHardwareDecode = false;
  float* p;
  __device__ void operator()(std::int64_t i, float v) const { p[i] = v; }
  template <bool kMayBeNaN>
  __device__ void store8(std::int64_t i, const float (&v)[8]) const {
    *reinterpret_cast<float4*>(p + i) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4*>(p + i + 4) = make_float4(v[4], v[5], v[6], v[7]);
  }
};
// bf16 (kBf16) or fp16 outputs: the same code but for the pair conversion.
template <bool kBf16>
struct HalfOutput {
  static constexpr bool kHardwareDecode = true;
  std::uint16_t* p;
  template <bool kMayBeNaN = true>
  __device__ static std::uint32_t pair(float a, float b) {
    return kBf16 ? bf16_pair<kMayBeNaN>(a, b) : fp16_pair<kMayBeNaN>(a, b);
  }
  __device__ void operator()(std::int64_t i, float v) const {
    p[i] = static_cast<std::uint16_t>(pair(v, 0.0f));
  }
  template <bool kMayBeNaN>
  __device__ void store8(std::int64_t i, const float (&v)[8]) const {
    *reinterpret_cast<uint4*>(p + i) =
        make_uint4(pair<kMayBeNaN>(v[0], v[1]), pair<kMayBeNaN>(v[2], v[3]),
                   pair<kMayBeNaN>(v[4], v[5]), pair<kMayBeNaN>(v[6], v[7]));
  }
};
using Bf16Output = HalfOutput<true>;
using F16Output = HalfOutput<false>;

template <typename Output>
__global__ void dequantize_kernel(const std::uint8_t* __restrict__ data,
                                  const std::uint8_t* __restrict__ scale, std::int64_t rows,
                                  std::int64_t cols, std::int64_t blocks_per_row,
                                  ScaleIndex scale_index, Output output) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t row = i / cols;
    const std::int64_t block = (i % cols) / kBlock;
    const std::uint32_t e = scale[scale_index(row * blocks_per_row + block)];
    output(i, dequantize_pair<Output::kHardwareDecode>(data[i], e).x);
  }
}

template <bool kMayBeNaN, typename Output>
__device__ __forceinline__ void dequantize8(uint2 codes, std::uint32_t e, std::int64_t i,
                                            const Output& output) {
  float v[8];
  for (int k = 0; k < 8; k += 2) {
    const std::uint32_t two_codes = (k < 4 ? codes.x : codes.y) >> (8 * (k % 4));
    const float2 pair = dequantize_pair<Output::kHardwareDecode, kMayBeNaN>(two_codes, e);
    v[k] = pair.x;
    v[k + 1] = pair.y;
  }
  output.template store8<kMayBeNaN>(i, v);
}

// Vectorised dequantize: thread g reads the 8 codes [8g, 8g + 8) (block g / 4, cols % 32 == 0).
template <typename Output>
__global__ void dequantize_x8_kernel(const std::uint8_t* __restrict__ data,
                                     const std::uint8_t* __restrict__ scale, std::int64_t groups,
                                     ScaleIndex scale_index, Output output) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       g < groups; g += stride) {
    const uint2 codes = *reinterpret_cast<const uint2*>(data + g * 8);
    const std::uint32_t e = scale[scale_index(g / 4)];
    // Without NaN codes or a NaN scale (the usual case) no result is NaN: skip the patching.
    if (e != kE8M0NaNCode && !has_nan_code(codes.x) && !has_nan_code(codes.y)) {
      dequantize8<false>(codes, e, g * 8, output);
    } else {
      dequantize8<true>(codes, e, g * 8, output);
    }
  }
}

unsigned ctas_for(std::int64_t threads) {
  const std::int64_t ctas = (threads + kThreadsPerCta - 1) / kThreadsPerCta;
  return static_cast<unsigned>(ctas < 1 ? 1 : (ctas > kMaxCtas ? kMaxCtas : ctas));
}

void check_dtype(DType dtype, const char* what) {
  SW_REQUIRE(dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16,
             InvalidArgument, what, ": dtype ", dtype_name(dtype),
             " is not supported (expected fp32, bf16 or fp16)");
}

void check_shape(std::int64_t rows, std::int64_t cols, const char* what) {
  SW_REQUIRE(rows >= 0 && cols >= 0, ShapeError, what, ": negative shape [", rows, ", ", cols, "]");
}

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// The vectorised kernels need whole blocks in every row and 16-byte vectors (8-byte for E4M3
// codes) at aligned addresses; anything else takes the general kernels.
bool vectorisable(std::int64_t cols, const void* wide, const void* codes) {
  const auto wide_address = reinterpret_cast<std::uintptr_t>(wide);
  const auto codes_address = reinterpret_cast<std::uintptr_t>(codes);
  return cols % kBlock == 0 && wide_address % 16 == 0 && codes_address % 8 == 0;
}

struct Launch {
  std::int64_t rows, cols;
  cudaStream_t stream;
  bool vectorised;
  ScaleIndex scale_index;
  bool floor_rule = false;
};

ScaleIndex scale_index_for(Mxfp8ScaleLayout layout, std::int64_t cols) {
  const std::int64_t blocks_per_row = (cols + kBlock - 1) / kBlock;
  return {layout == Mxfp8ScaleLayout::kSwizzled128x4, blocks_per_row, (blocks_per_row + 3) / 4};
}

template <bool kFloor, typename Input>
void launch_quantize_rule(const Launch& l, Input input, std::uint8_t* data, std::uint8_t* scale) {
  if (l.vectorised) {
    const std::int64_t groups = l.rows * l.cols / 8;
    quantize_x8_kernel<kFloor><<<ctas_for(groups), kThreadsPerCta, 0, l.stream>>>(
        input, groups, data, scale, l.scale_index);
    return;
  }
  const std::int64_t blocks_per_row = (l.cols + kBlock - 1) / kBlock;
  quantize_kernel<kFloor>
      <<<ctas_for(l.rows * blocks_per_row * kBlock), kThreadsPerCta, 0, l.stream>>>(
          input, l.rows, l.cols, blocks_per_row, data, scale, l.scale_index);
}

template <typename Input>
void launch_quantize(const Launch& l, Input input, std::uint8_t* data, std::uint8_t* scale) {
  if (l.floor_rule) {
    launch_quantize_rule<true>(l, input, data, scale);
  } else {
    launch_quantize_rule<false>(l, input, data, scale);
  }
}

template <typename Output>
void launch_dequantize(const Launch& l, const std::uint8_t* data, const std::uint8_t* scale,
                       Output output) {
  if (l.vectorised) {
    const std::int64_t groups = l.rows * l.cols / 8;
    dequantize_x8_kernel<<<ctas_for(groups), kThreadsPerCta, 0, l.stream>>>(data, scale, groups,
                                                                            l.scale_index, output);
    return;
  }
  const std::int64_t blocks_per_row = (l.cols + kBlock - 1) / kBlock;
  dequantize_kernel<<<ctas_for(l.rows * l.cols), kThreadsPerCta, 0, l.stream>>>(
      data, scale, l.rows, l.cols, blocks_per_row, l.scale_index, output);
}

void require_gpu() { SW_REQUIRE(device_count() > 0, CudaError, "no CUDA device is available"); }

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" / "no driver" error
    return 0;
  }
  return count;
}

void quantize_mxfp8_device(const void* input, DType dtype, std::int64_t rows, std::int64_t cols,
                           std::uint8_t* data, std::uint8_t* scale, void* stream,
                           const Mxfp8Options& options) {
  check_dtype(dtype, "quantize_mxfp8_device input");
  check_shape(rows, cols, "quantize_mxfp8_device");
  if (rows == 0 || cols == 0) return;
  const Launch launch{rows,
                      cols,
                      static_cast<cudaStream_t>(stream),
                      vectorisable(cols, input, data),
                      scale_index_for(options.layout, cols),
                      options.rule == Mxfp8ScaleRule::kFloor};
  switch (dtype) {
    case DType::kFloat32:
      launch_quantize(launch, F32Input{static_cast<const float*>(input)}, data, scale);
      break;
    case DType::kBFloat16:
      launch_quantize(launch, Bf16Input{static_cast<const std::uint16_t*>(input)}, data, scale);
      break;
    default:
      launch_quantize(launch, F16Input{static_cast<const std::uint16_t*>(input)}, data, scale);
      break;
  }
  check_cuda(cudaGetLastError(), "quantize_mxfp8 kernel launch");
}

void dequantize_mxfp8_device(const std::uint8_t* data, const std::uint8_t* scale, std::int64_t rows,
                             std::int64_t cols, void* output, DType dtype, void* stream,
                             Mxfp8ScaleLayout layout) {
  check_dtype(dtype, "dequantize_mxfp8_device output");
  check_shape(rows, cols, "dequantize_mxfp8_device");
  if (rows == 0 || cols == 0) return;
  const Launch launch{rows, cols, static_cast<cudaStream_t>(stream),
                      vectorisable(cols, output, data), scale_index_for(layout, cols)};
  switch (dtype) {
    case DType::kFloat32:
      launch_dequantize(launch, data, scale, F32Output{static_cast<float*>(output)});
      break;
    case DType::kBFloat16:
      launch_dequantize(launch, data, scale, Bf16Output{static_cast<std::uint16_t*>(output)});
      break;
    default:
      launch_dequantize(launch, data, scale, F16Output{static_cast<std::uint16_t*>(output)});
      break;
  }
  check_cuda(cudaGetLastError(), "dequantize_mxfp8 kernel launch");
}

Mxfp8Tensor quantize_mxfp8_cuda(TensorView input, std::int64_t rows, std::int64_t cols,
                                const Mxfp8Options& options) {
  check_dtype(input.dtype, "quantize_mxfp8_cuda input");
  check_shape(rows, cols, "quantize_mxfp8_cuda");
  SW_REQUIRE(input.numel == rows * cols, ShapeError, "quantize_mxfp8_cuda: input has ", input.numel,
             " elements, shape [", rows, ", ", cols, "] needs ", rows * cols);
  Mxfp8Tensor out = Mxfp8Tensor::allocate(rows, cols, options.layout);
  if (input.numel == 0) return out;
  require_gpu();
  DeviceBuffer d_in(input.nbytes()), d_data(out.data.size()), d_scale(out.scale.size());
  check_cuda(cudaMemcpy(d_in.get(), input.data, input.nbytes(), cudaMemcpyHostToDevice),
             "cudaMemcpy (input to device)");
  // The swizzled layout's padding stays zero, as Mxfp8Tensor::allocate makes it on the CPU.
  check_cuda(cudaMemset(d_scale.get(), 0, out.scale.size()), "cudaMemset (scales)");
  quantize_mxfp8_device(d_in.get(), input.dtype, rows, cols, d_data.as<std::uint8_t>(),
                        d_scale.as<std::uint8_t>(), nullptr, options);
  check_cuda(cudaMemcpy(out.data.data(), d_data.get(), out.data.size(), cudaMemcpyDeviceToHost),
             "cudaMemcpy (data to host)");
  check_cuda(cudaMemcpy(out.scale.data(), d_scale.get(), out.scale.size(), cudaMemcpyDeviceToHost),
             "cudaMemcpy (scales to host)");
  return out;
}

void dequantize_mxfp8_cuda(const Mxfp8ConstView& src, TensorView output) {
  check_dtype(output.dtype, "dequantize_mxfp8_cuda output");
  check_shape(src.rows, src.cols, "dequantize_mxfp8_cuda");
  const Mxfp8Geometry g = mxfp8_geometry(src.rows, src.cols, src.layout);
  SW_REQUIRE(static_cast<std::int64_t>(src.data.size()) >= g.data_bytes &&
                 static_cast<std::int64_t>(src.scale.size()) >= g.scale_bytes,
             ShapeError, "dequantize_mxfp8_cuda: buffers too small for [", src.rows, ", ", src.cols,
             "]");
  SW_REQUIRE(output.numel == src.rows * src.cols, ShapeError, "dequantize_mxfp8_cuda: output has ",
             output.numel, " elements, needs ", src.rows * src.cols);
  if (output.numel == 0) return;
  require_gpu();
  const auto data_bytes = static_cast<std::size_t>(g.data_bytes);
  const auto scale_bytes = static_cast<std::size_t>(g.scale_bytes);
  DeviceBuffer d_data(data_bytes), d_scale(scale_bytes), d_out(output.nbytes());
  check_cuda(cudaMemcpy(d_data.get(), src.data.data(), data_bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy (data to device)");
  check_cuda(cudaMemcpy(d_scale.get(), src.scale.data(), scale_bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy (scales to device)");
  dequantize_mxfp8_device(d_data.as<std::uint8_t>(), d_scale.as<std::uint8_t>(), src.rows, src.cols,
                          d_out.get(), output.dtype, nullptr, src.layout);
  check_cuda(cudaMemcpy(output.data, d_out.get(), output.nbytes(), cudaMemcpyDeviceToHost),
             "cudaMemcpy (output to host)");
}

}  // namespace shardwise::cuda

// AdamW element loops written with intrinsics: GCC will not vectorise std::sqrt without
// -fno-math-errno, and the vector sqrt / div instructions are IEEE-exact, so each width computes
// exactly what the scalar tail computes (operations in the same order, nothing fused).
#include "adamw_kernels.hpp"

#include <cmath>

#if SW_HAVE_ISA_LEVELS
#include <immintrin.h>
// GCC 12 warns inside avx512fintrin.h (_mm512_set1_ps reads an "undefined" register on purpose).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace shardwise::optim::adamw_kernels {
namespace {

void scalar_tail(const AdamWStepScalars& s, float* __restrict p, const float* __restrict g,
                 float* __restrict m, float* __restrict v, std::int64_t i, std::int64_t n) {
  for (; i < n; ++i) {
    const float gi = g[i];
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * s.inv_sqrt_bias2 + s.eps;
    p[i] = p[i] * s.decay - s.step_size * (mi / denom);
  }
}

#if SW_HAVE_ISA_LEVELS
// One body for the three widths: V is the register type, the macros below name its intrinsics.
#define SW_ADAMW_BODY(V, W, SET1, LOAD, STORE, ADD, SUB, MUL, DIV, SQRT)                     \
  const V beta1 = SET1(s.beta1), one_minus_beta1 = SET1(s.one_minus_beta1);                  \
  const V beta2 = SET1(s.beta2), one_minus_beta2 = SET1(s.one_minus_beta2);                  \
  const V inv_sqrt_bias2 = SET1(s.inv_sqrt_bias2), eps = SET1(s.eps);                        \
  const V decay = SET1(s.decay), step_size = SET1(s.step_size);                              \
  std::int64_t i = 0;                                                                        \
  for (; i + (W) <= n; i += (W)) {                                                           \
    const V gi = LOAD(g + i);                                                                \
    const V mi = ADD(MUL(beta1, LOAD(m + i)), MUL(one_minus_beta1, gi));                     \
    const V vi = ADD(MUL(beta2, LOAD(v + i)), MUL(one_minus_beta2, MUL(gi, gi)));            \
    STORE(m + i, mi);                                                                        \
    STORE(v + i, vi);                                                                        \
    const V denom = ADD(MUL(SQRT(vi), inv_sqrt_bias2), eps);                                 \
    STORE(p + i, SUB(MUL(LOAD(p + i), decay), MUL(step_size, DIV(mi, denom))));              \
  }                                                                                          \
  scalar_tail(s, p, g, m, v, i, n);

void update_sse2(const AdamWStepScalars& s, float* p, const float* g, float* m, float* v,
                 std::int64_t n) {
  SW_ADAMW_BODY(__m128, 4, _mm_set1_ps, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps, _mm_sub_ps,
                _mm_mul_ps, _mm_div_ps, _mm_sqrt_ps)
}

SW_TARGET_AVX2 void update_avx2(const AdamWStepScalars& s, float* p, const float* g, float* m,
                                float* v, std::int64_t n) {
  SW_ADAMW_BODY(__m256, 8, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps,
                _mm256_sub_ps, _mm256_mul_ps, _mm256_div_ps, _mm256_sqrt_ps)
}

SW_TARGET_AVX512 void update_avx512(const AdamWStepScalars& s, float* p, const float* g, float* m,
                                    float* v, std::int64_t n) {
  SW_ADAMW_BODY(__m512, 16, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps,
                _mm512_sub_ps, _mm512_mul_ps, _mm512_div_ps, _mm512_sqrt_ps)
}
#undef SW_ADAMW_BODY
#else
void update_scalar(const AdamWStepScalars& s, float* p, const float* g, float* m, float* v,
                   std::int64_t n) {
  scalar_tail(s, p, g, m, v, 0, n);
}
#endif

}  // namespace

#if SW_HAVE_ISA_LEVELS
const UpdateKernel kUpdate[kNumIsaLevels] = {update_sse2, update_avx2, update_avx512};
#else
const UpdateKernel kUpdate[kNumIsaLevels] = {update_scalar, update_scalar, update_scalar};
#endif

}  // namespace shardwise::optim::adamw_kernels

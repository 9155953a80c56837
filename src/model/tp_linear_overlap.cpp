// Each TP linear's slot mapped onto the plan's GEMM slots and run by the tp layer; biases and
// bias gradients are handled here exactly as tp_linear.cpp does (the runtime does GEMMs only).
#include "tp_linear_overlap.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/model/dense_kernels.hpp"
#include "shardwise/tp/overlapped_gemm.hpp"

namespace shardwise {
namespace {

struct PlanSlots {
  tp::GemmSlot fprop, dgrad, wgrad;
};

PlanSlots plan_slots(TpGemmSlot slot) {
  using G = tp::GemmSlot;
  switch (slot) {
    case TpGemmSlot::kQkv:
      return {G::kQkvFprop, G::kQkvDgrad, G::kQkvWgrad};
    case TpGemmSlot::kFc1:
      return {G::kFc1Fprop, G::kFc1Dgrad, G::kFc1Wgrad};
    // Row-parallel layers have no wgrad slot (their wgrad has no communication).
    case TpGemmSlot::kProj:
      return {G::kProjFprop, G::kProjDgrad, G::kProjDgrad};
    case TpGemmSlot::kFc2:
      return {G::kFc2Fprop, G::kFc2Dgrad, G::kFc2Dgrad};
    case TpGemmSlot::kOutput:
      break;
  }
  throw InvariantError(str_cat("TP slot ", tp_gemm_slot_name(slot), " has no overlap slots"));
}

void add_bias_rows(float* y, std::int64_t rows, std::int64_t cols, const float* bias) {
  if (bias == nullptr) return;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t c = 0; c < cols; ++c) y[i * cols + c] += bias[c];
  }
}

}  // namespace

bool tp_overlap_active(TpGemmSlot slot, const TensorParallelOptions& tp) {
  return tp.enabled() && tp.sequence_parallel && tp.overlap != nullptr && tp.overlap->enabled &&
         slot != TpGemmSlot::kOutput;
}

void overlapped_column_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                        const float* x, const float* w, const float* bias,
                                        std::int64_t n, std::int64_t in, std::int64_t out_local,
                                        std::vector<float>& y) {
  const std::int64_t m = n / tp.size();
  y.assign(static_cast<std::size_t>(n * out_local), 0.0f);
  tp::all_gather_gemm(*tp.group, tp.overlap->choice(plan_slots(slot).fprop), {x, m, in},
                      {{w, out_local, in}, blas::Op::kTranspose}, {y.data(), n, out_local});
  add_bias_rows(y.data(), n, out_local, bias);
}

void overlapped_column_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                         const float* dy, const float* x, const float* w,
                                         std::int64_t n, std::int64_t in, std::int64_t out_local,
                                         float* dw, float* dbias, std::vector<float>& dx) {
  const std::int64_t m = n / tp.size();
  const PlanSlots slots = plan_slots(slot);
  dx.assign(static_cast<std::size_t>(m * in), 0.0f);
  tp::column_parallel_backward(*tp.group, tp.overlap->choice(slots.dgrad),
                               tp.overlap->choice(slots.wgrad), {x, m, in}, {w, out_local, in},
                               {dy, n, out_local}, {{dx.data(), m, in}, {dw, out_local, in}, 1.0f});
  if (dbias) add_column_sums(dy, n, out_local, dbias);
}

void overlapped_row_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                     const float* x, const float* w, const float* bias,
                                     std::int64_t n, std::int64_t in_local, std::int64_t out,
                                     std::vector<float>& y) {
  const std::int64_t m = n / tp.size();
  y.assign(static_cast<std::size_t>(m * out), 0.0f);
  tp::gemm_reduce_scatter(*tp.group, tp.overlap->choice(plan_slots(slot).fprop), {x, n, in_local},
                          {{w, out, in_local}, blas::Op::kTranspose}, {y.data(), m, out});
  add_bias_rows(y.data(), m, out, bias);
}

void overlapped_row_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                      const float* dy, const float* x, const float* w,
                                      std::int64_t n, std::int64_t in_local, std::int64_t out,
                                      float* dw, float* dbias, std::vector<float>& dx) {
  const std::int64_t m = n / tp.size();
  if (dbias) add_column_sums(dy, m, out, dbias);
  dx.assign(static_cast<std::size_t>(n * in_local), 0.0f);
  tp::row_parallel_backward(*tp.group, tp.overlap->choice(plan_slots(slot).dgrad), {x, n, in_local},
                            {w, out, in_local}, {dy, m, out}, {dx.data(), n, in_local},
                            {dw, out, in_local}, 1.0f);
}

}  // namespace shardwise

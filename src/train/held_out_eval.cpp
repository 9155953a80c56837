// Trainer step 6: evaluation on the held-out split.
#include <algorithm>

#include "shardwise/train/eval_report.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {

EvalMetrics evaluate_held_out(TrainableModel& model, const TokenDataset& data,
                              ProcessGroup& dp_group, std::int64_t step) {
  constexpr int kEvalBatch = 64;
  const int seq = data.seq_len(), dp = dp_group.size(), rank = dp_group.rank();
  const std::int64_t n = data.validation_size();
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(kEvalBatch) * seq),
      targets(static_cast<std::size_t>(kEvalBatch) * seq);
  double loss_sum = 0, correct = 0, count = 0;
  // Rank r evaluates the r-th of dp contiguous slices of the held-out set.
  const std::int64_t lo = n * rank / dp, hi = n * (rank + 1) / dp;
  for (std::int64_t first = lo; first < hi; first += kEvalBatch) {
    const int b = static_cast<int>(std::min<std::int64_t>(kEvalBatch, hi - first));
    data.fill(Split::kValidation, first, b, tokens.data(), targets.data());
    loss_sum += model.forward(tokens.data(), targets.data(), b, seq) * b;
    for (bool ok : model.exact_match()) correct += ok;
    count += b;
  }
  EvalMetrics e;
  e.step = step;
  const double total = optim::all_reduce_sum_exact(dp_group, count);
  e.eval_loss = optim::all_reduce_sum_exact(dp_group, loss_sum) / total;
  e.accuracy = optim::all_reduce_sum_exact(dp_group, correct) / total;
  add_language_model_metrics(e, data);
  return e;
}

}  // namespace shardwise::train_detail

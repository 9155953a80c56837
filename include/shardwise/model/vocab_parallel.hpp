// Vocabulary-parallel embedding lookup and softmax cross-entropy (Megatron's
// VocabParallelEmbedding / vocab_parallel_cross_entropy): TP rank r holds vocabulary rows
// [r*V/T, (r+1)*V/T) of the padded vocabulary V, and no rank ever holds a full row of logits.
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/model/tensor_parallel.hpp"

namespace shardwise {

// First vocabulary row of this TP rank's slice of `padded_vocab` rows.
inline std::int64_t vocab_slice_begin(const TensorParallelOptions& tp, std::int64_t padded_vocab) {
  return padded_vocab / tp.size() * tp.rank();
}

// out[n, h] = embedding rows of tokens that fall in this rank's slice, zero for the others (the
// caller sums over the TP group). table: [v_local, h].
template <typename Scalar>
void vocab_parallel_embedding_lookup(const std::int32_t* tokens, std::int64_t n,
                                     const Scalar* table, std::int64_t v_begin,
                                     std::int64_t v_local, std::int64_t h, Scalar* out);

// grad rows of tokens in this rank's slice += dout rows.
template <typename Scalar>
void vocab_parallel_embedding_backward(const std::int32_t* tokens, std::int64_t n,
                                       const Scalar* dout, std::int64_t v_begin,
                                       std::int64_t v_local, std::int64_t h, Scalar* grad);

// logits: [n, v_local], this rank's vocabulary columns [v_begin, v_begin + v_local) of every row;
// columns at vocabulary index >= vocab_size are padding and take no part. Turns logits into this
// slice's share of the softmax probabilities in place (zero on padding) and returns the mean
// cross-entropy over rows whose target is >= 0 (their count goes to `counted`); identical on
// every TP rank. Collective over tp.group (two all-reduces of n and 2n values).
template <typename Scalar>
double vocab_parallel_cross_entropy(const TensorParallelOptions& tp, std::vector<Scalar>& logits,
                                    const std::vector<std::int32_t>& targets, std::int64_t n,
                                    std::int64_t v_local, std::int64_t vocab_size,
                                    std::int64_t& counted);

}  // namespace shardwise

#include "shardwise/train/model_from_config.hpp"

#include <filesystem>
#include <new>
#include <system_error>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/train/synthetic_task.hpp"
#include "shardwise/train/token_file_dataset.hpp"

namespace shardwise {

std::unique_ptr<TokenDataset> make_token_dataset(const TrainingConfig& c) {
  const auto seed = static_cast<std::uint64_t>(c.training.seed);
  switch (c.data.source) {
    case DataSource::kSynthetic:
      return std::make_unique<SyntheticTaskDataset>(c.data.task == SyntheticTask::kAddition
                                                        ? SyntheticTaskKind::kAddition
                                                        : SyntheticTaskKind::kSort,
                                                    c.data.digits, seed, c.data.eval_samples);
    case DataSource::kText:
    case DataSource::kBin: {
      const bool text = c.data.source == DataSource::kText;
      auto read = [&](const std::string& path) {
        try {
          return text ? read_text_tokens(path) : read_bin_tokens(path);
        } catch (const std::bad_alloc&) {
          // The whole file is held as int32 tokens (4 bytes per byte of text).
          std::error_code ec;
          const auto bytes = std::filesystem::file_size(path, ec);
          throw IoError(str_cat("data file '", printable(path), "'",
                                ec ? std::string() : str_cat(" (", bytes, " bytes)"),
                                " does not fit in memory: its tokens are read whole, 4 bytes "
                                "each; give a smaller file"));
        }
      };
      std::vector<std::int32_t> val;
      if (!c.data.val_path.empty()) {
        val = read(c.data.val_path);
        // An empty val file must not read as "no val file" (10% of the training data held out).
        SW_REQUIRE(!val.empty(), InvalidArgument, "data.val_path '", printable(c.data.val_path),
                   "' holds no tokens (an empty file); give a validation file with at least one "
                   "sample, or leave data.val_path empty to hold out part of data.path");
        // Named here: the dataset's own check names data.path's file for both parts.
        const auto need = static_cast<std::size_t>(c.model.seq_len) + 1;
        SW_REQUIRE(val.size() >= need, InvalidArgument, "data.val_path '",
                   printable(c.data.val_path), "' holds ", val.size(),
                   " tokens; a validation sample needs model.seq_len + 1 = ", need);
      }
      return std::make_unique<TokenFileDataset>(
          read(c.data.path), std::move(val), c.model.seq_len, text ? 256 : c.model.vocab, seed,
          c.data.eval_samples, str_cat(text ? "text file '" : "token file '", c.data.path, "'"));
    }
  }
  throw InvalidArgument("unknown data.source");
}

GptConfig gpt_config_for(const TrainingConfig& c, const TokenDataset& data) {
  GptConfig g;
  SW_REQUIRE(c.model.vocab == 0 || c.model.vocab >= data.vocab_size(), ConfigError, "model.vocab (",
             c.model.vocab, ") is smaller than the data's vocabulary (", data.vocab_size(), ")");
  g.vocab_size = c.model.vocab > 0 ? c.model.vocab : data.vocab_size();
  g.seq_len = data.seq_len();
  g.num_layers = c.model.layers;
  g.hidden = c.model.hidden;
  g.num_heads = c.model.heads;
  g.ffn_hidden = c.model.ffn;
  g.rope = c.model.position == PositionEmbedding::kRope;
  g.tied_embeddings = c.model.tied_embeddings;
  g.init_std = c.model.init_std;
  g.validate_tensor_parallel(c.parallel.tp);
  return g;
}

}  // namespace shardwise

#include "shardwise/train/token_file_dataset.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/core/hash_mix.hpp"
#include "shardwise/core/input_file.hpp"

namespace shardwise {

namespace {

constexpr std::int32_t kBinMagic = 20240520;
constexpr std::int32_t kBinVersion = 1;
constexpr std::size_t kBinHeaderInts = 256;

// Data must be a regular file: /dev/zero would be read forever, a FIFO blocks until someone
// writes to it, and a directory opens as an empty stream.
std::string read_file_bytes(const std::string& path) {
  return read_input_file(path, "data file", kNoSizeLimit);
}

}  // namespace

std::vector<std::int32_t> read_text_tokens(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  std::vector<std::int32_t> tokens(bytes.size());
  std::transform(bytes.begin(), bytes.end(), tokens.begin(),
                 [](char c) { return static_cast<std::int32_t>(static_cast<unsigned char>(c)); });
  return tokens;
}

std::vector<std::int32_t> read_bin_tokens(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  const std::size_t header_bytes = kBinHeaderInts * sizeof(std::int32_t);
  SW_REQUIRE(bytes.size() >= header_bytes, FormatError, "token file '", path, "' is ", bytes.size(),
             " bytes, shorter than its ", header_bytes, "-byte header");
  std::int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  SW_REQUIRE(header[0] == kBinMagic, FormatError, "token file '", path, "': bad magic ", header[0],
             " (expected ", kBinMagic, ")");
  SW_REQUIRE(header[1] == kBinVersion, FormatError, "token file '", path, "': unsupported version ",
             header[1], " (expected ", kBinVersion, ")");
  SW_REQUIRE(header[2] >= 0, FormatError, "token file '", path, "': negative token count ",
             header[2]);
  const auto count = static_cast<std::size_t>(header[2]);
  const std::size_t expected = header_bytes + count * sizeof(std::uint16_t);
  SW_REQUIRE(bytes.size() == expected, FormatError, "token file '", path, "' is ", bytes.size(),
             " bytes but its header announces ", count, " tokens (", expected, " bytes)",
             bytes.size() < expected ? ": truncated" : ": trailing bytes");
  std::vector<std::int32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t t;
    std::memcpy(&t, bytes.data() + header_bytes + i * sizeof(t), sizeof(t));
    tokens[i] = t;
  }
  return tokens;
}

void write_bin_tokens(const std::string& path, const std::vector<std::uint16_t>& tokens) {
  std::vector<std::int32_t> header(kBinHeaderInts, 0);
  header[0] = kBinMagic;
  header[1] = kBinVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());
  std::string bytes(reinterpret_cast<const char*>(header.data()),
                    header.size() * sizeof(std::int32_t));
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(std::uint16_t));
  write_file_atomic(path, bytes);
}

TokenFileDataset::TokenFileDataset(std::vector<std::int32_t> train_tokens,
                                   std::vector<std::int32_t> val_tokens, int seq_len,
                                   int vocab_size, std::uint64_t seed,
                                   std::int64_t validation_samples, std::string description)
    : train_(std::move(train_tokens)),
      val_(std::move(val_tokens)),
      seq_len_(seq_len),
      vocab_size_(vocab_size),
      seed_(seed),
      validation_samples_(validation_samples),
      held_out_(val_.empty()),
      description_(std::move(description)) {
  if (held_out_) {
    // Hold out the last tenth of the training tokens.
    const std::size_t split = train_.size() - train_.size() / 10;
    val_.assign(train_.begin() + static_cast<std::ptrdiff_t>(split), train_.end());
    train_.resize(split);
  }
  const auto need = static_cast<std::size_t>(seq_len) + 1;
  SW_REQUIRE(train_.size() >= need && val_.size() >= need, InvalidArgument, description_,
             ": training and validation parts need at least ", need, " tokens each (have ",
             train_.size(), " and ", val_.size(), ")");
  const std::int32_t largest = std::max(*std::max_element(train_.begin(), train_.end()),
                                        *std::max_element(val_.begin(), val_.end()));
  // A vocabulary given for a token file is model.vocab (text's 256 bytes never fall outside).
  const bool from_config = vocab_size_ > 0;
  if (!from_config) vocab_size_ = largest + 1;
  for (const auto* part : {&train_, &val_}) {
    for (auto t : *part) {
      SW_REQUIRE(t >= 0 && t < vocab_size_, FormatError, description_, ": token ", t,
                 " outside the vocabulary of ", vocab_size_,
                 from_config && t >= 0
                     ? str_cat(" (model.vocab; give at least ", std::int64_t{largest} + 1,
                               ", or 0 to take it from the data)")
                     : std::string());
    }
  }
}

std::vector<std::string> TokenFileDataset::warnings() const {
  // Validation sample i starts at token i * seq_len (see fill): these many fit before it wraps.
  const auto whole =
      static_cast<std::int64_t>((val_.size() - 1) / static_cast<std::size_t>(seq_len_));
  if (validation_samples_ <= whole) return {};
  return {str_cat("data.eval_samples (", validation_samples_, ") is more than the ", whole,
                  " samples of ", seq_len_, " tokens in ",
                  held_out_ ? str_cat("the held-out last tenth of ", description_)
                            : std::string("data.val_path's file"),
                  ": evaluation wraps around and scores held-out tokens more than once (the "
                  "held-out loss is no better measured than with ",
                  whole, ")")};
}

void TokenFileDataset::fill(Split split, std::int64_t first, int count, std::int32_t* tokens,
                            std::int32_t* targets) const {
  const auto& source = split == Split::kTrain ? train_ : val_;
  const std::uint64_t windows = source.size() - static_cast<std::size_t>(seq_len_);
  for (int s = 0; s < count; ++s) {
    const std::uint64_t index = static_cast<std::uint64_t>(first + s);
    // Validation walks the held-out tokens in order; training draws windows pseudo-randomly.
    const std::uint64_t start = split == Split::kTrain
                                    ? hash_mix(seed_ ^ hash_mix(index)) % windows
                                    : (index * static_cast<std::uint64_t>(seq_len_)) % windows;
    for (int t = 0; t < seq_len_; ++t) {
      tokens[std::int64_t{s} * seq_len_ + t] = source[start + t];
      targets[std::int64_t{s} * seq_len_ + t] = source[start + t + 1];
    }
  }
}

namespace {

// FNV-1a over whole tokens in four interleaved lanes (one lane's multiply chain alone would
// limit it to a token per ~4 cycles), then the lanes and the count into one value.
void hash_tokens(const std::vector<std::int32_t>& tokens, Fnv1a& out) {
  std::uint64_t lanes[4] = {1, 2, 3, 4};
  const std::size_t n = tokens.size();
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) {
      lanes[k] = (lanes[k] ^ static_cast<std::uint32_t>(tokens[i + k])) * 1099511628211ull;
    }
  }
  for (; i < n; ++i)
    lanes[0] = (lanes[0] ^ static_cast<std::uint32_t>(tokens[i])) * 1099511628211ull;
  out.integer(static_cast<std::int64_t>(n));
  for (const std::uint64_t lane : lanes) out.integer(static_cast<std::int64_t>(lane));
}

}  // namespace

std::uint64_t TokenFileDataset::fingerprint() const {
  Fnv1a hash;
  hash_tokens(train_, hash);
  hash_tokens(val_, hash);
  for (const std::int64_t v : {std::int64_t{seq_len_}, std::int64_t{vocab_size_},
                               static_cast<std::int64_t>(seed_), validation_samples_}) {
    hash.integer(v);
  }
  return hash.value();
}

}  // namespace shardwise

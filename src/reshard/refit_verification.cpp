#include "shardwise/reshard/refit_verification.hpp"

#include <cstring>

#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/reshard/tp_export.hpp"

namespace shardwise {
namespace {

// Row-major multi-index of flat element `index` of `shape`, as "[i, j]".
std::string index_text(std::int64_t index, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return to_string(idx);
}

std::string hex_byte(std::uint32_t v, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string out = "0x";
  for (int i = digits - 1; i >= 0; --i) out += kDigits[(v >> (4 * i)) & 0xF];
  return out;
}

std::vector<float> to_fp32(TensorView src, const std::string& name) {
  SW_REQUIRE(
      src.dtype == DType::kFloat32 || src.dtype == DType::kBFloat16 || src.dtype == DType::kFloat16,
      InvalidArgument, "refit: param ", name, " has dtype ", dtype_name(src.dtype),
      "; expected fp32, bf16 or fp16");
  std::vector<float> out(static_cast<std::size_t>(src.numel));
  convert_floats(src, {out.data(), src.numel, DType::kFloat32}, name);
  return out;
}

constexpr int kReferenceTag = 1;

}  // namespace

std::map<std::string, std::vector<float>> send_reference_weights(
    ProcessGroup& group, const std::vector<RefitParam>& params, const RefitTopology& topology,
    int source_rank, const std::map<std::string, TensorView>& values) {
  const int me = group.rank();
  const int first = topology.first_inference_rank();
  SW_REQUIRE(source_rank >= 0 && source_rank < first, InvalidArgument,
             "refit reference: source rank ", source_rank, " must be a training rank (< ", first,
             ")");
  std::map<std::string, std::vector<float>> received;
  if (me == source_rank) {
    std::vector<std::vector<float>> full;
    full.reserve(params.size());
    for (const RefitParam& p : params) {
      const auto it = values.find(p.name);
      SW_REQUIRE(it != values.end(), InvalidArgument, "refit reference: no value for param ",
                 p.name, " on rank ", me);
      SW_REQUIRE(it->second.numel == shape_numel(p.shape), InvalidArgument,
                 "refit reference: param ", p.name, " has ", it->second.numel, " elements, shape ",
                 to_string(p.shape));
      full.push_back(to_fp32(it->second, p.name));
    }
    std::vector<WorkPtr> sends;
    for (int r = first; r < first + topology.tp; ++r) {
      for (std::vector<float>& v : full) {
        sends.push_back(group.send({v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32},
                                   r, kReferenceTag));
      }
    }
    for (const WorkPtr& w : sends) w->wait();
  } else if (me >= first && me < first + topology.tp) {
    std::vector<WorkPtr> recvs;
    for (const RefitParam& p : params) {
      std::vector<float>& v = received[p.name];
      v.resize(static_cast<std::size_t>(shape_numel(p.shape)));
    }
    // Same order as the sends (the params' order), so messages of one tag meet in order.
    for (const RefitParam& p : params) {
      std::vector<float>& v = received[p.name];
      recvs.push_back(group.recv({v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32},
                                 source_rank, kReferenceTag));
    }
    for (const WorkPtr& w : recvs) w->wait();
  }
  return received;
}

RefitVerification verify_refit(const std::vector<InferenceTensor>& weights,
                               const std::map<std::string, std::vector<float>>& reference, int tp,
                               int tp_rank, const Mxfp8Options& mxfp8_options) {
  RefitVerification result;
  const auto mismatch = [&](std::string text) {
    if (result.first_mismatch.empty()) result.first_mismatch = std::move(text);
  };
  for (const InferenceTensor& t : weights) {
    ++result.tensors_checked;
    const auto it = reference.find(t.name);
    if (it == reference.end()) {
      mismatch(str_cat("param ", t.name, ": no reference value"));
      continue;
    }
    if (static_cast<std::int64_t>(it->second.size()) != shape_numel(t.global_shape)) {
      mismatch(str_cat("param ", t.name, ": reference has ", it->second.size(), " elements, shape ",
                       to_string(t.global_shape)));
      continue;
    }
    const std::vector<std::uint8_t> slice = extract_tp_slice(
        t.name, it->second.data(), t.global_shape, sizeof(float), t.rule, tp, tp_rank);
    const std::size_t n = slice.size() / sizeof(float);
    std::vector<std::uint16_t> expected_bf16(n);
    std::vector<float> slice_fp32(n);
    std::memcpy(slice_fp32.data(), slice.data(), slice.size());
    float_to_bf16_n(slice_fp32.data(), expected_bf16.data(), static_cast<std::int64_t>(n));
    const std::string where =
        str_cat("param ", t.name, " (", to_string(t.rule), ", tp rank ", tp_rank, " of ", tp, ")");
    if (!t.mxfp8) {
      if (t.bf16.size() != n) {
        mismatch(str_cat(where, ": holds ", t.bf16.size(), " elements, expected ", n));
        continue;
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (t.bf16[i] != expected_bf16[i]) {
          mismatch(str_cat(where, ": bf16 element ",
                           index_text(static_cast<std::int64_t>(i), t.local_shape), " is ",
                           hex_byte(t.bf16[i], 4), ", expected ", hex_byte(expected_bf16[i], 4)));
          break;
        }
      }
      continue;
    }
    Mxfp8Options options = mxfp8_options;
    options.layout = Mxfp8ScaleLayout::kRowMajor;
    const Mxfp8Tensor expected =
        quantize_mxfp8({expected_bf16.data(), static_cast<std::int64_t>(n), DType::kBFloat16},
                       t.local_shape[0], t.local_shape[1], options);
    if (expected.data.size() != t.quantized.data.size() ||
        expected.scale.size() != t.quantized.scale.size()) {
      mismatch(str_cat(where, ": MXFP8 buffers of ", t.quantized.data.size(), " + ",
                       t.quantized.scale.size(), " bytes, expected ", expected.data.size(), " + ",
                       expected.scale.size()));
      continue;
    }
    const auto d =
        std::mismatch(expected.data.begin(), expected.data.end(), t.quantized.data.begin());
    if (d.first != expected.data.end()) {
      const auto i = d.first - expected.data.begin();
      mismatch(str_cat(where, ": MXFP8 data byte ", index_text(i, t.local_shape), " is ",
                       hex_byte(*d.second, 2), ", expected ", hex_byte(*d.first, 2)));
      continue;
    }
    const auto s =
        std::mismatch(expected.scale.begin(), expected.scale.end(), t.quantized.scale.begin());
    if (s.first != expected.scale.end()) {
      const auto i = s.first - expected.scale.begin();
      const std::vector<std::int64_t> scale_shape{t.local_shape[0],
                                                  expected.geometry().blocks_per_row};
      mismatch(str_cat(where, ": MXFP8 scale ", index_text(i, scale_shape), " is ",
                       hex_byte(*s.second, 2), ", expected ", hex_byte(*s.first, 2)));
    }
  }
  return result;
}

}  // namespace shardwise

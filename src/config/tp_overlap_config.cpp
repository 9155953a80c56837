#include "shardwise/config/tp_overlap_config.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

void require_positive(int value, const std::string& field) {
  SW_REQUIRE(value >= 1, ConfigError, field, " must be >= 1 (got ", value, ")");
}

void require_method(const std::string& method, std::string_view expected,
                    const std::string& where) {
  SW_REQUIRE(method == expected, ConfigError, where, ".method: unknown or mismatched method '",
             method, "' (this config is '", expected,
             "'; valid methods: pipeline, ring_exchange, bulk)");
}

}  // namespace

std::string_view expected_method(const TPOverlapCfg& cfg) {
  static constexpr std::string_view kMethods[] = {"pipeline", "ring_exchange", "bulk"};
  return kMethods[cfg.index()];  // variant order: Pipeline, RingExchange, Bulk
}

const std::array<std::pair<std::string_view, TransformerLayerTPOverlapCfg::Slot>, 10>&
TransformerLayerTPOverlapCfg::slots() {
  using T = TransformerLayerTPOverlapCfg;
  static const std::array<std::pair<std::string_view, Slot>, 10> kSlots = {{
      {"qkv_dgrad", &T::qkv_dgrad},
      {"qkv_wgrad", &T::qkv_wgrad},
      {"fc1_dgrad", &T::fc1_dgrad},
      {"fc1_wgrad", &T::fc1_wgrad},
      {"qkv_fprop", &T::qkv_fprop},
      {"proj_dgrad", &T::proj_dgrad},
      {"fc1_fprop", &T::fc1_fprop},
      {"fc2_dgrad", &T::fc2_dgrad},
      {"proj_fprop", &T::proj_fprop},
      {"fc2_fprop", &T::fc2_fprop},
  }};
  return kSlots;
}

void validate(const TransformerLayerTPOverlapCfg& cfg, std::string_view where) {
  for (const auto& [name, slot] : TransformerLayerTPOverlapCfg::slots()) {
    const auto& entry = cfg.*slot;
    if (!entry) continue;
    const std::string prefix = str_cat(where, ".", name);
    std::visit(Overloaded{[&](const PipelineOverlapCfg& c) {
                            require_method(c.method, "pipeline", prefix);
                            require_positive(c.num_sm, prefix + ".num_sm");
                            require_positive(c.cga_size, prefix + ".cga_size");
                            require_positive(c.num_splits, prefix + ".num_splits");
                          },
                          [&](const RingExchangeOverlapCfg& c) {
                            require_method(c.method, "ring_exchange", prefix);
                            require_positive(c.num_sm, prefix + ".num_sm");
                            require_positive(c.cga_size, prefix + ".cga_size");
                          },
                          [&](const BulkOverlapCfg& c) {
                            require_method(c.method, "bulk", prefix);
                            require_positive(c.num_sm, prefix + ".num_sm");
                            require_positive(c.cga_size, prefix + ".cga_size");
                          }},
               *entry);
  }
}

std::map<std::string, TpOverlapScalar> overlap_fields(const TPOverlapCfg& cfg) {
  using Fields = std::map<std::string, TpOverlapScalar>;
  auto i64 = [](int v) { return TpOverlapScalar{static_cast<std::int64_t>(v)}; };
  return std::visit(Overloaded{[&](const PipelineOverlapCfg& c) {
                                 return Fields{{"method", c.method},
                                               {"num_sm", i64(c.num_sm)},
                                               {"cga_size", i64(c.cga_size)},
                                               {"num_splits", i64(c.num_splits)},
                                               {"set_sm_margin", c.set_sm_margin},
                                               {"fp8_buf", c.fp8_buf},
                                               {"atomic_gemm", c.atomic_gemm}};
                               },
                               [&](const RingExchangeOverlapCfg& c) {
                                 return Fields{{"method", c.method},
                                               {"aggregate", c.aggregate},
                                               {"num_sm", i64(c.num_sm)},
                                               {"cga_size", i64(c.cga_size)},
                                               {"set_sm_margin", c.set_sm_margin},
                                               {"fp8_buf", c.fp8_buf},
                                               {"atomic_gemm", c.atomic_gemm}};
                               },
                               [&](const BulkOverlapCfg& c) {
                                 return Fields{{"method", c.method},
                                               {"num_sm", i64(c.num_sm)},
                                               {"cga_size", i64(c.cga_size)},
                                               {"set_sm_margin", c.set_sm_margin}};
                               }},
                    cfg);
}

TpOverlapBackendMap to_backend_map(const TransformerLayerTPOverlapCfg& cfg) {
  TpOverlapBackendMap out;
  for (const auto& [name, slot] : TransformerLayerTPOverlapCfg::slots()) {
    const auto& entry = cfg.*slot;
    if (!entry) continue;
    for (auto& [field, value] : overlap_fields(*entry)) {
      out.emplace(str_cat(name, ".", field), std::move(value));
    }
  }
  return out;
}

}  // namespace shardwise

#include "shardwise/core/checked_size.hpp"

namespace shardwise {

std::optional<std::int64_t> product_within(std::initializer_list<NamedSize> factors,
                                           std::int64_t limit) {
  std::int64_t product = 1;
  for (const NamedSize& f : factors) {
    const auto next = checked_mul(product, f.value);
    if (!next) return std::nullopt;
    product = *next;
  }
  if (product > limit) return std::nullopt;
  return product;
}

std::string describe_product_refusal(std::initializer_list<NamedSize> factors, std::int64_t limit) {
  std::string out;
  for (const NamedSize& f : factors) {
    out += str_cat(out.empty() ? "" : " x ", f.name, " (", f.value, ")");
  }
  const auto product = product_within(factors, std::numeric_limits<std::int64_t>::max());
  if (!product) return out + " overflows 64 bits";
  return str_cat(out, " = ", *product, " exceeds the limit of ", limit);
}

}  // namespace shardwise

// Name tables for the small enums that configs choose from ("layer-wise", "cosine", ...).
// Every such enum E provides `std::span<const EnumName<E>> enum_names(E)` next to its
// definition; the templates below turn that one table into printing, parsing and error messages.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E>
concept NamedEnum = requires(E e) {
  { enum_names(e) } -> std::convertible_to<std::span<const EnumName<E>>>;
};

template <NamedEnum E>
std::string_view to_string(E value) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.value == value) return entry.name;
  }
  return "<invalid>";
}

template <NamedEnum E>
std::optional<E> parse_enum(std::string_view text) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.name == text) return entry.value;
  }
  return std::nullopt;
}

// "a, b, c": the accepted spellings, for error messages and help texts.
template <NamedEnum E>
std::string enum_choices() {
  std::string out;
  for (const auto& entry : enum_names(E{})) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

// Like parse_enum but throws ConfigError naming `field` and the accepted values.
template <NamedEnum E>
E enum_from_name(std::string_view text, std::string_view field) {
  if (auto value = parse_enum<E>(text)) return *value;
  throw ConfigError(
      str_cat(field, ": unknown value '", printable(text), "' (valid: ", enum_choices<E>(), ")"));
}

}  // namespace shardwise

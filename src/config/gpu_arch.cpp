#include "shardwise/config/gpu_arch.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "shardwise/core/message_text.hpp"

namespace shardwise {

int compute_capability_major(GpuArch arch) {
  switch (arch) {
    case GpuArch::kNone:
      return 0;
    case GpuArch::kVolta:
      return 7;
    case GpuArch::kAmpere:
      return 8;
    case GpuArch::kHopper:
      return 9;
    case GpuArch::kBlackwell:
      return 10;
  }
  return 0;
}

GpuArch gpu_arch_from_name(std::string_view text, std::string_view field) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  struct Alias {
    std::string_view name;
    GpuArch arch;
  };
  static constexpr Alias kProducts[] = {
      {"cpu", GpuArch::kNone},       {"v100", GpuArch::kVolta},      {"a100", GpuArch::kAmpere},
      {"h100", GpuArch::kHopper},    {"h200", GpuArch::kHopper},     {"h800", GpuArch::kHopper},
      {"b200", GpuArch::kBlackwell}, {"gb200", GpuArch::kBlackwell}, {"b300", GpuArch::kBlackwell},
  };
  if (auto arch = parse_enum<GpuArch>(lower)) return *arch;
  for (const auto& alias : kProducts) {
    if (alias.name == lower) return alias.arch;
  }
  std::string choices = enum_choices<GpuArch>();
  for (const auto& alias : kProducts) choices += str_cat(", ", alias.name);
  throw ConfigError(str_cat(field, ": unknown GPU '", printable(text), "' (valid: ", choices, ")"));
}

}  // namespace shardwise

// GPU architecture families, as far as configuration decisions need them (CUDA connection
// counts, which TP-overlap presets apply). kNone means "no GPU" (shardwise's CPU build).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "shardwise/config/enum_names.hpp"

namespace shardwise {

enum class GpuArch { kNone, kVolta, kAmpere, kHopper, kBlackwell };

inline constexpr EnumName<GpuArch> kGpuArchNames[] = {
    {GpuArch::kNone, "none"},     {GpuArch::kVolta, "volta"},         {GpuArch::kAmpere, "ampere"},
    {GpuArch::kHopper, "hopper"}, {GpuArch::kBlackwell, "blackwell"},
};
inline std::span<const EnumName<GpuArch>> enum_names(GpuArch) { return kGpuArchNames; }

// CUDA compute-capability major version of the family (0 for kNone).
int compute_capability_major(GpuArch arch);

// Accepts family names (hopper, blackwell, ...) and product names (h100, h200, b200, gb200,
// a100, v100, cpu); case-insensitive. Throws ConfigError naming `field` otherwise.
GpuArch gpu_arch_from_name(std::string_view text, std::string_view field);

}  // namespace shardwise

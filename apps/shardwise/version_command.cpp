// `shardwise version`: prints the version and the build configuration: the BLAS library and the
// core it picked, the ISA level the element-wise kernels run at on this CPU, and whether the CUDA
// kernels were built (and for which architectures).
#include <cstdio>

#include "command_registry.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/core/cpu_isa.hpp"

namespace shardwise::cli {
namespace {

const char* build_type() {
#ifdef NDEBUG
  return "release";
#else
  return "debug";
#endif
}

const char* cuda_kernels() {
#ifdef SHARDWISE_CUDA_ARCHITECTURES
  return "built for CUDA architectures " SHARDWISE_CUDA_ARCHITECTURES;
#else
  return "not built (cmake/cuda.cmake says when they are)";
#endif
}

const bool registered = register_command(
    "version", "Print the shardwise version and build configuration", [](CLI::App&) {
      return [] {
        std::printf("shardwise 0.1.0 (C++%ld, %s)\n", __cplusplus / 100 % 100, build_type());
        std::printf("BLAS: %s\n", blas::library_config().c_str());
        std::printf("CPU kernels: %s\n", std::string(isa_level_name(active_isa_level())).c_str());
        std::printf("CUDA kernels: %s\n", cuda_kernels());
        return 0;
      };
    });

}  // namespace
}  // namespace shardwise::cli

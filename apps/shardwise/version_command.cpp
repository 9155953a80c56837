// `shardwise version`: prints the version and the build configuration.
#include <cstdio>

#include "command_registry.hpp"

namespace shardwise::cli {
namespace {

const bool registered = register_command(
    "version", "Print the shardwise version and build configuration", [](CLI::App&) {
      return [] {
        std::printf("shardwise 0.1.0 (C++%ld, %s)\n", __cplusplus / 100 % 100,
#ifdef NDEBUG
                    "release"
#else
                    "debug"
#endif
        );
        return 0;
      };
    });

}  // namespace
}  // namespace shardwise::cli

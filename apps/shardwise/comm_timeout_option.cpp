#include "comm_timeout_option.hpp"

namespace shardwise::cli {

CLI::Option* add_comm_timeout_option(CLI::App& app, double& seconds) {
  // Checked by validate_comm_timeout (comm/comm_deadline.hpp) before MPI starts, so a bad value
  // exits 2 on every rank with one message.
  return app.add_option("--comm-timeout", seconds,
                        "Abort the job (exit 3) when one collective or send/recv waits longer "
                        "than SECONDS for another rank (default 600)");
}

}  // namespace shardwise::cli

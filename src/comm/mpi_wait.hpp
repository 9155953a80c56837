// Completing MPI requests under the collective watchdog's deadline (private to the MPI backend).
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise {

// MPI's text for an error code.
std::string mpi_error_text(int rc);

// The MPI type buffers of `dtype` travel as (16-bit floats as raw bits).
MPI_Datatype mpi_type(DType dtype);

// Completes `count` requests by polling MPI_Testall (PollMode::kDrivesProgress: the polls move
// the data; a hung wait still ends at the deadline, which MPI_Wait cannot). Returns MPI's code.
// When they have not all completed after `timeout_seconds`, prints comm_timeout_message(describe(),
// ...) and aborts the whole job with kCommTimeoutExitCode: a peer that never arrives must not hang
// the job.
int wait_all_or_abort(int count, MPI_Request* requests, MPI_Status* statuses,
                      double timeout_seconds, const std::function<CommWaitDescription()>& describe);

// Prints the watchdog's message and aborts the job.
[[noreturn]] void abort_on_comm_timeout(const CommWaitDescription& wait, double waited_seconds,
                                        double timeout_seconds);

}  // namespace shardwise

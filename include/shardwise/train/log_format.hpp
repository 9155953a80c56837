// Wording of the trainer's log lines, kept apart from the loop so it can be tested on its own.
#pragma once

#include <string>

#include "shardwise/config/training_config.hpp"

namespace shardwise {

// "comm hidden 66%": the share of a step's gradient communication that overlapped backward.
std::string comm_hidden_text(double hidden_fraction);

// Whether the run's held-out samples have one right answer, so exact-match accuracy means
// something: the synthetic tasks (addition, ...). Not text or token-file data.
bool reports_exact_match(const DataConfig& data);

// ", exact-match accuracy 97.5%" when the data has exact answers, else "".
std::string exact_match_text(const DataConfig& data, double accuracy);

}  // namespace shardwise

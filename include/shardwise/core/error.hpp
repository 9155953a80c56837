// Error types. Every error a user can cause names the offending input (file, field, param);
// the CLI turns any shardwise::Error into one line on stderr and exit code 2.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace shardwise {

// Streams all arguments into one string: str_cat("param ", name, " has ", n, " elements").
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed an impossible value (dp=0, negative bucket size, unknown name).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A config file or option is malformed or has unknown keys.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A file on disk is malformed, truncated or inconsistent.
class FormatError : public Error {
 public:
  using Error::Error;
};

// Shapes, sizes or dtypes that do not agree.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// Failure of the communication layer or disagreement between ranks.
class CommError : public Error {
 public:
  using Error::Error;
};

// Filesystem errors (cannot open, cannot rename, ...).
class IoError : public Error {
 public:
  using Error::Error;
};

// An internal invariant did not hold: a bug in shardwise, never the user's fault.
class InvariantError : public Error {
 public:
  using Error::Error;
};

}  // namespace shardwise

// Asserts an invariant in every build type (layouts and plans are too important to check only
// in debug builds). Extra arguments are streamed into the message.
#define SW_CHECK(cond, ...)                                                     \
  do {                                                                          \
    if (!(cond)) {                                                              \
      throw ::shardwise::InvariantError(                                        \
          ::shardwise::str_cat(__FILE__, ":", __LINE__, ": invariant `", #cond, \
                               "` failed: " __VA_OPT__(, ) __VA_ARGS__));       \
    }                                                                           \
  } while (0)

// Validates user input: throws ErrorType with the streamed message when cond is false.
#define SW_REQUIRE(cond, ErrorType, ...)                             \
  do {                                                               \
    if (!(cond)) throw ErrorType(::shardwise::str_cat(__VA_ARGS__)); \
  } while (0)

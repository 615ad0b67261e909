#pragma once
// Error types of the planner. The planner throws; the CLI turns InputError into
// exit code 2 with the message, and DeviceError (probes) into exit code 3.
#include <stdexcept>
#include <string>

namespace kvsight {

// Bad input: a field, flag or file that is missing, malformed, contradictory or
// out of range. The message names the field and what is allowed.
class InputError : public std::runtime_error {
 public:
  InputError(std::string field, const std::string& what_is_wrong)
      : std::runtime_error(field.empty() ? what_is_wrong : field + ": " + what_is_wrong),
        field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

// A byte or element count that does not fit in 64 bits. Still bad input (an
// absurd context or batch), so it is an InputError and exits with code 2.
class OverflowError : public InputError {
 public:
  using InputError::InputError;
};

// A device or runtime failure (driver error, allocation failure, failed
// verification). Exit code 3.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvsight

// Errors that a user can act on.
//
// Every failure in Ringmaster carries a category and a message written for
// the person reading it: what failed, against what, and what to check next.
// `Status` is a value; `Error` is the exception that carries one through
// code that cannot return it. Both are immutable once made and safe to copy
// between threads.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ringmaster {

enum class ErrorCategory : std::uint8_t {
  ok,
  config,    // bad configuration or input: fix the command line or environment
  network,   // a socket, address or route failed
  protocol,  // a peer sent something we cannot parse or did not expect
  peer,      // a peer rank failed, died or disagreed with us
  timeout,   // something did not happen within its deadline
  internal,  // an invariant of ours broke: a bug to report
};

std::string_view name_of(ErrorCategory c) noexcept;

class Status {
 public:
  Status() = default;
  Status(ErrorCategory category, std::string message) : category_(category), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const noexcept { return category_ == ErrorCategory::ok; }
  explicit operator bool() const noexcept { return ok(); }
  ErrorCategory category() const noexcept { return category_; }
  const std::string& message() const noexcept { return message_; }
  // "<category> error: <message>", or "ok".
  std::string to_string() const;

 private:
  ErrorCategory category_ = ErrorCategory::ok;
  std::string message_;
};

class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  Error(ErrorCategory category, std::string message) : Error(Status(category, std::move(message))) {}

  const Status& status() const noexcept { return status_; }
  ErrorCategory category() const noexcept { return status_.category(); }

 private:
  Status status_;
};

}  // namespace ringmaster

// The engine's error type and check macros. A message names the bad value
// and what was expected ("model.heads = 12 must be divisible by
// model.kv_heads = 5"), never just "invalid argument".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace burst {

// What went wrong decides the exit status: bad input (a config, a flag, a
// data file) exits 2 on every rank; a numerical fault (non-finite loss or
// gradient, train.on_nonfinite = abort) exits 3; everything else exits 1.
enum class ErrorKind { Config, Input, IO, Comm, Numeric, Internal };

const char* error_kind_name(ErrorKind k);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg, const char* file = nullptr, int line = 0);
  ErrorKind kind() const { return kind_; }
  int exit_code() const {
    if (kind_ == ErrorKind::Config || kind_ == ErrorKind::Input) return 2;
    return kind_ == ErrorKind::Numeric ? 3 : 1;
  }
  // Raised by every rank at once (bad input is the same everywhere; a fault
  // found after a global reduction is seen by all): rank 0 reports it and
  // every rank exits with exit_code() instead of aborting the job.
  bool collective() const { return collective_ || exit_code() == 2; }
  Error& set_collective() {
    collective_ = true;
    return *this;
  }
  // The message without the source location (for users); what() has both.
  const std::string& message() const { return message_; }

 private:
  ErrorKind kind_;
  std::string message_;
  bool collective_ = false;
};

template <class... Args> std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace burst

#define BURST_FAIL(kind, ...) throw ::burst::Error((kind), ::burst::str_cat(__VA_ARGS__), __FILE__, __LINE__)

// BURST_CHECK(cond, kind, message parts...): throws Error(kind) when cond is false.
#define BURST_CHECK(cond, kind, ...)          \
  do {                                        \
    if (!(cond)) BURST_FAIL(kind, __VA_ARGS__); \
  } while (0)

#define BURST_CHECK_CONFIG(cond, ...) BURST_CHECK(cond, ::burst::ErrorKind::Config, __VA_ARGS__)
#define BURST_CHECK_INPUT(cond, ...) BURST_CHECK(cond, ::burst::ErrorKind::Input, __VA_ARGS__)
#define BURST_CHECK_IO(cond, ...) BURST_CHECK(cond, ::burst::ErrorKind::IO, __VA_ARGS__)
// An internal invariant: the message says what was expected.
#define BURST_ASSERT(cond, ...) \
  BURST_CHECK(cond, ::burst::ErrorKind::Internal, "internal check '" #cond "' failed: ", __VA_ARGS__)

// BURST_CHECK_EQ(a, b, what): "what: expected a == b, got a = 3, b = 4".
#define BURST_CHECK_EQ(a, b, kind, what)                                                                  \
  do {                                                                                                    \
    const auto& burst_a_ = (a);                                                                           \
    const auto& burst_b_ = (b);                                                                           \
    if (!(burst_a_ == burst_b_))                                                                          \
      BURST_FAIL(kind, what, ": expected " #a " == " #b ", got " #a " = ", burst_a_, ", " #b " = ", burst_b_); \
  } while (0)

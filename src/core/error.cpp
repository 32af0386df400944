#include "core/error.hpp"

namespace burst {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Config: return "config";
    case ErrorKind::Input: return "input";
    case ErrorKind::IO: return "io";
    case ErrorKind::Comm: return "comm";
    case ErrorKind::Numeric: return "numeric";
    case ErrorKind::Internal: return "internal";
  }
  return "unknown";
}

static std::string with_location(ErrorKind kind, const std::string& msg, const char* file, int line) {
  // Users get the message; the source location only helps for internal errors.
  if (kind != ErrorKind::Internal || file == nullptr) return msg;
  return msg + " [" + file + ":" + std::to_string(line) + "]";
}

Error::Error(ErrorKind kind, const std::string& msg, const char* file, int line)
    : std::runtime_error(with_location(kind, msg, file, line)), kind_(kind), message_(msg) {}

}  // namespace burst

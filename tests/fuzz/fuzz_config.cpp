// libFuzzer harness: the TOML run-file reader (ConfigSchema::parse_string)
// and --set overrides (apply_override, one per input line). Bad input must
// end in burst::Error (a message for the user); anything else escaping, a
// crash, a hang or a sanitizer report is a bug. The schema holds every key
// type and a cross-key rule, like train_schema().
#include "core/config.hpp"
#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

namespace {
const burst::ConfigSchema& schema() {
  static const burst::ConfigSchema s = [] {
    burst::ConfigSchema x;
    x.integer("train.steps", 300, 1, 100000000, "steps")
        .integer("train.batch", 16, 1, 1 << 20, "batch")
        .real("train.lr", 3e-3, 0, 10, "lr")
        .real("train.min_lr", 3e-4, 0, 10, "min lr")
        .boolean("train.shuffle", false, "shuffle")
        .string("train.dtype", "float", {"float", "double"}, "dtype")
        .string("io.checkpoint", "", {}, "path")
        .int_list("bench.sizes", {512}, 1, 16384, "sizes")
        .string("model.deep.nested.key", "x", {}, "a deep section");
    x.rule([](const burst::Config& c) -> std::string {
      return c.get_real("train.min_lr") > c.get_real("train.lr") ? "min_lr exceeds lr" : "";
    });
    return x;
  }();
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    burst::Config c = schema().parse_string(text, "fuzz.toml");
    (void)c.dump();
  } catch (const burst::Error&) {
  }
  std::istringstream lines(text);
  burst::Config c = schema().defaults();
  for (std::string line; std::getline(lines, line);) {
    try {
      schema().apply_override(c, line);
    } catch (const burst::Error&) {
    }
  }
  return 0;
}

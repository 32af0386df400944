// libFuzzer harness: the .safetensors header reader and the index of a
// sharded checkpoint. The input is a whole file; after the header passes,
// every number tensor is converted from the input's bytes, so an offset the
// checks let through outside the buffer is an ASan report. Bad input must
// end in burst::Error; anything else escaping is a bug.
#include "core/error.hpp"
#include "io/safetensors.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace burst::io;
  try {
    const StHeader h = parse_safetensors_header(data, size, size, "fuzz.safetensors");
    for (const StTensor& t : h.tensors) {
      if (t.dtype != StDtype::BF16 && t.dtype != StDtype::F16 && t.dtype != StDtype::F32 && t.dtype != StDtype::F64) continue;
      std::vector<float> out(std::size_t(t.numel()));
      st_convert(t.dtype, data + h.data_start() + t.begin, out.size(), out.data());
    }
  } catch (const burst::Error&) {
  }
  try {
    (void)parse_safetensors_index(std::string(reinterpret_cast<const char*>(data), size), "fuzz.index.json");
  } catch (const burst::Error&) {
  }
  return 0;
}

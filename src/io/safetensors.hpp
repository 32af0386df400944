// The .safetensors format of Hugging Face checkpoints:
//   [8 bytes: header length N, little-endian u64] [N bytes: JSON header] [data]
// The header maps each tensor name to {dtype, shape, data_offsets [begin,
// end)} relative to the start of the data, plus an optional "__metadata__"
// object of strings. Sharded checkpoints add model.safetensors.index.json
// whose "weight_map" names the shard of every tensor.
//
// Reading checks every rule of the format before any data is used: the
// header fits the file, is a JSON object, each dtype is known, each shape
// times the dtype size equals its byte range, the ranges lie inside the data
// and tile it without overlap or gap. A file breaking one is refused with
// Error(Input) naming the file, the byte offset and the rule; a file that
// cannot be read is Error(IO). Free of Kokkos (the fuzz harness builds it
// alone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace burst::io {

// Element types of the format. Numbers convert from BF16/F16/F32/F64 only;
// the others are recognised (a file holding them is valid) but not converted.
enum class StDtype { BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2 };

const char* st_dtype_name(StDtype t);
std::size_t st_dtype_size(StDtype t);
// "BF16" -> BF16; false when the name is not a safetensors dtype.
bool st_dtype_from_name(const std::string& name, StDtype* out);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range relative to the data start
  std::uint64_t numel() const;
};

// The parsed header of one file.
struct StHeader {
  std::uint64_t header_len = 0;               // N
  std::vector<StTensor> tensors;              // in header order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::uint64_t data_start() const { return 8 + header_len; }
  const StTensor* find(const std::string& name) const;
};

// Parses and checks a header. `head` holds the first bytes of the file (at
// least the 8-byte length and the JSON when the file is long enough), and
// `file_size` the size of the whole file; `source` names it in messages.
StHeader parse_safetensors_header(const std::uint8_t* head, std::size_t head_size, std::uint64_t file_size,
                                  const std::string& source);

// Headers beyond this are refused before being read (the format's own
// readers use the same limit).
constexpr std::uint64_t kMaxSafetensorsHeader = 100ull << 20;

class SafetensorsFile {
 public:
  // Opens and checks the header; Error(Input) when missing or malformed.
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return path_; }
  const StHeader& header() const { return header_; }
  const StTensor& tensor(const std::string& name) const;  // Error(Input) naming the file when absent
  // The tensor's bytes as stored (little-endian).
  std::vector<std::uint8_t> raw(const std::string& name) const;
  // The tensor converted to T (float or double) from BF16/F16/F32/F64.
  template <class T> std::vector<T> read(const std::string& name) const;

 private:
  std::string path_;
  StHeader header_;
};

// Converts stored little-endian elements to T (float or double).
template <class T> void st_convert(StDtype from, const std::uint8_t* bytes, std::size_t n, T* out);
// Converts values to stored bytes of BF16/F16/F32/F64 (round to nearest even).
template <class T> std::vector<std::uint8_t> st_encode(StDtype to, const T* values, std::size_t n);

// A tensor to write: its bytes are asked for when the writer reaches it, so
// a large checkpoint is never held whole in memory.
struct StTensorSpec {
  std::string name;
  StDtype dtype;
  std::vector<std::uint64_t> shape;
};
using StBytesFn = std::function<std::vector<std::uint8_t>(std::size_t index)>;

// Writes a file (through "<path>.tmp" and a rename): the header padded with
// spaces to a multiple of 8 bytes, then each tensor in the given order.
void write_safetensors(const std::string& path, const std::vector<StTensorSpec>& tensors,
                       const std::map<std::string, std::string>& metadata, const StBytesFn& bytes_of);

// A checkpoint directory: model.safetensors.index.json (sharded) or a single
// .safetensors file. Every tensor of the weight map must be in its shard.
class SafetensorsModel {
 public:
  explicit SafetensorsModel(const std::string& dir);
  std::vector<std::string> names() const;  // sorted
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const StTensor& tensor(const std::string& name) const;
  const SafetensorsFile& file_of(const std::string& name) const;
  template <class T> std::vector<T> read(const std::string& name) const { return file_of(name).read<T>(name); }
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t> where_;  // tensor -> index in files_
};

// The index file of a sharded checkpoint, parsed and checked: weight_map
// (tensor -> shard file name), and metadata.total_size when present.
struct StIndex {
  std::map<std::string, std::string> weight_map;
  std::int64_t total_size = -1;
};
StIndex parse_safetensors_index(const std::string& text, const std::string& source);

}  // namespace burst::io

#include "io/safetensors.hpp"

#include "core/durable.hpp"
#include "core/error.hpp"
#include "core/text_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace burst::io {

namespace {
struct DtypeInfo {
  StDtype t;
  const char* name;
  std::size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {StDtype::BOOL, "BOOL", 1}, {StDtype::U8, "U8", 1},   {StDtype::I8, "I8", 1},     {StDtype::I16, "I16", 2},
    {StDtype::U16, "U16", 2},   {StDtype::I32, "I32", 4}, {StDtype::U32, "U32", 4},   {StDtype::I64, "I64", 8},
    {StDtype::U64, "U64", 8},   {StDtype::F16, "F16", 2}, {StDtype::BF16, "BF16", 2}, {StDtype::F32, "F32", 4},
    {StDtype::F64, "F64", 8},   {StDtype::F8_E4M3, "F8_E4M3", 1}, {StDtype::F8_E5M2, "F8_E5M2", 1},
};

std::uint64_t le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Deeper nesting than any safetensors header ({name: {shape: [..]}}) is
// refused before the JSON parser builds it: a megabyte of '[' is a valid
// JSON prefix but no header.
long max_nesting(const std::uint8_t* p, std::size_t n) {
  long depth = 0, worst = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = char(p[i]);
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') in_string = true;
    else if (c == '[' || c == '{') worst = std::max(worst, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return worst;
}

// IEEE half <-> float (the format's F16).
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float f = std::ldexp(float(man), -24);
    return sign ? -f : f;
  }
  const std::uint32_t u = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t float_to_half(float f) {  // round to nearest, ties to even
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, inf
  if (a >= 0x477ff000u) return sign | 0x7c00u;                               // rounds past 65504
  if (a < 0x38800000u) {                                                     // below 2^-14: subnormal
    float af;
    std::memcpy(&af, &a, sizeof af);
    return sign | std::uint16_t(std::nearbyint(double(af) * 16777216.0));    // units of 2^-24
  }
  std::uint32_t h = ((a >> 23) - 112) << 10 | ((a & 0x7fffffu) >> 13);
  const std::uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent, as it should
  return sign | std::uint16_t(h);
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {  // as core/bf16.hpp, without Kokkos
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) return std::uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

std::string range(std::uint64_t a, std::uint64_t b) { return str_cat("[", a, ", ", b, ")"); }
}  // namespace

const char* st_dtype_name(StDtype t) {
  for (auto& d : kDtypes)
    if (d.t == t) return d.name;
  return "?";
}

std::size_t st_dtype_size(StDtype t) {
  for (auto& d : kDtypes)
    if (d.t == t) return d.size;
  return 0;
}

bool st_dtype_from_name(const std::string& name, StDtype* out) {
  for (auto& d : kDtypes)
    if (name == d.name) {
      *out = d.t;
      return true;
    }
  return false;
}

std::uint64_t StTensor::numel() const {
  std::uint64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

const StTensor* StHeader::find(const std::string& name) const {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

StHeader parse_safetensors_header(const std::uint8_t* head, std::size_t head_size, std::uint64_t file_size,
                                  const std::string& src) {
  BURST_CHECK_INPUT(file_size >= 8, "safetensors file '", src, "' is truncated: ", file_size,
                    " bytes, fewer than the 8-byte header length at offset 0");
  BURST_ASSERT(head_size >= 8, "the caller passes the first 8 bytes");
  StHeader h;
  h.header_len = le64(head);
  const std::uint64_t N = h.header_len;
  BURST_CHECK_INPUT(N <= file_size - 8, "safetensors file '", src, "': the header length ", N,
                    " (bytes 0-7) runs past the end of the file (", file_size, " bytes): truncated, or not a safetensors file");
  BURST_CHECK_INPUT(N <= kMaxSafetensorsHeader, "safetensors file '", src, "': the header length ", N,
                    " (bytes 0-7) exceeds the limit of ", kMaxSafetensorsHeader, " bytes");
  BURST_CHECK_INPUT(N >= 2, "safetensors file '", src, "': the header length ", N,
                    " (bytes 0-7) is too short for a JSON object");
  BURST_ASSERT(head_size >= 8 + N, "the caller passes the whole header");
  const std::uint64_t data_size = file_size - 8 - N;
  const long depth = max_nesting(head + 8, std::size_t(N));
  BURST_CHECK_INPUT(depth <= 8, "safetensors file '", src, "': the JSON header (bytes ", range(8, 8 + N),
                    ") nests ", depth, " levels deep; a safetensors header nests at most 3");
  json j;
  try {
    // The format pads the header with spaces; a NUL padding is also seen in the wild.
    std::size_t n = std::size_t(N);
    while (n > 0 && head[8 + n - 1] == 0) --n;
    j = json::parse(head + 8, head + 8 + n);
  } catch (const json::parse_error& e) {
    BURST_FAIL(ErrorKind::Input, "safetensors file '", src, "': the header (bytes ", range(8, 8 + N),
               ") is not valid JSON near byte offset ", 8 + (e.byte > 0 ? e.byte - 1 : 0), ": ", e.what());
  } catch (const json::exception& e) {  // a number out of range (1e999) is not a parse_error (found by the fuzzer)
    BURST_FAIL(ErrorKind::Input, "safetensors file '", src, "': the header (bytes ", range(8, 8 + N),
               ") is not valid JSON: ", e.what());
  }
  BURST_CHECK_INPUT(j.is_object(), "safetensors file '", src, "': the header at byte offset 8 must be a JSON object, got ",
                    j.type_name());
  const std::string at = str_cat("safetensors file '", src, "': ");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      BURST_CHECK_INPUT(v.is_object(), at, "__metadata__ in the header (bytes ", range(8, 8 + N), ") must be an object, got ",
                        v.type_name());
      for (auto m = v.begin(); m != v.end(); ++m) {
        BURST_CHECK_INPUT(m.value().is_string(), at, "__metadata__ value of '", m.key(), "' must be a string, got ",
                          m.value().type_name());
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = str_cat(at, "tensor '", name, "' in the header (bytes ", range(8, 8 + N), ")");
    BURST_CHECK_INPUT(!name.empty(), at, "a tensor in the header (bytes ", range(8, 8 + N), ") has an empty name");
    BURST_CHECK_INPUT(v.is_object(), what, " must be an object {dtype, shape, data_offsets}, got ", v.type_name());
    StTensor t;
    t.name = name;
    BURST_CHECK_INPUT(v.contains("dtype") && v["dtype"].is_string(), what, ": 'dtype' must be a string");
    const std::string dt = v["dtype"].get<std::string>();
    BURST_CHECK_INPUT(st_dtype_from_name(dt, &t.dtype), what, ": unknown dtype '", dt,
                      "' (known: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2)");
    BURST_CHECK_INPUT(v.contains("shape") && v["shape"].is_array(), what, ": 'shape' must be an array");
    std::uint64_t numel = 1;
    bool overflow = false;
    for (const json& s : v["shape"]) {
      BURST_CHECK_INPUT(s.is_number_unsigned(), what, ": the shape ", v["shape"].dump(),
                        " must hold non-negative integers");
      const std::uint64_t d = s.get<std::uint64_t>();
      t.shape.push_back(d);
      if (d != 0 && numel > std::numeric_limits<std::uint64_t>::max() / d) overflow = true;
      numel *= d;
    }
    const std::uint64_t es = st_dtype_size(t.dtype);
    overflow = overflow || (numel != 0 && numel > std::numeric_limits<std::uint64_t>::max() / es);
    BURST_CHECK_INPUT(!overflow, what, ": the shape ", v["shape"].dump(), " has more elements than any file holds");
    BURST_CHECK_INPUT(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2 &&
                          v["data_offsets"][0].is_number_unsigned() && v["data_offsets"][1].is_number_unsigned(),
                      what, ": 'data_offsets' must be two non-negative integers [begin, end]");
    t.begin = v["data_offsets"][0].get<std::uint64_t>();
    t.end = v["data_offsets"][1].get<std::uint64_t>();
    BURST_CHECK_INPUT(t.begin <= t.end, what, ": data_offsets ", range(t.begin, t.end), " end before they begin");
    BURST_CHECK_INPUT(t.end <= data_size, what, ": data_offsets ", range(t.begin, t.end), " (file bytes ",
                      t.end <= std::numeric_limits<std::uint64_t>::max() - 8 - N ? range(8 + N + t.begin, 8 + N + t.end)
                                                                                 : std::string("beyond 2^64"),
                      ") run past the end of the data (", data_size, " bytes at file offset ", 8 + N,
                      "; the file has ", file_size, " bytes): truncated?");
    BURST_CHECK_INPUT(t.end - t.begin == numel * es, what, ": data_offsets ", range(t.begin, t.end), " hold ",
                      t.end - t.begin, " bytes (file offset ", 8 + N + t.begin, ") but shape ", v["shape"].dump(), " x ",
                      dt, " needs ", numel * es);
    h.tensors.push_back(std::move(t));
  }
  // The tensors tile the data: no overlap, no gap, nothing after the last.
  std::vector<const StTensor*> order;
  for (auto& t : h.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const StTensor* a, const StTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expect = 0;
  const StTensor* prev = nullptr;
  for (const StTensor* t : order) {
    BURST_CHECK_INPUT(t->begin >= expect, at, "tensor '", t->name, "' (data_offsets ", range(t->begin, t->end),
                      ", file offset ", 8 + N + t->begin, ") overlaps tensor '", prev ? prev->name : "", "' (data_offsets ",
                      prev ? range(prev->begin, prev->end) : "", ")");
    BURST_CHECK_INPUT(t->begin == expect, at, "data bytes ", range(expect, t->begin), " (file offset ", 8 + N + expect,
                      ") belong to no tensor (a gap before tensor '", t->name, "')");
    expect = t->end;
    prev = t;
  }
  BURST_CHECK_INPUT(expect == data_size, at, "the tensors end at data byte ", expect, " (file offset ", 8 + N + expect,
                    ") but the file goes on to byte ", file_size, ": ", data_size - expect,
                    " bytes belong to no tensor");
  return h;
}

// ---------------------------------------------------------------- file

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  {  // before opening: opening a FIFO (a shard named in the index, a *.safetensors in the directory) waits for a writer
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (fs::exists(st))
      BURST_CHECK_INPUT(fs::is_regular_file(st), "safetensors file '", path, "' is not a regular file (",
                        fs::is_directory(st) ? "a directory" : "a device, FIFO or socket", ")");
  }
  std::ifstream in(path, std::ios::binary);
  BURST_CHECK_INPUT(in.good(), "cannot open safetensors file '", path, "': ", std::strerror(errno));
  std::error_code ec;
  const std::uint64_t size = fs::file_size(path, ec);
  BURST_CHECK_INPUT(!ec, "cannot read the size of safetensors file '", path, "': ", ec.message());
  std::vector<std::uint8_t> head(std::size_t(std::min<std::uint64_t>(size, 8)));
  in.read(reinterpret_cast<char*>(head.data()), std::streamsize(head.size()));
  BURST_CHECK_IO(in.good() || head.empty(), "cannot read safetensors file '", path, "'");
  if (size >= 8) {
    const std::uint64_t n = le64(head.data());
    if (n <= size - 8 && n <= kMaxSafetensorsHeader) {  // otherwise the parser says why, from 8 bytes
      head.resize(std::size_t(8 + n));
      in.read(reinterpret_cast<char*>(head.data() + 8), std::streamsize(n));
      BURST_CHECK_IO(in.good(), "cannot read the header of safetensors file '", path, "' (bytes ", range(8, 8 + n), ")");
    }
  }
  header_ = parse_safetensors_header(head.data(), head.size(), size, path);
}

const StTensor& SafetensorsFile::tensor(const std::string& name) const {
  const StTensor* t = header_.find(name);
  BURST_CHECK_INPUT(t != nullptr, "safetensors file '", path_, "' holds no tensor '", name, "'");
  return *t;
}

std::vector<std::uint8_t> SafetensorsFile::raw(const std::string& name) const {
  const StTensor& t = tensor(name);
  std::vector<std::uint8_t> out(std::size_t(t.end - t.begin));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(std::streamoff(header_.data_start() + t.begin));
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size()));
  BURST_CHECK_IO(in.good() || out.empty(), "cannot read tensor '", name, "' from safetensors file '", path_, "' (file bytes ",
                 range(header_.data_start() + t.begin, header_.data_start() + t.end), "): the file changed or was truncated");
  return out;
}

template <class T> void st_convert(StDtype from, const std::uint8_t* b, std::size_t n, T* out) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (from) {
      case StDtype::BF16: out[i] = T(bf16_to_float(std::uint16_t(b[2 * i] | b[2 * i + 1] << 8))); break;
      case StDtype::F16: out[i] = T(half_to_float(std::uint16_t(b[2 * i] | b[2 * i + 1] << 8))); break;
      case StDtype::F32: {
        std::uint32_t u = 0;
        for (int k = 3; k >= 0; --k) u = u << 8 | b[4 * i + k];
        float f;
        std::memcpy(&f, &u, 4);
        out[i] = T(f);
        break;
      }
      case StDtype::F64: {
        std::uint64_t u = le64(b + 8 * i);
        double d;
        std::memcpy(&d, &u, 8);
        out[i] = T(d);
        break;
      }
      default: BURST_FAIL(ErrorKind::Input, "safetensors dtype ", st_dtype_name(from), " does not convert to numbers (BF16, F16, F32, F64 do)");
    }
  }
}

template <class T> std::vector<std::uint8_t> st_encode(StDtype to, const T* x, std::size_t n) {
  std::vector<std::uint8_t> out(n * st_dtype_size(to));
  auto put = [&](std::size_t at, std::uint64_t bits, int bytes) {
    for (int k = 0; k < bytes; ++k) out[at + k] = std::uint8_t(bits >> (8 * k));
  };
  for (std::size_t i = 0; i < n; ++i) {
    switch (to) {
      case StDtype::BF16: put(2 * i, float_to_bf16(float(x[i])), 2); break;
      case StDtype::F16: put(2 * i, float_to_half(float(x[i])), 2); break;
      case StDtype::F32: {
        const float f = float(x[i]);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        put(4 * i, u, 4);
        break;
      }
      case StDtype::F64: {
        const double d = double(x[i]);
        std::uint64_t u;
        std::memcpy(&u, &d, 8);
        put(8 * i, u, 8);
        break;
      }
      default: BURST_FAIL(ErrorKind::Internal, "cannot encode numbers as safetensors ", st_dtype_name(to));
    }
  }
  return out;
}

template <class T> std::vector<T> SafetensorsFile::read(const std::string& name) const {
  const StTensor& t = tensor(name);
  BURST_CHECK_INPUT(t.dtype == StDtype::BF16 || t.dtype == StDtype::F16 || t.dtype == StDtype::F32 || t.dtype == StDtype::F64,
                    "tensor '", name, "' in safetensors file '", path_, "' is ", st_dtype_name(t.dtype),
                    "; only BF16, F16, F32 and F64 tensors convert to numbers");
  const std::vector<std::uint8_t> b = raw(name);
  std::vector<T> out(std::size_t(t.numel()));
  st_convert(t.dtype, b.data(), out.size(), out.data());
  return out;
}

template void st_convert<float>(StDtype, const std::uint8_t*, std::size_t, float*);
template void st_convert<double>(StDtype, const std::uint8_t*, std::size_t, double*);
template std::vector<std::uint8_t> st_encode<float>(StDtype, const float*, std::size_t);
template std::vector<std::uint8_t> st_encode<double>(StDtype, const double*, std::size_t);
template std::vector<float> SafetensorsFile::read<float>(const std::string&) const;
template std::vector<double> SafetensorsFile::read<double>(const std::string&) const;

// ---------------------------------------------------------------- writer

void write_safetensors(const std::string& path, const std::vector<StTensorSpec>& tensors,
                       const std::map<std::string, std::string>& metadata, const StBytesFn& bytes_of) {
  json j = json::object();
  if (!metadata.empty()) j["__metadata__"] = metadata;
  std::uint64_t off = 0;
  std::vector<std::uint64_t> sizes;
  for (const StTensorSpec& t : tensors) {
    BURST_ASSERT(!t.name.empty() && t.name != "__metadata__" && !j.contains(t.name), "tensor names are unique: ", t.name);
    std::uint64_t n = st_dtype_size(t.dtype);
    for (auto s : t.shape) n *= s;
    j[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    sizes.push_back(n);
    off += n;
  }
  std::string hdr = j.dump();
  hdr.append((8 - hdr.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  TempPath tmp(path);  // a failure on the way (a full disk, a damaged source tensor) leaves no temporary
  {
    std::ofstream out(tmp.path(), std::ios::binary | std::ios::trunc);
    BURST_CHECK_IO(out.good(), "cannot create '", tmp.path(), "': ", std::strerror(errno));
    std::uint8_t len[8];
    for (int k = 0; k < 8; ++k) len[k] = std::uint8_t(std::uint64_t(hdr.size()) >> (8 * k));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(hdr.data(), std::streamsize(hdr.size()));
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::vector<std::uint8_t> b = bytes_of(i);
      BURST_ASSERT(b.size() == sizes[i], "tensor '", tensors[i].name, "' has ", b.size(), " bytes, its shape needs ", sizes[i]);
      out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    }
    out.close();  // what the stream still buffers written now, its failure seen
    BURST_CHECK_IO(!out.fail(), "cannot write '", tmp.path(), "' (disk full?)");
  }
  tmp.publish();  // synced before the rename: a crash leaves the earlier file or the new one, whole
}

// ---------------------------------------------------------------- sharded

StIndex parse_safetensors_index(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    BURST_FAIL(ErrorKind::Input, "cannot parse safetensors index '", src, "' as JSON near byte offset ",
               e.byte > 0 ? e.byte - 1 : 0, ": ", e.what());
  } catch (const json::exception& e) {  // out_of_range: a number beyond double (found by the fuzzer)
    BURST_FAIL(ErrorKind::Input, "cannot parse safetensors index '", src, "' as JSON: ", e.what());
  }
  BURST_CHECK_INPUT(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), "safetensors index '", src,
                    "' must be a JSON object with a 'weight_map' object");
  StIndex ix;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    BURST_CHECK_INPUT(it.value().is_string(), "safetensors index '", src, "': weight_map entry '", it.key(),
                      "' must name a file, got ", it.value().dump());
    const std::string file = it.value().get<std::string>();
    const fs::path p(file);
    BURST_CHECK_INPUT(!file.empty() && p.is_relative() && std::none_of(p.begin(), p.end(), [](const fs::path& c) { return c == ".."; }),
                      "safetensors index '", src, "': weight_map entry '", it.key(), "' names '", file,
                      "', not a file inside the checkpoint directory");
    ix.weight_map[it.key()] = file;
  }
  if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("total_size") &&
      j["metadata"]["total_size"].is_number_integer())
    ix.total_size = j["metadata"]["total_size"].get<std::int64_t>();
  return ix;
}

SafetensorsModel::SafetensorsModel(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {  // one file given directly
    files_.emplace_back(dir);
  } else {
    BURST_CHECK_INPUT(fs::is_directory(dir, ec), "model directory '", dir, "' does not exist");
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index, ec)) {
      const std::string text = read_text_file("safetensors index", index.string(), ErrorKind::Input);
      const StIndex ix = parse_safetensors_index(text, index.string());
      BURST_CHECK_INPUT(!ix.weight_map.empty(), "safetensors index '", index.string(), "' maps no tensor");
      std::map<std::string, std::size_t> shard_of_file;
      for (auto& [name, file] : ix.weight_map) {
        if (!shard_of_file.count(file)) {
          shard_of_file[file] = files_.size();
          files_.emplace_back((fs::path(dir) / file).string());
        }
        const SafetensorsFile& f = files_[shard_of_file[file]];
        BURST_CHECK_INPUT(f.header().find(name) != nullptr, "tensor '", name, "' is in shard '", file, "' according to '",
                          index.string(), "', but '", f.path(), "' does not hold it");
        where_[name] = shard_of_file[file];
      }
      // Every tensor of every shard, listed or not: one the index leaves out is
      // still in the checkpoint (import-hf refuses it unless the model ignores
      // it, as for one file), and one held by two shards is ambiguous. Both
      // went unseen: an unlisted tensor (a bias the config does not know) was
      // dropped without a word.
      for (std::size_t i = 0; i < files_.size(); ++i)
        for (const StTensor& t : files_[i].header().tensors) {
          const auto [at, added] = where_.emplace(t.name, i);
          BURST_CHECK_INPUT(added || at->second == i, "tensor '", t.name, "' is in two shards: '", files_[at->second].path(),
                            "' and '", files_[i].path(), "' (the index '", index.string(), "' names '",
                            ix.weight_map.count(t.name) ? ix.weight_map.at(t.name) : std::string("neither"), "')");
        }
      return;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".safetensors") found.push_back(it->path().string());
    std::sort(found.begin(), found.end());
    BURST_CHECK_INPUT(!found.empty(), "model directory '", dir,
                      "' holds no .safetensors file (model.safetensors, or shards with model.safetensors.index.json)");
    BURST_CHECK_INPUT(found.size() == 1, "model directory '", dir, "' holds ", found.size(),
                      " .safetensors files but no model.safetensors.index.json saying which tensor is where");
    files_.emplace_back(found[0]);
  }
  for (auto& t : files_[0].header().tensors) where_[t.name] = 0;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  for (auto& [n, i] : where_) out.push_back(n);
  return out;
}

const SafetensorsFile& SafetensorsModel::file_of(const std::string& name) const {
  auto it = where_.find(name);
  BURST_CHECK_INPUT(it != where_.end(), "the checkpoint in '", dir_, "' has no tensor '", name, "'");
  return files_[it->second];
}

const StTensor& SafetensorsModel::tensor(const std::string& name) const { return file_of(name).tensor(name); }

}  // namespace burst::io

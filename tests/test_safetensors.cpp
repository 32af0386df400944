// .safetensors reader and writer: round trips of every number dtype, the
// metadata and sharded checkpoints; each malformed-file rule refused with a
// message naming the file and the byte offset; and 1000 random corruptions
// of a valid file, each of which either loads or raises burst::Error.
#include "core/error.hpp"
#include "io/safetensors.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

using namespace burst;
using namespace burst::io;
namespace fs = std::filesystem;

namespace {
std::string tmp(const std::string& name) { return "/tmp/burst_test_st_" + std::to_string(getpid()) + "_" + name; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A file from a header text and data bytes, as a writer with bugs would make it.
std::string raw_file(const std::string& header, const std::string& data, std::uint64_t len_field = ~0ull) {
  const std::uint64_t n = len_field == ~0ull ? header.size() : len_field;
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[k] = char(n >> (8 * k));
  return s + header + data;
}

// The message of the Error raised by opening `bytes` as a file (and reading
// every tensor); "" when it loads.
std::string open_error(const std::string& bytes, ErrorKind* kind = nullptr) {
  const std::string p = tmp("case.safetensors");
  write_bytes(p, bytes);
  try {
    SafetensorsFile f(p);
    for (auto& t : f.header().tensors) (void)f.raw(t.name);
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.message();
  }
  return "";
}

const std::vector<float> kValues = {1.5f, -2.0f, 0.25f, 0.0f, 1024.0f, -3.0f};
}  // namespace

TEST(Safetensors, RoundTripsEveryNumberDtypeAndMetadata) {
  const std::string p = tmp("types.safetensors");
  const std::vector<StDtype> dts = {StDtype::BF16, StDtype::F16, StDtype::F32, StDtype::F64};
  std::vector<StTensorSpec> specs;
  for (auto dt : dts) specs.push_back({std::string("t.") + st_dtype_name(dt), dt, {2, 3}});
  specs.push_back({"empty", StDtype::F32, {0, 4}});
  write_safetensors(p, specs, {{"format", "pt"}}, [&](std::size_t i) {
    return i < dts.size() ? st_encode(dts[i], kValues.data(), kValues.size()) : std::vector<std::uint8_t>{};
  });
  SafetensorsFile f(p);
  EXPECT_EQ(f.header().data_start() % 8, 0u) << "the header is padded to 8 bytes";
  EXPECT_EQ(f.header().metadata.at("format"), "pt");
  for (auto dt : dts) {
    const std::string name = std::string("t.") + st_dtype_name(dt);
    EXPECT_EQ(f.tensor(name).shape, (std::vector<std::uint64_t>{2, 3}));
    EXPECT_EQ(f.read<float>(name), kValues) << name;  // every value is exact in all four
    EXPECT_EQ(f.read<double>(name)[2], 0.25);
  }
  EXPECT_TRUE(f.read<float>("empty").empty());
}

TEST(Safetensors, HalfAndBfloatRoundToNearestEven) {
  const std::vector<double> x = {65519.0, 65520.0, 4e-8, -5.960464477539063e-08, 1.0 + 1.0 / 2048, 1.0 + 3.0 / 2048,
                                 std::numeric_limits<double>::infinity(), 1.0 + 1.0 / 256};
  std::vector<float> h(x.size()), b(x.size());
  auto eh = st_encode(StDtype::F16, x.data(), x.size());
  auto eb = st_encode(StDtype::BF16, x.data(), x.size());
  st_convert(StDtype::F16, eh.data(), x.size(), h.data());
  st_convert(StDtype::BF16, eb.data(), x.size(), b.data());
  EXPECT_EQ(h[0], 65504.0f);
  EXPECT_TRUE(std::isinf(h[1])) << "65520 is halfway to 65536 and rounds to inf";
  EXPECT_FLOAT_EQ(h[2], 5.960464477539063e-08f) << "4e-8 rounds to the smallest subnormal";
  EXPECT_FLOAT_EQ(h[3], -5.960464477539063e-08f);
  EXPECT_EQ(h[4], 1.0f) << "tie to even (down)";
  EXPECT_EQ(h[5], 1.0f + 4.0f / 2048) << "tie to even (up)";
  EXPECT_TRUE(std::isinf(h[6]));
  EXPECT_EQ(b[7], 1.0f) << "bf16 tie to even";
  const double nan = std::nan("");
  auto en = st_encode(StDtype::F16, &nan, 1);
  float back;
  st_convert(StDtype::F16, en.data(), 1, &back);
  EXPECT_TRUE(std::isnan(back));
}

TEST(Safetensors, MalformedFilesAreRefusedNamingFileAndOffset) {
  const std::string ok_hdr = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data8(8, '\1');
  ASSERT_EQ(open_error(raw_file(ok_hdr, data8)), "");
  struct Case {
    const char* what;
    std::string bytes, message;
  };
  const std::vector<Case> cases = {
      {"missing", "", ""},
      {"truncated", std::string(5, '\0'), "is truncated: 5 bytes, fewer than the 8-byte header length at offset 0"},
      {"length past end", raw_file(ok_hdr, data8, 1000), "the header length 1000 (bytes 0-7) runs past the end of the file (70 bytes)"},
      {"huge length", raw_file(ok_hdr, data8, ~1ull), "runs past the end of the file"},
      {"bad json", raw_file(R"({"a":{"dtype":"F32",)", ""), "is not valid JSON near byte offset"},
      {"number beyond double", raw_file(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,8]}})", data8),
       "is not valid JSON: [json.exception.out_of_range.406] number overflow"},
      {"not an object", raw_file("[1,2]   ", ""), "the header at byte offset 8 must be a JSON object, got array"},
      {"deep nesting", raw_file(std::string(64, '[') + std::string(64, ']'), ""), "nests 64 levels deep"},
      {"unknown dtype", raw_file(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", data8), "unknown dtype 'Q4'"},
      {"shape not ints", raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
       "the shape [-2] must hold non-negative integers"},
      {"offsets past data", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
       "data_offsets [0, 16) (file bytes [63, 79)) run past the end of the data (8 bytes at file offset 63"},
      {"size mismatch", raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
       "data_offsets [0, 8) hold 8 bytes (file offset 62) but shape [3] x F32 needs 12"},
      {"reversed offsets", raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8), "end before they begin"},
      {"overlap", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8),
       "tensor 'b' (data_offsets [4, 8), file offset 119) overlaps tensor 'a' (data_offsets [0, 8))"},
      {"gap", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8),
       "data bytes [0, 4) (file offset 62) belong to no tensor"},
      {"trailing bytes", raw_file(ok_hdr, data8 + "xy"), "2 bytes belong to no tensor"},
      {"huge shape", raw_file(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data8),
       "has more elements than any file holds"},
      {"metadata not strings", raw_file(R"({"__metadata__":{"n":1}})", ""), "__metadata__ value of 'n' must be a string"},
      {"offsets not a pair", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8),
       "'data_offsets' must be two non-negative integers"},
  };
  for (const Case& c : cases) {
    ErrorKind kind = ErrorKind::Internal;
    std::string msg;
    if (std::string(c.what) == "missing") {
      try {
        SafetensorsFile f("/nonexistent/model.safetensors");
      } catch (const Error& e) {
        msg = e.message(), kind = e.kind();
      }
      EXPECT_NE(msg.find("cannot open safetensors file '/nonexistent/model.safetensors'"), std::string::npos) << msg;
    } else {
      msg = open_error(c.bytes, &kind);
      EXPECT_NE(msg.find(c.message), std::string::npos) << c.what << ": " << msg;
      EXPECT_NE(msg.find(tmp("case.safetensors")), std::string::npos) << c.what << " names the file: " << msg;
    }
    EXPECT_EQ(kind, ErrorKind::Input) << c.what;
  }
  // A tensor that is not there, and one that does not convert.
  const std::string p = tmp("i64.safetensors");
  write_bytes(p, raw_file(R"({"n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", data8));
  SafetensorsFile f(p);
  try {
    f.tensor("m");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("safetensors file '" + p + "' holds no tensor 'm'"), std::string::npos) << e.message();
  }
  try {
    f.read<float>("n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("is I64; only BF16, F16, F32 and F64 tensors convert"), std::string::npos) << e.message();
  }
}

TEST(Safetensors, ShardedCheckpointWithIndex) {
  const std::string dir = tmp("sharded");
  fs::create_directories(dir);
  const std::vector<float> v = {1, 2, 3, 4};
  auto bytes = [&](std::size_t) { return st_encode(StDtype::F32, v.data(), v.size()); };
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", StDtype::F32, {4}}}, {}, bytes);
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {{"b", StDtype::F32, {2, 2}}}, {}, bytes);
  const std::string index = dir + "/model.safetensors.index.json";
  write_bytes(index, R"({"metadata":{"total_size":32},"weight_map":{"a":"model-00001-of-00002.safetensors",
                         "b":"model-00002-of-00002.safetensors"}})");
  {
    SafetensorsModel m(dir);
    EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(m.read<float>("b"), v);
    EXPECT_EQ(m.tensor("b").shape, (std::vector<std::uint64_t>{2, 2}));
    EXPECT_EQ(m.files().size(), 2u);
  }
  auto refused = [&](const std::string& index_text) {
    write_bytes(index, index_text);
    try {
      SafetensorsModel m(dir);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      return e.message();
    }
    return std::string();
  };
  EXPECT_NE(refused(R"({"weight_map":{"a":"model-00002-of-00002.safetensors"}})")
                .find("tensor 'a' is in shard 'model-00002-of-00002.safetensors' according to '" + index + "'"),
            std::string::npos);
  EXPECT_NE(refused(R"({"weight_map":{"a":"../x.safetensors"}})").find("not a file inside the checkpoint directory"),
            std::string::npos);
  EXPECT_NE(refused(R"({"weight_map":{"a":"model-00003.safetensors"}})")
                .find("cannot open safetensors file '" + dir + "/model-00003.safetensors'"),
            std::string::npos);
  EXPECT_NE(refused(R"({"weight_map":[1]})").find("must be a JSON object with a 'weight_map' object"), std::string::npos);
  EXPECT_NE(refused("{").find("cannot parse safetensors index '" + index + "' as JSON"), std::string::npos);
  EXPECT_NE(refused(R"({"metadata":{"total_size":2e999},"weight_map":{}})").find("number overflow"), std::string::npos);
  fs::remove(index);
  try {
    SafetensorsModel m(dir);
    ADD_FAILURE() << "two files without an index";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("holds 2 .safetensors files but no model.safetensors.index.json"), std::string::npos) << e.message();
  }
  fs::remove_all(dir);
}

// The index and the shards disagree: a tensor a shard holds but the index
// does not list is still seen (import-hf then refuses it unless the model
// ignores it, as for one file; it was dropped without a word), and a tensor
// two shards hold is refused naming both.
TEST(Safetensors, ShardedTensorsTheIndexDoesNotListAreSeen) {
  const std::string dir = tmp("unlisted");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<float> v = {1, 2, 3, 4};
  auto bytes = [&](std::size_t) { return st_encode(StDtype::F32, v.data(), v.size()); };
  const std::string s1 = dir + "/model-00001-of-00002.safetensors", s2 = dir + "/model-00002-of-00002.safetensors";
  write_safetensors(s1, {{"a", StDtype::F32, {4}}}, {}, bytes);
  write_safetensors(s2, {{"b", StDtype::F32, {4}}, {"q_proj.bias", StDtype::F32, {4}}}, {}, bytes);
  write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"model-00001-of-00002.safetensors",
                         "b":"model-00002-of-00002.safetensors"}})");
  {
    SafetensorsModel m(dir);
    EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "b", "q_proj.bias"}));
    EXPECT_EQ(m.file_of("q_proj.bias").path(), s2);
    EXPECT_EQ(m.read<float>("q_proj.bias"), v);
  }
  // "a" in both shards (the index names the first).
  write_safetensors(s2, {{"b", StDtype::F32, {4}}, {"a", StDtype::F32, {4}}}, {}, bytes);
  try {
    SafetensorsModel m(dir);
    ADD_FAILURE() << "a tensor in two shards was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(e.message().find("tensor 'a' is in two shards: '" + s1 + "' and '" + s2 + "' (the index '" + dir +
                               "/model.safetensors.index.json' names 'model-00001-of-00002.safetensors')"),
              std::string::npos)
        << e.message();
  }
  fs::remove_all(dir);
}

// A shard named in the index, or the one *.safetensors of a directory, that
// is a FIFO: refused by what it is. Opening it waited for a writer forever.
TEST(Safetensors, ShardThatIsNoRegularFileIsRefused) {
  const std::string dir = tmp("fifo_shard");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<float> v = {1, 2, 3, 4};
  auto bytes = [&](std::size_t) { return st_encode(StDtype::F32, v.data(), v.size()); };
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", StDtype::F32, {4}}}, {}, bytes);
  ASSERT_EQ(mkfifo((dir + "/model-00002-of-00002.safetensors").c_str(), 0600), 0);
  write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"model-00001-of-00002.safetensors",
                         "b":"model-00002-of-00002.safetensors"}})");
  auto refused = [&](const std::string& path) {
    try {
      SafetensorsModel m(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      return e.message();
    }
    return std::string();
  };
  EXPECT_NE(refused(dir).find("safetensors file '" + dir + "/model-00002-of-00002.safetensors' is not a regular file "
                              "(a device, FIFO or socket)"),
            std::string::npos);
  // No index: the directory's one .safetensors is the FIFO.
  fs::remove(dir + "/model.safetensors.index.json");
  fs::remove(dir + "/model-00001-of-00002.safetensors");
  EXPECT_NE(refused(dir).find("is not a regular file (a device, FIFO or socket)"), std::string::npos);
  // A directory named like a shard.
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  fs::create_directories(dir + "/model.safetensors");
  EXPECT_NE(refused(dir).find("safetensors file '" + dir + "/model.safetensors' is not a regular file (a directory)"),
            std::string::npos);
  fs::remove_all(dir);
}

// Random damage to a valid file: every damaged file either loads (every
// tensor readable) or raises Error(Input/IO) naming the file; never a crash
// or another exception. Truncation and extension are always caught (the
// tensors must tile the data up to the end of the file); damage to the data
// alone always loads (the layout is intact; checksums are not the format's).
TEST(Safetensors, RandomCorruptionLoadsOrRaisesError) {
  const std::string p = tmp("valid.safetensors");
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 3;
  write_safetensors(p,
                    {{"model.embed_tokens.weight", StDtype::BF16, {4, 3}},
                     {"model.norm.weight", StDtype::F32, {3}},
                     {"lm_head.weight", StDtype::F16, {3, 3}}},
                    {{"format", "pt"}}, [&](std::size_t i) {
                      const StDtype d[] = {StDtype::BF16, StDtype::F32, StDtype::F16};
                      const size_t n[] = {12, 3, 9};
                      return st_encode(d[i], v.data(), n[i]);
                    });
  const std::string good = read_bytes(p);
  const std::uint64_t data_start = SafetensorsFile(p).header().data_start();
  std::mt19937_64 g(7);
  int loaded = 0, refused = 0, loaded_after_header_damage = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::string bad = good;
    const int kind = int(g() % 4);
    bool header_touched = false;
    if (kind == 0) {  // truncate
      bad.resize(g() % good.size());
    } else if (kind == 1) {  // extend
      bad += std::string(1 + g() % 16, char(g()));
    } else {  // flip 1-4 bytes, mostly in the header (kind 2) or anywhere (kind 3)
      const int flips = 1 + int(g() % 4);
      for (int k = 0; k < flips; ++k) {
        const size_t at = kind == 2 ? g() % data_start : g() % bad.size();
        header_touched = header_touched || at < data_start;
        bad[at] = char(bad[at] ^ char(1 + g() % 255));
      }
    }
    ErrorKind ek = ErrorKind::Internal;
    std::string msg;
    try {
      msg = open_error(bad, &ek);
    } catch (const std::exception& e) {
      FAIL() << "trial " << trial << ": an exception other than burst::Error: " << e.what();
    }
    if (msg.empty()) {
      ++loaded;
      EXPECT_GE(kind, 2) << "trial " << trial << ": a truncated or extended file loaded";
      if (header_touched) ++loaded_after_header_damage;
    } else {
      ++refused;
      EXPECT_TRUE(kind < 2 || header_touched) << "trial " << trial << ": damage to the data alone was refused: " << msg;
      EXPECT_TRUE(ek == ErrorKind::Input || ek == ErrorKind::IO) << msg;
      EXPECT_NE(msg.find(tmp("case.safetensors")), std::string::npos) << "trial " << trial << ": " << msg;
    }
  }
  std::printf("1000 corruptions: %d loaded (%d with a damaged header still consistent), %d refused with an Error\n", loaded,
              loaded_after_header_damage, refused);
  EXPECT_GT(loaded, 10);
  EXPECT_GT(refused, 500);
}

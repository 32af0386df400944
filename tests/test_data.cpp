// Data sources: the recall task, packing of documents (shifted labels, the
// last token of a document ignored, document ids, restarting positions),
// held-out splits, every source through make_source, and each bad data
// file refused with Error(Input) whose message names the file and the
// offending index or byte offset.
#include "core/error.hpp"
#include "data/h5_tokens.hpp"
#include "data/source.hpp"
#include "data/token_files.hpp"
#include "io/h5.hpp"
#include "kernels/cross_entropy.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

using namespace burst;
using namespace burst::data;
namespace fs = std::filesystem;

namespace {
std::string tmp(const std::string& name) { return "/tmp/burst_test_data_" + std::to_string(getpid()) + "_" + name; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

template <class U> void write_tokens(const std::string& path, const std::vector<U>& t) {
  write_bytes(path, std::string(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(U)));  // little-endian host
}

Config data_config(const std::vector<std::string>& sets) {
  ConfigSchema s;
  add_data_schema(s);
  Config c = s.defaults();
  for (auto& kv : sets) s.apply_override(c, kv);
  s.validate(c);
  return c;
}

// The Error's message, requiring its kind; "" when nothing was thrown.
std::string error_of(const std::function<void()>& f, ErrorKind want = ErrorKind::Input) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(want)) << e.message();
    return e.message();
  }
  return "";
}

#define EXPECT_ERROR(call, text)                                                     \
  do {                                                                               \
    const std::string m_ = error_of([&] { (void)(call); });                          \
    EXPECT_NE(m_.find(text), std::string::npos) << "message: '" << m_ << "'";       \
  } while (0)
// A 1-D dataset of `type` (an HDF5 native integer type) holding `values`,
// added to `path` (H5File writes only some integer widths).
void write_ints_as(const std::string& path, const std::string& name, hid_t type, const std::vector<std::uint64_t>& values) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hsize_t n = values.size();
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  const hid_t d = H5Dcreate2(f, name.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  H5Dclose(d), H5Pclose(lcpl), H5Sclose(space), H5Fclose(f);
}
}  // namespace

// Token datasets of every integer width are read (int8, int16, uint32 and
// uint64 failed with status 1: "holds other, not numbers"), an id beyond
// int64 is refused as beyond the vocabulary, and a group where a dataset
// belongs is named (Error(Input); it was Error(IO)).
TEST(Data, H5TokensOfEveryIntegerWidth) {
  const long V = 64;
  const std::string h = tmp("widths.h5");
  { io::H5File f = io::H5File::create(h); }
  std::vector<std::uint64_t> ids(40);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i % 60;
  // One at a time: nvcc (the CUDA build compiles this file through it) misparses
  // HDF5's type macros, comma expressions, inside a nested brace list.
  std::vector<std::pair<const char*, hid_t>> types;
  types.emplace_back("i8", H5T_STD_I8LE);
  types.emplace_back("i16", H5T_STD_I16LE);
  types.emplace_back("u32", H5T_STD_U32LE);
  types.emplace_back("u64", H5T_STD_U64LE);
  types.emplace_back("u8", H5T_STD_U8LE);
  types.emplace_back("i64", H5T_STD_I64LE);
  for (auto& [name, type] : types) write_ints_as(h, name, type, ids);
  write_ints_as(h, "offsets_u32", H5T_STD_U32LE, {0, 10, 25});
  write_ints_as(h, "huge", H5T_STD_U64LE, {1, 2, ~0ull});
  write_ints_as(h, "grp/x", H5T_STD_I32LE, {0});
  for (auto& [name, type] : types) {
    const TokenCorpus c = open_h5_tokens(h, name, "offsets_u32", true, V);
    EXPECT_EQ(c.size(), 40) << name;
    EXPECT_EQ(c[39], 39u) << name;
    EXPECT_EQ(c.doc_starts(), (std::vector<long>{0, 10, 25})) << name;
  }
  EXPECT_ERROR(open_h5_tokens(h, "huge", "", false, V), "token id 9223372036854775807 at index 2 of 'huge' is not in the model's vocabulary");
  EXPECT_ERROR(open_h5_tokens(h, "grp", "", false, V), "HDF5 tokens file '" + h + "': token 'grp' is not a dataset (a group?)");
  EXPECT_ERROR(open_h5_tokens(h, "u8", "grp", true, V), "document offsets 'grp' is not a dataset (a group?)");
  EXPECT_ERROR(open_h5_tokens(h, "", "", false, V), "token '' is not a dataset");
  std::remove(h.c_str());
}

TEST(Data, RecallAnswersAreTheValuesOfTheQueriedKeys) {
  RecallTask t;
  t.seq_len = 96, t.pairs = 6, t.values = 10, t.vocab = 64;
  t.validate();
  long answers = 0;
  std::set<std::int32_t> seen_values;
  for (std::uint64_t i = 0; i < 50; ++i) {
    Sequence s = t.make(3, 0, i);
    ASSERT_EQ(long(s.tokens.size()), t.seq_len);
    // The pairs: a key token followed by its value, before the queries.
    std::map<std::int32_t, std::int32_t> pair;
    const long q0 = t.seq_len - 3 * t.query_count();
    for (long p = 0; p + 1 < q0; ++p) {
      const std::int32_t k = s.tokens[p];
      if (k >= t.first_key() && k < t.first_filler()) {
        EXPECT_EQ(pair.count(k), 0u) << "keys are distinct";
        pair[k] = s.tokens[p + 1];
        EXPECT_LT(s.tokens[p + 1], t.values);
      }
    }
    EXPECT_EQ(long(pair.size()), t.pairs);
    for (long p = 0; p < t.seq_len; ++p) {
      if (s.labels[p] == kernels::kIgnoreIndex) continue;
      ++answers;
      EXPECT_EQ(s.tokens[p - 1], t.query_token());
      EXPECT_EQ(s.labels[p], pair.at(s.tokens[p])) << "the answer is the value of the queried key";
      EXPECT_EQ(s.labels[p], s.tokens[p + 1]) << "labels are shifted";
      seen_values.insert(s.labels[p]);
    }
  }
  EXPECT_EQ(answers, 50 * t.pairs);
  EXPECT_EQ(seen_values.size(), 10u) << "every value occurs as an answer";
  EXPECT_EQ(t.make(3, 0, 7).tokens, t.make(3, 0, 7).tokens) << "deterministic";
  EXPECT_NE(t.make(3, 0, 7).tokens, t.make(3, 1, 7).tokens) << "streams differ";
  t.pairs = 40;
  EXPECT_NE(error_of([&] { t.validate(); }, ErrorKind::Config).find("needs a vocabulary of at least 92 tokens"),
            std::string::npos);
}

TEST(Data, PackingShiftsLabelsAndSplitsDocuments) {
  // Documents [0, 5) [5, 12) [12, 20).
  std::vector<std::uint32_t> tok(20);
  for (int i = 0; i < 20; ++i) tok[i] = std::uint32_t(100 + i);
  TokenCorpus c = TokenCorpus::from_tokens(tok, {0, 5, 12, 20}, 200, "test corpus");
  EXPECT_EQ(c.doc_starts(), (std::vector<long>{0, 5, 12}));
  Sequence s = pack_sequence(c, 3, 10, false);  // tokens 3..12, labels from 4..13
  for (long t = 0; t < 10; ++t) {
    EXPECT_EQ(s.tokens[t], 103 + t);
    EXPECT_EQ(s.positions[t], t);
    const bool last_of_doc = 3 + t == 4 || 3 + t == 11;
    EXPECT_EQ(s.labels[t], last_of_doc ? kernels::kIgnoreIndex : 104 + t) << t;
  }
  EXPECT_EQ(s.doc_ids, (std::vector<int>{0, 0, 1, 1, 1, 1, 1, 1, 1, 2}));
  Sequence r = pack_sequence(c, 3, 10, true);
  EXPECT_EQ(r.positions, (std::vector<long>{3, 4, 0, 1, 2, 3, 4, 5, 6, 0}));
  Sequence one = pack_sequence(c, 5, 6, false);  // inside document 1, its last label too
  EXPECT_TRUE(one.doc_ids.empty());
  EXPECT_EQ(one.labels.back(), 111);
}

TEST(Data, SamplerKeepsStreamsInTheirParts) {
  std::vector<std::uint32_t> tok(1000);
  for (int i = 0; i < 1000; ++i) tok[i] = std::uint32_t(i);  // token = its index
  auto c = std::make_shared<const TokenCorpus>(TokenCorpus::from_tokens(tok, {}, 1000, "test corpus"));
  CorpusSampler smp(c, 31, 0.1, false);
  EXPECT_EQ(smp.train_tokens(), 900);
  std::set<long> starts;
  for (std::uint64_t i = 0; i < 300; ++i) {
    Sequence a = smp.make(1, 0, i), b = smp.make(1, 1, i);
    const long sa = a.tokens[0], sb = b.tokens[0];
    EXPECT_LE(sa + 31, 899);
    EXPECT_GE(sb, 900);
    EXPECT_LE(sb + 31, 999);
    starts.insert(sa);
    EXPECT_EQ(a.labels[30], a.tokens[30] + 1);
  }
  EXPECT_GT(starts.size(), 200u) << "windows are spread over the training part";
  EXPECT_EQ(smp.make(1, 0, 5).tokens, smp.make(1, 0, 5).tokens);
}

TEST(Data, EverySourceThroughMakeSource) {
  // passkey and recall
  auto pk = make_source(data_config({}), 64, 128);
  EXPECT_NEAR(pk->chance_loss(), std::log(10.0), 1e-12);
  EXPECT_EQ(pk->make(1, 0, 0).tokens, (data::PasskeyTask{128, 4, 64}.make(1, 0, 0).tokens));
  auto rc = make_source(data_config({"data.task=recall", "data.recall_pairs=4"}), 64, 64);
  EXPECT_EQ(rc->vocab_needed, 20);
  EXPECT_EQ(rc->make(2, 1, 3).tokens.size(), 64u);
  // text: two files, two documents, each ending in the end-of-document token
  const std::string dir = tmp("textdir");
  fs::create_directories(dir);
  write_bytes(dir + "/a.txt", std::string(40, 'a'));
  write_bytes(dir + "/b.txt", std::string(30, 'b'));
  auto tx = make_source(data_config({"data.task=text", "data.path=\"" + dir + "\"", "data.heldout_fraction=0"}), 300, 16);
  EXPECT_EQ(tx->vocab_needed, kTextVocab);
  // no held-out part (fraction 0): evaluations draw from the training data, and the source says so
  EXPECT_FALSE(tx->heldout());
  EXPECT_NE(tx->describe().find("no held-out part"), std::string::npos) << tx->describe();
  EXPECT_TRUE(pk->heldout());
  EXPECT_TRUE(std::isnan(tx->chance_loss()));
  bool crossed = false;
  for (std::uint64_t i = 0; i < 64; ++i) {
    Sequence s = tx->make(5, 0, i);
    for (long t = 0; t < 16; ++t) {
      if (s.tokens[t] == kTextEndOfDocument) {
        crossed = true;
        EXPECT_EQ(s.labels[t], kernels::kIgnoreIndex) << "the end of a document does not predict the next one";
      }
    }
  }
  EXPECT_TRUE(crossed);
  // bin uint32 with an end-of-document id
  std::vector<std::uint32_t> ids;
  for (int i = 0; i < 200; ++i) ids.push_back(i % 50 == 49 ? 70000 : std::uint32_t(i));
  write_tokens(tmp("t32.bin"), ids);
  auto b32 = make_source(data_config({"data.task=bin", "data.path=\"" + tmp("t32.bin") + "\"", "data.dtype=uint32",
                                      "data.eos=70000", "data.restart_positions=true", "data.heldout_fraction=0"}),
                         80000, 60);
  EXPECT_EQ(b32->vocab_needed, 70001);
  Sequence s = b32->make(9, 0, 2);
  EXPECT_FALSE(s.doc_ids.empty()) << "60 tokens always cross a 50-token document";
  for (long t = 0; t < 60; ++t)
    if (s.tokens[t] == 70000) EXPECT_EQ(s.labels[t], kernels::kIgnoreIndex);
  // h5 with document offsets
  {
    io::H5File f = io::H5File::create(tmp("tok.h5"));
    std::vector<std::int32_t> t(300);
    for (int i = 0; i < 300; ++i) t[i] = i % 97;
    f.write("tokens", t);
    f.write("doc_offsets", std::vector<std::int64_t>{0, 100, 250, 300});
  }
  auto h5 = make_source(data_config({"data.task=h5", "data.path=\"" + tmp("tok.h5") + "\"", "data.heldout_fraction=0"}), 97, 64);
  EXPECT_NE(h5->describe().find("300 tokens in 3 document(s)"), std::string::npos) << h5->describe();
  auto h5h = make_source(data_config({"data.task=h5", "data.path=\"" + tmp("tok.h5") + "\"", "data.heldout_fraction=0.3"}), 97, 64);
  EXPECT_TRUE(h5h->heldout());
}

TEST(Data, BadTokenFilesAreRefusedNamingFileAndOffset) {
  const long V = 64;
  EXPECT_ERROR(TokenCorpus::open_bin("/nonexistent/t.bin", 2, V, -1),
               "cannot open token file '/nonexistent/t.bin': No such file or directory");
  write_bytes(tmp("empty.bin"), "");
  EXPECT_ERROR(TokenCorpus::open_bin(tmp("empty.bin"), 2, V, -1), "token file '" + tmp("empty.bin") + "' is empty");
  write_bytes(tmp("odd.bin"), std::string(7, '\1'));
  EXPECT_ERROR(TokenCorpus::open_bin(tmp("odd.bin"), 2, V, -1),
               "token file '" + tmp("odd.bin") + "' has 7 bytes, not a multiple of 2 (data.dtype = uint16): truncated after token 3 (byte offset 6)");
  write_bytes(tmp("six.bin"), std::string(6, '\1'));
  EXPECT_ERROR(TokenCorpus::open_bin(tmp("six.bin"), 4, V, -1), "has 6 bytes, not a multiple of 4 (data.dtype = uint32)");
  write_tokens(tmp("big.bin"), std::vector<std::uint16_t>{1, 2, 70, 3});
  EXPECT_ERROR(TokenCorpus::open_bin(tmp("big.bin"), 2, V, -1),
               "token file '" + tmp("big.bin") + "': token id 70 at index 2 (byte offset 4) is not below the model's vocabulary size 64");
  // A uint16 file read as uint32: ids far beyond the vocabulary.
  write_tokens(tmp("u16.bin"), std::vector<std::uint16_t>{5, 6, 7, 8});
  EXPECT_ERROR(TokenCorpus::open_bin(tmp("u16.bin"), 4, V, -1), "token id 393221 at index 0 (byte offset 0)");
  EXPECT_ERROR(TokenCorpus::open_bin("/tmp", 2, V, -1), "token file '/tmp' is not a regular file");
  // Too short for one sequence, in the training or the held-out part.
  EXPECT_ERROR(make_source(data_config({"data.task=bin", "data.path=\"" + tmp("u16.bin") + "\""}), V, 32),
               "token file '" + tmp("u16.bin") + "' holds 4 tokens; its training part (the first 4, data.heldout_fraction = 0.05) is shorter than one sequence of seq_len + 1 = 33 tokens");
  write_tokens(tmp("hundred.bin"), std::vector<std::uint16_t>(100, 1));
  EXPECT_ERROR(make_source(data_config({"data.task=bin", "data.path=\"" + tmp("hundred.bin") + "\""}), V, 32),
               "holds 100 tokens; its held-out part (the last 5, data.heldout_fraction = 0.05) is shorter than one sequence");
  // text
  EXPECT_ERROR(TokenCorpus::open_text("/nonexistent/a.txt", 300), "cannot open text file '/nonexistent/a.txt'");
  write_bytes(tmp("empty.txt"), "");
  EXPECT_ERROR(TokenCorpus::open_text(tmp("empty.txt"), 300), "text file '" + tmp("empty.txt") + "' is empty");
  EXPECT_NE(error_of([&] { TokenCorpus::open_text(tmp("empty.txt"), 64); }, ErrorKind::Config)
                .find("byte-level text needs a vocabulary of at least 257 tokens"),
            std::string::npos);
  // HDF5
  const std::string h = tmp("bad.h5");
  EXPECT_ERROR(open_h5_tokens("/nonexistent/t.h5", "tokens", "", false, V), "HDF5 tokens file '/nonexistent/t.h5' does not exist");
  EXPECT_ERROR(open_h5_tokens("/tmp", "tokens", "", false, V), "HDF5 tokens file '/tmp' is a directory, not a file");
  EXPECT_ERROR(open_h5_tokens(tmp("odd.bin"), "tokens", "", false, V), "HDF5 tokens file '" + tmp("odd.bin") + "' cannot be read");
  {
    io::H5File f = io::H5File::create(h);
    f.write("floats", std::vector<float>{1, 2});
    f.write("matrix", std::vector<std::int32_t>{1, 2, 3, 4}, {2, 2});
    f.write("tokens", std::vector<std::int32_t>{1, 2, 3, -4, 5});
    f.write("good", std::vector<std::int32_t>{1, 2, 3, 4, 5});
    f.write("offsets", std::vector<std::int64_t>{0, 3, 2});
  }
  EXPECT_ERROR(open_h5_tokens(h, "nope", "", false, V), "HDF5 tokens file '" + h + "' has no dataset 'nope' (data.dataset)");
  EXPECT_ERROR(open_h5_tokens(h, "floats", "", false, V), "token dataset 'floats' holds float32, not integers");
  EXPECT_ERROR(open_h5_tokens(h, "matrix", "", false, V), "token dataset 'matrix' must be 1-D, it has 2 dimensions");
  EXPECT_ERROR(open_h5_tokens(h, "tokens", "", false, V), "token id -4 at index 3 of 'tokens' is not in the model's vocabulary [0, 64)");
  EXPECT_ERROR(open_h5_tokens(h, "good", "offsets", true, V), "document offset 2 at index 2 must exceed the previous one (3)");
  EXPECT_ERROR(open_h5_tokens(h, "good", "missing", true, V), "has no dataset 'missing' (data.offsets)");
  EXPECT_EQ(open_h5_tokens(h, "good", "missing", false, V).doc_starts().size(), 1u) << "the default name may be absent";
  // Keys and rules of the schema.
  EXPECT_NE(error_of([&] { data_config({"data.task=copy"}); }, ErrorKind::Config)
                .find("data.task = \"copy\" at --set is not allowed: must be one of passkey, recall, text, bin, h5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data_config({"data.dtype=int8"}); }, ErrorKind::Config).find("must be one of uint16, uint32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data_config({"data.heldout_fraction=0.9"}); }, ErrorKind::Config).find("must be in [0, 0.5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data_config({"data.recall_pairs=2", "data.recall_queries=3"}); }, ErrorKind::Config)
                .find("data.recall_queries = 3 exceeds data.recall_pairs = 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { make_source(data_config({"data.task=bin", "data.path=\"" + tmp("hundred.bin") + "\"", "data.eos=64"}), V, 8); },
                     ErrorKind::Config)
                .find("data.eos = 64 is not a token of the model's vocabulary of 64"),
            std::string::npos);
  // A path-less file task is a config error.
  EXPECT_NE(error_of([&] { data_config({"data.task=bin"}); }, ErrorKind::Config).find("data.task = bin needs data.path"),
            std::string::npos);
}

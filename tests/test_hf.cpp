// Hugging Face import/export and the weights loader, in process: the golden
// fixture survives export (bf16, sharded) and import; load_weights verifies
// checksums and refuses another model; import-hf refuses a checkpoint that
// does not fit its config.json, naming the tensor; tied embeddings export
// no lm_head; forward's hidden states follow Hugging Face's convention.
#include "cli/commands.hpp"
#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/safetensors.hpp"
#include "model/llama.hpp"
#include "tools/corrupt.hpp"
#include "train/weights.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

using namespace burst;
namespace fs = std::filesystem;
using Mem = DeviceMem;

namespace {
const std::string kGolden = BURST_FIXTURE_DIR "/llama_tiny_golden.h5";
std::string tmp(const std::string& name) { return "/tmp/burst_test_hf_" + std::to_string(getpid()) + "_" + name; }

std::string error_of(const std::function<void()>& f, ErrorKind want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(want)) << e.message();
    return e.message();
  }
  return "";
}

void export_hf(const std::string& weights, const std::string& out, const std::string& dtype, double shard_mb = 0) {
  cli::ExportHfOptions o;
  o.weights = weights, o.output = out, o.dtype = dtype, o.max_shard_mb = shard_mb;
  cli::cmd_export_hf(Runtime::current(), o);
}
void import_hf(const std::string& dir, const std::string& out) {
  cli::ImportHfOptions o;
  o.model_dir = dir, o.output = out;
  cli::cmd_import_hf(Runtime::current(), o);
}
}  // namespace

TEST(HfWeights, GoldenSurvivesBf16ShardedRoundTrip) {
  const std::string dir = tmp("bf16"), w = tmp("bf16.h5");
  export_hf(kGolden, dir, "bf16", 0.01);
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir + "/config.json"));
  import_hf(dir, w);
  WeightsReader golden(kGolden), back(w);
  EXPECT_FALSE(golden.checksummed());
  EXPECT_TRUE(back.checksummed());
  EXPECT_EQ(back.stored_dtype(), "float32");
  back.require_model(golden.config());
  for (const ParamInfo& p : llama_param_table(golden.config())) {
    const std::vector<double> a = golden.read(p), b = back.read(p);
    for (long i = 0; i < p.size; ++i) {  // exactly the bf16 rounding of the original
      const std::vector<std::uint8_t> e = io::st_encode(io::StDtype::BF16, &a[i], 1);
      float r;
      io::st_convert(io::StDtype::BF16, e.data(), 1, &r);
      ASSERT_EQ(b[i], double(r)) << p.name << "[" << i << "]";
    }
    // bf16 keeps 8 significant bits: within 2^-8 relative of the original.
    for (long i = 0; i < p.size; ++i) ASSERT_LE(std::fabs(b[i] - a[i]), std::fabs(a[i]) * (1.0 / 256)) << p.name << "[" << i << "]";
  }
  fs::remove_all(dir);
}

TEST(HfWeights, LoadWeightsChecksAndRefusesAnotherModel) {
  const std::string dir = tmp("f64"), w = tmp("f64.h5");
  export_hf(kGolden, dir, "f64");
  import_hf(dir, w);  // F64 tensors: stored as float64, exactly
  WeightsReader golden(kGolden);
  const ModelConfig mc = golden.config();
  LlamaModel<double, Mem> model(mc, std::make_shared<LocalAttention<double, Mem>>(1.0));
  load_weights(w, mc, model.params());
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.params().flat());
  for (const ParamInfo& p : model.params().table()) {
    const std::vector<double> a = golden.read(p);
    for (long i = 0; i < p.size; ++i) ASSERT_EQ(h(p.offset + i), a[i]) << p.name;
  }
  // Another model.
  LlamaModel<float, Mem> tiny(model_preset("tiny"), std::make_shared<LocalAttention<float, Mem>>(1.0));
  EXPECT_NE(error_of([&] { load_weights(w, tiny.config(), tiny.params()); }, ErrorKind::Input)
                .find("weights file '" + w + "' holds another model: "),
            std::string::npos);
  // A damaged dataset.
  ASSERT_EQ(test_tools::flip_dataset_byte(w, "params/model.layers.1.mlp.up_proj.weight"), "");
  EXPECT_NE(error_of([&] { load_weights(w, mc, model.params()); }, ErrorKind::IO)
                .find("dataset 'params/model.layers.1.mlp.up_proj.weight' in checkpoint '" + w + "' fails its checksum"),
            std::string::npos);
  // Not a weights file; missing.
  EXPECT_NE(error_of([&] { WeightsReader r(dir + "/config.json"); }, ErrorKind::Input).find("cannot be read"), std::string::npos);
  EXPECT_NE(error_of([&] { WeightsReader r("/nonexistent/w.h5"); }, ErrorKind::Input).find("weights file '/nonexistent/w.h5' does not exist"),
            std::string::npos);
  // A directory is named as one (it was "does not exist").
  EXPECT_NE(error_of([&] { WeightsReader r(dir); }, ErrorKind::Input).find("weights file '" + dir + "' is a directory, not a file"),
            std::string::npos);
  fs::remove_all(dir);
}

// A tensor of another shape than the model's: both shapes named, '[a, b]' (io::dims_string).
TEST(HfWeights, ReadNamesBothShapesOfAMismatch) {
  WeightsReader golden(kGolden);
  ParamInfo p = llama_param_table(golden.config()).front();
  const std::vector<long> stored = p.shape;
  ASSERT_EQ(stored.size(), 2u);
  p.shape = {stored[0] + 1, stored[1]};
  EXPECT_EQ(error_of([&] { golden.read(p); }, ErrorKind::Input),
            "weights file '" + kGolden + "': params/" + p.name + " has shape [" + std::to_string(stored[0]) + ", " +
                std::to_string(stored[1]) + "], the model needs [" + std::to_string(stored[0] + 1) + ", " +
                std::to_string(stored[1]) + "]");
}

TEST(HfWeights, ImportRefusesACheckpointThatDoesNotFitItsConfig) {
  const std::string dir = tmp("bad"), w = tmp("bad.h5");
  export_hf(kGolden, dir, "f32");
  std::ifstream in(dir + "/config.json");
  const std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write_cfg = [&](const std::string& text) { std::ofstream(dir + "/config.json") << text; };
  // One layer more than the checkpoint holds.
  std::string more = cfg;
  more.replace(more.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 3");
  write_cfg(more);
  EXPECT_NE(error_of([&] { import_hf(dir, w); }, ErrorKind::Input)
                .find("has no tensor 'model.layers.2.input_layernorm.weight', a parameter of the model in " + dir + "/config.json"),
            std::string::npos);
  // One layer less: the checkpoint has tensors the model does not use.
  std::string fewer = cfg;
  fewer.replace(fewer.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 1");
  write_cfg(fewer);
  EXPECT_NE(error_of([&] { import_hf(dir, w); }, ErrorKind::Input)
                .find("tensor 'model.layers.1.input_layernorm.weight' in '" + dir + "/model.safetensors' is not a parameter"),
            std::string::npos);
  // Another intermediate size: shapes differ.
  std::string wide = cfg;
  wide.replace(wide.find("\"intermediate_size\": 48"), 23, "\"intermediate_size\": 40");
  write_cfg(wide);
  EXPECT_NE(error_of([&] { import_hf(dir, w); }, ErrorKind::Input)
                .find("tensor 'model.layers.0.mlp.gate_proj.weight' in '" + dir + "/model.safetensors' has shape [48, 32], but"),
            std::string::npos);
  fs::remove(dir + "/config.json");
  EXPECT_NE(error_of([&] { import_hf(dir, w); }, ErrorKind::Input).find("has no config.json"), std::string::npos);
  fs::remove_all(dir);
}

TEST(HfWeights, TiedEmbeddingsExportNoLmHead) {
  ModelConfig mc = model_preset("tiny");
  mc.tie_embeddings = true;
  const std::string w = tmp("tied.h5"), dir = tmp("tied"), back = tmp("tied_back.h5");
  save_weights(w, mc, "float32", [](const ParamInfo& p) { return std::vector<double>(std::size_t(p.size), 0.5); }, "test");
  export_hf(w, dir, "f32");
  io::SafetensorsFile f(dir + "/model.safetensors");
  EXPECT_EQ(f.header().find("lm_head.weight"), nullptr);
  EXPECT_NE(f.header().find("model.embed_tokens.weight"), nullptr);
  import_hf(dir, back);
  WeightsReader r(back);
  EXPECT_TRUE(r.config().tie_embeddings);
  r.require_model(mc);
  fs::remove_all(dir);
}

TEST(HfWeights, HiddenStatesFollowHuggingFace) {
  WeightsReader golden(kGolden);
  const ModelConfig mc = golden.config();
  LlamaModel<double, Mem> model(mc, std::make_shared<LocalAttention<double, Mem>>(1.0 / std::sqrt(double(mc.head_dim))));
  load_weights(kGolden, mc, model.params());
  const long s = 5;
  Kokkos::View<std::int32_t*, Layout, Mem> t("act/t", s), lab("act/l", s);
  Kokkos::View<long*, Layout, Mem> pos("act/p", s);
  auto ht = Kokkos::create_mirror_view(t);
  auto hp = Kokkos::create_mirror_view(pos);
  for (long i = 0; i < s; ++i) ht(i) = std::int32_t(3 * i + 1), hp(i) = i;
  Kokkos::deep_copy(t, ht);
  Kokkos::deep_copy(pos, hp);
  TokenBatch<Mem> b;
  b.tokens = t, b.labels = lab, b.positions = pos;
  Kokkos::View<double**, Layout, Mem> logits("act/logits", s, mc.vocab), ref("act/ref", s, mc.vocab);
  std::vector<Kokkos::View<double**, Layout, Mem>> hs;
  model.forward_logits(b, logits, hs);
  model.forward_logits(b, ref);
  ASSERT_EQ(long(hs.size()), mc.layers + 1);
  auto h0 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), hs[0]);
  auto emb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.params().mat("model.embed_tokens.weight"));
  for (long i = 0; i < s; ++i)
    for (long c = 0; c < mc.hidden; ++c) ASSERT_EQ(h0(i, c), emb(3 * i + 1, c)) << "the first hidden state is the embedding";
  auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);
  auto hr = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ref);
  auto hf = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), hs.back());
  auto head = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.params().mat("lm_head.weight"));
  for (long i = 0; i < s; ++i) {
    for (long v = 0; v < mc.vocab; ++v) {
      ASSERT_EQ(hl(i, v), hr(i, v));
      double dot = 0;
      for (long c = 0; c < mc.hidden; ++c) dot += hf(i, c) * head(v, c);
      ASSERT_NEAR(dot, hl(i, v), 1e-12 * (1 + std::fabs(dot))) << "the last hidden state is the normed output the head reads";
    }
  }
}

TEST(HfWeights, ForwardOnABatchOfRows) {
  // The fixture's 24 tokens twice, as [2, 24]: each row gets the fixture's logits.
  io::H5File g = io::H5File::open(kGolden);
  const std::vector<std::int32_t> tok = g.read<std::int32_t>("tokens");
  const std::vector<double> ref = g.read<double>("logits");
  std::vector<std::int32_t> two(tok);
  two.insert(two.end(), tok.begin(), tok.end());
  const std::string tf = tmp("tokens2.h5"), out = tmp("out2.h5");
  {
    io::H5File f = io::H5File::create(tf);
    f.write("tokens", two, {2, tok.size()});
  }
  const std::string cfg = tmp("golden_config.json");
  std::ofstream(cfg) << g.attr_string("/", "config_json");
  cli::ForwardOptions o;
  o.model = cfg, o.weights = kGolden, o.tokens = tf, o.output = out, o.dtype = "double", o.hidden_states = true;
  cli::cmd_forward(Runtime::current(), o);
  io::H5File r = io::H5File::open(out);
  io::Dims d, dh;
  const std::vector<double> logits = r.read<double>("logits", &d);
  EXPECT_EQ(d, (io::Dims{2, tok.size(), 64}));
  r.read<double>("hidden_states", &dh);
  EXPECT_EQ(dh, (io::Dims{2, 3, tok.size(), 32}));
  for (size_t row = 0; row < 2; ++row) {
    double num = 0, den = 0;
    for (size_t e = 0; e < ref.size(); ++e) num += std::pow(logits[row * ref.size() + e] - ref[e], 2), den += ref[e] * ref[e];
    EXPECT_LT(std::sqrt(num / den), 1e-5) << "row " << row << " (double; transformers' own rope runs in float32)";
  }
  for (size_t e = 0; e < ref.size(); ++e) ASSERT_EQ(logits[e], logits[ref.size() + e]) << "rows are independent";
}

namespace {
// Rewrites the single-file checkpoint in `dir` with `name`[at] set to v (F32).
void poke_f32(const std::string& dir, const std::string& name, long at, float v) {
  const std::string path = dir + "/model.safetensors";
  std::vector<io::StTensorSpec> specs;
  std::vector<std::vector<std::uint8_t>> data;
  {
    io::SafetensorsFile f(path);
    for (const io::StTensor& t : f.header().tensors) {
      specs.push_back({t.name, t.dtype, t.shape});
      data.push_back(f.raw(t.name));
      if (t.name == name) {
        ASSERT_EQ(t.dtype, io::StDtype::F32);
        const std::vector<std::uint8_t> e = io::st_encode(io::StDtype::F32, &v, 1);
        std::copy(e.begin(), e.end(), data.back().begin() + 4 * at);
      }
    }
  }
  io::write_safetensors(path, specs, {}, [&](std::size_t k) { return data[k]; });
}
}  // namespace

// A NaN or infinite weight in a checkpoint, or an F64 value beyond float32
// imported as float32: refused naming the tensor, the value and its place,
// an earlier import at --output kept. They were imported without a word and
// made every logit NaN.
TEST(HfWeights, ImportRefusesWeightsThatAreNotFinite) {
  const std::string dir = tmp("nonfinite"), w = tmp("nonfinite.h5");
  export_hf(kGolden, dir, "f32");
  import_hf(dir, w);  // an earlier, good import
  poke_f32(dir, "model.norm.weight", 3, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(error_of([&] { import_hf(dir, w); }, ErrorKind::Input),
            "tensor 'model.norm.weight' in '" + dir + "/model.safetensors' holds nan at index 3 ([3]): the weights must be "
            "finite (a damaged or diverged checkpoint?)");
  poke_f32(dir, "model.norm.weight", 3, 1.0f);
  poke_f32(dir, "model.layers.1.mlp.up_proj.weight", 33, -std::numeric_limits<float>::infinity());
  EXPECT_NE(error_of([&] { import_hf(dir, w); }, ErrorKind::Input)
                .find("tensor 'model.layers.1.mlp.up_proj.weight' in '" + dir + "/model.safetensors' holds -inf at index 33 ([1, 1])"),
            std::string::npos);
  WeightsReader earlier(w);  // whole, checksums and all
  for (const ParamInfo& p : llama_param_table(earlier.config())) earlier.read(p);
  // F64 beyond float32: kept as float64 (auto), refused as float32.
  const std::string dir64 = tmp("nonfinite64"), big = tmp("big64.h5");
  {
    ModelConfig mc = WeightsReader(kGolden).config();
    save_weights(big, mc, "float64", [](const ParamInfo& p) {
      std::vector<double> x(std::size_t(p.size), 0.5);
      if (p.name == "model.norm.weight") x[7] = 1e300;
      return x;
    }, "test");
    export_hf(big, dir64, "f64");
  }
  cli::ImportHfOptions o;
  o.model_dir = dir64, o.output = w, o.dtype = "float32";
  EXPECT_EQ(error_of([&] { cli::cmd_import_hf(Runtime::current(), o); }, ErrorKind::Input),
            "tensor 'model.norm.weight' in '" + dir64 + "/model.safetensors' holds 1e+300 at index 7 ([7]), beyond the "
            "float32 range (import with --dtype float64)");
  o.dtype = "auto";
  cli::cmd_import_hf(Runtime::current(), o);
  EXPECT_EQ(WeightsReader(w).stored_dtype(), "float64");
  fs::remove_all(dir), fs::remove_all(dir64), fs::remove(w), fs::remove(big);
}

// Weights F16 (or BF16) cannot hold, or that are not finite: export-hf refuses
// them naming the tensor and the place, and an earlier export in the directory
// is left as it was. They were written as inf.
TEST(HfWeights, ExportRefusesValuesItsDtypeCannotHold) {
  ModelConfig mc = model_preset("tiny");
  const std::string w = tmp("wide.h5"), dir = tmp("wide");
  auto weights = [&](double v) {
    save_weights(w, mc, "float32", [v](const ParamInfo& p) {
      std::vector<double> x(std::size_t(p.size), 0.5);
      if (p.name == "model.layers.0.post_attention_layernorm.weight") x[7] = v;
      return x;
    }, "test");
  };
  weights(1.0);
  export_hf(w, dir, "f16");  // an earlier export
  const std::string before = [&] {
    std::ifstream in(dir + "/model.safetensors", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }();
  weights(1e5);
  EXPECT_EQ(error_of([&] { export_hf(w, dir, "f16"); }, ErrorKind::Input),
            "weights file '" + w + "': model.layers.0.post_attention_layernorm.weight holds 100000 at index 7 ([7]), beyond "
            "the range of F16 (it would be written as inf): export with --dtype bf16 or f32");
  {
    std::ifstream in(dir + "/model.safetensors", std::ios::binary);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), before);
    EXPECT_FALSE(fs::exists(dir + "/.burst-export.tmp"));
  }
  weights(65519.0);  // rounds to 65504, the largest half: written
  export_hf(w, dir, "f16");
  EXPECT_EQ(io::SafetensorsFile(dir + "/model.safetensors").read<float>("model.layers.0.post_attention_layernorm.weight")[7], 65504.0f);
  weights(1e5);
  export_hf(w, dir, "bf16");  // within BF16's range
  // float64 weights beyond F32.
  const std::string w64 = tmp("wide64.h5");
  save_weights(w64, mc, "float64", [](const ParamInfo& p) {
    std::vector<double> x(std::size_t(p.size), 0.5);
    if (p.name == "model.norm.weight") x[7] = 1e300;
    return x;
  }, "test");
  EXPECT_EQ(error_of([&] { export_hf(w64, dir, "f32"); }, ErrorKind::Input),
            "weights file '" + w64 + "': model.norm.weight holds 1e+300 at index 7 ([7]), beyond the range of F32 (it would "
            "be written as inf): export with --dtype f64");
  fs::remove(w64);
  weights(std::numeric_limits<double>::quiet_NaN());
  EXPECT_NE(error_of([&] { export_hf(w, dir, "f32"); }, ErrorKind::Input)
                .find("model.layers.0.post_attention_layernorm.weight holds nan at index 7 ([7]): the weights must be finite"),
            std::string::npos);
  fs::remove_all(dir), fs::remove(w);
}

// --output with a trailing slash names the directory to make (its parent was
// taken to be the directory itself: "the directory 'out' does not exist").
TEST(HfWeights, ExportIntoANewDirectoryGivenWithASlash) {
  const std::string dir = tmp("slash");
  fs::remove_all(dir);
  export_hf(kGolden, dir + "/", "f32");
  EXPECT_TRUE(fs::is_regular_file(dir + "/model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(dir + "/config.json"));
  export_hf(kGolden, dir + "//", "f32");  // and again, into the directory now there
  EXPECT_NE(error_of([&] { export_hf(kGolden, "/nonexistent/x/", "f32"); }, ErrorKind::Input)
                .find("--output '/nonexistent/x/': the directory '/nonexistent' does not exist"),
            std::string::npos);
  fs::remove_all(dir);
}

// Tokens of any integer width (int8, int16, uint32, uint64 were refused as
// "holds other, not integers"), the same logits as int32; an id beyond int64
// is beyond the vocabulary; a group named tokens is named (it was Error(IO), status 1).
TEST(HfWeights, ForwardReadsTokensOfEveryIntegerWidth) {
  io::H5File g = io::H5File::open(kGolden);
  const std::vector<std::int32_t> tok = g.read<std::int32_t>("tokens");
  const std::string cfg = tmp("widths_config.json");
  std::ofstream(cfg) << g.attr_string("/", "config_json");
  auto forward = [&](const std::string& tokens, const std::string& out) {
    cli::ForwardOptions o;
    o.model = cfg, o.weights = kGolden, o.tokens = tokens, o.output = out, o.dtype = "float";
    cli::cmd_forward(Runtime::current(), o);
    return io::H5File::open(out).read<float>("logits");
  };
  auto tokens_as = [&](const std::string& path, const std::string& name, hid_t type, std::vector<std::uint64_t> v) {
    { io::H5File f = io::H5File::create(path); }
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hsize_t n = v.size();
    const hid_t space = H5Screate_simple(1, &n, nullptr), lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    const hid_t d = H5Dcreate2(f, name.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d), H5Pclose(lcpl), H5Sclose(space), H5Fclose(f);
  };
  const std::vector<std::uint64_t> ids(tok.begin(), tok.end());
  const std::string t32 = tmp("tok_i32.h5");
  tokens_as(t32, "tokens", H5T_STD_I32LE, ids);
  const std::vector<float> ref = forward(t32, tmp("logits_i32.h5"));
  // Listed one at a time: nvcc (the CUDA build compiles this file through it)
  // misparses HDF5's type macros, comma expressions, inside a brace list.
  std::vector<hid_t> widths;
  widths.push_back(H5T_STD_I8LE);
  widths.push_back(H5T_STD_I16LE);
  widths.push_back(H5T_STD_U32LE);
  widths.push_back(H5T_STD_U64LE);
  for (hid_t type : widths) {
    const std::string t = tmp("tok_w.h5");
    tokens_as(t, "tokens", type, ids);
    EXPECT_EQ(forward(t, tmp("logits_w.h5")), ref) << "HDF5 type of " << H5Tget_size(type) << " bytes";
  }
  const std::string huge = tmp("tok_huge.h5"), grp = tmp("tok_grp.h5");
  tokens_as(huge, "tokens", H5T_STD_U64LE, {1, 2, ~0ull});
  EXPECT_EQ(error_of([&] { forward(huge, tmp("logits_x.h5")); }, ErrorKind::Input),
            "tokens file '" + huge + "': token 9223372036854775807 at row 0, position 2 is outside the vocabulary [0, 64)");
  tokens_as(grp, "tokens/x", H5T_STD_I32LE, {1});
  EXPECT_EQ(error_of([&] { forward(grp, tmp("logits_x.h5")); }, ErrorKind::Input),
            "tokens file '" + grp + "': 'tokens' is not a dataset (a group?)");
  for (const char* f : {"tok_i32.h5", "tok_w.h5", "tok_huge.h5", "tok_grp.h5", "logits_i32.h5", "logits_w.h5", "widths_config.json"})
    fs::remove(tmp(f));
}

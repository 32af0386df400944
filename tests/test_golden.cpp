// Golden fixture from Hugging Face transformers (experiments/peers/
// make_golden_fixture.py, run on the GPU machine): a tiny random LLaMA with
// GQA and llama3 rope scaling in float64. Our model, loading its weights,
// must match its logits, loss and every parameter gradient.
#include "io/h5.hpp"
#include "kernels/cross_entropy.hpp"
#include "model/llama.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace burst;
using Mem = DeviceMem;

TEST(Golden, MatchesHuggingFaceLlama) {
  io::H5File f = io::H5File::open(BURST_FIXTURE_DIR "/llama_tiny_golden.h5");
  ModelConfig cfg = model_from_hf_json(f.attr_string("/", "config_json"), "golden config_json");
  LlamaModel<double, Mem> model(cfg, std::make_shared<LocalAttention<double, Mem>>(1.0 / std::sqrt(double(cfg.head_dim))));
  auto hp = Kokkos::create_mirror_view(model.params().flat());
  for (const ParamInfo& p : model.params().table()) {
    std::vector<double> x = f.read<double>("params/" + p.name);
    ASSERT_EQ(long(x.size()), p.size) << p.name;
    std::copy(x.begin(), x.end(), hp.data() + p.offset);
  }
  Kokkos::deep_copy(model.params().flat(), hp);
  std::vector<std::int32_t> tok = f.read<std::int32_t>("tokens");
  const long s = long(tok.size());
  Kokkos::View<std::int32_t*, Layout, Mem> t("act/tok", s), lab("act/lab", s);
  Kokkos::View<long*, Layout, Mem> pos("act/pos", s);
  auto ht = Kokkos::create_mirror_view(t);
  auto hl = Kokkos::create_mirror_view(lab);
  auto hpos = Kokkos::create_mirror_view(pos);
  for (long i = 0; i < s; ++i) {
    ht(i) = tok[i];
    hl(i) = i + 1 < s ? tok[i + 1] : kernels::kIgnoreIndex;  // labels shifted before anything else
    hpos(i) = i;
  }
  Kokkos::deep_copy(t, ht);
  Kokkos::deep_copy(lab, hl);
  Kokkos::deep_copy(pos, hpos);
  TokenBatch<Mem> b;
  b.tokens = t, b.labels = lab, b.positions = pos;
  // Logits.
  Kokkos::View<double**, Layout, Mem> logits("act/logits", s, cfg.vocab);
  model.forward_logits(b, logits);
  auto hlog = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);
  std::vector<double> ref = f.read<double>("logits");
  double num = 0, den = 0;
  for (size_t e = 0; e < ref.size(); ++e) num += std::pow(hlog.data()[e] - ref[e], 2), den += ref[e] * ref[e];
  EXPECT_LT(std::sqrt(num / den), 1e-4) << "logits";
  // Loss and gradients.
  Kokkos::deep_copy(model.grads().flat(), 0.0);
  StepLoss l = model.forward_backward(b, double(s - 1));
  EXPECT_NEAR(l.sum / double(s - 1), f.read<double>("loss")[0], 1e-4 * f.read<double>("loss")[0]);
  auto hg = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.grads().flat());
  for (const ParamInfo& p : model.grads().table()) {
    std::vector<double> g = f.read<double>("grads/" + p.name);
    double n2 = 0, d2 = 0;
    for (long e = 0; e < p.size; ++e) n2 += std::pow(hg(p.offset + e) - g[e], 2), d2 += g[e] * g[e];
    EXPECT_LT(std::sqrt(n2 / std::max(d2, 1e-300)), 1e-4) << p.name;
  }
}

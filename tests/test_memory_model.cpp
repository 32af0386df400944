// The analytic memory model against the memory tracker's measured peaks
// (Kokkos allocation callbacks): activations for every policy and head,
// parameters / gradients / optimizer state for every ZeRO stage, within 10%;
// and `half` keeps half of what `whole` keeps (measured after the forward).
#include "comm/runtime.hpp"
#include "core/memory.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"
#include "kernels/lm_head_loss.hpp"
#include "model/llama.hpp"
#include "train/memory_model.hpp"
#include "train/sequence_parallel.hpp"
#include "train/zero.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <random>

using namespace burst;

namespace {

// Where DeviceMem's allocations are counted.
constexpr MemSpaceKind kSpace = std::is_same<DeviceMem, HostMem>::value ? MemSpaceKind::Host : MemSpaceKind::Device;

ModelConfig model_config() {
  ModelConfig c;
  c.vocab = 512, c.hidden = 32, c.layers = 3, c.heads = 4, c.kv_heads = 2, c.head_dim = 8, c.ffn = 64;
  c.rope.head_dim = 8;
  c.rope.theta = 1000;
  return c;
}

data::Sequence sequence(long S, long vocab) {
  std::mt19937 g(3);
  data::Sequence s;
  for (long t = 0; t < S; ++t) s.tokens.push_back(std::int32_t(g() % vocab)), s.positions.push_back(t);
  for (long t = 0; t < S; ++t) s.labels.push_back(t + 1 < S ? s.tokens[size_t(t + 1)] : kernels::kIgnoreIndex);
  return s;
}

struct Measured {
  std::array<std::int64_t, kMemCategories> peak{};  // above what was allocated before the step
};

// One forward + backward (+ the ZeRO gradient reduction and update) of a
// model on this rank's slots, with the peaks of the allocations it made.
template <class T = double>
Measured measure(ActPolicy policy, long chunk, int zero_stage, long S, bool distributed, MemoryModelInput* in,
                 std::int64_t* kept_after_forward = nullptr, const parallel::AttnOptions& opt = {}) {
  auto& rt = Runtime::current();
  const ModelConfig mc = model_config();
  ModelOptions mo;
  mo.policy = policy, mo.loss_chunk = chunk;
  const double scale = 1.0 / std::sqrt(double(mc.head_dim));
  std::shared_ptr<AttentionOp<T>> attn;
  const parallel::SeqLayout* layout = nullptr;
  int block = 0;
  // The method's packets are allocated when it is made: comm is counted from here.
  const std::int64_t comm_base = MemoryTracker::global().current(kSpace, MemCategory::Comm);
  if (distributed) {
    auto mesh = Mesh::make(rt.world(), rt.world(), rt.size());
    parallel::AttnProblem pb;
    pb.layout = policy == ActPolicy::Half ? parallel::LayoutKind::Striped : parallel::LayoutKind::Zigzag;
    pb.seq = S, pb.heads = mc.heads, pb.kv_heads = mc.kv_heads, pb.head_dim = mc.head_dim;
    auto sp = std::make_shared<SequenceParallelAttention<T>>(opt, pb, mesh, rt.topology(),
                                                              policy == ActPolicy::Half);
    layout = &sp->shards();
    block = mesh->cp_rank;
    attn = sp;
  } else {
    attn = std::make_shared<LocalAttention<T>>(scale);
  }
  LlamaModel<T> model(mc, attn, mo);
  init_params(model.params(), 5, 0.1);
  ZeroState<T> zero(model, zero_stage, false, rt.world());
  if (kept_after_forward)
    model.set_forward_probe([&] { *kept_after_forward = MemoryTracker::global().current(kSpace, MemCategory::Activations); });
  const LocalSequence ls = local_slots(layout, block, sequence(S, mc.vocab));
  auto batch = to_device(ls);
  auto& tr = MemoryTracker::global();
  const MemCounters before = tr.counters(kSpace);
  tr.reset_peaks();
  zero.zero_grads();
  model.forward_backward(batch, double(S - 1));
  zero.finish_grads();
  zero.step(kernels::AdamWParams{}, 1, 1.0);
  const MemCounters after = tr.counters(kSpace);
  Measured m;
  for (int c = 0; c < kMemCategories; ++c) {
    // Params, grads and moments were allocated before the window: their peak
    // is what stays plus what the step gathered; activations start from zero.
    const bool state = c == int(MemCategory::Params) || c == int(MemCategory::Grads) || c == int(MemCategory::Optimizer);
    m.peak[size_t(c)] = state ? after.peak[size_t(c)] : after.peak[size_t(c)] - before.current[size_t(c)];
  }
  m.peak[int(MemCategory::Comm)] = after.peak[int(MemCategory::Comm)] - comm_base;
  in->attention = attn->comm_buffers();
  in->model = mc, in->slots = long(ls.tokens.size()), in->scalar_bytes = int(sizeof(T)), in->accum_bytes = int(sizeof(accum_t<T>)), in->policy = policy, in->loss_chunk = chunk;
  in->zero_stage = zero_stage, in->world = rt.size();
  return m;
}

void expect_within(std::int64_t measured, std::int64_t model, const std::string& what) {
  if (std::getenv("BURST_TEST_SHOW_MEMORY")) std::printf("%s: measured %ld model %ld (%+.2f%%)\n", what.c_str(), (long)measured, (long)model, 100.0 * (double(model) / double(measured) - 1));
  EXPECT_LE(std::fabs(double(measured) - double(model)), 0.1 * double(measured))
      << what << ": measured " << measured << " bytes, model " << model;
}

}  // namespace

// Activations for every policy, with the plain and the fused head; tag
// prefixes the failure messages.
template <class T> void expect_activations_of_every_policy(const std::string& tag) {
  const bool distributed = Runtime::current().size() > 1;
  for (ActPolicy p : {ActPolicy::Keep, ActPolicy::Full, ActPolicy::Whole, ActPolicy::Half})
    for (long chunk : {0L, 16L}) {
      MemoryModelInput in;
      const Measured m = measure<T>(p, chunk, 0, 96, distributed, &in);
      const MemoryEstimate e = estimate_memory(in);
      expect_within(m.peak[int(MemCategory::Activations)], e.bytes[int(MemCategory::Activations)],
                    tag + "activations, " + act_policy_name(p) + ", chunk " + std::to_string(chunk));
    }
}

// The categories cats at every ZeRO stage (whole, fused head).
template <class T> void expect_zero_stages(const std::string& tag, std::initializer_list<MemCategory> cats) {
  const bool distributed = Runtime::current().size() > 1;
  for (int stage : {0, 1, 2, 3}) {
    MemoryModelInput in;
    const Measured m = measure<T>(ActPolicy::Whole, 16, stage, 96, distributed, &in);
    const MemoryEstimate e = estimate_memory(in);
    for (MemCategory c : cats)
      expect_within(m.peak[int(c)], e.bytes[int(c)], tag + mem_category_name(c) + ", ZeRO " + std::to_string(stage));
  }
}

TEST(MemoryModel, ActivationsOfEveryPolicyWithin10Percent) { expect_activations_of_every_policy<double>(""); }

TEST(FusedLoss, EqualsThePlainHeadAndHoldsOneChunkOfLogits) {
  // x [N, H], W [V, H], targets with ignored rows: loss, dx and dW of the
  // fused head equal logits -> cross-entropy -> two GEMMs, and the only memory
  // it allocates is one chunk of logits and its per-token losses.
  const long N = 75, H = 24, V = 300, chunk = 16;
  std::mt19937 g(9);
  std::normal_distribution<double> nd(0.0, 1.0);
  View2<double> x("act/x", N, H), W("params/W", V, H), dx("act/dx", N, H), dW("grads/dW", V, H), dx_ref("act/dx_ref", N, H),
      dW_ref("grads/dW_ref", V, H);
  View1<std::int32_t> t("act/t", N);
  auto hx = Kokkos::create_mirror_view(x);
  auto hw = Kokkos::create_mirror_view(W);
  auto ht = Kokkos::create_mirror_view(t);
  for (long i = 0; i < N; ++i)
    for (long j = 0; j < H; ++j) hx(i, j) = nd(g);
  for (long i = 0; i < V; ++i)
    for (long j = 0; j < H; ++j) hw(i, j) = nd(g);
  long valid = 0;
  for (long i = 0; i < N; ++i) ht(i) = i % 7 == 3 ? kernels::kIgnoreIndex : std::int32_t(g() % V), valid += ht(i) >= 0;
  Kokkos::deep_copy(x, hx), Kokkos::deep_copy(W, hw), Kokkos::deep_copy(t, ht);
  const double scale = 1.0 / double(valid);

  View2<double> logits("act/logits", N, V), dlogits("act/dlogits", N, V);
  View1<double> loss("act/loss", N);
  kernels::gemm('N', 'T', 1, x, W, 0, logits);
  const kernels::LossSum ref = kernels::cross_entropy<double, DeviceMem>(logits, t, loss, dlogits, scale);
  kernels::gemm('N', 'N', 1, dlogits, W, 0, dx_ref);
  kernels::gemm('T', 'N', 1, dlogits, x, 0, dW_ref);

  auto& tr = MemoryTracker::global();
  const std::int64_t before = tr.current(kSpace, MemCategory::Activations);
  tr.reset_peaks();
  const kernels::LossSum got = kernels::lm_head_cross_entropy<double, DeviceMem>(x, W, t, chunk, scale, dx, dW);
  EXPECT_EQ(tr.peak(kSpace, MemCategory::Activations) - before, std::int64_t(8 * (chunk * V + chunk)));
  EXPECT_EQ(got.valid, ref.valid);
  EXPECT_NEAR(got.sum, ref.sum, 1e-12 * std::fabs(ref.sum));
  auto close = [](const View2<double>& a, const View2<double>& b) {
    auto ha = Kokkos::create_mirror_view_and_copy(HostMem(), a);
    auto hb = Kokkos::create_mirror_view_and_copy(HostMem(), b);
    double num = 0, den = 0;
    for (size_t i = 0; i < ha.extent(0); ++i)
      for (size_t j = 0; j < ha.extent(1); ++j)
        num = std::max(num, std::fabs(ha(i, j) - hb(i, j))), den = std::max(den, std::fabs(hb(i, j)));
    return num / den;
  };
  EXPECT_LT(close(dx, dx_ref), 1e-12);
  EXPECT_LT(close(dW, dW_ref), 1e-12);
}

TEST(MemoryModel, ZeroStagesWithin10Percent) {
  expect_zero_stages<double>("", {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer});
}

// Communication buffers: every method's packets and all-to-all / all-gather
// buffers (from its own plan), and ZeRO's per-unit buffers, against the
// tracker's comm peak over one step.
TEST(MemoryModel, CommBuffersOfEveryMethodAndZeroStageWithin10Percent) {
  const int P = Runtime::current().size();
  const bool distributed = P > 1;
  const ModelConfig c = model_config();
  std::vector<parallel::AttnOptions> methods;
  for (const char* name : {"burst", "ring", "loongtrain", "allgather", "ulysses", "usp"}) {
    parallel::AttnOptions o;
    o.method = name;
    if (o.method == "ulysses" && (c.kv_heads % P != 0)) continue;  // no kv-head replication
    if (o.method == "usp") {
      if (P % 2 != 0) continue;
      o.hp = 2;
    }
    if (o.method == "loongtrain") o.inner = P % 2 == 0 ? 2 : P;
    methods.push_back(o);
  }
  for (const auto& o : distributed ? methods : std::vector<parallel::AttnOptions>{parallel::AttnOptions{}})
    for (int stage : {0, 2, 3}) {
      MemoryModelInput in;
      const Measured m = measure(ActPolicy::Whole, 16, stage, 96, distributed, &in, nullptr, o);
      const MemoryEstimate e = estimate_memory(in);
      const std::string what = "comm, " + (distributed ? o.method : std::string("local")) + ", ZeRO " + std::to_string(stage);
      if (distributed || stage > 0) EXPECT_GT(m.peak[int(MemCategory::Comm)], 0) << what;
      expect_within(m.peak[int(MemCategory::Comm)], e.bytes[int(MemCategory::Comm)], what);
    }
}

TEST(MemoryModel, HalfKeepsHalfOfWhatWholeKeeps) {
  // Measured at the end of the forward: what whole and half keep beyond full
  // (the attention O and lse of every layer, or of the second half of the
  // tokens).
  const bool distributed = Runtime::current().size() > 1;
  std::int64_t full = 0, whole = 0, half = 0;
  MemoryModelInput in;
  measure(ActPolicy::Full, 0, 0, 96, distributed, &in, &full);
  measure(ActPolicy::Whole, 0, 0, 96, distributed, &in, &whole);
  measure(ActPolicy::Half, 0, 0, 96, distributed, &in, &half);
  const ModelConfig c = model_config();
  // (The last layer keeps everything under every policy: not counted.)
  EXPECT_EQ(whole - full, (c.layers - 1) * 8 * in.slots * (c.heads * c.head_dim + c.heads));
  EXPECT_EQ(2 * (half - full), whole - full);
}

TEST(MemoryModel, Bf16CacheHoldsOInBf16) {
  // bf16 storage, fp32 accumulation: the `whole` cache is O in bf16 and lse
  // in fp32 (ALGORITHMS.md section 7: s*H*2 + s*n*4 bytes per layer), not
  // the fp32 O attention produced; `half` holds half of it. Measured at the
  // end of the forward, beyond what `full` keeps.
  const bool distributed = Runtime::current().size() > 1;
  std::int64_t full = 0, whole = 0, half = 0;
  MemoryModelInput in;
  measure<bf16>(ActPolicy::Full, 0, 0, 96, distributed, &in, &full);
  measure<bf16>(ActPolicy::Whole, 0, 0, 96, distributed, &in, &whole);
  measure<bf16>(ActPolicy::Half, 0, 0, 96, distributed, &in, &half);
  const ModelConfig c = model_config();
  EXPECT_EQ(whole - full, (c.layers - 1) * in.slots * (2 * c.heads * c.head_dim + 4 * c.heads));
  EXPECT_EQ(2 * (half - full), whole - full);
}

TEST(MemoryModel, Bf16KeepHoldsOOnceInBf16) {
  // bf16 storage, fp32 accumulation, `keep`: a layer keeps its activations
  // with attention's O once, in bf16 (what the O projection and attention's
  // backward read; the method's fp32 O goes once converted): h1, q, k, v, O,
  // x2, h2, gate, up, act in bf16, rstd1, rstd2 and lse in fp32, per slot.
  // Measured at the end of the forward, beyond what `full` keeps (the layer
  // inputs, kept by both).
  const bool distributed = Runtime::current().size() > 1;
  std::int64_t full = 0, keep = 0;
  MemoryModelInput in;
  measure<bf16>(ActPolicy::Full, 0, 0, 96, distributed, &in, &full);
  measure<bf16>(ActPolicy::Keep, 0, 0, 96, distributed, &in, &keep);
  const ModelConfig c = model_config();
  const std::int64_t H = c.hidden, nd = c.heads * c.head_dim, kvd = c.kv_heads * c.head_dim, F = c.ffn;
  const std::int64_t per_slot = 2 * (3 * H + nd + 2 * kvd + 3 * F) + 2 * nd + 4 * (2 + c.heads);
  // The last layer keeps all of them under `full` too (no recompute of it).
  EXPECT_EQ(keep - full, (c.layers - 1) * in.slots * per_slot)
      << "an fp32 O would add " << (c.layers - 1) * in.slots * 4 * nd << " bytes";
}

TEST(MemoryModel, Bf16EveryCategoryWithin10Percent) {
  // bf16 storage with fp32 accumulation, the GPU's configuration: weights and
  // activations in bf16; O, lse, D, dq/dk/dv, rstds, gradients, moments and
  // master weights in fp32 (MemoryModelInput::accum_bytes).
  expect_activations_of_every_policy<bf16>("bf16 ");
  expect_zero_stages<bf16>("bf16 ", {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer, MemCategory::Comm});
}

// The model on sequence shards: every rank holds the slots of one layout
// block and attention goes through a distributed method. The loss and every
// parameter gradient (summed over the ranks) must equal the single-rank
// model on the whole sequence in double precision, for every method, layout,
// activation policy and the fused LM head, at every registered rank count.
#include "comm/runtime.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "kernels/cross_entropy.hpp"
#include "model/llama.hpp"
#include "train/sequence_parallel.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

using namespace burst;

namespace {

ModelConfig small_model(long kv_heads) {
  ModelConfig c;
  c.vocab = 40, c.hidden = 32, c.layers = 2, c.heads = 4, c.kv_heads = kv_heads, c.head_dim = 8, c.ffn = 48;
  c.rope.head_dim = 8;
  c.rope.theta = 1000;
  return c;
}

// Random tokens, next-token labels with a few ignored (and the last).
data::Sequence random_sequence(long S, long vocab, unsigned seed) {
  std::mt19937 g(seed);
  data::Sequence s;
  for (long t = 0; t < S; ++t) s.tokens.push_back(std::int32_t(g() % vocab)), s.positions.push_back(t);
  for (long t = 0; t < S; ++t)
    s.labels.push_back(t + 1 < S && g() % 5 != 0 ? s.tokens[size_t(t + 1)] : kernels::kIgnoreIndex);
  return s;
}

struct Case {
  std::string method, layout;
  ActPolicy policy = ActPolicy::Keep;
  long loss_chunk = 0, kv_heads = 4, window = 0;
  int hp = 0;
  std::string backward = "auto";
  std::string name() const {
    return method + "/" + layout + "/" + act_policy_name(policy) + "/chunk" + std::to_string(loss_chunk) + "/kv" +
           std::to_string(kv_heads) + (window ? "/window" + std::to_string(window) : "") + "/bwd-" + backward;
  }
};

double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num = std::max(num, std::fabs(a[i] - b[i])), den = std::max(den, std::fabs(b[i]));
  return den > 0 ? num / den : num;
}

std::vector<double> host(const Kokkos::View<double*, Layout, DeviceMem>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostMem(), v);
  return std::vector<double>(h.data(), h.data() + h.extent(0));
}

void run_case(const Case& c) {
  SCOPED_TRACE(c.name());
  auto& rt = Runtime::current();
  const int P = rt.size();
  const long S = 48;
  const ModelConfig mc = small_model(c.kv_heads);
  const data::Sequence seq = random_sequence(S, mc.vocab, 7);
  long valid = 0;
  for (auto l : seq.labels) valid += l != kernels::kIgnoreIndex;
  ModelOptions mo;
  mo.policy = c.policy;
  mo.loss_chunk = c.loss_chunk;
  const double scale = 1.0 / std::sqrt(double(mc.head_dim));

  // Reference: one process, the whole sequence, every activation kept.
  LlamaModel<double> ref(mc, std::make_shared<LocalAttention<double>>(scale, c.window));
  init_params(ref.params(), 11, 0.2);
  Kokkos::deep_copy(ref.grads().flat(), 0.0);
  const StepLoss lr = ref.forward_backward(to_device(local_slots(nullptr, 0, seq)), double(valid));

  // Distributed: P ranks share the sequence.
  auto mesh = Mesh::make(rt.world(), rt.world(), P);
  parallel::AttnOptions ao;
  ao.method = c.method, ao.hp = c.hp, ao.backward = c.backward;
  parallel::AttnProblem pb;
  pb.layout = parallel::parse_layout(c.layout);
  pb.mask = c.window > 0 ? parallel::MaskSpec{parallel::MaskType::Window, c.window} : parallel::MaskSpec{};
  pb.seq = S, pb.heads = mc.heads, pb.kv_heads = mc.kv_heads, pb.head_dim = mc.head_dim, pb.scale = scale;
  auto sp = std::make_shared<SequenceParallelAttention<double>>(ao, pb, mesh, rt.topology(), c.policy == ActPolicy::Half);
  LlamaModel<double> dist(mc, sp, mo);
  init_params(dist.params(), 11, 0.2);
  Kokkos::deep_copy(dist.grads().flat(), 0.0);
  const StepLoss ld = dist.forward_backward(to_device(local_slots(&sp->shards(), mesh->cp_rank, seq)), double(valid));
  double sum = ld.sum;
  long cnt = ld.valid;
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, rt.world());
  MPI_Allreduce(MPI_IN_PLACE, &cnt, 1, MPI_LONG, MPI_SUM, rt.world());
  std::vector<double> g = host(dist.grads().flat());
  MPI_Allreduce(MPI_IN_PLACE, g.data(), int(g.size()), MPI_DOUBLE, MPI_SUM, rt.world());

  EXPECT_EQ(cnt, lr.valid);
  EXPECT_NEAR(sum, lr.sum, 1e-9 * std::fabs(lr.sum));
  const std::vector<double> gr = host(ref.grads().flat());
  EXPECT_LT(rel_err(g, gr), 1e-9);
  // Tensor by tensor, so a failure names the parameter.
  for (const ParamInfo& p : ref.grads().table()) {
    std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.size), b(gr.begin() + p.offset, gr.begin() + p.offset + p.size);
    EXPECT_LT(rel_err(a, b), 1e-9) << p.name;
  }
}

}  // namespace

TEST(SeqParallel, RingAndBurstOnZigzagKeepEveryActivation) {
  run_case({"burst", "zigzag", ActPolicy::Keep, 0, 4});
  run_case({"ring", "zigzag", ActPolicy::Keep, 0, 2});
}

TEST(SeqParallel, BurstWithGqaBothBackwards) {
  run_case({"burst", "zigzag", ActPolicy::Keep, 0, 2, 0, 0, "burst"});
  run_case({"burst", "zigzag", ActPolicy::Keep, 0, 2, 0, 0, "kv"});
}

TEST(SeqParallel, ActivationPoliciesRecomputeTheSameGradients) {
  run_case({"burst", "zigzag", ActPolicy::Full, 0, 4});
  run_case({"burst", "zigzag", ActPolicy::Whole, 0, 4});
  run_case({"ring", "striped", ActPolicy::Half, 0, 2});
  run_case({"burst", "striped", ActPolicy::Half, 0, 4});
}

TEST(SeqParallel, FusedLossGivesTheSameGradients) {
  run_case({"burst", "zigzag", ActPolicy::Whole, 7, 4});
  run_case({"burst", "contiguous", ActPolicy::Keep, 48, 2});
}

TEST(SeqParallel, OtherMethods) {
  const int P = Runtime::current().size();
  run_case({"loongtrain", "zigzag", ActPolicy::Full, 5, 2});
  run_case({"allgather", "zigzag", ActPolicy::Whole, 0, 2});
  if (4 % P == 0) {  // Ulysses splits the 4 (kv) heads over the ranks
    run_case({"ulysses", "zigzag", ActPolicy::Keep, 0, 4});
    run_case({"ulysses", "zigzag", ActPolicy::Whole, 0, 4});  // backward re-shards from its arguments
  }
  if (P % 2 == 0 && P >= 4) run_case({"usp", "zigzag", ActPolicy::Full, 0, 4, 0, 2});
}

TEST(SeqParallel, SlidingWindowOnTheContiguousLayout) {
  run_case({"burst", "contiguous", ActPolicy::Keep, 0, 4, 10});
  run_case({"ring", "contiguous", ActPolicy::Whole, 9, 2, 10});
}

TEST(SeqParallel, HalfNeedsTheStripedLayout) {
  auto& rt = Runtime::current();
  auto mesh = Mesh::make(rt.world(), rt.world(), rt.size());
  parallel::AttnProblem pb;
  pb.layout = parallel::LayoutKind::Zigzag;
  pb.seq = 48, pb.heads = 4, pb.kv_heads = 4, pb.head_dim = 8;
  try {
    SequenceParallelAttention<double> sp(parallel::AttnOptions{}, pb, mesh, rt.topology(), true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("half needs the striped layout"), std::string::npos) << e.what();
  }
}

namespace {
// Loss and summed parameter gradients of the bf16 model (bf16 weights and
// activations, fp32 accumulation and gradients) on P ranks, method burst on
// the striped layout, under `policy`; weights from init_params in bf16.
struct Bf16Run {
  double loss = 0;
  std::vector<double> grads;
};
Bf16Run bf16_run(ActPolicy policy, const ModelConfig& mc, const data::Sequence& seq, long valid) {
  auto& rt = Runtime::current();
  ModelOptions mo;
  mo.policy = policy;
  auto mesh = Mesh::make(rt.world(), rt.world(), rt.size());
  parallel::AttnProblem pb;
  pb.layout = parallel::LayoutKind::Striped;
  pb.seq = long(seq.tokens.size()), pb.heads = mc.heads, pb.kv_heads = mc.kv_heads, pb.head_dim = mc.head_dim;
  pb.scale = 1.0 / std::sqrt(double(mc.head_dim));
  auto sp = std::make_shared<SequenceParallelAttention<bf16>>(parallel::AttnOptions{}, pb, mesh, rt.topology(),
                                                              policy == ActPolicy::Half);
  LlamaModel<bf16> m(mc, sp, mo);
  init_params(m.params(), 11, 0.2);
  Kokkos::deep_copy(m.grads().flat(), 0.0f);
  const StepLoss l = m.forward_backward(to_device(local_slots(&sp->shards(), mesh->cp_rank, seq)), double(valid));
  Bf16Run r;
  r.loss = l.sum;
  MPI_Allreduce(MPI_IN_PLACE, &r.loss, 1, MPI_DOUBLE, MPI_SUM, rt.world());
  auto h = Kokkos::create_mirror_view_and_copy(HostMem(), m.grads().flat());
  r.grads.assign(h.data(), h.data() + h.extent(0));
  MPI_Allreduce(MPI_IN_PLACE, r.grads.data(), int(r.grads.size()), MPI_DOUBLE, MPI_SUM, rt.world());
  return r;
}
}  // namespace

// bf16 storage under every activation policy against the double model on
// one rank with the same (bf16-rounded) weights. Every policy keeps
// attention's O in bf16 (`whole` / `half`: the cache of ALGORITHMS.md
// section 7) and the backward's D = rowsum(dO * O) reads that copy, so the
// recomputing policies reproduce `keep`'s gradients up to the order of
// fp32 sums (on the host exactly). An accuracy guard (D from a wrong O, or
// the wrong half cached, fails it), not a regression test of the cache's
// type: MemoryModel.Bf16CacheHoldsOInBf16 and Bf16KeepHoldsOOnceInBf16 are.
TEST(SeqParallel, Bf16PoliciesMatchDouble) {
  const long S = 48;
  const ModelConfig mc = small_model(2);
  const data::Sequence seq = random_sequence(S, mc.vocab, 7);
  long valid = 0;
  for (auto l : seq.labels) valid += l != kernels::kIgnoreIndex;
  // The reference: double, one rank, the bf16 weights widened.
  LlamaModel<double> ref(mc, std::make_shared<LocalAttention<double>>(1.0 / std::sqrt(double(mc.head_dim))));
  {
    FlatTensors<bf16, DeviceMem> w(ref.params().table(), MemCategory::Params, "w16");
    init_params(w, 11, 0.2);
    auto hw = Kokkos::create_mirror_view_and_copy(HostMem(), w.flat());
    auto hr = Kokkos::create_mirror_view(ref.params().flat());
    for (size_t i = 0; i < hw.extent(0); ++i) hr(i) = double(float(hw(i)));
    Kokkos::deep_copy(ref.params().flat(), hr);
  }
  Kokkos::deep_copy(ref.grads().flat(), 0.0);
  const StepLoss lr = ref.forward_backward(to_device(local_slots(nullptr, 0, seq)), double(valid));
  const std::vector<double> gr = host(ref.grads().flat());
  const Bf16Run keep = bf16_run(ActPolicy::Keep, mc, seq, valid);
  for (ActPolicy p : {ActPolicy::Keep, ActPolicy::Whole, ActPolicy::Half}) {
    SCOPED_TRACE(act_policy_name(p));
    const Bf16Run r = p == ActPolicy::Keep ? keep : bf16_run(p, mc, seq, valid);
    const double e = rel_err(r.grads, gr), ek = rel_err(r.grads, keep.grads);
    if (Runtime::current().rank() == 0)
      std::printf("bf16 %s at P = %d: loss %.6f (double %.6f), gradients vs double %.2e, vs bf16 keep %.2e\n",
                  act_policy_name(p), Runtime::current().size(), r.loss, lr.sum, e, ek);
    EXPECT_NEAR(r.loss, lr.sum, 1e-2 * std::fabs(lr.sum));
    EXPECT_LT(e, 3e-2);
    EXPECT_LT(ek, 1e-3);
  }
}

#include "train/sequence_parallel.hpp"

#include "core/error.hpp"
#include "core/memory.hpp"
#include "kernels/cross_entropy.hpp"

namespace burst {

std::shared_ptr<Mesh> Mesh::make(MPI_Comm comm, MPI_Comm world, int cp) {
  int size = 1, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  BURST_CHECK_CONFIG(cp >= 1 && size % cp == 0, "parallel.cp = ", cp, " must divide the ", size, " ranks of the run");
  auto m = std::make_shared<Mesh>();
  m->cp = cp;
  m->dp = size / cp;
  m->dp_rank = rank / cp;
  m->cp_rank = rank % cp;
  MPI_Comm_split(comm, m->dp_rank, m->cp_rank, &m->cp_comm);
  // World ranks of the cp members, for the node topology of the rings.
  MPI_Group g_cp, g_world;
  MPI_Comm_group(m->cp_comm, &g_cp);
  MPI_Comm_group(world, &g_world);
  std::vector<int> mine(static_cast<size_t>(cp));
  for (int i = 0; i < cp; ++i) mine[size_t(i)] = i;
  m->cp_world_ranks.assign(size_t(cp), MPI_UNDEFINED);
  MPI_Group_translate_ranks(g_cp, cp, mine.data(), g_world, m->cp_world_ranks.data());
  MPI_Group_free(&g_cp);
  MPI_Group_free(&g_world);
  for (int r : m->cp_world_ranks)
    BURST_CHECK(r != MPI_UNDEFINED, ErrorKind::Internal, "a sequence-parallel rank is outside the runtime's world");
  return m;
}

Mesh::~Mesh() {
  if (cp_comm != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&cp_comm);
  }
}

LocalSequence local_slots(const parallel::SeqLayout* layout, int block, const data::Sequence& s) {
  std::vector<long> natural(s.tokens.size());
  for (size_t i = 0; i < natural.size(); ++i) natural[i] = long(i);
  if (layout == nullptr) return {s.tokens, s.labels, s.positions, s.doc_ids, natural};
  BURST_CHECK(long(s.tokens.size()) == layout->seq, ErrorKind::Internal, "a sequence of ", s.tokens.size(),
              " tokens on a layout of ", layout->seq);
  return {layout->to_block(block, s.tokens, 1, std::int32_t(0)),
          layout->to_block(block, s.labels, 1, std::int32_t(kernels::kIgnoreIndex)), layout->to_block(block, s.positions, 1, 0L),
          s.doc_ids.empty() ? std::vector<int>() : layout->to_block(block, s.doc_ids, 1, -1),
          layout->to_block(block, natural, 1, 0L)};
}

TokenBatch<DeviceMem> to_device(const LocalSequence& s) {
  auto put = [](const auto& host, const char* name) {
    using E = typename std::decay_t<decltype(host)>::value_type;
    Kokkos::View<E*, Layout, DeviceMem> d(mem_label(MemCategory::Activations, name), host.size());
    Kokkos::deep_copy(d, Kokkos::View<const E*, Layout, HostMem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host.data(), host.size()));
    return d;
  };
  TokenBatch<DeviceMem> b;
  b.tokens = put(s.tokens, "tokens");
  b.labels = put(s.labels, "labels");
  b.positions = put(s.positions, "positions");
  if (!s.doc_ids.empty()) b.doc_ids = put(s.doc_ids, "doc_ids");
  if (!s.index.empty()) b.index = put(s.index, "index");
  return b;
}

template <class T>
SequenceParallelAttention<T>::SequenceParallelAttention(const parallel::AttnOptions& opt, const parallel::AttnProblem& pb,
                                                        std::shared_ptr<Mesh> mesh, const Topology& topo, bool half)
    : mesh_(std::move(mesh)) {
  const int P = mesh_->cp;
  parallel::validate_attention(opt, pb, P, topo.ranks_per_node);
  layouts_ = parallel::plan_layouts(parallel::resolve_options(opt, P, topo.ranks_per_node), pb, P);
  // NCCL where every rank has a GPU of its own (BURST_COMM as for bench attention and attn-check), else MPI.
  group_ = Communicator::create(mesh_->cp_comm, "cp");
  method_ = parallel::make_attention<T>(opt, pb, *group_, topo, mesh_->cp_world_ranks);
  if (half) {
    BURST_CHECK_CONFIG(pb.layout == parallel::LayoutKind::Striped, "train.activation = half needs the striped layout (its ",
                       "first local half is the first half of the sequence); parallel.layout is ",
                       parallel::layout_name(pb.layout));
    BURST_CHECK_CONFIG(pb.mask.type == parallel::MaskType::Causal || pb.mask.type == parallel::MaskType::Window,
                       "train.activation = half needs a causal or sliding-window mask (first-half queries must never see ",
                       "the second half); the mask is ", parallel::mask_name(pb.mask.type));
    BURST_CHECK_CONFIG(pb.seq % (2L * P) == 0, "train.activation = half needs the sequence (", pb.seq,
                       " tokens) to divide into 2 x ", P, " equal halves of stripes");
    parallel::AttnProblem hp = pb;
    hp.seq = pb.seq / 2;
    half_ = parallel::make_attention<T>(opt, hp, *group_, topo, mesh_->cp_world_ranks);
  }
}

template <class T>
void SequenceParallelAttention<T>::forward(int layer, const TokenBatch<DeviceMem>&, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) {
  method_->forward(layer, q, k, v, o, lse);
}

template <class T>
void SequenceParallelAttention<T>::backward(int layer, const TokenBatch<DeviceMem>&, CV3 q, CV3 k, CV3 v,
                                            CV3 o,
                                            Kokkos::View<const accum_t<T>**, Layout, DeviceMem> lse, CV3 dout, V3 dq, V3 dk,
                                            V3 dv) {
  method_->backward(layer, q, k, v, o, lse, dout, dq, dk, dv);
}

template <class T>
void SequenceParallelAttention<T>::forward_first_half(int layer, const TokenBatch<DeviceMem>&, CV3 q, CV3 k, CV3 v, V3 o,
                                                      V2 lse) {
  BURST_CHECK(half_ != nullptr, ErrorKind::Internal, "forward_first_half without the half policy's method");
  half_->forward(layer, q, k, v, o, lse);
  half_->release(layer);
}

template class SequenceParallelAttention<float>;
template class SequenceParallelAttention<double>;
template class SequenceParallelAttention<bf16>;

}  // namespace burst

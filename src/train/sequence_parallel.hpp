// The model on a sequence shard: the dp x cp mesh, and the AttentionOp that
// hands each layer's attention to a distributed AttentionMethod.
//
// World = dp x cp, world rank = dp_rank * cp + cp_rank: each of the dp
// replicas trains on its own sequences, and the cp ranks of a replica hold
// the slots of one sequence's layout (block = cp rank). Everything but
// attention is local to the slots; gradients are summed over the whole
// world (the loss is normalised by the global count of valid tokens, so the
// sum is the mean over dp and the sum over cp).
#pragma once

#include "comm/communicator.hpp"
#include "comm/topology.hpp"
#include "data/synthetic.hpp"
#include "model/llama.hpp"
#include "parallel/attention_method.hpp"

#include <mpi.h>

#include <memory>
#include <vector>

namespace burst {

struct Mesh {
  int dp = 1, cp = 1, dp_rank = 0, cp_rank = 0;
  MPI_Comm cp_comm = MPI_COMM_NULL;  // the cp ranks of this replica (owned)
  std::vector<int> cp_world_ranks;   // their ranks in the runtime's world (for node topology)
  // Collective over `comm`. cp must divide its size (Error(Config) otherwise).
  // `world` is the runtime's world (comm may be a part of it).
  static std::shared_ptr<Mesh> make(MPI_Comm comm, MPI_Comm world, int cp);
  ~Mesh();
};

// One sequence's tokens in this rank's slots: layout block `block` (padding
// slots: token 0, no label, position 0), or every token in natural order
// when `layout` is null.
struct LocalSequence {
  std::vector<std::int32_t> tokens, labels;
  std::vector<long> positions;
  std::vector<int> doc_ids;  // empty: one document; padding slots -1
  std::vector<long> index;   // token index in the sequence (padding slots 0)
};
LocalSequence local_slots(const parallel::SeqLayout* layout, int block, const data::Sequence& s);
TokenBatch<DeviceMem> to_device(const LocalSequence& s);

// Attention over the slots of this rank, through a distributed method.
template <class T> class SequenceParallelAttention : public AttentionOp<T, DeviceMem> {
 public:
  using Base = AttentionOp<T, DeviceMem>;
  using typename Base::V3;
  using typename Base::CV3;
  using typename Base::V2;
  // Collective over the mesh's cp group. `half`: also build the method of the
  // `half` policy's recompute (first-half queries and keys: a striped
  // problem of S/2 tokens), which needs the striped layout and a causal or
  // window mask.
  SequenceParallelAttention(const parallel::AttnOptions& opt, const parallel::AttnProblem& pb, std::shared_ptr<Mesh> mesh,
                            const Topology& topo, bool half);

  // Which natural tokens this rank's slots hold (block = cp rank).
  const parallel::SeqLayout& shards() const { return layouts_.shards; }
  parallel::AttentionMethod<T>& method() { return *method_; }

  void forward(int layer, const TokenBatch<DeviceMem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override;
  void backward(int layer, const TokenBatch<DeviceMem>& b, CV3 q, CV3 k, CV3 v,
                CV3 o, Kokkos::View<const accum_t<T>**, Layout, DeviceMem> lse,
                CV3 dout, V3 dq, V3 dk, V3 dv) override;
  void forward_first_half(int layer, const TokenBatch<DeviceMem>& b, CV3 q, CV3 k, CV3 v, V3 o, V2 lse) override;
  void release(int layer) override { method_->release(layer); }
  CommBuffers comm_buffers() const override {
    CommBuffers b = method_->comm_buffers();
    if (half_) b.persistent += half_->comm_buffers().persistent, b.transient = std::max(b.transient, half_->comm_buffers().transient);
    return b;
  }

 private:
  std::shared_ptr<Mesh> mesh_;
  std::unique_ptr<Communicator> group_;
  parallel::AttnLayouts layouts_;
  std::unique_ptr<parallel::AttentionMethod<T>> method_, half_;
};

}  // namespace burst

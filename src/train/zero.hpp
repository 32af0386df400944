// ZeRO over the whole world (the data x sequence group): the optimizer's
// view of the parameters, and where the gradients go.
//
//   stage 0  every rank: whole parameters, gradients (all-reduced) and AdamW moments
//   stage 1  + the AdamW moments sharded: each rank updates its shard of the
//            parameters and the shards are all-gathered, a unit at a time
//   stage 2  + the gradients sharded: a unit's gradients live only between
//            its backward and a reduce-scatter into the shard (per micro-step)
//   stage 3  + the parameters sharded: a unit is all-gathered just before it
//            is used (forward, recompute, backward) and freed after
//
// A unit is the embedding, one layer, or the final norm with the head
// (param_units); each unit is cut into W equal chunks (the last ranks' chunks
// padded with zeros), so every collective is on equal chunks. With `offload`
// the moments and the AdamW update live in host memory (a host AdamW over
// the shard, for GPU builds).
//
// Checkpoints hold whole tensors whatever the stage: gather_full /
// scatter_full move a flat vector in table order between the shards and
// rank 0 (gather) or every rank (scatter), so a run resumes at another rank
// count or stage.
#pragma once

#include "comm/communicator.hpp"
#include "kernels/optim.hpp"
#include "model/llama.hpp"

#include <mpi.h>

#include <string>
#include <type_traits>
#include <vector>

namespace burst {

template <class T> class ZeroState : public ParamHooks {
 public:
  using Mem = DeviceMem;
  // Gradients, AdamW moments and the master weights are in A (fp32 for a
  // bf16 model; the model's own type otherwise). With T != A ("mixed"),
  // the rank keeps an A master of what it updates (stage 0: every tensor;
  // else its shard) and the update writes the T copy the model reads in the
  // same pass; checkpoints hold the masters, so nothing is lost to rounding.
  using A = accum_t<T>;
  static constexpr bool kMixed = !std::is_same<A, T>::value;
  using V1 = Kokkos::View<T*, Layout, Mem>;
  using VA = Kokkos::View<A*, Layout, Mem>;
  using HA = Kokkos::View<A*, Layout, HostMem>;

  // Collective over comm. Switches `model` to per-unit storage as the stage
  // asks (the model must outlive this object's use). The master weights
  // start as the model's parameters.
  ZeroState(LlamaModel<T, Mem>& model, int stage, bool offload, MPI_Comm comm);
  ~ZeroState() override;

  int stage() const { return stage_; }
  // Before a step's first micro-step: gradients to zero.
  void zero_grads();
  // After the last micro-step: gradients summed over the world (stages 0
  // and 1 all-reduce them here; 2 and 3 reduced them unit by unit already).
  void finish_grads();
  // The global gradient norm (the same on every rank), and the first tensor
  // whose gradient is not finite ("" if none; collective).
  double grad_norm();
  std::string first_nonfinite();
  // Scale, AdamW on this rank's shard, and (stages 1, 2) all-gather the new
  // parameters into every rank's whole copy.
  void step(const kernels::AdamWParams& hp, long t, double clip);
  // For tests: a NaN in the first gradient element of `name` (global).
  void inject_nan(const std::string& name);

  // Whole tensors in table order: "params" (the masters), "optim/m", "optim/v".
  // gather_full: on rank 0 (others get an empty vector); collective.
  std::vector<A> gather_full(const std::string& what);
  // scatter_full: every rank passes the whole vector and keeps its part
  // ("params": the masters and the model's T copy).
  void scatter_full(const std::string& what, const std::vector<A>& full);

  void acquire_params(int unit) override;
  void release_params(int unit) override;
  void acquire_grads(int unit) override;
  void release_grads(int unit) override;

  // Elements this rank holds of each kind (for the memory report).
  long shard_elements() const { return shard_; }

 private:
  struct Chunk {
    long shard_off = 0;  // where this unit's chunk starts in the shard buffers
    long chunk = 0;      // elements per rank of this unit
    long begin = 0, len = 0;  // the unit in table order
  };
  // The part [lo, hi) of the unit's flat range that this rank owns.
  long own_lo(int u) const { return std::min(units_[size_t(u)].len, long(rank_) * units_[size_t(u)].chunk); }
  long own_hi(int u) const { return std::min(units_[size_t(u)].len, long(rank_ + 1) * units_[size_t(u)].chunk); }
  // Unit u gathered from the shards into `out` [len].
  void all_gather_unit(int u, const V1& shard, const V1& out);
  V1 shard_view(const V1& shard, int u) const;
  template <class F> void for_each_owned_tensor(F f) const;

  LlamaModel<T, Mem>& model_;
  int stage_;
  bool offload_;
  MPI_Comm comm_;
  // The gradient and parameter collectives (all-reduce, reduce-scatter,
  // all-gather) on the backend Communicator::create picks: NCCL on the
  // device where every rank has a GPU, else MPI (staged through the host on
  // device builds). Group "zero" in CommStats.
  std::unique_ptr<Communicator> coll_;
  int rank_ = 0, size_ = 1;
  std::vector<Chunk> units_;
  long shard_ = 0;       // sum of chunks
  V1 p_shard_;           // stage 3: the parameters this rank owns (the master unless mixed)
  VA master_;            // mixed: the master weights (stage 0: whole; else the shard; device)
  HA hmaster_;           // mixed with offload: the same in host memory
  VA g_shard_;           // stages 2, 3: the reduced gradients
  VA m_, v_;             // stage 0: whole; else the shard (device memory)
  HA hm_, hv_;           // offload: the moments in host memory
  std::vector<int> p_held_, g_held_;  // reference counts per unit
};

}  // namespace burst

// Distributed attention methods, one AttentionMethod each, picked by name:
//
//   ring        K,V travel in forward; K,V,dK,dV in backward (Megatron-CP style)
//   burst       K,V travel in forward; in backward Q, dO, lse, D travel one round
//               ahead and dQ one behind, K, V, dK, dV stay home (BurstAttention)
//   loongtrain  double ring of `inner`-rank inner rings, ring-style backward
//   ulysses     all-to-all sequence <-> heads, local attention
//   usp         Ulysses over hp ranks x a ring (ring | burst | double) over cp
//   allgather   gather K,V (Llama-3 style), reduce-scatter dK,dV
//
// Every rank holds the slots of one block of a SeqLayout (plan_layouts says
// which); positions and document ids are known to every rank from the layout
// (no per-hop metadata), so each round computes only its unmasked tiles and
// skips masked blocks without a synchronisation.
#pragma once

#include "comm/communicator.hpp"
#include "comm/topology.hpp"
#include "core/memory.hpp"
#include "parallel/layout.hpp"
#include "parallel/ring_executor.hpp"

#include <memory>
#include <string>
#include <vector>

namespace burst::parallel {

struct AttnOptions {
  std::string method = "burst";      // ring | burst | loongtrain | ulysses | usp | allgather
  std::string ring = "auto";         // flat | double | auto (pick_shape: burst/USP double over whole nodes unless a flat ring stops early; ring flat)
  std::string backward = "auto";     // burst | kv | auto (burst for MHA, kv for GQA)
  bool partial_bf16 = false;         // travelling partial sums in bf16 (default fp32/accumulation type)
  int inner = 0;                     // loongtrain: ranks per inner ring (0 = the group's ranks per node)
  int hp = 0;                        // usp: head-parallel size (0 = the group's ranks per node)
  std::string placement = "head-first";  // usp: head-first (hp inside the node) | ring-first
  std::string usp_inner = "burst";   // usp: ring | burst (its ring shape follows `ring`)
  bool trace = false;                // check every payload's block id against the schedule
  bool comm_only = false;            // benchmarks: every transfer, no attention math (the communication time alone); O, lse, dQ, dK, dV are left unwritten
  bool release_before_backward = false;  // check_attention: release the forward's state before backward (the path an
                                         // activation policy that recomputes takes; the bytes then include its rebuild)
};

// What every method needs to know about the problem.
struct AttnProblem {
  LayoutKind layout = LayoutKind::Zigzag;
  MaskSpec mask;
  long seq = 0;
  std::vector<long> doc_lengths;  // empty: one document
  long heads = 0, kv_heads = 0, head_dim = 0;
  double scale = 0;  // 0: 1/sqrt(head_dim)
};

// The layout the method's rings work on (`base`) and the one that says which
// slots each rank of the group holds (`shards`, block = group rank).
struct AttnLayouts {
  SeqLayout base, shards;
};

// Check the options against the problem and the group (the same answer on
// every rank, before any communication): Error(Config) naming the value and
// the rule.
void validate_attention(const AttnOptions& opt, const AttnProblem& pb, int group_size, int ranks_per_node);
// Defaults filled in: hp (ulysses: P; usp: the group's ranks per node, min(ranks per node, P)), inner (the same).
AttnOptions resolve_options(const AttnOptions& opt, int group_size, int ranks_per_node);
// `opt` resolved.
AttnLayouts plan_layouts(const AttnOptions& opt, const AttnProblem& pb, int group_size);

template <class T> class AttentionMethod {
 public:
  using Acc = accum_t<T>;
  using CV3 = Kokkos::View<const T***, Layout, DeviceMem>;
  using AV3 = Kokkos::View<Acc***, Layout, DeviceMem>;
  using AV2 = Kokkos::View<Acc**, Layout, DeviceMem>;
  using CAV3 = Kokkos::View<const Acc***, Layout, DeviceMem>;
  using CAV2 = Kokkos::View<const Acc**, Layout, DeviceMem>;
  virtual ~AttentionMethod() = default;
  virtual std::string name() const = 0;
  // q [s, n, d], k and v [s, n_kv, d] of this rank's slots -> o [s, n, d], lse [s, n].
  // `slot` names the call (a layer) for methods that keep state between a
  // forward and its backward (Ulysses keeps the head-sharded tensors).
  virtual void forward(int slot, CV3 q, CV3 k, CV3 v, AV3 o, AV2 lse) = 0;
  // o: the forward's O in the storage type (the layers keep it so; D =
  // rowsum(dO * O) reads it as FlashAttention reads its bf16 O).
  virtual void backward(int slot, CV3 q, CV3 k, CV3 v, CV3 o, CAV2 lse, CV3 dout, AV3 dq, AV3 dk, AV3 dv) = 0;
  // Drop what the method keeps between the forward and the backward of
  // `slot` (its backward then works from its arguments alone).
  virtual void release(int /*slot*/) {}
  // Block ids checked during the runs so far (trace option).
  virtual const RingTrace& trace() const { return trace_; }
  // Bytes this rank hands to the transport for one forward + backward,
  // derived from the method's schedule (not from any counter).
  virtual std::int64_t analytic_bytes() const = 0;
  virtual CommBuffers comm_buffers() const = 0;
  // A description of the schedule in use ("burst flat ring, 4 rounds fwd, ...").
  virtual std::string describe() const = 0;

 protected:
  RingTrace trace_;
};

// `group`: the ranks of the sequence-parallel group; `topo`: the world
// topology and `group_world_ranks` the world rank of each group member (to
// find nodes). Collective over the group.
template <class T>
std::unique_ptr<AttentionMethod<T>> make_attention(const AttnOptions& opt, const AttnProblem& pb, Communicator& group,
                                                   const Topology& topo, const std::vector<int>& group_world_ranks);

}  // namespace burst::parallel

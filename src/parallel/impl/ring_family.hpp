// The ring methods (ring, burst, loongtrain; the inner ring of USP): one
// class, a schedule geometry and a choice of what travels in backward.
#pragma once

#include "parallel/attention_method.hpp"
#include "parallel/impl/block_meta.hpp"

namespace burst::parallel::impl {

struct RingConfig {
  std::string name;        // for describe()
  RingGeometry geometry;   // N x L; N = 1: flat
  bool kv_backward = false;  // K,V,dK,dV travel (ring); else Q,dO,lse,D + dQ (burst)
  bool partial_bf16 = false;
  bool trace = false;
  bool comm_only = false;  // run the transfers (and their copies) only, no client math
  std::string group_name = "ring";  // byte counters: flat ring "<name>", double "<name>_intra"/"<name>_inter"
};

template <class T> class RingFamily : public AttentionMethod<T> {
 public:
  using typename AttentionMethod<T>::Acc;
  using typename AttentionMethod<T>::CV3;
  using typename AttentionMethod<T>::AV3;
  using typename AttentionMethod<T>::AV2;
  using typename AttentionMethod<T>::CAV3;
  using typename AttentionMethod<T>::CAV2;

  RingFamily(const RingConfig& cfg, const SeqLayout& base, const MaskSpec& mask, Communicator& group, long heads,
             long kv_heads, long head_dim, double scale);
  std::string name() const override { return cfg_.name; }
  void forward(int slot, CV3 q, CV3 k, CV3 v, AV3 o, AV2 lse) override;
  void backward(int slot, CV3 q, CV3 k, CV3 v, CV3 o, CAV2 lse, CV3 dout, AV3 dq, AV3 dk, AV3 dv) override;
  std::string describe() const override;
  std::int64_t analytic_bytes() const override;
  CommBuffers comm_buffers() const override { return {planned_comm_, 0}; }
  ~RingFamily() override;
  int forward_rounds() const { return fwd_.rounds; }
  int backward_rounds() const { return bwd_.rounds; }

 private:
  struct Pass {
    RingProgram program;
    bool mirror = false;
    int rounds = 0;
    std::vector<Packet> read, partial;
    std::vector<size_t> read_spec, partial_spec;  // the packets' fields (bytes)
    std::vector<long> read_at, partial_at;        // each packet's offset in the arena, -1: unused by the program
    RingTimes times;  // BURST_RING_TIMERS only
  };
  // Consecutive 64-byte-aligned pieces of one pass's share of the arena.
  struct Carve {
    size_t end = 0;
    size_t take(size_t bytes) {
      const size_t at = end;
      end += Packet::pad64(bytes);
      return at;
    }
  };
  void plan(Pass& p, bool partial, bool queries_travel);
  void lay_out(Pass& p, const std::vector<size_t>& read_spec, const std::vector<size_t>& partial_spec, Carve& c);
  void place(Pass& p);

  RingConfig cfg_;
  BlockMeta meta_;
  std::unique_ptr<Communicator> intra_, inter_;
  long n_, nkv_, d_;
  Acc scale_;
  int me_ = 0;
  Pass fwd_, bwd_;
  std::int64_t planned_comm_ = 0;  // bytes of the arena: the larger pass's packets (those its program names) and scratch
  bool timers_ = false;  // BURST_RING_TIMERS set: per-round timers, a summary per pass on stderr at destruction
  std::string backend_;  // the group's transport, named in the timers' summary
  ByteView arena_;  // the packets and the scratch below (views into it)
  AV3 ob_;          // forward: a block's partial O and lse before the merge
  AV2 lseb_, D_;    // backward: D = rowsum(dO * O)
  AV3 tmp_a_, tmp_b_;  // backward, bf16 partials: contributions in Acc before rounding
};

}  // namespace burst::parallel::impl

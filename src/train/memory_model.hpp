// The analytic memory model of one training step on one rank: what the
// engine allocates, by category, derived from the shapes (not measured).
// The trainer prints it beside the measured peaks of the memory tracker,
// and tests hold the two within 10% for every activation policy.
//
// Activations: the bytes each policy keeps per layer between forward and
// backward, plus the largest of three moments: the end of the forward, the
// LM head (a [s, V] logits + gradient pair, or one chunk of the fused head),
// and the top layer's backward (the larger of its MLP's and its attention's
// backward temporaries: the backward frees as it goes). The top layer is
// never recomputed: it holds all its activations from its forward on. (The
// final norm's backward, dx in place of the head's input, is below the head.)
// Parameters, gradients, optimizer: whole, or the ZeRO shard plus the units
// gathered at once. Communication buffers: the attention methods' (their
// persistent ring packets, and the largest all-to-all or all-gather buffer
// of one call, from each method's own plan: AttentionOp::comm_buffers) and
// ZeRO's (one unit's reduce-scatter or all-gather buffers), the transient
// ones never alive together. Work buffers stay measured only.
#pragma once

#include "core/memory.hpp"
#include "model/llama.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace burst {

struct MemoryModelInput {
  ModelConfig model;
  long slots = 0;            // tokens (slots) of this rank's sequence shard
  int scalar_bytes = 4;      // sizeof(T): weights and activations in the storage type
  int accum_bytes = 0;       // sizeof(accum_t<T>) (0: scalar_bytes): attention's O, lse, D, dq/dk/dv, rstds,
                             // gradients, Adam moments and (bf16) the fp32 master weights
  ActPolicy policy = ActPolicy::Keep;
  long loss_chunk = 0;       // 0: the plain head
  int zero_stage = 0;
  int world = 1;             // ZeRO group size
  CommBuffers attention;     // every attention op the run holds (AttentionOp::comm_buffers)
};

struct MemoryEstimate {
  std::array<std::int64_t, kMemCategories> bytes{};  // peak per category
  std::int64_t kept_per_layer = 0;                   // activations a layer keeps for backward
  std::string report() const;                        // "params 1.2 MiB, grads ..., activations ..."
};

MemoryEstimate estimate_memory(const MemoryModelInput& in);

}  // namespace burst

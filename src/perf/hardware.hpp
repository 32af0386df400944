// What the performance model knows about a machine and about the software
// running on it, read from committed TOML (experiments/clusters/<name>.toml,
// experiments/perf_calibration.toml). Every constant has its source written
// next to it in the file; nothing here is a default.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace burst::perf {

// One direction of a link as seen by one GPU: time = alpha + bytes / beta.
struct Link {
  double alpha = 0;  // s
  double beta = 0;   // bytes/s, achieved (spec x link efficiency)
  double time(double bytes) const { return bytes > 0 ? alpha + bytes / beta : 0.0; }
};

// A host constant measured at several rank counts: piecewise linear in
// log2 P through (ranks[i], vals[i]), the end values beyond the points. With
// no ranks, vals[0] at every P (a number in the cluster file); empty: 0.
struct PerRanks {
  std::vector<double> ranks, vals;
  PerRanks() = default;
  PerRanks(double v) : vals{v} {}  // NOLINT: implicit, one value for every P
  double at(int P) const;
};

struct Cluster {
  std::string name, file;
  int gpus_per_node = 0;
  double peak_flops = 0;       // dense bf16, FLOP/s (the MFU denominator)
  double gemm_fraction = 0;    // achieved share of peak on the block's GEMMs
  double hbm_bw = 0;           // bytes/s
  double mem_capacity = 0;     // bytes
  // Attention kernel: combined fwd+bwd rate (paper convention, bwd = 2.5 fwd)
  // r_inf * t / (t + t0) for blocks of t key tokens; fwd runs `fwd_over_bwd`
  // times faster than bwd.
  double attn_rate_inf = 0, attn_t0 = 0, attn_fwd_over_bwd = 1;
  // Optional (attention.rate_points_tokens / attention.rate_points_tflops):
  // the combined rate measured at a few block sizes. When given, the rate at
  // t is interpolated linearly in log t between them and held beyond the
  // ends, and r_inf / t0 are not used (CPU kernels whose rate is not
  // monotonic in t: caches).
  std::vector<double> attn_pts_t, attn_pts_rate;  // tokens, FLOP/s
  // Optional attention.merge_in_epilogue: a ring forward's visiting block
  // merges into the running (O, lse) inside the flash forward's epilogue
  // (kernels::flash_attention_forward_merge on CUDA bf16, BURST_FA_MERGE=1),
  // paying the read of the running O and lse beyond the block's forward
  // (head dims 64 and 128, the CUDA kernels'); otherwise (other head dims,
  // host kernels, other systems) a separate fp32 merge pass reads O and O_b
  // and writes O (perf/attention.cpp).
  bool attn_merge_in_epilogue = false;
  double link_efficiency = 0;  // achieved / spec bandwidth, every link
  double nvlink_bw = 0, nvlink_latency = 0;  // per GPU per direction (spec)
  double ib_hca_bw = 0, ib_latency = 0;      // one HCA, one direction (spec)
  int hcas_per_node = 0;
  double pcie_bw = 0, pcie_latency = 0;      // GPU <-> host, one direction
  double host_mem_bw = 0;                    // the node's CPU memory bandwidth (CPU Adam)
  // CPU machines (optional key host.cores): every rank of a run shares these
  // cores (ranks of one host, one thread each), so with P ranks each rank
  // computes at min(1, cores / P) of its single-core rates. 0: one device
  // per rank (GPUs), nothing shared.
  double host_cores = 0;  // may be fractional: the cores a run actually got (other jobs on the host)
  // host_cores is the CPU the run's ranks used (CPU seconds per wall second,
  // kernel accounting: `burst simulate --host-cpu`), not the cores they could
  // have used: a rank's idle (napping) waits are already left out of it, so
  // the ring rounds of an unbalanced layout cost the ranks' mean work at
  // that rate (perf/attention.cpp, ring_round_times).
  bool host_cpu_used = false;
  // CPU machines (optional key host.binding = "core"): the runs bind rank r
  // to core r mod machine_cores (mpiexec -bind-to core), so a waiting rank's
  // core goes to the ranks bound to the same core only, not to any rank
  // (perf/attention.cpp, ring_round_times). "none" (the default): the kernel
  // places and moves the ranks.
  bool ranks_bound = false;
  // The host's cores as the cluster file names them (host.cores), which a
  // run's --host-cores (the share it got) does not change: whether a group of
  // ranks can be on the cores all at once (group_fits_cores).
  double machine_cores = 0;
  // CPU machines (optional keys host.collective_wait_ms, host.nap_wait_ms,
  // measured by `burst bench collective`): a collective cannot complete until
  // every member has been scheduled and reached it. A rank that gets a share
  // s < 1 of a core is off it (1/s - 1) time slices per slice on it, and the
  // collective waits for the last member's turn: wait = tau (1/s - 1) per
  // dependent round of the collective's algorithm (MPICH's algorithm for the
  // size: 1 to P - 1 rounds, perf/attention.hpp), tau one constant per kind
  // of call, as the engine waits (comm/collectives.hpp: every collective is
  // non-blocking and completed by wait_all_bounded, which yields the core
  // and then naps on shared cores): `spin` (the historical name) for the
  // all-to-all, all-gather and reduce-scatter of the attention methods, per
  // round; `nap` for the trainer's all-reduces, per call. The same calls
  // within groups that fit on the host's cores (USP's head-parallel pairs on
  // 2 cores) have their own constant (host.collective_wait_fit_ms, measured
  // with `bench collective` bench.group; default: collective_wait_ms): their
  // members can be on the cores together, and a member is waited for less
  // often than in a group that can never be on the cores at once. 0 on GPU
  // clusters.
  // Each is one value for every P (a number in the file) or a value per
  // rank count of host.wait_ranks (an array): the wait per unit of 1/s - 1
  // is not the same at every P (measured on 2 cores: the all-reduce's 0.98 ms
  // at 4 ranks, 2.3 ms at 8; a call right after another 0.09 / 0.21 ms per
  // round), and one constant fitted over all of them is pulled to the largest
  // P's points, where 1/s - 1 is largest (NOTES, "Waits per rank count").
  PerRanks coll_wait_spin, coll_wait_nap;  // s (spin: per dependent round of the collective's algorithm)
  PerRanks coll_wait_spin_fit;             // s per round, groups that fit on the cores
  // A call right after another of its group that does not fit on the cores
  // (perf::Collective::follows; host.collective_wait_follow_ms, measured with
  // `bench collective` bench.calls = 2; default: collective_wait_ms).
  PerRanks coll_wait_follow;  // s per round
  // CPU machines (optional key host.wait_work_ms, fitted by
  // experiments/runners/calibrate_cpu.py on `bench collective` single calls
  // after 1, 3 and 10 ms of compute per rank): the waits above are the
  // saturated ones; a call after W seconds of compute per rank since the
  // members last met waits 1 - exp(-W / wait_work) of it (their arrivals
  // spread over the scheduler's turns as the compute between calls grows:
  // 0.11-0.36 ms per call after 1 ms, 0.67-0.90 ms after 10 ms at 4 ranks on
  // 2 cores, NOTES). 0: no dependence (the whole wait after any compute).
  // A call right after another (coll_wait_follow) is measured as such. Per
  // rank count like the waits (at 8 ranks on 2 cores the wait is whole after
  // 1 ms already).
  PerRanks wait_work;  // s
  double wait_fraction(int P, double W) const {
    const double w0 = wait_work.at(P);
    return w0 > 0 ? 1.0 - std::exp(-std::max(0.0, W) / w0) : 1.0;
  }
  // Bytes per element of the tensors the engine moves (host.element_bytes:
  // the host build runs float; bf16 on GPUs). Sizes the collectives for the
  // MPI algorithm they get (mpi_collective_rounds).
  double elem_bytes = 2;
  // CPU machines (optional keys host.concurrency_ranks and
  // host.concurrency_efficiency, measured by running the block microbenchmark
  // `burst bench layer` as P copies at once): the rate per CPU-second of one
  // rank while P ranks run on the host, relative to one rank alone (shared
  // caches and memory bandwidth, and when P exceeds the cores the context
  // switches between ranks). Piecewise linear in log2 P through (1, 1) and
  // the measured points (the loader puts (1, 1) first), the last value beyond
  // them. Empty on GPU clusters.
  PerRanks concurrency;
  // CPU machines (optional keys host.layer_overhead_ms,
  // host.step_overhead_ms, host.step_overhead_us_per_token): CPU time that
  // the kernel-rate terms do not carry, one rank alone: per layer (forward +
  // backward; the intercept of `bench layer`'s non-GEMM, non-attention time
  // over its token counts: launches, allocations, small reductions), and per
  // training step outside the layers (data, embedding, the step's
  // bookkeeping: the intercept and slope of what a one-rank training step at
  // two sizes leaves unexplained). 0 on GPU clusters.
  double layer_overhead = 0, step_overhead = 0, step_overhead_per_token = 0;
  // CPU machines (optional keys host.a2a_local_ns_per_byte,
  // host.allgather_local_ns_per_byte): the CPU time of the local memory work
  // around the engine's blocking collectives, per byte of the tensors they
  // fill: Ulysses/USP's seq_to_heads / heads_to_seq (a fresh send or receive
  // buffer per call, the pack or unpack pass over it, MPI's copies through
  // shared memory, the head-layout state allocated per pass), the all-gather
  // method's gathered K,V (fresh buffers) and its dK,dV accumulators
  // (zero-filled) reduce-scattered. On a GPU this is bandwidth-bound device
  // work the a2a alpha-beta term ignores; on one CPU thread it is ~3 ns per
  // byte (measured: `burst bench attention` comm-only runs, 2 ranks, a size
  // no experiment runs; the all-gather method's also per rank count, below). CPU time: stretched by shared_by like the other
  // host terms. 0 on GPU clusters.
  double a2a_local = 0, allgather_local = 0;  // s per byte
  // The all-gather method's term measured at several rank counts
  // (host.allgather_local_ranks, host.allgather_local_ns_per_byte an array):
  // the comm-only run's CPU seconds per byte at each P. Above the cores that
  // run holds the members' turns on the shared cores between its six
  // back-to-back calls, so shared_by(P) takes allgather_local from it and the
  // model charges no separate wait to a call that follows another (or a
  // barrier) in that method (allgather_local_holds_follows). Empty: the
  // number above at every P, follow waits charged as for every method. The
  // follows' waits are a time per call, folded here into a time per byte at
  // the calibration's one size (3072 tokens): at other sizes they scale with
  // the bytes (NOTES, "The all-gather method's local work per rank count").
  PerRanks allgather_local_at;
  bool allgather_local_holds_follows() const { return !allgather_local_at.ranks.empty(); }
  // CPU machines (optional keys host.tile_*_us, host.call_us,
  // host.call_row_ns: [forward, backward] each, measured by `burst bench
  // attention --set bench.tile_costs=true`, one rank, CPU seconds): what the
  // host kernel pays under the rings' general position mask beyond the
  // arithmetic of whole tiles, which the attention rate prices (the
  // calibration's causal block: its mask costs nothing per tile but the
  // diagonal's compare). Per (tile, head): `mask`, every computed tile (the
  // bound and all-visible checks over its positions and documents);
  // `partial_*`, a partly visible tile beyond a whole one (the per-element
  // mask), by the rule that cuts it (the run's mask: causal, window,
  // document); `skip`, a tile the bound rejects. Per kernel call: `call`,
  // fixed, and `row` per (query + key row, head) (the tiles' loads and the
  // outputs' stores, paid even when every tile is skipped). `causal_diag`:
  // a diagonal tile of the plain causal mask (the calibration's block) beyond
  // a whole unmasked one, per (tile, head): taken out of the calibration's
  // block time before its rate prices tile area, so that the rounds' whole
  // tiles do not pay for the calibration's diagonal and their partly visible
  // ones pay the general mask's cost instead. Used where ring rounds are
  // costed from the engine's layout (perf/attention.cpp); 0 on GPU
  // clusters. CPU time: stretched by shared_by like the other host terms.
  struct TileCosts {
    double mask = 0, partial_causal = 0, partial_window = 0, partial_document = 0, skip = 0, call = 0, row = 0;  // s
    double causal_diag = 0;  // s
    bool any() const {
      return mask > 0 || partial_causal > 0 || partial_window > 0 || partial_document > 0 || skip > 0 || call > 0 || row > 0 ||
             causal_diag > 0;
    }
  };
  TileCosts tile_fwd, tile_bwd;
  // CPU machines (optional keys host.ring_round_cpu_us,
  // host.ring_round_cpu_ns_per_byte, measured by `burst bench collective`
  // kind `ring`: a rank's CPU time per ring round beyond the same compute
  // alone, send + receive of one chunk, as a + b bytes): on shared cores
  // the transfer is CPU work (posting, polling, MPI's shared-memory copies)
  // that no compute hides; each received transfer of a ring pass adds its
  // bytes' part, each round (the transfers completed between two computes)
  // the fixed part once, to the rank's compute (perf/attention.cpp,
  // ring_pass). 0 on GPU
  // clusters. CPU time: stretched by shared_by like the other host terms.
  double ring_round_cpu = 0, ring_round_cpu_per_byte = 0;  // s, s per byte

  // Slices off the core per slice on it for each of P ranks sharing
  // host_cores: 1/s - 1 with s = min(1, host_cores / P); 0 for one rank or
  // a device per rank.
  double off_core_ratio(int P) const;
  // The wait per round of a blocking collective of a group of `group` of the
  // P ranks sharing the host.
  double spin_collective_wait(int P, int group) const {
    return (group_fits_cores(group) ? coll_wait_spin_fit : coll_wait_spin).at(P) * off_core_ratio(P);
  }
  double nap_collective_wait(int P) const { return coll_wait_nap.at(P) * off_core_ratio(P); }
  double follow_collective_wait(int P) const { return coll_wait_follow.at(P) * off_core_ratio(P); }
  // Whether a collective's group of `group` ranks fits on the host's cores
  // at once (machine_cores; always on a device per rank). Then a collective
  // issued right after another of the same group finds every member still on
  // a core and waits for no one's turn (perf::Collective::follows); a larger
  // group cannot all be on the cores, so each of its calls waits again.
  bool group_fits_cores(int group) const { return machine_cores <= 0 || double(group) <= machine_cores; }
  // host.concurrency_efficiency at P ranks (1 for one rank or none measured).
  double concurrency_efficiency(int P) const;

  // This cluster as seen by one of P ranks: compute rates (GEMM, attention,
  // memory passes) divided among the host's cores when P exceeds them and
  // times concurrency_efficiency(P); the CPU-time overheads stretched alike.
  Cluster shared_by(int P) const;

  double gemm_rate() const { return peak_flops * gemm_fraction; }
  double attn_rate(double t) const;
  double attn_rate_fwd(double t) const;
  double attn_rate_bwd(double t) const;
  Link nvlink() const { return {nvlink_latency, nvlink_bw * link_efficiency}; }
  // One transfer between two nodes while no other GPU of the node sends
  // (a flat ring's node-crossing hop): one HCA.
  Link ib_one_flow() const { return {ib_latency, ib_hca_bw * link_efficiency}; }
  // Every GPU of the node sending to another node at once (double ring,
  // all-to-all): the node's HCAs shared by its GPUs.
  Link ib_all_gpus() const;
  double ib_node_bw() const { return hcas_per_node * ib_hca_bw * link_efficiency; }
  Link pcie() const { return {pcie_latency, pcie_bw * link_efficiency}; }
};

// Software constants shared by every cluster (perf_calibration.toml).
struct Calibration {
  std::string file;
  double elem_passes = 0;          // bf16 passes over (hidden + ffn) per token per layer, fwd + bwd
  double elem_fwd_share = 0;       // share of those passes in the forward
  double lm_fused_gemms = 0;       // GEMMs of the fused LM head (3 ours, 4 the released BurstEngine)
  double lm_fused_bytes_per_logit = 0;    // HBM traffic per logit element, fused chunked loss
  double lm_unfused_bytes_per_logit = 0;  // HBM traffic per logit element, plain logits + cross-entropy
  double lm_unfused_mem_per_logit = 0;    // peak extra bytes per logit element, plain
  double lm_inplace_bytes_per_logit = 0;  // HBM traffic per logit, plain logits + in-place cross-entropy (flash-attn)
  double lm_inplace_mem_per_logit = 0;    // peak extra bytes per logit element, same
  double lm_chunk_tokens = 0;      // fused loss chunk
  double opt_gpu_bytes_per_param = 0;     // AdamW on the GPU: HBM bytes per parameter
  double opt_cpu_bytes_per_param = 0;     // CPU Adam: host memory bytes per parameter
  double opt_offload_pcie_bytes_per_param = 0;  // gradients down + parameters up
  double zero_prefetch_layers = 0; // gathered layers alive at once under ZeRO-3
  double allocator_slack = 0;      // reserved / allocated, one global factor
};

// `name_or_path`: "a800" -> <dir>/clusters/a800.toml, or a path to a .toml.
Cluster load_cluster(const std::string& name_or_path, const std::string& dir);
Calibration load_calibration(const std::string& path);
// The experiments/ directory of the source tree this binary was built from.
std::string default_data_dir();

}  // namespace burst::perf

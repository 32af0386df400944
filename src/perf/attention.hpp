// Time and bytes of one layer's distributed attention, per method, from the
// schedules the engine executes: ring methods walk the program of
// parallel::ring_program() op by op against an alpha-beta link model
// (transfers overlap compute; a double ring's inter-node block spans L
// rounds); Ulysses/USP all-to-alls and all-gathers are not overlapped.
#pragma once

#include "parallel/schedule.hpp"
#include "perf/hardware.hpp"

#include <string>
#include <vector>

namespace burst::perf {

struct AttnConfig {
  std::string method = "burst";      // ring | burst | loongtrain | ulysses | usp | allgather
  std::string ring = "auto";         // flat | double | auto (as the engine: double over whole nodes unless a flat ring stops early; ring flat)
  std::string backward = "auto";     // burst | kv | auto (burst when n = n_kv)
  std::string usp_inner = "burst";   // usp: ring | burst
  std::string placement = "head-first";
  bool partial_bf16 = false;         // travelling partial sums in bf16 (else fp32)
  int hp = 0;                        // usp: head-parallel size (0: GPUs per node)
  int inner = 0;                     // loongtrain: ranks per inner ring (0: GPUs per node)
  bool causal = true;
  long window = 0;                   // > 0: sliding window of this many tokens (causal), contiguous layout
  // A layout / document mask other than the defaults (zigzag for causal and
  // full, contiguous for a window): the ring methods are then costed round by
  // round from the engine's own layout (parallel::make_layout) with exact
  // visible-pair counts. layout: "" (default) | contiguous | zigzag | striped | document.
  std::string layout;
  bool document = false;             // the document mask (causal within documents)
  std::vector<long> doc_lengths;     // documents (natural order), summing to S; with `document` or layout document
  // The passes timed as `burst bench attention` times them (--attention-only):
  // a barrier right before the forward, the backward right after it. A pass's
  // opening collective then waits after no compute (forward) or after the
  // forward's kernel (backward) on shared cores (Cluster::wait_fraction); in
  // a training step the layer's projections run before either.
  bool bench_timing = false;
};

// The largest problems the model takes: GPUs in the group (it keeps
// per-rank tables), and tokens of a layout costed tile by tile (--layout,
// --mask document: memory grows with S and time with (S / 64)^2).
constexpr int kMaxGpus = 1 << 20;
constexpr double kMaxLayoutSeq = 4194304;  // 4M tokens
// The all-gather method's kernel call is priced by its tiles on CPU hosts
// (Cluster::tile_fwd) up to this many tokens ((S / 32)^2 / P tiles per rank).
constexpr double kAllGatherTileSeq = 262144;

struct AttnProblem {
  int P = 1;       // ranks
  double S = 0;    // tokens
  long n = 0, nkv = 0, d = 0;
};

struct PassCost {
  double time = 0;                 // wall time of the pass on one rank
  double compute = 0;              // kernels, merges, adds, copies on that rank
  double bytes_intra = 0, bytes_inter = 0;  // handed to the transport by one rank
  parallel::RingCounts counts;     // ring transfers of the pass (zero for others)
  double a2a_bytes = 0;            // all-to-all / all-gather bytes sent by one rank
  int collectives = 0;             // blocking collectives one rank calls in the pass
  double sync = 0;                 // their scheduling wait on shared cores (Cluster::spin_collective_wait), in `time`
};

struct AttnCost {
  PassCost fwd, bwd;
  PassCost half_fwd;     // the `half` policy's recompute: first-half queries x first-half keys
  // Ulysses/USP: the all-to-alls that rebuild the head-sharded q, k, v, o,
  // lse in the backward when the method's state was released after the
  // forward (the `whole` and `half` policies; zero for every other method).
  PassCost rebuild;
  double buffer_bytes = 0;  // method buffers alive at the backward's peak
  std::string describe;
};

// Blocking collectives one rank calls per pass, as parallel/methods.cpp
// issues them (the ring methods call none: their transfers are
// point-to-point). UspAttention (ulysses, usp) over a head-parallel group of
// `group` > 1 ranks: forward 5 all-to-alls (q, k, v, o, lse), backward 4 (dO;
// dq, dk, dv), a rebuild of a released state 5 (q, k, v, o, lse).
// AllGatherAttention over all `group` ranks: forward 2 all-gathers (K, V),
// backward 2 all-gathers and 2 reduce-scatters (dK, dV). Sizes for a rank
// holding s tokens with n / nkv heads of d, elements of `elem` bytes (the
// engine's T) and accumulators of `acc` bytes.
//
// `follows`: the call is issued right after another blocking collective of
// the same group, with only local work (a pack, an allocation) between them
// (k and v after q; lse after o; dk, dv after dq; the all-gather's V after
// K). A rebuild's five all-to-alls run back to back with the backward's
// first (dO), so all five are marked: the group meets once for the six, and
// the wait is charged at dO. On shared cores such a call waits for no
// member's turn when the whole group fits on the host's cores at once: the
// previous call ended with every member on a core (Cluster::group_fits_cores);
// in a group that does not fit it waits Cluster::coll_wait_follow per round
// (measured with `bench collective` bench.calls = 2: the second of two
// back-to-back calls waits less than the first).
//
// `after_kernel`: the first call after the pass's attention kernel (Ulysses'
// o, dq; the all-gather method's dK reduce-scatter): its members last met
// before the kernel, so it waits Cluster::wait_fraction of the kernel's CPU
// time. The other calls that do not follow one open the pass: they wait
// after whatever the pass's caller ran before it (AttnConfig::bench_timing).
struct Collective {
  enum Kind { AllToAll, AllGather, ReduceScatter } kind = AllToAll;
  double bytes = 0;  // all-to-all: the chunk for one peer; all-gather: the gathered buffer; reduce-scatter: the send buffer
  bool follows = false;
  bool after_kernel = false;
};
struct BlockingCollectives {
  std::vector<Collective> fwd, bwd, rebuild;
};
BlockingCollectives blocking_collectives(const std::string& method, int group, double s = 1, long n = 1, long nkv = 1, long d = 1,
                                         double elem = 2, double acc = 4);
// Dependent point-to-point rounds of one collective over `group` ranks with
// MPICH 4.0's default algorithms (the CVAR thresholds named in the .cpp):
// each round needs both partners on a core, so on shared cores every round
// waits for a partner's turn (Cluster::spin_collective_wait per round).
int mpi_collective_rounds(const Collective& c, int group);

// What the kernels compute for one call over a layout's slots (positions
// and document ids as SeqLayout::mask_positions / mask_docs): the queries of
// slots [q_off, q_off + nq) against the keys of [k_off, k_off + nk), the
// area of their computed tiles and the whole, partly visible and skipped
// tiles. The model counts them through a sorted fast path where it can;
// `pair_by_pair` takes the tile-by-tile reference (tests compare the two).
struct TileCounts {
  double area = 0, whole = 0, partial = 0, skipped = 0;
};
TileCounts tile_counts(const std::vector<long>& pos, const std::vector<int>& doc, long q_off, long nq, long k_off, long nk,
                       bool causal, long window, bool same_doc, bool pair_by_pair);

// Throws Error(Config) for a configuration the engine refuses (heads not
// divisible by the head-parallel size, ...), naming the rule.
void validate_attention(const AttnConfig& a, const AttnProblem& p, int gpus_per_node);
AttnCost attention_cost(const Cluster& c, const AttnConfig& a, const AttnProblem& p);

// One ring pass timed from the program of rank 0 (every rank runs the same
// program shifted, so rank 0's timeline is every rank's). Exposed for tests.
struct RingPassSpec {
  parallel::RingGeometry g;
  int rounds = 0;
  bool partial = false;
  double read_bytes = 0, partial_bytes = 0;
  double t_home = 0, t_round = 0;  // compute of the own block / a visiting block
  std::vector<double> t_by_round;  // if not empty: compute of round r (masks that vary by round)
  double hbm_bw = 0;               // copies and partial adds
  Link intra, inter;
  // CPU hosts: the rank's CPU time per received transfer (Cluster::ring_round_cpu
  // + ring_round_cpu_per_byte x bytes), charged as compute at its Wait.
  double round_cpu = 0, round_cpu_per_byte = 0;
};
PassCost ring_pass(const RingPassSpec& s);

// Pairs a query block sees in a key block `dist` blocks before it (blocks of
// s tokens, contiguous layout, sliding window w): the window mask's area.
double window_block_area(double dist, double s, double w);

}  // namespace burst::perf

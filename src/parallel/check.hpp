// One distributed attention forward + backward checked against a
// single-rank double-precision reference of the same problem: what
// `burst attn-check` prints and what the multi-rank tests assert.
#pragma once

#include "parallel/attention_method.hpp"

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace burst::parallel {

struct Tensors {
  std::vector<double> q, k, v, dout;  // global, natural token order
};
struct Outputs {
  std::vector<double> o, lse, dq, dk, dv;
};

// q, k, v, do from an HDF5 file ("" = normal random numbers from `seed`).
Tensors make_inputs(const AttnProblem& pb, const std::string& input, unsigned long long seed);
// The block kernel on the whole natural-order sequence, in double.
Outputs reference(const AttnProblem& pb, const SeqLayout& base, const Tensors& in);
// max |x - ref| / max(max |ref|, floor) (matching -inf entries ignored); NaN
// when either holds a NaN, inf when an entry is infinite in one only. The
// floor judges a reference that is zero up to rounding against a scale of
// its own kind instead of that rounding (check_attention: the gradients').
double rel_error(const std::vector<double>& x, const std::vector<double>& ref, double floor = 0);
// A tenth of the largest gradient's scale: the floor of dq, dk and dv. When
// every query sees only itself (a window of 1, documents of one token) dq and
// dk are exactly 0 and the double reference holds ~1e-16 of rounding, against
// which any float rounding read as a relative error of ~1e9.
constexpr double kGradientFloor = 0.1;

struct CheckResult {
  std::string description;
  double err[5] = {0, 0, 0, 0, 0};  // o lse dq dk dv (every rank gets rank 0's numbers)
  std::int64_t bytes = 0, analytic = 0;      // this rank
  std::map<std::string, std::int64_t> by_group;  // "group/op" -> bytes, this rank
  double exposed_s = 0, forward_s = 0, backward_s = 0;
  long checked = 0, mismatches = 0;  // payload block ids checked / wrong
  long padding = 0, travel = 0, local = 0;
  Outputs natural;  // rank 0: results in natural order
};

// Collective over `comm`; `topo` describes the nodes of comm's ranks.
template <class T>
CheckResult check_attention(const AttnOptions& opt, const AttnProblem& pb, MPI_Comm comm, const Topology& topo, const Tensors& in);

}  // namespace burst::parallel

// cuBLASLt row-major GEMM (see gemm_lt.h).
#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace burst {
namespace lt {
namespace {

constexpr size_t kWorkspace = size_t(32) << 20;

cudaDataType_t cuda_type(DType t) { return t == kBF16 ? CUDA_R_16BF : t == kF32 ? CUDA_R_32F : CUDA_R_64F; }
size_t type_bytes(DType t) { return t == kBF16 ? 2 : t == kF32 ? 4 : 8; }

// Largest power of two (<= 256) dividing the address and the row stride in bytes:
// cuBLASLt's heuristic only offers kernels whose vector loads this allows.
std::uint32_t alignment(const void* p, long ld, DType t) {
  std::uint64_t v = reinterpret_cast<std::uintptr_t>(p) | (std::uint64_t(ld) * type_bytes(t)) | 256u;
  return std::uint32_t(v & (~v + 1));
}

using Key = std::tuple<char, char, long, long, long, long, long, long, int, int, int, std::uint32_t, std::uint32_t,
                       std::uint32_t, std::uint32_t>;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct State {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  std::map<Key, Plan> plans;
  long calls = 0;
  long tuned = 0;          // plans whose algorithm was chosen by timing (BURST_GEMM_TUNE=1)
  long tuned_changed = 0;  // ... of which the choice is not the heuristic's first
};

State& state() {
  static State s;
  return s;
}

void destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  p = Plan();
}

#define LT_TRY(call, msg)                              \
  do {                                                 \
    if ((call) != CUBLAS_STATUS_SUCCESS) return msg;   \
  } while (0)

constexpr int kTuneCandidates = 8;

// Column-major problem: D'[n, m] = op'(B) op'(A), op' = the row-major op.
// The plan's descriptors and the heuristic's first algorithm; with n_algos > 1
// the heuristic's first n_algos candidates too (for time_candidates).
const char* make_plan(State& s, const Gemm& g, std::uint32_t al_a, std::uint32_t al_b, std::uint32_t al_c,
                      std::uint32_t al_d, Plan& p, int n_algos, std::vector<cublasLtMatmulAlgo_t>& candidates) {
  const cublasComputeType_t compute = g.a_type == kF64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = g.a_type == kF64 ? CUDA_R_64F : CUDA_R_32F;
  LT_TRY(cublasLtMatmulDescCreate(&p.op, compute, scale), "cublasLtMatmulDescCreate failed");
  const cublasOperation_t opa = g.tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;  // the column-major "A" is our B
  const cublasOperation_t opb = g.ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "set TRANSA failed");
  LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "set TRANSB failed");
  // Stored column-major shapes: our row-major B [k, n] ('N') is col-major n x k, ld = ldb.
  const std::uint64_t ar = g.tb == 'N' ? g.n : g.k, ac = g.tb == 'N' ? g.k : g.n;
  const std::uint64_t br = g.ta == 'N' ? g.k : g.m, bc = g.ta == 'N' ? g.m : g.k;
  LT_TRY(cublasLtMatrixLayoutCreate(&p.a, cuda_type(g.b_type), ar, ac, g.ldb), "layout B failed");
  LT_TRY(cublasLtMatrixLayoutCreate(&p.b, cuda_type(g.a_type), br, bc, g.lda), "layout A failed");
  LT_TRY(cublasLtMatrixLayoutCreate(&p.c, cuda_type(g.c_type), std::uint64_t(g.n), std::uint64_t(g.m), g.ldc),
         "layout C failed");
  cublasLtMatmulPreference_t pref = nullptr;
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "preference create failed");
  const size_t ws = kWorkspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_b, sizeof al_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_a, sizeof al_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
  cublasLtMatmulHeuristicResult_t res[kTuneCandidates]{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(s.handle, p.op, p.a, p.b, p.c, p.c, pref, n_algos, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return "cublasLtMatmulAlgoGetHeuristic found no algorithm";
  p.algo = res[0].algo;
  for (int i = 0; i < found && i < n_algos; ++i) candidates.push_back(res[i].algo);
  return nullptr;
}

// Bytes spanned by a row-major matrix of `rows` rows of `cols` elements, row stride ld.
size_t span_bytes(long rows, long cols, long ld, DType t) { return (size_t(rows - 1) * size_t(ld) + size_t(cols)) * type_bytes(t); }
bool overlap(const void* a, size_t na, const void* b, size_t nb) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + nb && pb < pa + na;
}

// A candidate replaces the heuristic's first only when this much faster (so
// that run-to-run timing noise does not change the choice, and the bits).
constexpr float kTuneMargin = 0.98f;

// Times each candidate on the call's own operands (one warm-up, the fastest
// of three) and returns the chosen index (-1 when nothing was timed): the
// fastest, if it beats the first by kTuneMargin, else 0. Candidates that
// fail to run, and split-K candidates that sum their partials in a bf16
// output (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE), are not chosen. The runs
// write D, so they run into D itself only when repeating the call is
// harmless: beta = 0 or C apart from D, and D overlapping none of A, B, C
// (byte ranges); else into a scratch D (cudaMalloc outside the engine's
// memory tracker, freed before returning; if it cannot be had, no tuning).
// A CUDA error pending before the tuning skips it; an error the tuning
// itself raised is cleared before returning. The real call follows.
int time_candidates(State& s, const Gemm& g, const Plan& p, const std::vector<cublasLtMatmulAlgo_t>& cands, const void* alpha,
                    const void* A, const void* B, const void* beta, bool beta_zero, const void* C, void* D,
                    cudaStream_t stream, float* first_ms, float* chosen_ms) {
  if (cands.size() < 2 || cudaPeekAtLastError() != cudaSuccess) return -1;
  const long ar = g.ta == 'N' ? g.m : g.k, ac = g.ta == 'N' ? g.k : g.m;
  const long br = g.tb == 'N' ? g.k : g.n, bc = g.tb == 'N' ? g.n : g.k;
  const size_t nA = span_bytes(ar, ac, g.lda, g.a_type), nB = span_bytes(br, bc, g.ldb, g.b_type),
               nC = span_bytes(g.m, g.n, g.ldc, g.c_type);
  const bool d_overlaps_c = C != D && overlap(C, nC, D, nC);
  const bool harmless = (beta_zero || C != D) && !d_overlaps_c && !overlap(D, nC, A, nA) && !overlap(D, nC, B, nB);
  void* Dt = D;
  void* scratch = nullptr;
  if (!harmless) {
    if (cudaMalloc(&scratch, nC) != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky: clear it and run untuned
      return -1;
    }
    Dt = scratch;
  }
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  int best = -1;
  float best_ms = 0, ms0 = -1;
  bool failed = false;
  if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
    for (size_t i = 0; i < cands.size(); ++i) {
      std::uint32_t red = 0;
      size_t got = 0;
      if (i > 0 && g.c_type == kBF16 &&
          cublasLtMatmulAlgoConfigGetAttribute(&cands[i], CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &got) ==
              CUBLAS_STATUS_SUCCESS &&
          red == std::uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE))
        continue;
      auto run = [&] {
        return cublasLtMatmul(s.handle, p.op, alpha, B, p.a, A, p.b, beta, C, p.c, Dt, p.c, &cands[i], s.ws, s.ws_bytes,
                              stream);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) {  // a candidate that does not run is not chosen
        failed = true;
        continue;
      }
      float ms_min = -1;
      for (int r = 0; r < 3; ++r) {
        float ms = 0;
        cudaEventRecord(e0, stream);
        const cublasStatus_t st = run();
        cudaEventRecord(e1, stream);
        if (st != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
          ms_min = -1, failed = true;
          break;
        }
        if (ms_min < 0 || ms < ms_min) ms_min = ms;
      }
      if (ms_min < 0) continue;
      if (i == 0) ms0 = ms_min;
      if (best < 0 || ms_min < best_ms) best = int(i), best_ms = ms_min;
    }
  } else {
    failed = true;
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (scratch) {
    if (cudaStreamSynchronize(stream) != cudaSuccess) failed = true;
    cudaFree(scratch);
  }
  if (failed) cudaGetLastError();  // nothing of the tuning may surface as a later kernel's error
  if (best > 0 && ms0 > 0 && best_ms > kTuneMargin * ms0) best = 0;  // not worth a different algorithm
  *first_ms = ms0, *chosen_ms = best == 0 ? ms0 : best_ms;
  return best;
}

}  // namespace

bool supported(DType a, DType b, DType c) {
  if (a != b) return false;
  if (a == kBF16) return c == kBF16 || c == kF32;
  return c == a;
}

const char* gemm(const Gemm& g, double alpha, const void* A, const void* B, double beta, const void* C, void* D,
                 cudaStream_t stream) {
  if (!supported(g.a_type, g.b_type, g.c_type)) return "unsupported type combination";
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return "empty GEMM (handled by the caller)";
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.handle) LT_TRY(cublasLtCreate(&s.handle), "cublasLtCreate failed");
  if (!s.ws) {
    if (cudaMalloc(&s.ws, kWorkspace) != cudaSuccess) return "cudaMalloc of the cuBLASLt workspace failed";
    s.ws_bytes = kWorkspace;
  }
  if (!D) D = const_cast<void*>(C);
  const std::uint32_t al_a = alignment(A, g.lda, g.a_type), al_b = alignment(B, g.ldb, g.b_type),
                      al_c = alignment(C, g.ldc, g.c_type), al_d = alignment(D, g.ldc, g.c_type);
  const Key key{g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, int(g.a_type), int(g.b_type), int(g.c_type), al_a, al_b, al_c, al_d};
  const float af = float(alpha), bf = float(beta);
  const void* pa = g.a_type == kF64 ? static_cast<const void*>(&alpha) : static_cast<const void*>(&af);
  const void* pb = g.a_type == kF64 ? static_cast<const void*>(&beta) : static_cast<const void*>(&bf);
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    const bool tune = g.tune && g.tune();  // read here, once per shape, not at every call
    Plan p;
    std::vector<cublasLtMatmulAlgo_t> cands;
    if (const char* err = make_plan(s, g, al_a, al_b, al_c, al_d, p, tune ? kTuneCandidates : 1, cands)) {
      destroy(p);
      return err;
    }
    if (tune) {
      float ms0 = -1, ms = -1;
      const int b = time_candidates(s, g, p, cands, pa, A, B, pb, beta == 0, C, D, stream, &ms0, &ms);
      if (b >= 0) {
        p.algo = cands[size_t(b)], ++s.tuned;
        if (b != 0) ++s.tuned_changed;
        // One line per tuned shape (an opt-in diagnostic mode): an A/B can then
        // tell "no faster" from "the same algorithms".
        std::fprintf(stderr, "gemm tune: %c%c m=%ld n=%ld k=%ld ldc=%ld: candidate %d of %zu, %.4f ms (first %.4f ms)\n", g.ta,
                     g.tb, g.m, g.n, g.k, g.ldc, b, cands.size(), double(ms), double(ms0));
      }
    }
    it = s.plans.emplace(key, p).first;
  }
  Plan& p = it->second;
  const cublasStatus_t st =
      cublasLtMatmul(s.handle, p.op, pa, B, p.a, A, p.b, pb, C, p.c, D, p.c, &p.algo, s.ws, s.ws_bytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return "cublasLtMatmul failed";
  ++s.calls;
  return nullptr;
}

size_t workspace_bytes() { return state().ws_bytes; }
long call_count() { return state().calls; }
long tuned_plans() { return state().tuned; }
long tuned_changed() { return state().tuned_changed; }

void release() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& kv : s.plans) destroy(kv.second);
  s.plans.clear();
  if (s.ws) {
    cudaDeviceSynchronize();  // queued calls may still read it
    cudaFree(s.ws);
  }
  s.ws = nullptr;
  s.ws_bytes = 0;
  if (s.handle) cublasLtDestroy(s.handle);
  s.handle = nullptr;
}

}  // namespace lt
}  // namespace burst

// cuBLASLt row-major GEMM (see gemm_lt.h).
#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

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
  long tuned = 0;  // plans whose algorithm was chosen by timing (BURST_GEMM_TUNE=1)
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

// Times each candidate on the call's own operands (one warm-up, the fastest
// of three) and returns the fastest's index (-1 when nothing was timed).
// The runs write D, so they run into D itself only when repeating the call
// is harmless: beta = 0, or C a separate array, and D none of A, B; else
// into a scratch D (cudaMalloc outside the engine's memory tracker, freed
// before returning; if it cannot be had, no tuning). The real call follows.
int time_candidates(State& s, const Gemm& g, const Plan& p, const std::vector<cublasLtMatmulAlgo_t>& cands, const void* alpha,
                    const void* A, const void* B, const void* beta, bool beta_zero, const void* C, void* D,
                    cudaStream_t stream) {
  if (cands.size() < 2) return -1;
  void* Dt = D;
  void* scratch = nullptr;
  if ((!beta_zero && C == D) || D == A || D == B) {
    const size_t bytes = (size_t(g.m - 1) * size_t(g.ldc) + size_t(g.n)) * type_bytes(g.c_type);
    if (cudaMalloc(&scratch, bytes) != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky: clear it and run untuned
      return -1;
    }
    Dt = scratch;
  }
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  int best = -1;
  float best_ms = 0;
  if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
    for (size_t i = 0; i < cands.size(); ++i) {
      auto run = [&] {
        return cublasLtMatmul(s.handle, p.op, alpha, B, p.a, A, p.b, beta, C, p.c, Dt, p.c, &cands[i], s.ws, s.ws_bytes,
                              stream);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that does not run is not chosen
      float ms_min = -1;
      for (int r = 0; r < 3; ++r) {
        float ms = 0;
        cudaEventRecord(e0, stream);
        const cublasStatus_t st = run();
        cudaEventRecord(e1, stream);
        if (st != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
          ms_min = -1;
          break;
        }
        if (ms_min < 0 || ms < ms_min) ms_min = ms;
      }
      if (ms_min >= 0 && (best < 0 || ms_min < best_ms)) best = int(i), best_ms = ms_min;
    }
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (scratch) {
    cudaStreamSynchronize(stream);
    cudaFree(scratch);
  }
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
    const bool tune = g.tune;
    Plan p;
    std::vector<cublasLtMatmulAlgo_t> cands;
    if (const char* err = make_plan(s, g, al_a, al_b, al_c, al_d, p, tune ? kTuneCandidates : 1, cands)) {
      destroy(p);
      return err;
    }
    if (tune) {
      const int b = time_candidates(s, g, p, cands, pa, A, B, pb, beta == 0, C, D, stream);
      if (b >= 0) p.algo = cands[size_t(b)], ++s.tuned;
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

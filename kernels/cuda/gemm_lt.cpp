// cuBLASLt row-major GEMM (see gemm_lt.h).
#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>

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

// Column-major problem: D'[n, m] = op'(B) op'(A), op' = the row-major op.
const char* make_plan(State& s, const Gemm& g, std::uint32_t al_a, std::uint32_t al_b, std::uint32_t al_c,
                      std::uint32_t al_d, Plan& p) {
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
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(s.handle, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return "cublasLtMatmulAlgoGetHeuristic found no algorithm";
  p.algo = res.algo;
  return nullptr;
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
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    Plan p;
    if (const char* err = make_plan(s, g, al_a, al_b, al_c, al_d, p)) {
      destroy(p);
      return err;
    }
    it = s.plans.emplace(key, p).first;
  }
  Plan& p = it->second;
  cublasStatus_t st;
  if (g.a_type == kF64) {
    st = cublasLtMatmul(s.handle, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, D, p.c, &p.algo, s.ws, s.ws_bytes, stream);
  } else {
    const float af = float(alpha), bf = float(beta);
    st = cublasLtMatmul(s.handle, p.op, &af, B, p.a, A, p.b, &bf, C, p.c, D, p.c, &p.algo, s.ws, s.ws_bytes, stream);
  }
  if (st != CUBLAS_STATUS_SUCCESS) return "cublasLtMatmul failed";
  ++s.calls;
  return nullptr;
}

size_t workspace_bytes() { return state().ws_bytes; }
long call_count() { return state().calls; }

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

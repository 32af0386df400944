// Lab tool: how much does the choice of cuBLASLt algorithm matter for the
// LLaMA block's GEMMs? The engine (kernels/cuda/gemm_lt.cpp) takes the
// heuristic's first algorithm for every shape. This program, for each of the
// block's 7 forward and 14 backward GEMMs at the 1B and 7B widths (row-major,
// the engine's operand order and types: bf16 in, bf16 out for activations,
// fp32 out with beta = 1 for the weight gradients), asks the heuristic for up
// to --algos candidates and times each alone (median of --reps launches after
// two warm-ups, CUDA events). Then it runs the whole 21-GEMM sequence
// back to back, alternating rounds with the heuristic's first choices and
// with the fastest alone, so the answer includes the card's power-managed
// clock under a sustained load (the block's GEMM phase runs ~15% below the
// per-shape rates of `bench gemm`).
//
// Output: one line per (shape, candidate) and per sequence round, CSV on
// stdout (kind,...), so the results file is the program's output.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 gemm_algos.cu -lcublasLt -o gemm_algos
// Run:   ./gemm_algos [--tokens 32768] [--algos 16] [--reps 10] [--rounds 6] [--model 1B|7B|both]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "gemm_algos: %s failed: %s\n", #x, cudaGetErrorString(e_));         \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define LK(x)                                                                                  \
  do {                                                                                         \
    cublasStatus_t s_ = (x);                                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      std::fprintf(stderr, "gemm_algos: %s failed: status %d\n", #x, int(s_));                 \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

constexpr size_t kWorkspace = size_t(32) << 20;  // the engine's

struct Shape {
  std::string name;
  char ta, tb;
  long m, n, k;
  bool c_f32;  // fp32 C (weight gradient) else bf16
  float beta;
};

struct Cand {
  cublasLtMatmulAlgo_t algo;
  float ms = 1e30f;
  int tile = -1, stages = -1, splitk = -1, red = -1, cluster = -1, swz = -1;
  size_t ws = 0;
};

struct Problem {
  Shape s;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  void *A = nullptr, *B = nullptr, *C = nullptr, *D = nullptr;
  std::vector<Cand> cands;
  int best = 0;
};

template <class T> void fill(void* p, size_t n, float scale, unsigned seed);

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, float scale, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16(scale * (float(h & 0xffff) / 32768.0f - 1.0f));
  }
}
__global__ void fill_f32(float* p, size_t n, float scale, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = scale * (float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

void* dev_alloc(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  return p;
}

template <class U = std::uint32_t> int attr_int(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t at) {
  U v = 0;  // the attribute's own width (CLUSTER_SHAPE_ID is 16 bits; a wrong size fails the call)
  size_t got = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, at, &v, sizeof v, &got) != CUBLAS_STATUS_SUCCESS) return -1;
  return int(v);
}

// The engine's mapping (gemm_lt.cpp): row-major D[m, n] = op(A) op(B) as
// column-major D'[n, m] = op'(B) op'(A), operands swapped.
void make(cublasLtHandle_t h, Problem& p, int max_algos) {
  const Shape& g = p.s;
  LK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opa = g.tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = g.ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
  LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  // Row-major A: [m, k] ('N') or [k, m] ('T'); B: [k, n] ('N') or [n, k] ('T').
  const long lda = g.ta == 'N' ? g.k : g.m, ldb = g.tb == 'N' ? g.n : g.k, ldc = g.n;
  const std::uint64_t ar = g.tb == 'N' ? g.n : g.k, ac = g.tb == 'N' ? g.k : g.n;
  const std::uint64_t br = g.ta == 'N' ? g.k : g.m, bc = g.ta == 'N' ? g.m : g.k;
  LK(cublasLtMatrixLayoutCreate(&p.la, CUDA_R_16BF, ar, ac, ldb));
  LK(cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_16BF, br, bc, lda));
  LK(cublasLtMatrixLayoutCreate(&p.lc, g.c_f32 ? CUDA_R_32F : CUDA_R_16BF, std::uint64_t(g.n), std::uint64_t(g.m), ldc));
  const size_t na = size_t(g.m) * g.k, nb = size_t(g.k) * g.n, nc = size_t(g.m) * g.n;
  p.A = dev_alloc(na * 2), p.B = dev_alloc(nb * 2);
  const size_t cb = g.c_f32 ? 4 : 2;
  p.C = dev_alloc(nc * cb), p.D = dev_alloc(nc * cb);
  fill_bf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p.A), na, 1.0f, 1u);
  fill_bf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p.B), nb, 0.02f, 2u);
  if (g.c_f32)
    fill_f32<<<1024, 256>>>(static_cast<float*>(p.C), nc, 0.01f, 3u);
  else
    fill_bf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p.C), nc, 0.01f, 3u);
  CK(cudaGetLastError());
  cublasLtMatmulPreference_t pref = nullptr;
  LK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspace;
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The engine's operands are Kokkos views, 128 bytes past their allocation's
  // start: its heuristic is asked with 128-byte alignment (gemm_lt.cpp), so
  // the survey asks the same (unset, cuBLASLt assumes 256).
  const std::uint32_t al = 128;
  for (auto at : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    LK(cublasLtMatmulPreferenceSetAttribute(pref, at, &al, sizeof al));
  std::vector<cublasLtMatmulHeuristicResult_t> res(max_algos);
  int found = 0;
  LK(cublasLtMatmulAlgoGetHeuristic(h, p.op, p.la, p.lb, p.lc, p.lc, pref, max_algos, res.data(), &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    std::fprintf(stderr, "gemm_algos: no algorithm for %s\n", g.name.c_str());
    std::exit(1);
  }
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    Cand c;
    c.algo = res[i].algo;
    c.ws = res[i].workspaceSize;
    c.tile = attr_int(c.algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
    c.stages = attr_int(c.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
    c.splitk = attr_int(c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
    c.red = attr_int(c.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
    c.cluster = attr_int<std::uint16_t>(c.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
    c.swz = attr_int(c.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
    p.cands.push_back(c);
  }
  if (p.cands.empty()) {
    std::fprintf(stderr, "gemm_algos: no usable algorithm for %s\n", g.name.c_str());
    std::exit(1);
  }
}

// D separate from C (C read when beta != 0): timing runs repeat the call.
bool launch(cublasLtHandle_t h, const Problem& p, const cublasLtMatmulAlgo_t& algo, void* ws, cudaStream_t st) {
  const float alpha = 1.0f, beta = p.s.beta;
  return cublasLtMatmul(h, p.op, &alpha, p.B, p.la, p.A, p.lb, &beta, p.C, p.lc, p.D, p.lc, &algo, ws, kWorkspace, st) ==
         CUBLAS_STATUS_SUCCESS;
}

double flops(const Shape& s) { return 2.0 * double(s.m) * double(s.n) * double(s.k); }

std::vector<Shape> block_shapes(const std::string& model, long S) {
  const long H = model == "1B" ? 2048 : 4096, F = model == "1B" ? 5632 : 11008;
  const std::string p = model + ".";
  // The engine's order (src/cli/bench_layer.cpp, the block's GEMMs alone).
  return {
      {p + "fwd.q", 'N', 'T', S, H, H, false, 0.f},
      {p + "fwd.k", 'N', 'T', S, H, H, false, 0.f},
      {p + "fwd.v", 'N', 'T', S, H, H, false, 0.f},
      {p + "fwd.o+res", 'N', 'T', S, H, H, false, 1.f},
      {p + "fwd.up", 'N', 'T', S, F, H, false, 0.f},
      {p + "fwd.gate", 'N', 'T', S, F, H, false, 0.f},
      {p + "fwd.down+res", 'N', 'T', S, H, F, false, 1.f},
      {p + "bwd.dm", 'N', 'N', S, F, H, false, 0.f},
      {p + "bwd.dW_down", 'T', 'N', H, F, S, true, 1.f},
      {p + "bwd.dh2_gate", 'N', 'N', S, H, F, false, 0.f},
      {p + "bwd.dW_gate", 'T', 'N', F, H, S, true, 1.f},
      {p + "bwd.dh2_up+", 'N', 'N', S, H, F, false, 1.f},
      {p + "bwd.dW_up", 'T', 'N', F, H, S, true, 1.f},
      {p + "bwd.dO", 'N', 'N', S, H, H, false, 0.f},
      {p + "bwd.dW_o", 'T', 'N', H, H, S, true, 1.f},
      {p + "bwd.dh1_q", 'N', 'N', S, H, H, false, 0.f},
      {p + "bwd.dh1_k+", 'N', 'N', S, H, H, false, 1.f},
      {p + "bwd.dh1_v+", 'N', 'N', S, H, H, false, 1.f},
      {p + "bwd.dW_q", 'T', 'N', H, H, S, true, 1.f},
      {p + "bwd.dW_k", 'T', 'N', H, H, S, true, 1.f},
      {p + "bwd.dW_v", 'T', 'N', H, H, S, true, 1.f},
  };
}

}  // namespace

int main(int argc, char** argv) {
  long S = 32768;
  int max_algos = 16, reps = 10, rounds = 6;
  std::string model = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gemm_algos: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokens") S = std::atol(next());
    else if (a == "--algos") max_algos = std::atoi(next());
    else if (a == "--reps") reps = std::atoi(next());
    else if (a == "--rounds") rounds = std::atoi(next());
    else if (a == "--model") model = next();
    else {
      std::fprintf(stderr, "gemm_algos: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (S <= 0 || max_algos < 1 || reps < 1 || rounds < 1 || (model != "1B" && model != "7B" && model != "both")) {
    std::fprintf(stderr, "gemm_algos: bad arguments\n");
    return 2;
  }
  cublasLtHandle_t h;
  LK(cublasLtCreate(&h));
  void* ws = dev_alloc(kWorkspace);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device,%s\n", prop.name);
  std::printf("kind,shape,ta,tb,m,n,k,cand,tile,stages,splitk,reduction,cluster,swizzle,ws_bytes,ms,tflops\n");

  std::vector<std::string> models = model == "both" ? std::vector<std::string>{"1B", "7B"} : std::vector<std::string>{model};
  for (const std::string& mdl : models) {
    std::vector<Problem> probs;
    for (const Shape& s : block_shapes(mdl, S)) {
      Problem p;
      p.s = s;
      make(h, p, max_algos);
      probs.push_back(p);
    }
    CK(cudaDeviceSynchronize());
    // Each shape alone, every candidate.
    for (Problem& p : probs) {
      std::vector<float> t(reps);
      for (size_t c = 0; c < p.cands.size(); ++c) {
        Cand& cd = p.cands[c];
        bool ok = launch(h, p, cd.algo, ws, st) && launch(h, p, cd.algo, ws, st);
        for (int r = 0; ok && r < reps; ++r) {
          CK(cudaEventRecord(e0, st));
          ok = launch(h, p, cd.algo, ws, st);
          CK(cudaEventRecord(e1, st));
          CK(cudaEventSynchronize(e1));
          CK(cudaEventElapsedTime(&t[r], e0, e1));
        }
        std::sort(t.begin(), t.end());
        cd.ms = ok ? t[reps / 2] : 1e30f;  // a candidate that does not run is never the fastest
        if (!ok) {
          cudaGetLastError();
          std::printf("failed,%s,%zu\n", p.s.name.c_str(), c);
          continue;
        }
        std::printf("alone,%s,%c,%c,%ld,%ld,%ld,%zu,%d,%d,%d,%d,%d,%d,%zu,%.4f,%.1f\n", p.s.name.c_str(), p.s.ta, p.s.tb,
                    p.s.m, p.s.n, p.s.k, c, cd.tile, cd.stages, cd.splitk, cd.red, cd.cluster, cd.swz, cd.ws, cd.ms,
                    flops(p.s) / (cd.ms * 1e-3) / 1e12);
      }
      p.best = int(std::min_element(p.cands.begin(), p.cands.end(), [](const Cand& a, const Cand& b) { return a.ms < b.ms; }) -
                   p.cands.begin());
      std::fflush(stdout);
    }
    // The sequence, alternating the heuristic's first choice and the fastest alone.
    double total_flops = 0;
    for (const Problem& p : probs) total_flops += flops(p.s);
    std::printf("kind,model,round,choice,ms,tflops\n");
    for (int r = 0; r < rounds; ++r) {
      for (int choice = 0; choice < 2; ++choice) {
        const bool best = (choice == 1) ^ (r % 2 == 1);  // alternate which goes first
        CK(cudaEventRecord(e0, st));
        for (const Problem& p : probs)
          if (!launch(h, p, p.cands[best ? p.best : 0].algo, ws, st)) {
            std::fprintf(stderr, "gemm_algos: %s failed in the sequence\n", p.s.name.c_str());
            return 1;
          }
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        std::printf("sequence,%s,%d,%s,%.4f,%.1f\n", mdl.c_str(), r, best ? "fastest_alone" : "heuristic_first", ms,
                    total_flops / (ms * 1e-3) / 1e12);
      }
      std::fflush(stdout);
    }
    for (Problem& p : probs) {
      cudaFree(p.A), cudaFree(p.B), cudaFree(p.C), cudaFree(p.D);
      cublasLtMatrixLayoutDestroy(p.la), cublasLtMatrixLayoutDestroy(p.lb), cublasLtMatrixLayoutDestroy(p.lc);
      cublasLtMatmulDescDestroy(p.op);
    }
  }
  cudaFree(ws);
  cublasLtDestroy(h);
  return 0;
}

// What the `burst bench` subcommands share: the memory space the tracker
// counts for device views, the cuBLASLt workspace (allocated outside Kokkos,
// so the tracker misses it), and the provenance attributes of every bench
// file (execution space, host, the resolved config, UTC date).
#pragma once

#include "cli/environment.hpp"
#include "comm/collectives.hpp"
#include "comm/runtime.hpp"
#include "core/config.hpp"
#include "core/memory.hpp"
#include "core/views.hpp"
#include "io/h5.hpp"
#include "kernels/gemm.hpp"
#include "train/weights.hpp"

#ifdef BURST_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>  // header-only: no library to link; a no-op unless a profiler is attached
#endif

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>
#include <type_traits>
#include <vector>

namespace burst::cli {

constexpr MemSpaceKind bench_dev_kind() {
  return std::is_same<DeviceMem, Kokkos::HostSpace>::value ? MemSpaceKind::Host : MemSpaceKind::Device;
}

inline std::int64_t bench_gemm_workspace_bytes() {
#ifdef BURST_HAVE_CUDA
  return std::int64_t(lt::workspace_bytes());
#else
  return 0;
#endif
}

// An NVTX push/pop range on CUDA builds (nothing on the host): profilers can
// take exactly the kernels inside it (ncu --nvtx --nvtx-include "NAME/").
class NvtxRange {
 public:
  explicit NvtxRange(const char* name, bool on = true) : on_(on) {
#ifdef BURST_HAVE_CUDA
    if (on_) nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef BURST_HAVE_CUDA
    if (on_) nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool on_;
};

// The schema's bench.dtype ("bf16", "float" or "double") as a type: the
// result of f(T{}) for that T.
template <class F> int with_bench_dtype(const std::string& dtype, F&& f) {
  if (dtype == "bf16") return f(bf16{});
  if (dtype == "float") return f(float{});
  return f(double{});
}

// The median the benches report over their repeats: the upper middle sample
// of an even count (0 for none).
inline double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0.0 : x[x.size() / 2];
}

// The bench's output file checked on rank 0 (which writes it) before any
// work; every rank raises the same error (bad input, status 2). `flag` is
// --output when given, else the config key the path came from.
// A training checkpoint or weights file there is refused (train/weights.hpp).
inline void check_bench_output(Runtime& rt, const std::string& cli_output, const std::string& path) {
  int rank = 0;
  MPI_Comm_rank(rt.world(), &rank);
  check_problem_on_root(rt.world(), rank == 0 ? output_problem(cli_output.empty() ? "bench.output" : "--output", path) : "");
}

inline void set_bench_provenance(io::H5File& f, Runtime& rt, const Config& cfg) {
  f.set_attr("/", "execution_space", std::string(Kokkos::DefaultExecutionSpace::name()));
  f.set_attr("/", "host", rt.hostname());
  f.set_attr("/", "config", cfg.dump());
  f.set_attr("/", "environment", run_environment("; "));  // cli/environment.hpp (rank 0's)
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  f.set_attr("/", "date", std::string(date));
}

}  // namespace burst::cli

#include "cli/versions.hpp"

#include "core/kokkos_compat.hpp"
#include "io/h5.hpp"

#include <CLI/Version.hpp>
#include <mpi.h>
#include <nlohmann/json.hpp>
#include <toml++/impl/version.h>

#ifdef BURST_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#endif
#ifdef BURST_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef BURST_HAVE_OPENBLAS
extern "C" char* openblas_get_config(void);
#endif

#ifndef BURST_KOKKOSKERNELS_VERSION
#define BURST_KOKKOSKERNELS_VERSION "not used"
#endif

namespace burst {

static std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, len);
  auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\0')) s.pop_back();
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  return s + " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

std::vector<std::pair<std::string, std::string>> dependency_versions() {
  std::vector<std::pair<std::string, std::string>> v;
  v.emplace_back("Kokkos", kx::version_string());
  v.emplace_back("Kokkos Kernels", BURST_KOKKOSKERNELS_VERSION);
#ifdef BURST_HAVE_OPENBLAS
  v.emplace_back("OpenBLAS", openblas_get_config());
#endif
  v.emplace_back("MPI", mpi_library_version());
  v.emplace_back("HDF5", io::hdf5_version());
#ifdef BURST_HAVE_CUDA
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  auto cuv = [](int x) { return std::to_string(x / 1000) + "." + std::to_string((x % 1000) / 10); };
  v.emplace_back("CUDA runtime", cuv(rt));
  v.emplace_back("CUDA driver", drv ? cuv(drv) : std::string("none"));
  v.emplace_back("cuBLASLt", std::to_string(cublasLtGetVersion()));
#endif
#ifdef BURST_HAVE_NCCL
  int nv = 0;
  ncclGetVersion(&nv);
  v.emplace_back("NCCL", std::to_string(nv / 10000) + "." + std::to_string((nv / 100) % 100) + "." + std::to_string(nv % 100));
#endif
  v.emplace_back("CLI11", CLI11_VERSION);
  v.emplace_back("toml++", std::to_string(TOML_LIB_MAJOR) + "." + std::to_string(TOML_LIB_MINOR) + "." +
                               std::to_string(TOML_LIB_PATCH));
  v.emplace_back("nlohmann/json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                      std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                      std::to_string(NLOHMANN_JSON_VERSION_PATCH));
#if defined(__clang__)
  v.emplace_back("compiler", std::string("clang ") + __clang_version__);
#elif defined(__GNUC__)
  v.emplace_back("compiler", "GCC " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
                                 std::to_string(__GNUC_PATCHLEVEL__));
#endif
#ifdef __CUDACC_VER_MAJOR__
  v.emplace_back("nvcc", std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__));
#endif
  return v;
}

}  // namespace burst

# Finds every dependency and defines:
#   burst::hdf5     HDF5 C library (serial API; serial or parallel builds both work)
#   burst::headers  header-only CLI11, toml++, nlohmann/json
#   BURST_HAVE_KOKKOSKERNELS, BURST_HAVE_OPENBLAS
#   burst_add_backend_definitions(target)  CUDA / NCCL / NVTX definitions and links

# Kokkos: the bootstrap's cache prefix, or the user's own (-DKokkos_ROOT=...).
if(BURST_ENABLE_CUDA)
  # Define CUDA::cudart and CUDA::cuda_driver with this CMake before Kokkos'
  # package config does: Kokkos 3.4 re-creates them from strings saved at its
  # install, which breaks when CUDA 13 reports two include directories
  # (include and include/cccl) under CMake 4; its definitions are guarded
  # by if(NOT TARGET), so ours win.
  find_package(CUDAToolkit REQUIRED)
endif()
find_package(Kokkos 3.4 REQUIRED)
if(Kokkos_ENABLE_CUDA AND NOT BURST_ENABLE_CUDA)
  message(FATAL_ERROR "This Kokkos (${Kokkos_DIR}) was built with CUDA: configure with -DBURST_ENABLE_CUDA=ON "
                      "(and CMAKE_CXX_COMPILER=<kokkos>/bin/nvcc_wrapper), or point Kokkos_ROOT at a host build.")
endif()
if(BURST_ENABLE_CUDA AND NOT Kokkos_ENABLE_CUDA)
  message(FATAL_ERROR "BURST_ENABLE_CUDA=ON needs a Kokkos built with CUDA; ${Kokkos_DIR} is not "
                      "(scripts/bootstrap.sh --cuda builds one).")
endif()
if(BURST_ENABLE_NCCL AND NOT BURST_ENABLE_CUDA)
  message(FATAL_ERROR "BURST_ENABLE_NCCL=ON needs BURST_ENABLE_CUDA=ON")
endif()

# Kokkos Kernels: host builds use it for GEMM (BLAS TPL). Optional on CUDA.
find_package(KokkosKernels QUIET)
set(BURST_HAVE_KOKKOSKERNELS ${KokkosKernels_FOUND})
if(NOT BURST_ENABLE_CUDA AND NOT KokkosKernels_FOUND)
  message(WARNING "Kokkos Kernels not found next to Kokkos: host GEMMs use the portable kernel (slow). "
                  "scripts/bootstrap.sh installs it.")
endif()
find_library(BURST_OPENBLAS_LIBRARY openblas)
if(BURST_OPENBLAS_LIBRARY)
  set(BURST_HAVE_OPENBLAS ON)
endif()

find_package(MPI REQUIRED COMPONENTS CXX)

# HDF5 through its C API only. Prefer the serial build when both are installed.
set(HDF5_PREFER_PARALLEL OFF)
find_package(HDF5 REQUIRED COMPONENTS C)
add_library(burst_hdf5 INTERFACE)
target_include_directories(burst_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(burst_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
target_compile_definitions(burst_hdf5 INTERFACE ${HDF5_C_DEFINITIONS} ${HDF5_DEFINITIONS})
if(HDF5_IS_PARALLEL)
  target_link_libraries(burst_hdf5 INTERFACE MPI::MPI_CXX)
endif()
add_library(burst::hdf5 ALIAS burst_hdf5)

# Header-only libraries: system include path, or BURST_DEPS_INCLUDE (offline).
add_library(burst_headers INTERFACE)
foreach(hdr CLI/CLI.hpp toml++/toml.h nlohmann/json.hpp)
  string(MAKE_C_IDENTIFIER ${hdr} var)
  find_path(BURST_INC_${var} ${hdr} HINTS ${BURST_DEPS_INCLUDE})
  if(NOT BURST_INC_${var})
    message(FATAL_ERROR "Header ${hdr} not found. Install it (scripts/bootstrap.sh) or pass -DBURST_DEPS_INCLUDE=<dir>.")
  endif()
  target_include_directories(burst_headers SYSTEM INTERFACE ${BURST_INC_${var}})
endforeach()
add_library(burst::headers ALIAS burst_headers)

if(BURST_ENABLE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(BURST_ENABLE_NCCL)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
      message(FATAL_ERROR "BURST_ENABLE_NCCL=ON but nccl.h / libnccl was not found")
    endif()
  endif()
endif()

function(burst_add_backend_definitions target)
  if(BURST_ENABLE_CUDA)
    target_compile_definitions(${target} PUBLIC BURST_HAVE_CUDA BURST_HAVE_NVTX)
    target_link_libraries(${target} PUBLIC CUDA::cudart CUDA::cublasLt CUDA::cublas)
    target_include_directories(${target} PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
    if(TARGET CUDA::nvtx3)
      target_link_libraries(${target} PUBLIC CUDA::nvtx3)
    endif()
  endif()
  if(BURST_ENABLE_NCCL)
    target_compile_definitions(${target} PUBLIC BURST_HAVE_NCCL)
    target_include_directories(${target} PUBLIC ${NCCL_INCLUDE_DIR})
    target_link_libraries(${target} PUBLIC ${NCCL_LIBRARY})
  endif()
endfunction()

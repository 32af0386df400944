// The host BLAS' kernel set. OpenBLAS 0.3.21 (Debian 12's) does not know the
// build machine's CPU and falls back to its Prescott (SSE3) kernels: sgemm 5x
// slower than its SkylakeX (AVX-512) kernels on the same core (measured,
// experiments/NOTES.md). OpenBLAS reads OPENBLAS_CORETYPE once, when it is
// loaded, so the executable re-executes itself with it set.
#pragma once

#include <string>

namespace burst {

// If the process runs OpenBLAS on a kernel set below what the CPU supports
// (and OPENBLAS_CORETYPE is unset), set OPENBLAS_CORETYPE (SkylakeX with
// AVX-512, Haswell with AVX2) and exec argv again; returns if nothing is to
// be done or the exec fails. Call first thing in main, before MPI starts.
void select_blas_core(char** argv);

// "OpenBLAS <core>" when OpenBLAS is linked, else "".
std::string blas_core_name();

}  // namespace burst

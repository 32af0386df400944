// Rotary position embedding (Hugging Face's rotate_half convention: element e
// pairs with e + d/2), on explicit position ids, with the rope_scaling kinds
// of Hugging Face configs: default, linear, dynamic (NTK), llama3, yarn.
// The inverse frequencies and the attention factor are computed on the host
// in double, once per configuration (and per sequence length for dynamic).
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#include <string>
#include <vector>

#ifdef BURST_HAVE_CUDA
#define BURST_ROPE_HPP_INCLUDES_CUDA
#include "kernels/cuda/rope_cuda.hpp"  // a block per token, 16-byte vectors, for bf16 / float device views
#undef BURST_ROPE_HPP_INCLUDES_CUDA
#endif

namespace burst::kernels {

struct RopeScaling {
  std::string type = "default";  // default | linear | dynamic | llama3 | yarn
  double factor = 1.0;
  long original_max_position_embeddings = 0;  // llama3, yarn, dynamic
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0, beta_slow = 1.0;                // yarn
  double attention_factor = 0.0;                           // yarn: 0 = derive from factor (0.1 ln(factor) + 1)
  bool truncate = true;                                    // yarn: floor/ceil the correction range
};

struct RopeConfig {
  double theta = 10000.0;
  long head_dim = 0;            // rotary dimension (even)
  long max_position_embeddings = 0;
  RopeScaling scaling;
};

struct RopeTable {
  std::vector<double> inv_freq;  // [d/2]
  double attention_factor = 1.0; // multiplies cos and sin (yarn)
};

// Throws Error(Config) for an unknown type or impossible parameters.
// `seq_len` matters only to dynamic scaling.
RopeTable rope_table(const RopeConfig& cfg, long seq_len);

// y [s, heads, d] = x rotated by positions pos [s] (x and y may be the same
// view: in place); inverse = true applies the transpose (the backward of the
// forward rotation). TI -> TO converts on the way (the backward rotates the
// fp32 gradients of q and k into the bf16 copies the projections read: one
// pass instead of a rotation in place and a conversion).
template <class TI, class TO, class Mem>
void rope_apply_to(Kokkos::View<TI***, Layout, Mem> x, Kokkos::View<TO***, Layout, Mem> y,
                   Kokkos::View<const long*, Layout, Mem> pos, Kokkos::View<const double*, Layout, Mem> inv_freq,
                   double attention_factor, bool inverse) {
  using Acc = decltype(accum_t<TI>() + accum_t<TO>());  // the wider: fp32 -> bf16 rotates in fp32, as before
  using Exec = typename Kokkos::View<TO***, Layout, Mem>::execution_space;
  const long s = x.extent(0), nh = x.extent(1), d = x.extent(2), half = d / 2;
  BURST_CHECK_INPUT(d % 2 == 0 && long(inv_freq.extent(0)) == half, "rope: head dim ", d,
                    " must be even and match the table's ", inv_freq.extent(0), " frequencies");
  BURST_CHECK_INPUT(long(pos.extent(0)) == s, "rope: ", pos.extent(0), " positions for ", s, " tokens");
  BURST_CHECK_INPUT(long(y.extent(0)) == s && long(y.extent(1)) == nh && long(y.extent(2)) == d, "rope: output [",
                    y.extent(0), ", ", y.extent(1), ", ", y.extent(2), "] for input [", s, ", ", nh, ", ", d, "]");
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::rope_dispatches<TI, TO, Mem>()) {
    if (cuda::rope_cuda_enabled() && cuda::all_contiguous(x, y, pos, inv_freq) &&
        rope::rope_supported(s, nh, d, x.data(), y.data())) {
      cuda::check(rope::rope_apply(cuda::dtype_code<TI>(), cuda::dtype_code<TO>(), s, nh, d, x.data(), y.data(), pos.data(),
                                   inv_freq.data(), attention_factor, inverse, Kokkos::Cuda().cuda_stream()),
                  "rope (kernels/cuda)");
      return;
    }
  }
#endif
  const double sign = inverse ? -1.0 : 1.0;
  // One thread per (token, frequency): the angle's FP64 sin and cos once for
  // all heads (they were recomputed per head: 5x the byte floor on the H200),
  // then the heads in a loop; consecutive threads take consecutive
  // frequencies, so every head's accesses stay coalesced. Each thread reads
  // its pair before writing it, so y may alias x.
  Kokkos::parallel_for(
      "burst::rope_apply", Kokkos::RangePolicy<Exec>(0, s * half), KOKKOS_LAMBDA(const long idx) {
        const long e = idx % half, i = idx / half;
        // The angle in double: positions reach millions, and float loses the phase.
        const double ang = double(pos(i)) * inv_freq(e);
        const Acc c = Acc(kx::cos(ang) * attention_factor), sn = Acc(sign * kx::sin(ang) * attention_factor);
        for (long h = 0; h < nh; ++h) {
          const Acc a = Acc(x(i, h, e)), b = Acc(x(i, h, e + half));
          y(i, h, e) = TO(a * c - b * sn);
          y(i, h, e + half) = TO(b * c + a * sn);
        }
      });
}

// x [s, heads, d] rotated in place.
template <class T, class Mem>
void rope_apply(Kokkos::View<T***, Layout, Mem> x, Kokkos::View<const long*, Layout, Mem> pos,
                Kokkos::View<const double*, Layout, Mem> inv_freq, double attention_factor, bool inverse) {
  rope_apply_to<T, T, Mem>(x, x, pos, inv_freq, attention_factor, inverse);
}

}  // namespace burst::kernels

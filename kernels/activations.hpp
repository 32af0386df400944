// MLP activations, forward and backward, elementwise over [N, F].
//  SwiGLU (LLaMA): h = silu(gate) * up.
//  GELU (non-gated MLPs, the paper's 7B): exact erf form or the tanh approximation.
// Also the layer's other elementwise passes: the residual add and the
// conversions between the accumulation and the storage type (fp32 attention
// outputs to bf16 for the GEMMs that follow and attention's backward; the
// `half` policy's cached bf16 O widened back into its recomputed fp32 O).
// On CUDA builds, bf16 device views with contiguous spans go to
// kernels/cuda/elementwise.cu (SwiGLU, add, fp32 -> bf16, bf16 -> fp32); the
// rest runs the portable kernels below.
#pragma once

#include "core/error.hpp"
#include "core/views.hpp"

#include <type_traits>

#ifdef BURST_HAVE_CUDA
#define BURST_ACTIVATIONS_HPP_INCLUDES_CUDA
#include "kernels/cuda/elementwise_cuda.hpp"
#undef BURST_ACTIVATIONS_HPP_INCLUDES_CUDA
#endif

namespace burst::kernels {

enum class Gelu { Erf, Tanh };

namespace impl {
template <class Acc> KOKKOS_INLINE_FUNCTION Acc sigmoid(Acc x) { return Acc(1) / (Acc(1) + kx::exp(-x)); }

template <class Acc> KOKKOS_INLINE_FUNCTION Acc gelu(Acc x, Gelu kind) {
  if (kind == Gelu::Erf) return Acc(0.5) * x * (Acc(1) + kx::erf(x * Acc(0.70710678118654752440)));
  const Acc c = Acc(0.79788456080286535588);  // sqrt(2/pi)
  return Acc(0.5) * x * (Acc(1) + kx::tanh(c * (x + Acc(0.044715) * x * x * x)));
}

template <class Acc> KOKKOS_INLINE_FUNCTION Acc gelu_grad(Acc x, Gelu kind) {
  if (kind == Gelu::Erf) {
    const Acc cdf = Acc(0.5) * (Acc(1) + kx::erf(x * Acc(0.70710678118654752440)));
    const Acc pdf = kx::exp(Acc(-0.5) * x * x) * Acc(0.39894228040143267794);  // 1/sqrt(2 pi)
    return cdf + x * pdf;
  }
  const Acc c = Acc(0.79788456080286535588);
  const Acc u = c * (x + Acc(0.044715) * x * x * x);
  const Acc t = kx::tanh(u);
  return Acc(0.5) * (Acc(1) + t) + Acc(0.5) * x * (Acc(1) - t * t) * c * (Acc(1) + Acc(3 * 0.044715) * x * x);
}
}  // namespace impl

template <class V1, class V2> void check_same_2d(const char* what, const V1& a, const V2& b) {
  BURST_CHECK_INPUT(a.extent(0) == b.extent(0) && a.extent(1) == b.extent(1), what, ": shapes [", a.extent(0), ", ",
                    a.extent(1), "] and [", b.extent(0), ", ", b.extent(1), "] differ");
}

template <class T, class Mem>
void swiglu_forward(Kokkos::View<const T**, Layout, Mem> gate, Kokkos::View<const T**, Layout, Mem> up,
                    Kokkos::View<T**, Layout, Mem> h) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  check_same_2d("swiglu", gate, up);
  check_same_2d("swiglu", gate, h);
  const long F = gate.extent(1);
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::ew_dispatches<T, Mem>()) {
    if (cuda::all_contiguous(gate, up, h)) {
      cuda::check(ew::swiglu_forward(long(gate.size()), cuda::nvb(gate.data()), cuda::nvb(up.data()), cuda::nvb(h.data()),
                                     Kokkos::Cuda().cuda_stream()),
                  "swiglu forward (kernels/cuda)");
      return;
    }
  }
#endif
  // On the host a row per index, its columns walked in a loop: no 64-bit
  // division and modulo per element to split a flat index (1.4-1.5x on a
  // 2-core CPU, NOTES "v3 host: SwiGLU by rows"); on a device a thread per
  // element keeps a warp's accesses consecutive.
  if constexpr (is_host_exec<Exec>()) {
    Kokkos::parallel_for(
        "burst::swiglu_forward", Kokkos::RangePolicy<Exec>(0, long(gate.extent(0))), KOKKOS_LAMBDA(const long i) {
          for (long f = 0; f < F; ++f) {
            const Acc g = Acc(gate(i, f));
            h(i, f) = T(g * impl::sigmoid(g) * Acc(up(i, f)));
          }
        });
    return;
  }
  Kokkos::parallel_for(
      "burst::swiglu_forward", Kokkos::RangePolicy<Exec>(0, long(gate.extent(0)) * F), KOKKOS_LAMBDA(const long x) {
        const long i = x / F, f = x % F;
        const Acc g = Acc(gate(i, f));
        h(i, f) = T(g * impl::sigmoid(g) * Acc(up(i, f)));
      });
}

// dgate = dh * up * silu'(gate), dup = dh * silu(gate).
template <class T, class Mem>
void swiglu_backward(Kokkos::View<const T**, Layout, Mem> dh, Kokkos::View<const T**, Layout, Mem> gate,
                     Kokkos::View<const T**, Layout, Mem> up, Kokkos::View<T**, Layout, Mem> dgate,
                     Kokkos::View<T**, Layout, Mem> dup) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  check_same_2d("swiglu backward", dh, gate);
  check_same_2d("swiglu backward", dh, up);
  check_same_2d("swiglu backward", dh, dgate);
  check_same_2d("swiglu backward", dh, dup);
  const long F = gate.extent(1);
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::ew_dispatches<T, Mem>()) {
    if (cuda::all_contiguous(dh, gate, up, dgate, dup)) {
      cuda::check(ew::swiglu_backward(long(dh.size()), cuda::nvb(dh.data()), cuda::nvb(gate.data()), cuda::nvb(up.data()),
                                      cuda::nvb(dgate.data()), cuda::nvb(dup.data()), Kokkos::Cuda().cuda_stream()),
                  "swiglu backward (kernels/cuda)");
      return;
    }
  }
#endif
  if constexpr (is_host_exec<Exec>()) {  // as the forward
    Kokkos::parallel_for(
        "burst::swiglu_backward", Kokkos::RangePolicy<Exec>(0, long(gate.extent(0))), KOKKOS_LAMBDA(const long i) {
          for (long f = 0; f < F; ++f) {
            const Acc g = Acc(gate(i, f)), s = impl::sigmoid(g), d = Acc(dh(i, f));
            dgate(i, f) = T(d * Acc(up(i, f)) * s * (Acc(1) + g * (Acc(1) - s)));
            dup(i, f) = T(d * g * s);
          }
        });
    return;
  }
  Kokkos::parallel_for(
      "burst::swiglu_backward", Kokkos::RangePolicy<Exec>(0, long(gate.extent(0)) * F), KOKKOS_LAMBDA(const long x) {
        const long i = x / F, f = x % F;
        const Acc g = Acc(gate(i, f)), s = impl::sigmoid(g), d = Acc(dh(i, f));
        dgate(i, f) = T(d * Acc(up(i, f)) * s * (Acc(1) + g * (Acc(1) - s)));
        dup(i, f) = T(d * g * s);
      });
}

template <class T, class Mem>
void gelu_forward(Kokkos::View<const T**, Layout, Mem> x, Gelu kind, Kokkos::View<T**, Layout, Mem> y) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  check_same_2d("gelu", x, y);
  const long F = x.extent(1);
  Kokkos::parallel_for(
      "burst::gelu_forward", Kokkos::RangePolicy<Exec>(0, long(x.extent(0)) * F), KOKKOS_LAMBDA(const long e) {
        y(e / F, e % F) = T(impl::gelu(Acc(x(e / F, e % F)), kind));
      });
}

template <class T, class Mem>
void gelu_backward(Kokkos::View<const T**, Layout, Mem> dy, Kokkos::View<const T**, Layout, Mem> x, Gelu kind,
                   Kokkos::View<T**, Layout, Mem> dx) {
  using Acc = accum_t<T>;
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  check_same_2d("gelu backward", dy, x);
  check_same_2d("gelu backward", dy, dx);
  const long F = x.extent(1);
  Kokkos::parallel_for(
      "burst::gelu_backward", Kokkos::RangePolicy<Exec>(0, long(x.extent(0)) * F), KOKKOS_LAMBDA(const long e) {
        const long i = e / F, f = e % F;
        dx(i, f) = T(Acc(dy(i, f)) * impl::gelu_grad(Acc(x(i, f)), kind));
      });
}

// y = x converted to y's type (round to nearest even for bf16), any two
// 2-D views of one shape. The model uses it for attention's fp32 O and
// dQ / dK / dV, which the bf16 GEMMs after it read in bf16, and to widen the
// `half` cache's bf16 O into the fp32 O its recompute completes.
template <class S, class T, class Mem>
void convert(Kokkos::View<const S**, Layout, Mem> x, Kokkos::View<T**, Layout, Mem> y) {
  using Exec = typename Kokkos::View<T**, Layout, Mem>::execution_space;
  check_same_2d("convert", x, y);
  const long F = y.extent(1);
#ifdef BURST_HAVE_CUDA
  if constexpr (cuda::ew_dispatches<T, Mem>() && std::is_same<S, float>::value) {
    if (cuda::all_contiguous(x, y)) {
      cuda::check(ew::f32_to_bf16(long(y.size()), x.data(), cuda::nvb(y.data()), Kokkos::Cuda().cuda_stream()),
                  "convert fp32 -> bf16 (kernels/cuda)");
      return;
    }
  }
  if constexpr (cuda::ew_dispatches<S, Mem>() && std::is_same<T, float>::value) {
    if (cuda::all_contiguous(x, y)) {
      cuda::check(ew::bf16_to_f32(long(y.size()), cuda::nvb(x.data()), y.data(), Kokkos::Cuda().cuda_stream()),
                  "convert bf16 -> fp32 (kernels/cuda)");
      return;
    }
  }
#endif
  Kokkos::parallel_for(
      "burst::convert", Kokkos::RangePolicy<Exec>(0, long(y.extent(0)) * F), KOKKOS_LAMBDA(const long e) {
        y(e / F, e % F) = T(x(e / F, e % F));
      });
}

// x in the storage type T: a converted copy labelled `label` (bf16:
// attention's fp32 O and dQ / dK / dV for the GEMMs and the backward that
// read them in T), or x itself when T is the accumulation type (float,
// double: no copy, no bytes). The copy is an uninit_view (poisoned under
// BURST_POISON=1, so an element the conversion missed shows).
template <class T, class Mem>
Kokkos::View<T**, Layout, Mem> storage_copy(const Kokkos::View<accum_t<T>**, Layout, Mem>& x, const std::string& label) {
  if constexpr (std::is_same<T, accum_t<T>>::value) {
    (void)label;
    return x;
  } else {
    auto y = uninit_view<Kokkos::View<T**, Layout, Mem>>(label, x.extent(0), x.extent(1));
    convert<accum_t<T>, T, Mem>(x, y);
    return y;
  }
}
// The same for [a, b, c] (contiguous): converted as [a, b c].
template <class T, class Mem>
Kokkos::View<T***, Layout, Mem> storage_copy(const Kokkos::View<accum_t<T>***, Layout, Mem>& x, const std::string& label) {
  using A = accum_t<T>;
  if constexpr (std::is_same<T, A>::value) {
    (void)label;
    return x;
  } else {
    BURST_CHECK_INPUT(x.span_is_contiguous(), "storage_copy: '", x.label(), "' is not contiguous");
    auto y = uninit_view<Kokkos::View<T***, Layout, Mem>>(label, x.extent(0), x.extent(1), x.extent(2));
    using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    const size_t rows = x.extent(0), cols = x.extent(1) * x.extent(2);
    convert<A, T, Mem>(Kokkos::View<const A**, Layout, Mem, U>(x.data(), rows, cols),
                       Kokkos::View<T**, Layout, Mem, U>(y.data(), rows, cols));
    return y;
  }
}

}  // namespace burst::kernels

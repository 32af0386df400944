// bfloat16 storage type for Kokkos views and kernels, on host and device.
// Arithmetic happens in float: load -> float, compute, store with
// round-to-nearest-even. Trivially copyable, 2 bytes, value-initialises to +0.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace burst {

struct bf16 {
  std::uint16_t bits;

  bf16() = default;
  template <class T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  KOKKOS_INLINE_FUNCTION bf16(T v) : bits(from_float(static_cast<float>(v))) {}

  KOKKOS_INLINE_FUNCTION operator float() const { return to_float(bits); }

  KOKKOS_INLINE_FUNCTION static bf16 from_bits(std::uint16_t b) {
    bf16 r;
    r.bits = b;
    return r;
  }

  KOKKOS_INLINE_FUNCTION static float to_float(std::uint16_t b) {
    std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

  // Round to nearest, ties to even; NaN stays a (quiet) NaN, +-inf stays inf.
  KOKKOS_INLINE_FUNCTION static std::uint16_t from_float(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u)
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
  }

  KOKKOS_INLINE_FUNCTION bf16& operator+=(float o) { return *this = bf16(float(*this) + o); }
  KOKKOS_INLINE_FUNCTION bf16& operator-=(float o) { return *this = bf16(float(*this) - o); }
  KOKKOS_INLINE_FUNCTION bf16& operator*=(float o) { return *this = bf16(float(*this) * o); }
  KOKKOS_INLINE_FUNCTION bf16& operator/=(float o) { return *this = bf16(float(*this) / o); }
};

static_assert(sizeof(bf16) == 2, "bf16 must be two bytes");
static_assert(std::is_trivially_copyable<bf16>::value, "bf16 must be trivially copyable");

// The type in which a scalar is accumulated: bf16 -> float, otherwise itself.
template <class T> struct accum { using type = T; };
template <> struct accum<bf16> { using type = float; };
template <class T> using accum_t = typename accum<T>::type;

template <class T> constexpr const char* scalar_name();
template <> constexpr const char* scalar_name<float>() { return "float32"; }
template <> constexpr const char* scalar_name<double>() { return "float64"; }
template <> constexpr const char* scalar_name<bf16>() { return "bfloat16"; }

}  // namespace burst

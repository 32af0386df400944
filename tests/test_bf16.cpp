#include "core/bf16.hpp"
#include "core/views.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using burst::bf16;

static std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16, RepresentableValuesRoundTripExactly) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f, 3.0e38f, 1e-38f}) {
    float r = float_of(bits_of(x) & 0xffff0000u);  // a bf16-representable neighbour
    EXPECT_EQ(bits_of(float(bf16(r))), bits_of(r)) << r;
  }
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(float(bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): -> 1 + 2^-6.
  EXPECT_EQ(float(bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  // Just above the tie rounds up.
  EXPECT_EQ(float(bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))), 1.0f + std::ldexp(1.0f, -7));
  // Relative error of any normal float is at most 2^-8.
  for (float x = 1e-3f; x < 1e3f; x *= 1.37f) EXPECT_LE(std::fabs(float(bf16(x)) - x) / x, std::ldexp(1.0, -8));  // half an ulp: 8 significant bits
}

TEST(Bf16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float(bf16(inf)), inf);
  EXPECT_EQ(float(bf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(float(bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must stay NaN, not become inf.
  EXPECT_TRUE(std::isnan(float(bf16(float_of(0x7f800001u)))));
  // Overflow past the largest bf16 rounds to infinity.
  EXPECT_EQ(float(bf16(3.4e38f)), inf);
  EXPECT_EQ(sizeof(bf16), 2u);
}

// Device lambdas cannot live in a TEST body (a private member function on CUDA).
static void bf16_kernel(const burst::View1<bf16>& v, const burst::View1<float>& out) {
  Kokkos::parallel_for(
      "bf16_test", int(v.extent(0)), KOKKOS_LAMBDA(const int i) {
        // Views value-initialise to +0.
        const float before = float(v(i));
        v(i) = bf16(0.01f * i - 3.0f);
        v(i) += 1.0f;
        out(i) = float(v(i)) + before;
      });
}

TEST(Bf16, WorksInViewsAndKernels) {
  const int n = 1000;
  burst::View1<bf16> v("act/bf16_test", n);
  burst::View1<float> out("act/bf16_out", n);
  bf16_kernel(v, out);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  for (int i = 0; i < n; ++i) {
    float expect = float(bf16(float(bf16(0.01f * i - 3.0f)) + 1.0f));
    ASSERT_EQ(h(i), expect) << i;
  }
}

TEST(Bf16, AccumTypeIsFloat) {
  static_assert(std::is_same<burst::accum_t<bf16>, float>::value, "");
  static_assert(std::is_same<burst::accum_t<double>, double>::value, "");
  EXPECT_STREQ(burst::scalar_name<bf16>(), "bfloat16");
}
